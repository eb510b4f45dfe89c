/* serve_opts.c - the options of `stalelab serve`: --help, argv into a
 * serve_opts, and the checks that need nothing started (ranges, what goes
 * together, the directories, the bus's URLs, the token, --listen). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "busmsg.h"
#include "cli.h"
#include "serve_http.h"
#include "serve_opts.h"
#include "sl.h"

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

enum { O_TOKEN_FILE = 256, O_BUS, O_BUS_REP, O_BUS_HZ, O_HTTP_MAX, O_HTTP_TIMEOUT,
       O_SWEEPS, O_CLUSTERS, O_WORKERS_LISTEN, O_WORKER_TIMEOUT, O_PUSH_LOG, O_MAX_MIB };

static const struct option serve_longopts[] = {
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

/* argv into o; --bus-hz's value, checked later, into *bus_hz_arg and
 * --token's into *token_arg, --token-file's into *token_file */
static int
read_argv(int argc, char **argv, serve_opts *o, const char **bus_hz_arg,
	  const char **token_arg, const char **token_file)
{
	char err[SL_ERR_LEN];
	int opt, rc = 0;
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":L:c:T:l:D:X:K:R:F:Mvqh", serve_longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'L': o->listen = optarg; break;
		case 'c': o->config = optarg; break;
		case 'T': *token_arg = optarg; break;
		case O_TOKEN_FILE: *token_file = optarg; break;
		case O_BUS: o->bus_url = optarg; break;
		case O_BUS_REP: o->bus_rep = optarg; break;
		case O_BUS_HZ: *bus_hz_arg = optarg; break;
		case O_HTTP_MAX:
			rc = cli_opt_u64("http-max-connections", optarg, 1, 100000, &o->conn_max, err);
			break;
		case O_HTTP_TIMEOUT:
			rc = cli_opt_u64("http-timeout", optarg, 0, 86400, &o->timeout, err);
			break;
		case 'l': o->log = optarg; break;
		case 'D': o->device = optarg; break;
		case 'X': o->ckpt_on_exit = optarg; break;
		case 'K': o->ckpt_dir = optarg; break;
		case O_SWEEPS: o->sweeps_dir = optarg; break;
		case O_CLUSTERS: o->clusters_dir = optarg; break;
		case O_WORKERS_LISTEN: o->workers_url = optarg; break;
		case O_PUSH_LOG: o->push_log = optarg; break;
		case O_MAX_MIB:
			rc = cli_opt_u64("workers-max-mib", optarg, 1, 2047, &o->max_mib, err);
			break;
		case O_WORKER_TIMEOUT:
			rc = cli_opt_double("worker-timeout", optarg,
					    (cli_range){.lo = 0.1, .hi = 3600, .what = "seconds"},
					    &o->worker_timeout, err);
			break;
		case 'R': o->resume = optarg; break;
		case 'F': o->log_format = optarg; break;
		case 'M': o->want_demo = 1; break;
		case 'v': o->verbose = 1; break;
		case 'q': o->quiet = 1; break;
		case 'h': fputs(serve_usage, stdout); return 0;
		default: return cli_bad_option("serve", opt, argv, serve_longopts);
		}
		if (rc < 0)
			return cli_usage_error("serve", err);
	}
	if (o->want_demo && optind < argc)
		o->demo_path = argv[optind++]; /* --demo FILE */
	if (optind < argc) {
		fprintf(stderr, "stalelab serve: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	return SERVE_GO;
}

/* what the options say together, the directories, the bus, the token */
static int
check(serve_opts *o, const char *bus_hz_arg, const char *token_arg, const char *token_file)
{
	char err[SL_ERR_LEN];
	const char *shelves[2][2] = {{"sweeps", o->sweeps_dir}, {"clusters", o->clusters_dir}};
	for (int i = 0; i < 2; i++) {
		struct stat sst;
		if (shelves[i][1] && (stat(shelves[i][1], &sst) < 0 || !S_ISDIR(sst.st_mode))) {
			fprintf(stderr, "stalelab serve: --%s %s: %s\n", shelves[i][0], shelves[i][1],
				stat(shelves[i][1], &sst) < 0 ? strerror(errno) : "not a directory");
			return 2;
		}
	}
	if (o->want_demo && (o->config || o->resume))
		return cli_usage_error("serve", "--demo runs its own scenes; drop --config/--resume");
	if (bus_hz_arg &&
	    cli_opt_double("bus-hz", bus_hz_arg, (cli_range){.lo = 0.1, .hi = 50}, &o->bus_hz, err) < 0)
		return cli_usage_error("serve", err);
	o->bus_default = !o->bus_url;
	o->bus_on = !o->bus_url || strcmp(o->bus_url, "none");
	if (!o->bus_url)
		o->bus_url = "tcp://127.0.0.1:8471";
	if (!o->bus_on && (o->bus_rep || bus_hz_arg)) {
		fprintf(stderr, "stalelab serve: %s: there is no bus with --bus none\n",
			o->bus_rep ? "--bus-rep" : "--bus-hz");
		return 2;
	}
	if (o->bus_on && !o->bus_rep) {
		char sib[512];
		if (bus_sibling(o->bus_url, sib, sizeof(sib), err, sizeof(err)) < 0) {
			fprintf(stderr, "stalelab serve: --bus %s\n", err);
			return 2;
		}
	}
	o->workers_default = !o->workers_url;
	if (!o->workers_url)
		o->workers_url = "tcp://127.0.0.1:8473";
	o->workers_on = strcmp(o->workers_url, "none") != 0;
	if (token_arg && token_file)
		return cli_usage_error("serve", "--token and --token-file: give one");
	o->token = read_token(token_arg, token_file, err);
	if (!o->token && err[0])
		return cli_usage_error("serve", err);
	if (http_parse_listen(o->listen, &o->sa, &o->sa_len) < 0) {
		fprintf(stderr, "stalelab serve: --listen: expected [ADDRESS]:PORT, PORT or "
			"[IPv6]:PORT, got \"%s\"\n", o->listen);
		return 2;
	}
	return SERVE_GO;
}

int
serve_opts_parse(int argc, char **argv, serve_opts *o)
{
	*o = (serve_opts){.listen = "127.0.0.1:8470", .log_format = "jsonl", .bus_hz = 4,
			  .worker_timeout = 5, .max_mib = 64, .conn_max = CONN_MAX,
			  .timeout = IDLE_TIMEOUT};
	const char *bus_hz_arg = NULL, *token_arg = NULL, *token_file = NULL;
	int rc = read_argv(argc, argv, o, &bus_hz_arg, &token_arg, &token_file);
	if (rc != SERVE_GO)
		return rc;
	return check(o, bus_hz_arg, token_arg, token_file);
}
