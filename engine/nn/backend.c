/* backend.c - the backend registry: one table of classes, opened by the
 * name a run config gives as "device". Adding a backend is one file that
 * defines its class (engine/backend_<name>.c) and one row here. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend_impl.h"
#include "backend_plugin.h"
#include "sl.h"

/* ---- plugins -------------------------------------------------------------
 * The cuda backend is a plugin, stalelab-cuda.so (engine/cuda/), built where
 * nvcc is and loaded on demand. It is looked for in $STALELAB_CUDA_PLUGIN
 * when set (a path; nothing else is tried), else beside the executable,
 * else in SL_PLUGIN_DIR (where make install puts it). The loader keeps no
 * state of its own: dlopen counts references, RTLD_NODELETE keeps the
 * library (and the CUDA runtime inside it) mapped for the process's life,
 * so each probe and open asks it again at the cost of a lookup. */
#ifndef SL_PLUGIN_DIR
#define SL_PLUGIN_DIR "/usr/local/lib/stalelab"
#endif
#define CUDA_PLUGIN "stalelab-cuda.so"

/* the plugin's table, or NULL with why saying what was tried and why it
 * failed (SL_ERR_LEN) */
static const sl_plugin *
plugin_load(const char *file, char *why)
{
	char tried[3][PATH_MAX];
	int nt = 0;
	const char *env = getenv("STALELAB_CUDA_PLUGIN");
	if (env && *env) {
		snprintf(tried[nt++], PATH_MAX, "%s", env);
	} else {
		char exe[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n > 0) {
			exe[n] = 0;
			char *slash = strrchr(exe, '/');
			if (slash)
				*slash = 0;
			snprintf(tried[nt++], PATH_MAX, "%.*s/%s", PATH_MAX - 64, exe, file);
		}
		snprintf(tried[nt++], PATH_MAX, "%s/%s", SL_PLUGIN_DIR, file);
	}
	char last[SL_ERR_LEN] = "";
	for (int i = 0; i < nt; i++) {
		if (access(tried[i], F_OK) != 0)
			continue;
		void *h = dlopen(tried[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
		if (!h) {
			snprintf(last, sizeof(last), "%s", dlerror());
			continue;
		}
		sl_plugin_init_fn init;
		*(void **)&init = dlsym(h, SL_PLUGIN_INIT);
		const sl_plugin *pl = init ? init() : NULL;
		if (!pl) {
			snprintf(last, sizeof(last), "%.160s has no %s", tried[i], SL_PLUGIN_INIT);
		} else if (pl->api_version != SL_PLUGIN_API || pl->ops_size != sizeof(backend_ops)) {
			snprintf(last, sizeof(last),
				 "%.120s was built for another revision (plugin api %d, %zu-byte "
				 "ops; this binary: %d, %zu)", tried[i], pl->api_version, pl->ops_size,
				 SL_PLUGIN_API, sizeof(backend_ops));
		} else {
			dlclose(h); /* a reference less; NODELETE keeps it mapped */
			return pl;
		}
		dlclose(h);
	}
	if (last[0])
		sl_fail(why, SL_EUNSUP, "device: cuda: %s", last);
	else if (env && *env)
		sl_fail(why, SL_EUNSUP, "device: cuda: no plugin at %.160s (STALELAB_CUDA_PLUGIN)", env);
	else
		sl_fail(why, SL_EUNSUP,
			"device: cuda: %s is not installed (looked beside the binary and in %s; "
			"it is built where nvcc is found)", file, SL_PLUGIN_DIR);
	return NULL;
}

static int
cuda_probe(char *why)
{
	const sl_plugin *pl = plugin_load(CUDA_PLUGIN, why);
	if (!pl)
		return 0;
	char msg[SL_ERR_LEN - 32] = "";
	if (pl->score(msg, sizeof(msg)) > 0)
		return 1;
	sl_fail(why, SL_EUNSUP, "device: cuda: %s", msg[0] ? msg : "not usable here");
	return 0;
}

static int
cuda_open(int nthreads, backend **out)
{
	char why[SL_ERR_LEN];
	const sl_plugin *pl = plugin_load(CUDA_PLUGIN, why);
	return pl ? pl->open(nthreads, out) : -SL_EUNSUP;
}

static const backend_class cuda_class = {
	.name = "cuda",
	.about = "NVIDIA GPU: cuBLAS and our kernels (the plugin stalelab-cuda.so)",
	.probe = cuda_probe,
	.open = cuda_open,
	.auto_pick = 1,
};

/* In the order "auto" tries them. */
static const backend_class *const classes[] = {
	&cuda_class,
	&backend_cpu_class,
	&backend_ref_class,
	&backend_refdev_class,
};
#define N_CLASSES ((int)(sizeof(classes) / sizeof(classes[0])))

const backend_class *
backend_class_at(int i)
{
	return i >= 0 && i < N_CLASSES ? classes[i] : NULL;
}

static const backend_class *
find(const char *name)
{
	for (int i = 0; i < N_CLASSES; i++)
		if (!strcmp(classes[i]->name, name))
			return classes[i];
	return NULL;
}

int
backend_check_name(const char *device, char *err)
{
	if (!strcmp(device, "auto") || find(device))
		return 0;
	char names[128] = "auto";
	size_t len = strlen(names);
	for (int i = 0; i < N_CLASSES && len < sizeof(names); i++)
		if (!classes[i]->hidden)
			len += (size_t)snprintf(names + len, sizeof(names) - len, ", %s",
					classes[i]->name);
	return sl_fail(err, SL_EINVAL, "device: unknown \"%s\" (expected %s)",
		       device, names);
}

static int
open_class(const backend_class *c, int nthreads, backend **out, char *err)
{
	char why[SL_ERR_LEN];
	if (!c->probe(why))
		return sl_fail(err, SL_EUNSUP, "%s", why);
	int rc = c->open(nthreads, out);
	if (rc < 0)
		return sl_fail(err, -rc, "device: cannot open the %s backend: %s",
			       c->name, sl_strerror(rc));
	return 0;
}

int
backend_open(const char *device, int nthreads, backend **out, char *err)
{
	*out = NULL;
	int rc = backend_check_name(device, err);
	if (rc < 0)
		return rc;
	if (nthreads < 1)
		return sl_fail(err, SL_EINVAL, "threads: must be >= 1");
	if (strcmp(device, "auto"))
		return open_class(find(device), nthreads, out, err);
	/* err says why the classes before the one opened were passed over */
	char why[SL_ERR_LEN], note[SL_ERR_LEN] = "";
	for (int i = 0; i < N_CLASSES; i++) {
		if (!classes[i]->auto_pick)
			continue;
		if (classes[i]->probe(why)) {
			rc = open_class(classes[i], nthreads, out, err);
			if (rc == 0 && err)
				snprintf(err, SL_ERR_LEN, "%.200s%s%s", note, note[0] ? "; using " : "",
					 note[0] ? classes[i]->name : "");
			return rc;
		}
		/* "device: cuda: no NVIDIA driver" -> "device auto: cuda: ..." */
		const char *w = strncmp(why, "device: ", 8) ? why : why + 8;
		if (!note[0])
			snprintf(note, sizeof(note), "device auto: %.200s", w);
	}
	return sl_fail(err, SL_EUNSUP, "device: auto found no backend to open");
}

const char *
backend_name(const backend *be)
{
	return be->ops->name;
}

void
backend_free(backend *be)
{
	if (be)
		be->ops->destroy(be);
}

void
backend_gather(backend *be, float *dst, const float *x, const uint32_t *idx,
	       int batch, int dim, int inner)
{
	if (be->ops->gather)
		be->ops->gather(be, dst, x, idx, batch, dim, inner);
	else
		host_gather(dst, x, idx, batch, dim, inner, 0, inner ? dim : batch);
}
