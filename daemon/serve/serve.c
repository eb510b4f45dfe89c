/* serve.c - `stalelab serve`: the long-running daemon. One run at a time
 * trains on its own thread; serve_http.c serves the HTTP API and bus.c the
 * nanomsg bus; the main thread waits for SIGINT/SIGTERM and shuts down
 * cleanly.
 *
 * This file is the command's flow from starting up to a clean shutdown;
 * its options, --help and their checks are serve_opts.c's. */
#include <errno.h>
#include <jansson.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bus.h"
#include "graph_spec.h"
#include "remote.h"
#include "busmsg.h"
#include "ckpt.h"
#include "cli.h"
#include "cmd_serve.h"
#include "config_json.h"
#include "control.h"
#include "serve_http.h"
#include "serve_opts.h"

/* The default run of `stalelab serve`: something worth watching. */
static void
serve_defaults(run_config *c)
{
	config_defaults(c);
	c->workers = 4;
	c->delay = (delay_cfg){.dist = DELAY_EXP, .mean_ms = 10};
	c->n_overrides = 2;
	c->overrides[0] = (worker_override){
		.id = 2, .has_delay = 1,
		.delay = {.dist = DELAY_LOGNORMAL, .mean_ms = 20, .sigma = 1}};
	c->overrides[1] = (worker_override){
		.id = 3, .has_delay = 1,
		.delay = {.dist = DELAY_CONST, .mean_ms = 60}};
}

/* The run to start: the default or --config's (with its schedule), on
 * --device (a --resume's checkpoint replaces it later). 0, or -1 with the
 * message printed (exit 2). */
static int
load_run(const serve_opts *o, run_config *cfg, json_t **conf, run_sched **sched, int *n_sched,
	 char *err)
{
	serve_defaults(cfg);
	if (o->config) {
		if (cli_read_json(o->config, conf, err) < 0) {
			fprintf(stderr, "stalelab serve: %s\n", err);
			return -1;
		}
		config_defaults(cfg);
		runlog_strip(*conf); /* a log's first record is a run object too */
		if (config_apply_json(*conf, cfg, err) < 0 ||
		    sched_from_json(json_object_get(*conf, "schedule"), cfg, sched, n_sched, err) < 0) {
			fprintf(stderr, "stalelab serve: %s: %s\n", o->config, err);
			return -1;
		}
	}
	if (o->device) {
		json_t *d = json_pack("{s:s}", "device", o->device);
		int rc = config_apply_json(d, cfg, err);
		json_decref(d);
		if (rc < 0) {
			fprintf(stderr, "stalelab serve: --device: %s\n", err);
			return -1;
		}
	}
	return 0;
}

/* --demo's scenes into s->ctl.demo: FILE's or the built-in ones. 0, or -1
 * with the message printed (exit 2). */
static int
load_demo(server *s, const char *path, char *err)
{
	int rc;
	if (path) {
		json_t *dj;
		if (cli_read_json(path, &dj, err) < 0) {
			fprintf(stderr, "stalelab serve: %s\n", err);
			return -1;
		}
		rc = demo_parse(dj, &s->ctl.demo, err);
		json_decref(dj);
	} else {
		rc = demo_builtin(&s->ctl.demo, err);
	}
	if (rc < 0) {
		fprintf(stderr, "stalelab serve: %s%s%s\n", path ? path : "", path ? ": " : "", err);
		return -1;
	}
	return 0;
}

/* what anyone who can reach the daemon could do without a token */
static void
warn_open(const serve_opts *o)
{
	if (!http_is_loopback(&o->sa) && !o->token)
		fprintf(stderr, "stalelab serve: warning: listening on %s without a token: "
			"anyone who can reach it can change or stop the run\n", o->listen);
	if (o->bus_on && !o->token &&
	    (!bus_url_local(o->bus_url) || (o->bus_rep && !bus_url_local(o->bus_rep))))
		fprintf(stderr, "stalelab serve: warning: the bus on %s without a token: "
			"anyone who can reach it can change or stop the run\n",
			bus_url_local(o->bus_url) ? o->bus_rep : o->bus_url);
}

/* The bus and the remote workers' socket, each with its line for the
 * start-up message in line (a warning when the default address is taken:
 * the daemon goes on without). 0, or the exit code with the message
 * printed. */
static int
start_sockets(server *s, const serve_opts *o, bus **bs, remote **rem, char *line, size_t cap,
	      char *err)
{
	size_t n = 0;
	line[0] = 0;
	if (o->bus_on) {
		int rc = bus_start(bs, &s->ctl, o->bus_url, o->bus_rep, o->token, o->bus_hz, err);
		if (rc < 0 && !(rc == -SL_ESTATE && o->bus_default)) {
			fprintf(stderr, "stalelab serve: %s\n", err);
			return rc == -SL_EINVAL ? 2 : 1;
		}
		if (rc < 0) /* the default port taken (another daemon): go on without */
			snprintf(line, cap, "stalelab serve: warning: no bus: %s\n", err);
		else
			snprintf(line, cap, "stalelab serve: bus on %s (commands on %s)\n", o->bus_url,
				 bus_rep_url(*bs));
		n = strlen(line);
	}
	if (!o->workers_on)
		return 0;
	int rc = remote_start(rem, &s->ctl, o->workers_url, o->token, o->worker_timeout,
			      o->push_log, (int)o->max_mib, err);
	if (rc < 0 && !(rc == -SL_ESTATE && o->workers_default)) {
		fprintf(stderr, "stalelab serve: %s\n", err);
		return rc == -SL_EINVAL ? 2 : 1;
	}
	if (rc < 0)
		snprintf(line + n, cap - n, "stalelab serve: warning: no remote workers: %s\n", err);
	else
		snprintf(line + n, cap - n, "stalelab serve: remote workers on %s\n%s", o->workers_url,
			 !o->token && !bus_url_local(o->workers_url)
				 ? "stalelab serve: warning: remote workers beyond loopback "
				   "without a token: anyone who reaches the port can join "
				   "(--token-file)\n" : "");
	return 0;
}

/* Wait for SIGINT or SIGTERM (set), then stop: the summary, the
 * checkpoint on exit. The exit code: 0, or 1 when that checkpoint
 * failed. */
static int
wait_and_stop(server *s, const serve_opts *o, sigset_t *set)
{
	int sig = 0;
	sigwait(set, &sig);
	/* while stopping, more of them are ignored: `make run` passes its own
	 * SIGINT or SIGTERM on top of the terminal's, and a signal that lands
	 * on a thread that does not block it (OpenBLAS makes its threads
	 * before main runs) would end the process before the end record */
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	fprintf(stderr, "stalelab serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
	if (!o->quiet)
		ctl_summary(&s->ctl, stderr);
	if (!o->ckpt_on_exit)
		return 0;
	char err[SL_ERR_LEN];
	size_t bytes = 0;
	uint64_t v = 0;
	int rc = ctl_checkpoint(&s->ctl, o->ckpt_on_exit, &bytes, &v, err);
	if (rc == 0)
		fprintf(stderr, "stalelab serve: checkpoint at v %llu in %s (%zu bytes)\n",
			(unsigned long long)v, o->ckpt_on_exit, bytes);
	else if (rc != -SL_ESTATE) {
		fprintf(stderr, "stalelab serve: checkpoint on exit failed: %s\n", err);
		return 1;
	}
	return 0;
}

int
cmd_serve(int argc, char **argv)
{
	/* Threads come and go in a daemon (workers added and removed, a
	 * thread per HTTP connection) and glibc gives new threads new malloc
	 * arenas, up to eight per core, so RSS climbed with every worker
	 * change of the soak (bench/soak.sh). Two arenas keep it flat; a
	 * training step allocates only for a gradient the server holds back
	 * or a copy-on-write of the weights. MALLOC_ARENA_MAX still wins. */
	if (!getenv("MALLOC_ARENA_MAX"))
		mallopt(M_ARENA_MAX, 2);
	serve_opts o;
	int code = 2, fd = -1;
	bus *bs = NULL;
	remote *rem = NULL;
	char err[SL_ERR_LEN];
	run_sched *sched = NULL;
	int n_sched = 0;
	uint8_t *ckpt = NULL;
	size_t ckpt_len = 0;
	json_t *conf = NULL;
	run_config cfg;
	server *s = calloc(1, sizeof(*s));
	if (!s)
		return 1;
	ctl_init(&s->ctl);
	int rc = serve_opts_parse(argc, argv, &o);
	s->token = o.token;
	if (rc != SERVE_GO) {
		code = rc;
		goto out;
	}
	s->ctl.ckpt_dir = o.ckpt_dir;
	s->ctl.sweeps_dir = o.sweeps_dir;
	s->ctl.clusters_dir = o.clusters_dir;
	s->ctl.term = o.quiet ? NULL : stderr;
	s->ctl.verbose = o.verbose && !o.quiet;
	if ((o.want_demo && load_demo(s, o.demo_path, err) < 0) ||
	    load_run(&o, &cfg, &conf, &sched, &n_sched, err) < 0)
		goto out;
	warn_open(&o);
	if (o.log) {
		if (runlog_open(&s->ctl.log, o.log, o.log_format, 1, err) < 0) {
			fprintf(stderr, "stalelab serve: %s\n", err);
			code = 1; /* as `stalelab run`: a runtime failure */
			goto out;
		}
		s->ctl.have_log = 1;
	}
	/* signals go to the main thread only (sigwait below) */
	sigset_t set;
	cli_block_signals(&set, 0);
	signal(SIGPIPE, SIG_IGN); /* a client gone away is a write error */

	if (o.resume && ckpt_read(o.resume, &ckpt, &ckpt_len, &cfg, err) < 0) {
		fprintf(stderr, "stalelab serve: %s\n", err);
		goto out;
	}
	code = 1; /* from here on, failures are the machine's */
	unsigned long long conn_max = http_fd_room(o.conn_max, o.quiet);
	s->timeout = (unsigned)o.timeout;
	s->keepalive = o.timeout ? (o.timeout / 3.0 < 15 ? o.timeout / 3.0 : 15) : 15;
	if ((fd = http_listen_on(o.listen, &o.sa, o.sa_len, err)) < 0) {
		fprintf(stderr, "stalelab serve: %s\n", err);
		goto out;
	}
	if (http_start(s, fd, o.sa.ss_family, (unsigned)conn_max) < 0) {
		fprintf(stderr, "stalelab serve: --listen %s: cannot start the HTTP server: %s\n",
			o.listen, strerror(errno));
		goto out;
	}
	char sockets_line[1800];
	if ((rc = start_sockets(s, &o, &bs, &rem, sockets_line, sizeof(sockets_line), err)))
		goto fail;
	rc = o.want_demo ? ctl_demo_start(&s->ctl, err)
			 : ctl_start(&s->ctl, &cfg, ckpt ? NULL : sched, ckpt ? 0 : n_sched,
				     ckpt, ckpt_len, err);
	if (rc < 0) {
		fprintf(stderr, "stalelab serve: %s\n", err);
		rc = 2;
		goto fail;
	}
	char url[96];
	http_socket_url(fd, url, sizeof(url));
	/* one write: scripts read the address as soon as the line is there */
	char line[4096], label[64];
	snprintf(line, sizeof(line), "stalelab serve: listening on %s (rule %s, %d workers, %s)\n%s",
		 url, o.want_demo ? s->ctl.demo.base.rule : cfg.rule,
		 o.want_demo ? s->ctl.demo.base.workers : cfg.workers,
		 graph_spec_label(o.want_demo ? s->ctl.demo.base.model : cfg.model, label,
				  sizeof(label)), sockets_line);
	fputs(line, stderr);
	code = wait_and_stop(s, &o, &set);
	goto out;
fail:
	code = rc;
out:
	remote_stop(rem); /* remote workers let go: the run goes on without them */
	bus_stop(bs);
	events_close(&s->ctl.ev);
	if (s->mhd)
		http_stop(s); /* closes the listening socket too */
	else if (fd >= 0)
		close(fd);
	ctl_free(&s->ctl);
	remote_free(rem);
	if (s->ctl.have_log)
		runlog_close(&s->ctl.log);
	json_decref(conf);
	free(sched);
	free(ckpt);
	free((char *)s->token);
	free(s);
	return code;
}
