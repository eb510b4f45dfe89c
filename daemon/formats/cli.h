/* cli.h - what the commands of the one stalelab binary share on the
 * command line: numbers parsed whole and options' ranges checked,
 * unknown options named (with the nearest), signals, the cores, gnuplot. The commands themselves are
 * declared by their folders (daemon/run/cmd_run.h, ...) and return the
 * process exit code: 0 success, 1 runtime failure, 2 bad usage or bad
 * config. */
#ifndef SL_CLI_H
#define SL_CLI_H

#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>

/* Parse a whole string as a double / non-negative integer; 0 or -1. */
int cli_double(const char *s, double *out);
int cli_u64(const char *s, unsigned long long *out);

/* An option's value parsed whole and checked against its range, in the
 * commands' one wording: 0, or -SL_EINVAL with err "--FLAG: expected LO
 * to HI, got \"ARG\"" (HI CLI_NO_MAX: "expected an integer >= LO, got
 * ..."); *out is set only on success. flag is the long option's name. */
#define CLI_NO_MAX ULLONG_MAX
int cli_opt_u64(const char *flag, const char *arg, unsigned long long lo,
		unsigned long long hi, unsigned long long *out, char *err);

/* A real's range: from lo (lo itself refused when lo_open) to hi
 * (INFINITY: no bound); what the message calls it ("seconds"; NULL: "a
 * number"). */
typedef struct cli_range {
	double lo, hi;
	int lo_open;
	const char *what;
} cli_range;

/* As cli_opt_u64 for a finite real in r: "--FLAG: expected WHAT in [LO,
 * HI], got \"ARG\"" for a closed range, else "expected WHAT >= LO", "> LO"
 * or "> LO and <= HI". */
int cli_opt_double(const char *flag, const char *arg, cli_range r, double *out,
		   char *err);

/* "stalelab CMD: MSG" on stderr; returns 2, the exit code of bad usage. */
int cli_usage_error(const char *cmd, const char *msg);

/* getopt_long (optstring starting with ':', opterr 0) returned '?' or
 * ':': print "stalelab CMD: unknown option '--x'" or "...: option '--x'
 * needs a value" and the --help hint; returns 2. With the command's long
 * options (getopt_long's table; may be NULL) an unknown long option names
 * the nearest of them, "stalelab bench: unknown option '--modle' (did you
 * mean '--model'?)" (suggest.h). */
struct option;
int cli_bad_option(const char *cmd, int opt, char **argv, const struct option *opts);

/* Block SIGINT and SIGTERM (and SIGUSR1 when usr1: the run thread's "I
 * am done") in this thread and every thread it makes from now on, for the
 * main thread to sigwait on set. Call it before any thread is made. */
void cli_block_signals(sigset_t *set, int usr1);

/* Read a JSON file (duplicate keys refused). Errors name the file once:
 * "FILE: line L, column C: what" or "unable to open FILE: why". */
int cli_read_json(const char *path, json_t **out, char *err);

/* write(2) all n bytes of p to fd (again after EINTR or a short write);
 * 0, or -1 with errno set. */
int cli_write_all(int fd, const void *p, size_t n);

/* Run gnuplot on dir/script in dir: 0, or -1 with err saying why (not
 * installed: how to get it, and that the data is written). */
int cli_run_gnuplot(const char *dir, const char *script, char *err);
/* The lines every gnuplot script of ours starts with (stalelab plot,
 * stalelab cluster --out): the line types 1 to 14 in Okabe and Ito's
 * colour-blind-safe palette (7 colours, then the same dashed, each with a
 * point type of its own), cycling after 14; a static string. */
const char *cli_gnuplot_palette(void);
/* mkdir -p: path and every missing parent; 0, or -SL_EIO naming the part */
int cli_mkdir_p(const char *path, char *err);

/* Number of online CPUs (at least 1). */
int cli_ncpu(void);

#endif
