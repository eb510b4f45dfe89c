/* backend.c - the backend registry: one table of classes, opened by the
 * name a run config gives as "device". Adding a backend is one file that
 * defines its class (engine/backend_<name>.c) and one row here. */
#include <stdio.h>
#include <string.h>

#include "backend_impl.h"
#include "sl.h"

/* The CUDA backend will be a dlopen'ed plugin; this binary has none, and
 * the probe says so. */
static int
cuda_probe(char *why)
{
	sl_fail(why, SL_EUNSUP,
		"device: the cuda backend is not built in this binary (use cpu, ref or auto)");
	return 0;
}

static const backend_class cuda_class = {
	.name = "cuda",
	.about = "NVIDIA GPU (a plugin; not built in this binary)",
	.probe = cuda_probe,
	.open = NULL,
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
	char why[SL_ERR_LEN];
	for (int i = 0; i < N_CLASSES; i++)
		if (classes[i]->auto_pick && classes[i]->probe(why))
			return open_class(classes[i], nthreads, out, err);
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
