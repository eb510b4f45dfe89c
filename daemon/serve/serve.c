/* serve.c - `stalelab serve`: the long-running daemon. One run at a time
 * trains on its own thread; serve_http.c serves the HTTP API and bus.c the
 * nanomsg bus; the main thread waits for SIGINT/SIGTERM and shuts down
 * cleanly.
 *
 * This file is the command: its options, --help, and the flow from
 * starting up to a clean shutdown. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bus.h"
#include "remote.h"
#include "busmsg.h"
#include "ckpt.h"
#include "cli.h"
#include "cmd_serve.h"
#include "config_json.h"
#include "control.h"
#include "serve_http.h"

static const char serve_usage[] =
	"Usage: stalelab serve [OPTIONS]\n"
	"\n"
	"Run the daemon in the foreground: train the default run (or --config)\n"
	"and serve the HTTP API, live events and Prometheus metrics, and the\n"
	"same on the nanomsg bus (for `stalelab tui`), until SIGINT or SIGTERM;\n"
	"a browser at the address gets the dashboard.\n"
	"See docs/api.md, docs/bus.md and docs/dashboard.md.\n"
	"\n"
	"  -L, --listen ADDR:PORT  HTTP address (default 127.0.0.1:8470): also\n"
	"                          PORT or :PORT (loopback), [::1]:PORT (IPv6),\n"
	"                          0.0.0.0:PORT or [::]:PORT (every interface);\n"
	"                          port 0 picks a free one, printed on stderr\n"
	"  -c, --config FILE       run object to start with; its missing fields\n"
	"                          take the defaults of docs/formats.md (without\n"
	"                          it: Fashion-MNIST MLP, 4 workers, asgd, mixed\n"
	"                          delays, no stop)\n"
	"  -T, --token TOKEN       require 'Authorization: Bearer TOKEN' on every\n"
	"                          call that changes something (visible in ps:\n"
	"                          prefer the next two)\n"
	"      --token-file FILE   the token is the first line of FILE\n"
	"                          (else $STALELAB_TOKEN, when set)\n"
	"      --http-max-connections N\n"
	"                          HTTP connections at once (default 1024); more\n"
	"                          are closed as soon as they are accepted\n"
	"      --http-timeout S    close a connection that sends and reads\n"
	"                          nothing for S seconds (default 30, 0: never;\n"
	"                          an event stream that is read lives on)\n"
	"  -l, --log FILE          JSON-Lines log of the runs (appended)\n"
	"      --log-format F      jsonl (default) or csv\n"
	"      --device NAME       auto | cpu | ref | cuda (auto: cuda where a GPU answers, else cpu)\n"
	"      --resume FILE       start from a checkpoint instead of a run object\n"
	"      --checkpoint-on-exit FILE\n"
	"                          write a checkpoint on SIGINT/SIGTERM\n"
	"      --checkpoint-dir DIR  the only directory a request may name: where\n"
	"                          POST /api/v1/checkpoint writes and\n"
	"                          {\"resume\": path} reads (default: the current\n"
	"                          directory)\n"
	"      --sweeps DIR        finished sweeps to show in the dashboard's Sweeps\n"
	"                          view (GET /api/v1/sweeps): a sweep's --out, or a\n"
	"                          directory of them; read only\n"
	"      --clusters DIR      finished cluster simulations to show in the\n"
	"                          dashboard's Cluster view (GET /api/v1/clusters): a\n"
	"                          `stalelab cluster --out` directory, or a directory\n"
	"                          of them; read only\n"
	"      --workers-listen URL  where remote workers (stalelab worker) connect:\n"
	"                          tcp://ADDRESS:PORT or ipc://PATH (default\n"
	"                          tcp://127.0.0.1:8473, loopback; when that is taken\n"
	"                          the daemon warns and goes on without); none: no\n"
	"                          remote workers. Beyond loopback, use a token.\n"
	"                          See docs/remote.md\n"
	"      --worker-timeout S  a remote worker that sends nothing, not even its\n"
	"                          heartbeat (one a second), for S seconds is lost:\n"
	"                          it leaves the run (default 5); a slow one is not\n"
	"      --workers-max-mib N  the largest message a remote worker may send,\n"
	"                          MiB (default 64): a run whose model needs more\n"
	"                          refuses remote workers, saying so\n"
	"      --push-log FILE     append a line per remote push applied (epoch,\n"
	"                          worker, incarnation, step number, version read):\n"
	"                          an audit that nothing is applied twice\n"
	"      --bus URL           the nanomsg bus: events and snapshots on a PUB\n"
	"                          socket at URL, commands on a REP socket at its\n"
	"                          sibling (tcp://H:P -> tcp://H:P+1, ipc://F ->\n"
	"                          ipc://F.rep); default tcp://127.0.0.1:8471 (when\n"
	"                          that is taken, the daemon warns and goes on\n"
	"                          without a bus); none: no bus. See docs/bus.md\n"
	"      --bus-rep URL       the command socket's URL instead of the sibling\n"
	"      --bus-hz HZ         bus snapshots a second (default 4; 0.1 to 50)\n"
	"      --demo [FILE]       an unattended demonstration: scenes with\n"
	"                          captions (built in, or {\"run\": ..., \"scenes\": [...]})\n"
	"  -v, --verbose           a line per evaluation on stderr too\n"
	"  -q, --quiet             nothing on stderr but the address and errors\n"
	"                          (default: a line per run start, end, resume,\n"
	"                          change and demo caption; a summary at exit)\n"
	"  -h, --help              this text\n"
	"\n"
	"Exit status: 0 after a clean shutdown, 1 runtime failure, 2 bad usage.\n";

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

/* the token from --token, --token-file or $STALELAB_TOKEN (in that order);
 * NULL with err set on a bad one, NULL with err "" when there is none */
static char *
read_token(const char *arg, const char *file, char *err)
{
	char buf[512];
	const char *t = arg, *from = "--token";
	err[0] = 0;
	if (!t && file) {
		FILE *f = fopen(file, "r");
		if (!f) {
			sl_fail(err, SL_EIO, "--token-file %s: %s", file, strerror(errno));
			return NULL;
		}
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = 0;
		buf[strcspn(buf, "\r\n")] = 0; /* the first line */
		t = buf;
		from = "--token-file";
	}
	if (!t && (t = getenv("STALELAB_TOKEN")))
		from = "STALELAB_TOKEN";
	if (!t)
		return NULL;
	if (!*t) {
		sl_fail(err, SL_EINVAL, "%s: the token must not be empty", from);
		return NULL;
	}
	char *dup = strdup(t);
	if (!dup)
		sl_fail(err, SL_ENOMEM, "out of memory");
	return dup;
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
	enum { O_TOKEN_FILE = 256, O_BUS, O_BUS_REP, O_BUS_HZ, O_HTTP_MAX, O_HTTP_TIMEOUT,
	       O_SWEEPS, O_CLUSTERS, O_WORKERS_LISTEN, O_WORKER_TIMEOUT, O_PUSH_LOG,
	       O_MAX_MIB };
	static const struct option opts[] = {
		{"listen", required_argument, NULL, 'L'},
		{"config", required_argument, NULL, 'c'},
		{"token", required_argument, NULL, 'T'},
		{"token-file", required_argument, NULL, O_TOKEN_FILE},
		{"bus", required_argument, NULL, O_BUS},
		{"bus-rep", required_argument, NULL, O_BUS_REP},
		{"bus-hz", required_argument, NULL, O_BUS_HZ},
		{"http-max-connections", required_argument, NULL, O_HTTP_MAX},
		{"http-timeout", required_argument, NULL, O_HTTP_TIMEOUT},
		{"log", required_argument, NULL, 'l'},
		{"device", required_argument, NULL, 'D'},
		{"checkpoint-on-exit", required_argument, NULL, 'X'},
		{"checkpoint-dir", required_argument, NULL, 'K'},
		{"sweeps", required_argument, NULL, O_SWEEPS},
		{"clusters", required_argument, NULL, O_CLUSTERS},
		{"workers-listen", required_argument, NULL, O_WORKERS_LISTEN},
		{"worker-timeout", required_argument, NULL, O_WORKER_TIMEOUT},
		{"push-log", required_argument, NULL, O_PUSH_LOG},
		{"workers-max-mib", required_argument, NULL, O_MAX_MIB},
		{"resume", required_argument, NULL, 'R'},
		{"log-format", required_argument, NULL, 'F'},
		{"demo", no_argument, NULL, 'M'},
		{"verbose", no_argument, NULL, 'v'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *listen_spec = "127.0.0.1:8470", *config_path = NULL,
		   *log_path = NULL, *device = NULL, *resume_path = NULL,
		   *log_format = "jsonl", *token_arg = NULL, *token_file = NULL,
		   *ckpt_on_exit = NULL, *demo_path = NULL,
		   *bus_url = NULL, *bus_rep = NULL, *bus_hz_arg = NULL;
	int opt, code = 2, want_demo = 0, quiet = 0, verbose = 0, fd = -1;
	double bus_hz = 4, worker_timeout = 5;
	bus *bs = NULL;
	remote *rem = NULL;
	const char *workers_url = NULL, *push_log = NULL;
	unsigned long long conn_max = CONN_MAX, timeout = IDLE_TIMEOUT, max_mib = 64;
	char err[SL_ERR_LEN];
	run_sched *sched = NULL;
	int n_sched = 0;
	uint8_t *ckpt = NULL;
	size_t ckpt_len = 0;
	json_t *conf = NULL;
	server *s = calloc(1, sizeof(*s));
	if (!s)
		return 1;
	ctl_init(&s->ctl);
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":L:c:T:l:D:X:K:R:F:Mvqh", opts, NULL)) != -1) {
		switch (opt) {
		case 'L': listen_spec = optarg; break;
		case 'c': config_path = optarg; break;
		case 'T': token_arg = optarg; break;
		case O_TOKEN_FILE: token_file = optarg; break;
		case O_BUS: bus_url = optarg; break;
		case O_BUS_REP: bus_rep = optarg; break;
		case O_BUS_HZ: bus_hz_arg = optarg; break;
		case O_HTTP_MAX:
			if (cli_u64(optarg, &conn_max) < 0 || conn_max < 1 || conn_max > 100000) {
				fprintf(stderr, "stalelab serve: --http-max-connections: expected "
					"1 to 100000, got \"%s\"\n", optarg);
				goto out;
			}
			break;
		case O_HTTP_TIMEOUT:
			if (cli_u64(optarg, &timeout) < 0 || timeout > 86400) {
				fprintf(stderr, "stalelab serve: --http-timeout: expected seconds "
					"0 to 86400 (0: none), got \"%s\"\n", optarg);
				goto out;
			}
			break;
		case 'l': log_path = optarg; break;
		case 'D': device = optarg; break;
		case 'X': ckpt_on_exit = optarg; break;
		case 'K': s->ctl.ckpt_dir = optarg; break;
		case O_SWEEPS: s->ctl.sweeps_dir = optarg; break;
		case O_CLUSTERS: s->ctl.clusters_dir = optarg; break;
		case O_WORKERS_LISTEN: workers_url = optarg; break;
		case O_PUSH_LOG: push_log = optarg; break;
		case O_MAX_MIB:
			if (cli_u64(optarg, &max_mib) < 0 || max_mib < 1 || max_mib > 2047) {
				fprintf(stderr, "stalelab serve: --workers-max-mib: expected 1 to "
					"2047, got \"%s\"\n", optarg);
				goto out;
			}
			break;
		case O_WORKER_TIMEOUT:
			if (cli_double(optarg, &worker_timeout) < 0 ||
			    !(worker_timeout >= 0.1 && worker_timeout <= 3600)) {
				fprintf(stderr, "stalelab serve: --worker-timeout: expected seconds "
					"in [0.1, 3600], got \"%s\"\n", optarg);
				goto out;
			}
			break;
		case 'R': resume_path = optarg; break;
		case 'F': log_format = optarg; break;
		case 'M': want_demo = 1; break;
		case 'v': verbose = 1; break;
		case 'q': quiet = 1; break;
		case 'h': fputs(serve_usage, stdout); code = 0; goto out;
		default: code = cli_bad_option("serve", opt, argv, opts); goto out;
		}
	}
	s->ctl.term = quiet ? NULL : stderr;
	s->ctl.verbose = verbose && !quiet;
	if (want_demo && optind < argc)
		demo_path = argv[optind++]; /* --demo FILE */
	if (optind < argc) {
		fprintf(stderr, "stalelab serve: unexpected argument '%s'\n", argv[optind]);
		goto out;
	}
	const char *shelves[2][2] = {{"sweeps", s->ctl.sweeps_dir}, {"clusters", s->ctl.clusters_dir}};
	for (int i = 0; i < 2; i++) {
		struct stat sst;
		if (shelves[i][1] && (stat(shelves[i][1], &sst) < 0 || !S_ISDIR(sst.st_mode))) {
			fprintf(stderr, "stalelab serve: --%s %s: %s\n", shelves[i][0], shelves[i][1],
				stat(shelves[i][1], &sst) < 0 ? strerror(errno) : "not a directory");
			goto out;
		}
	}
	if (want_demo && (config_path || resume_path)) {
		fprintf(stderr, "stalelab serve: --demo runs its own scenes; drop --config/--resume\n");
		goto out;
	}
	if (bus_hz_arg && (cli_double(bus_hz_arg, &bus_hz) < 0 || !(bus_hz >= 0.1 && bus_hz <= 50))) {
		fprintf(stderr, "stalelab serve: --bus-hz: expected a number in [0.1, 50], got \"%s\"\n",
			bus_hz_arg);
		goto out;
	}
	int bus_default = !bus_url, bus_on = !bus_url || strcmp(bus_url, "none");
	if (!bus_url)
		bus_url = "tcp://127.0.0.1:8471";
	if (!bus_on && (bus_rep || bus_hz_arg)) {
		fprintf(stderr, "stalelab serve: %s: there is no bus with --bus none\n",
			bus_rep ? "--bus-rep" : "--bus-hz");
		goto out;
	}
	if (bus_on && !bus_rep) {
		char sib[512];
		if (bus_sibling(bus_url, sib, sizeof(sib), err, sizeof(err)) < 0) {
			fprintf(stderr, "stalelab serve: --bus %s\n", err);
			goto out;
		}
	}
	if (token_arg && token_file) {
		fprintf(stderr, "stalelab serve: --token and --token-file: give one\n");
		goto out;
	}
	s->token = read_token(token_arg, token_file, err);
	if (!s->token && err[0]) {
		fprintf(stderr, "stalelab serve: %s\n", err);
		goto out;
	}
	if (want_demo) {
		int drc;
		if (demo_path) {
			json_t *dj;
			if (cli_read_json(demo_path, &dj, err) < 0) {
				fprintf(stderr, "stalelab serve: %s\n", err);
				goto out;
			}
			drc = demo_parse(dj, &s->ctl.demo, err);
			json_decref(dj);
		} else {
			drc = demo_builtin(&s->ctl.demo, err);
		}
		if (drc < 0) {
			fprintf(stderr, "stalelab serve: %s%s%s\n", demo_path ? demo_path : "",
				demo_path ? ": " : "", err);
			goto out;
		}
	}
	struct sockaddr_storage sa;
	socklen_t sa_len;
	if (http_parse_listen(listen_spec, &sa, &sa_len) < 0) {
		fprintf(stderr, "stalelab serve: --listen: expected [ADDRESS]:PORT, PORT or "
			"[IPv6]:PORT, got \"%s\"\n", listen_spec);
		goto out;
	}
	run_config cfg;
	serve_defaults(&cfg);
	if (config_path) {
		if (cli_read_json(config_path, &conf, err) < 0) {
			fprintf(stderr, "stalelab serve: %s\n", err);
			goto out;
		}
		config_defaults(&cfg);
		runlog_strip(conf); /* a log's first record is a run object too */
		if (config_apply_json(conf, &cfg, err) < 0 ||
		    sched_from_json(json_object_get(conf, "schedule"), &cfg, &sched,
				    &n_sched, err) < 0) {
			fprintf(stderr, "stalelab serve: %s: %s\n", config_path, err);
			goto out;
		}
	}
	if (device) {
		json_t *d = json_pack("{s:s}", "device", device);
		int rc = config_apply_json(d, &cfg, err);
		json_decref(d);
		if (rc < 0) {
			fprintf(stderr, "stalelab serve: --device: %s\n", err);
			goto out;
		}
	}
	if (!http_is_loopback(&sa) && !s->token)
		fprintf(stderr, "stalelab serve: warning: listening on %s without a token: "
			"anyone who can reach it can change or stop the run\n", listen_spec);
	if (bus_on && !s->token && (!bus_url_local(bus_url) || (bus_rep && !bus_url_local(bus_rep))))
		fprintf(stderr, "stalelab serve: warning: the bus on %s without a token: "
			"anyone who can reach it can change or stop the run\n",
			bus_url_local(bus_url) ? bus_rep : bus_url);
	if (log_path) {
		if (runlog_open(&s->ctl.log, log_path, log_format, 1, err) < 0) {
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

	if (resume_path && ckpt_read(resume_path, &ckpt, &ckpt_len, &cfg, err) < 0) {
		fprintf(stderr, "stalelab serve: %s\n", err);
		goto out;
	}
	code = 1; /* from here on, failures are the machine's */
	conn_max = http_fd_room(conn_max, quiet);
	s->timeout = (unsigned)timeout;
	s->keepalive = timeout ? (timeout / 3.0 < 15 ? timeout / 3.0 : 15) : 15;
	if ((fd = http_listen_on(listen_spec, &sa, sa_len, err)) < 0) {
		fprintf(stderr, "stalelab serve: %s\n", err);
		goto out;
	}
	if (http_start(s, fd, sa.ss_family, (unsigned)conn_max) < 0) {
		fprintf(stderr, "stalelab serve: --listen %s: cannot start the HTTP server: %s\n",
			listen_spec, strerror(errno));
		goto out;
	}
	char bus_line[1200] = "";
	int rc;
	if (bus_on) {
		rc = bus_start(&bs, &s->ctl, bus_url, bus_rep, s->token, bus_hz, err);
		if (rc == -SL_ESTATE && bus_default) {
			/* the default port taken (another daemon): go on without */
			snprintf(bus_line, sizeof(bus_line), "stalelab serve: warning: no bus: %s\n", err);
		} else if (rc < 0) {
			fprintf(stderr, "stalelab serve: %s\n", err);
			code = rc == -SL_EINVAL ? 2 : 1;
			goto out;
		} else {
			snprintf(bus_line, sizeof(bus_line), "stalelab serve: bus on %s (commands on %s)\n",
				 bus_url, bus_rep_url(bs));
		}
	}
	char workers_line[600] = "";
	int workers_default = !workers_url;
	if (!workers_url)
		workers_url = "tcp://127.0.0.1:8473";
	if (strcmp(workers_url, "none")) {
		rc = remote_start(&rem, &s->ctl, workers_url, s->token, worker_timeout, push_log,
				  (int)max_mib, err);
		if (rc == -SL_ESTATE && workers_default) {
			snprintf(workers_line, sizeof(workers_line),
				 "stalelab serve: warning: no remote workers: %s\n", err);
		} else if (rc < 0) {
			fprintf(stderr, "stalelab serve: %s\n", err);
			code = rc == -SL_EINVAL ? 2 : 1;
			goto out;
		} else {
			snprintf(workers_line, sizeof(workers_line),
				 "stalelab serve: remote workers on %s\n%s", workers_url,
				 !s->token && !bus_url_local(workers_url)
					 ? "stalelab serve: warning: remote workers beyond loopback "
					   "without a token: anyone who reaches the port can join "
					   "(--token-file)\n" : "");
		}
	}
	rc = want_demo ? ctl_demo_start(&s->ctl, err)
			   : ctl_start(&s->ctl, &cfg, ckpt ? NULL : sched, ckpt ? 0 : n_sched,
				       ckpt, ckpt_len, err);
	if (rc < 0) {
		fprintf(stderr, "stalelab serve: %s\n", err);
		code = 2;
		goto out;
	}
	char url[96];
	http_socket_url(fd, url, sizeof(url));
	/* one write: scripts read the address as soon as the line is there */
	char line[4096];
	snprintf(line, sizeof(line), "stalelab serve: listening on %s (rule %s, %d workers, %s)\n%s%s",
		 url, want_demo ? s->ctl.demo.base.rule : cfg.rule,
		 want_demo ? s->ctl.demo.base.workers : cfg.workers,
		 want_demo ? s->ctl.demo.base.model : cfg.model, bus_line, workers_line);
	fputs(line, stderr);
	int sig = 0;
	sigwait(&set, &sig);
	/* while stopping, more of them are ignored: `make run` passes its own
	 * SIGINT or SIGTERM on top of the terminal's, and a signal that lands
	 * on a thread that does not block it (OpenBLAS makes its threads
	 * before main runs) would end the process before the end record */
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	fprintf(stderr, "stalelab serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
	code = 0;
	if (!quiet)
		ctl_summary(&s->ctl, stderr);
	if (ckpt_on_exit) {
		size_t bytes = 0;
		uint64_t v = 0;
		rc = ctl_checkpoint(&s->ctl, ckpt_on_exit, &bytes, &v, err);
		if (rc == 0)
			fprintf(stderr, "stalelab serve: checkpoint at v %llu in %s (%zu bytes)\n",
				(unsigned long long)v, ckpt_on_exit, bytes);
		else if (rc != -SL_ESTATE) {
			fprintf(stderr, "stalelab serve: checkpoint on exit failed: %s\n", err);
			code = 1;
		}
	}
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
