/* serve_opts.h - the options of `stalelab serve` (serve_opts.c): read
 * from argv into one struct and checked, with --help, before anything
 * starts; serve.c starts the daemon from them. */
#ifndef SL_SERVE_OPTS_H
#define SL_SERVE_OPTS_H

#include <sys/socket.h>

typedef struct serve_opts {
	const char *listen;          /* --listen as given ... */
	struct sockaddr_storage sa;  /* ... and parsed */
	socklen_t sa_len;
	const char *config, *resume; /* --config, --resume FILE */
	const char *log, *log_format; /* --log FILE, --log-format (jsonl) */
	const char *device;          /* --device NAME, NULL: the run object's */
	const char *ckpt_on_exit, *ckpt_dir; /* --checkpoint-on-exit, -dir */
	const char *sweeps_dir, *clusters_dir; /* --sweeps, --clusters */
	char *token;                 /* --token, --token-file or $STALELAB_TOKEN,
				      * NULL: none; the caller frees it */
	int want_demo;               /* --demo [FILE] */
	const char *demo_path;       /* its FILE, NULL: the built-in scenes */
	const char *bus_url;         /* --bus, or the default */
	const char *bus_rep;         /* --bus-rep, NULL: the sibling */
	int bus_on, bus_default;     /* not --bus none; no --bus given */
	double bus_hz;               /* --bus-hz */
	const char *workers_url;     /* --workers-listen, or the default */
	int workers_on, workers_default;
	double worker_timeout;       /* --worker-timeout, seconds */
	unsigned long long max_mib;  /* --workers-max-mib */
	const char *push_log;        /* --push-log FILE */
	unsigned long long conn_max; /* --http-max-connections */
	unsigned long long timeout;  /* --http-timeout, seconds (0: none) */
	int quiet, verbose;
} serve_opts;

#define SERVE_GO (-1) /* serve_opts_parse: no exit yet, go on */

/* Every option into o, checked: ranges, what goes together, the
 * directories named, the bus's URLs, the token read, the --listen
 * address parsed. SERVE_GO, or the exit code (0 after --help, 2 bad
 * usage, the message printed). o->token is the caller's to free either
 * way. */
int serve_opts_parse(int argc, char **argv, serve_opts *o);

#endif
