/* cli.c - small helpers shared by the subcommands. */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

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
cli_ncpu(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}
