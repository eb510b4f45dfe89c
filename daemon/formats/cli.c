/* cli.c - small helpers shared by the subcommands. */
#include "cli.h"

#include <errno.h>
#include <pthread.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sl.h"
#include "suggest.h"

int
cli_double(const char *s, double *out)
{
	char *end;
	errno = 0;
	double d = strtod(s, &end);
	if (!*s || *end || errno)
		return -1;
	*out = d;
	return 0;
}

int
cli_u64(const char *s, unsigned long long *out)
{
	char *end;
	if (!*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (*end || errno)
		return -1;
	*out = v;
	return 0;
}

int
cli_opt_u64(const char *flag, const char *arg, unsigned long long lo, unsigned long long hi,
	    unsigned long long *out, char *err)
{
	unsigned long long v;
	if (cli_u64(arg, &v) == 0 && v >= lo && v <= hi) {
		*out = v;
		return 0;
	}
	if (hi == CLI_NO_MAX)
		return sl_fail(err, SL_EINVAL, "--%s: expected an integer >= %llu, got \"%s\"", flag,
			       lo, arg);
	return sl_fail(err, SL_EINVAL, "--%s: expected %llu to %llu, got \"%s\"", flag, lo, hi,
		       arg);
}

int
cli_opt_double(const char *flag, const char *arg, cli_range r, double *out, char *err)
{
	double v;
	if (cli_double(arg, &v) == 0 && isfinite(v) && (r.lo_open ? v > r.lo : v >= r.lo) &&
	    v <= r.hi) {
		*out = v;
		return 0;
	}
	const char *what = r.what ? r.what : "a number";
	char range[96];
	if (isinf(r.hi))
		snprintf(range, sizeof(range), "%s %g", r.lo_open ? ">" : ">=", r.lo);
	else if (r.lo_open)
		snprintf(range, sizeof(range), "> %g and <= %g", r.lo, r.hi);
	else
		snprintf(range, sizeof(range), "in [%g, %g]", r.lo, r.hi);
	return sl_fail(err, SL_EINVAL, "--%s: expected %s %s, got \"%s\"", flag, what, range,
		       arg);
}

int
cli_usage_error(const char *cmd, const char *msg)
{
	fprintf(stderr, "stalelab %s: %s\n", cmd, msg);
	return 2;
}

int
cli_ncpu(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

int
cli_bad_option(const char *cmd, int opt, char **argv, const struct option *opts)
{
	/* optind is past the bad element; optopt is the short option, or 0
	 * for a long one */
	const char *arg = argv[optind - 1];
	char shortopt[3] = {'-', (char)optopt, 0};
	const char *name = optopt && (arg[0] != '-' || arg[1] != '-') ? shortopt : arg;
	char buf[128];
	snprintf(buf, sizeof(buf), "%s", name);
	char *eq = strchr(buf, '=');
	if (eq)
		*eq = 0;
	/* a long option: the nearest of the command's, as a suggestion */
	int is_long = opt != ':' && opts && !strncmp(buf, "--", 2);
	suggest near;
	suggest_start(&near, is_long ? buf + 2 : "");
	for (int i = 0; is_long && opts[i].name; i++)
		suggest_offer(&near, opts[i].name);
	char note[160];
	if (opt == ':')
		fprintf(stderr, "stalelab %s: option '%s' needs a value\n", cmd, buf);
	else
		fprintf(stderr, "stalelab %s: unknown option '%s'%s\n", cmd, buf,
			suggest_note(note, sizeof(note), NULL, "--", near.best));
	fprintf(stderr, "Try 'stalelab %s --help'.\n", cmd);
	return 2;
}

int
cli_read_json(const char *path, json_t **out, char *err)
{
	json_error_t je;
	*out = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (*out)
		return 0;
	if (je.line < 1) /* not opened or not read: jansson's text names it */
		return sl_fail(err, SL_EINVAL, "%s", je.text);
	return sl_fail(err, SL_EINVAL, "%s: line %d, column %d: %s", path, je.line,
		       je.column, je.text);
}

void
cli_block_signals(sigset_t *set, int usr1)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	if (usr1)
		sigaddset(set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, set, NULL);
}

int
cli_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t k = write(fd, c, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			if (k == 0)
				errno = EIO;
			return -1;
		}
		c += k;
		n -= (size_t)k;
	}
	return 0;
}

int
cli_run_gnuplot(const char *dir, const char *script, char *err)
{
	pid_t pid = fork();
	if (pid < 0)
		return sl_fail(err, SL_EIO, "fork: %s", strerror(errno));
	if (pid == 0) {
		if (chdir(dir) < 0)
			_exit(126);
		execlp("gnuplot", "gnuplot", script, (char *)NULL);
		_exit(errno == ENOENT ? 127 : 126);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
		return sl_fail(err, SL_EIO,
			       "gnuplot not found (apt-get install gnuplot-nox; `make deps` "
			       "installs it): the data and %s/%s are written, run "
			       "`gnuplot %s` there", dir, script, script);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return sl_fail(err, SL_EIO, "gnuplot failed on %s/%s (exit %d)", dir, script,
			       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	return 0;
}

const char *
cli_gnuplot_palette(void)
{
	/* no yellow (#F0E442): it fades on white */
	return "# Okabe and Ito's colour-blind-safe palette; past 7 dashed\n"
	       "set linetype 1 lc rgb '#0072B2' lw 2 pt 7 dt 1\n"
	       "set linetype 2 lc rgb '#D55E00' lw 2 pt 5 dt 1\n"
	       "set linetype 3 lc rgb '#009E73' lw 2 pt 9 dt 1\n"
	       "set linetype 4 lc rgb '#CC79A7' lw 2 pt 13 dt 1\n"
	       "set linetype 5 lc rgb '#E69F00' lw 2 pt 11 dt 1\n"
	       "set linetype 6 lc rgb '#56B4E9' lw 2 pt 15 dt 1\n"
	       "set linetype 7 lc rgb '#000000' lw 2 pt 3 dt 1\n"
	       "set linetype 8 lc rgb '#0072B2' lw 2 pt 6 dt 2\n"
	       "set linetype 9 lc rgb '#D55E00' lw 2 pt 4 dt 2\n"
	       "set linetype 10 lc rgb '#009E73' lw 2 pt 8 dt 2\n"
	       "set linetype 11 lc rgb '#CC79A7' lw 2 pt 12 dt 2\n"
	       "set linetype 12 lc rgb '#E69F00' lw 2 pt 10 dt 2\n"
	       "set linetype 13 lc rgb '#56B4E9' lw 2 pt 14 dt 2\n"
	       "set linetype 14 lc rgb '#000000' lw 2 pt 1 dt 2\n"
	       "set linetype cycle 14\n";
}

int
cli_mkdir_p(const char *path, char *err)
{
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || !*p) {
			char c = *p;
			*p = 0;
			if (mkdir(buf, 0777) < 0 && errno != EEXIST)
				return sl_fail(err, SL_EIO, "%s: %s", buf, strerror(errno));
			*p = c;
			if (!c)
				break;
		}
	}
	struct stat st;
	if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return sl_fail(err, SL_EIO, "%s: not a directory", path);
	return 0;
}
