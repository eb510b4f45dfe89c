/* main.c - stalelab: dispatch to subcommands. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_bench.h"
#include "cmd_cluster.h"
#include "cmd_run.h"
#include "cmd_serve.h"
#include "cmd_worker.h"
#include "backend.h"
#include "blas_pick.h"
#include "sl.h"
#include "suggest.h"
#include "sweep.h"
#include "tui.h"

static const char usage[] =
	"Usage: stalelab COMMAND [OPTIONS]\n"
	"\n"
	"A test-bed for asynchronous data-parallel training: a parameter server\n"
	"and workers train a real model while you study gradient staleness.\n"
	"\n"
	"Commands:\n"
	"  serve    the daemon: trains and serves the HTTP API, live events and\n"
	"           Prometheus metrics until SIGINT/SIGTERM\n"
	"  run      train headless: JSON-Lines log to --log or stdout, progress on\n"
	"           stderr, exit 0 when the stop condition is met\n"
	"  bench    throughput of the engine (samples/s, GFLOP/s vs OpenBLAS)\n"
	"  tui      the terminal front end of a running daemon (its nanomsg bus)\n"
	"  sweep    a grid of runs on the virtual clock: results.csv, a log per\n"
	"           cell, resumable, sharded, summarised over seeds\n"
	"  sample   text from a language model's checkpoint (a gpt: on text)\n"
	"  plot     a sweep's figures (gnuplot): loss, accuracy, staleness, slowdown\n"
	"  worker   a remote worker: joins a daemon's run over the network\n"
	"           (serve --workers-listen) and computes its gradients\n"
	"  cluster  simulate a GPU cluster's scheduler on a trace of jobs\n"
	"           (fifo, srtf, las, gandiva, jigsaw: partial backprop)\n"
	"\n"
	"Options:\n"
	"  -h, --help     this text (COMMAND --help, or help COMMAND, for a\n"
	"                 command's options)\n"
	"  -V, --version  print the version\n"
	"\n"
	"Exit status: 0 success, 1 runtime failure, 2 bad usage or bad config,\n"
	"3 a headless run diverged (stalelab run --help).\n";

typedef int (*command_fn)(int argc, char **argv);

static const struct command {
	const char *name;
	command_fn fn;
} commands[] = {
	{"serve", cmd_serve},
	{"run", cmd_run},
	{"bench", cmd_bench},
	{"tui", cmd_tui},
	{"sweep", cmd_sweep},
	{"plot", cmd_plot},
	{"sample", cmd_sample},
	{"worker", cmd_worker},
	{"cluster", cmd_cluster},
};

static const struct command *
find_command(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

/* "stalelab: WHAT 'name' (did you mean 'serve'?)" for a name that is no
 * command, or with the hint when none is near (suggest.h); returns 2 */
static int
no_command(const char *what, const char *name, const char *hint, int with_help)
{
	suggest near;
	suggest_start(&near, name);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		suggest_offer(&near, commands[i].name);
	if (with_help)
		suggest_offer(&near, "help");
	char note[160];
	fprintf(stderr, "stalelab: %s '%s'%s\n", what, name,
		suggest_note(note, sizeof(note), near.best ? NULL : hint, NULL, near.best));
	return 2;
}

/* Start this binary again with argv. By its path, not /proc/self/exe's:
 * the kernel names a process after the file exec'd, and ps, top, pgrep
 * and pkill should see "stalelab", not "exe". Returns only on failure. */
static void
reexec(char **argv)
{
	char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
	if (n > 0) {
		path[n] = 0;
		execv(path, argv);
	}
	execv("/proc/self/exe", argv); /* the file was moved or replaced */
}

/* The best BLAS kernel the CPU supports (engine/nn/blas_pick.h), before
 * anything else: a re-exec starts a process that has done nothing yet. */
static void
blas_choose(char **argv)
{
	const char *kernel, *config, *isa;
	backend_cpu_blas(&kernel, &config, &isa);
	blas_cpu f;
	blas_cpu_now(&f);
	blas_why why;
	const char *pick = blas_decide(getenv("OPENBLAS_CORETYPE"), getenv("STALELAB_BLAS"), kernel,
				       &f, &why);
	if (pick) {
		setenv("OPENBLAS_CORETYPE", pick, 1);
		setenv("STALELAB_BLAS", pick, 1);
		setenv("STALELAB_BLAS_LIBRARY", kernel ? kernel : "", 1);
		reexec(argv);
		/* cannot: go on with the library's choice */
		unsetenv("OPENBLAS_CORETYPE");
		unsetenv("STALELAB_BLAS");
		unsetenv("STALELAB_BLAS_LIBRARY");
		return;
	}
	char err[SL_ERR_LEN];
	if (why == BLAS_PICKED && backend_cpu_blas_check(err) < 0) {
		const char *lib = getenv("STALELAB_BLAS_LIBRARY");
		fprintf(stderr, "stalelab: warning: %s: back to the library's own kernel%s%s%s\n",
			err, lib && *lib ? " (" : "", lib && *lib ? lib : "", lib && *lib ? ")" : "");
		unsetenv("OPENBLAS_CORETYPE");
		setenv("STALELAB_BLAS", "fallback", 1);
		reexec(argv);
	}
}

int
main(int argc, char **argv)
{
	blas_choose(argv);
	if (argc < 2) {
		fputs(usage, stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "help") && argc >= 3) {
		/* help COMMAND: that command's --help, as git does */
		const struct command *c = find_command(argv[2]);
		if (!c)
			return no_command("help: no command", argv[2], "try 'stalelab help'", 0);
		char *av[] = {argv[2], "--help", NULL};
		return c->fn(2, av);
	}
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
		fputs(usage, stdout);
		return 0;
	}
	if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version")) {
		printf("stalelab %s\n", SL_VERSION);
		return 0;
	}
	const struct command *c = find_command(cmd);
	if (c)
		return c->fn(argc - 1, argv + 1);
	return no_command("unknown command", cmd, "try 'stalelab --help'", 1);
}
