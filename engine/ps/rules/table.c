/* table.c - the update rules: one row per rule, in the order of
 * docs/rules.md. A new rule is a file in this folder and a row here. */
#include <stdio.h>
#include <string.h>

#include "rules.h"

const rule_class *const rule_table[] = {
	&rule_ssgd,
	&rule_asgd,
	&rule_softsync,
	&rule_ssp,
	&rule_sasgd,
	&rule_dcasgd,
	&rule_odsgd,
	&rule_localsgd,
	&rule_easgd,
	&rule_hogwild,
	&rule_diloco,
	&rule_async_diloco,
	&rule_async_gated,
	&rule_streaming_diloco,
	&rule_sparta,
	&rule_demo,
	NULL,
};

const rule_class *
rule_find(const char *name)
{
	for (int i = 0; rule_table[i]; i++)
		if (!strcmp(name, rule_table[i]->name))
			return rule_table[i];
	return NULL;
}

int
rule_count(void)
{
	int n = 0;
	while (rule_table[n])
		n++;
	return n;
}

int
rule_index(const rule_class *rc)
{
	for (int i = 0; rule_table[i]; i++)
		if (rule_table[i] == rc)
			return i;
	return -1;
}

const char *
rule_names(char *buf, size_t cap)
{
	size_t n = 0;
	if (cap)
		buf[0] = 0;
	for (int i = 0; rule_table[i] && n < cap; i++) {
		int k = snprintf(buf + n, cap - n, "%s%s", i ? ", " : "",
				 rule_table[i]->name);
		if (k < 0)
			break;
		n += (size_t)k;
	}
	return buf;
}

const char *
rule_stale_unit(const rule_class *rc)
{
	return rc->stale_unit ? rc->stale_unit : "versions";
}

int
rule_round_size(const rule_class *rc, int n_running, const rule_params *rp)
{
	int n = rc->round_size ? rc->round_size(n_running, rp) : n_running;
	return n < 1 ? 1 : n;
}
