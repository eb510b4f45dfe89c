/* suggest.c - the nearest name to a word typed wrong (suggest.h). */
#include "suggest.h"

#include <stdio.h>
#include <string.h>

int
suggest_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > SUGGEST_MAX || lb > SUGGEST_MAX)
		return -1;
	/* three rows of the table: d[i][j] is the distance between a's first
	 * i bytes and b's first j */
	int rows[3][SUGGEST_MAX + 1];
	int *two = rows[0], *prev = rows[1], *cur = rows[2];
	for (size_t j = 0; j <= lb; j++)
		prev[j] = (int)j;
	for (size_t i = 1; i <= la; i++) {
		cur[0] = (int)i;
		for (size_t j = 1; j <= lb; j++) {
			int cost = a[i - 1] != b[j - 1];
			int d = prev[j - 1] + cost;                   /* keep or change */
			if (prev[j] + 1 < d)
				d = prev[j] + 1;                      /* a byte of a dropped */
			if (cur[j - 1] + 1 < d)
				d = cur[j - 1] + 1;                   /* a byte of b added */
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    two[j - 2] + 1 < d)
				d = two[j - 2] + 1;                   /* two swapped */
			cur[j] = d;
		}
		int *t = two;
		two = prev;
		prev = cur;
		cur = t;
	}
	return prev[lb];
}

int
suggest_limit(size_t len)
{
	return len / 3 > 1 ? (int)(len / 3) : 1;
}

void
suggest_start(suggest *s, const char *word)
{
	s->word = word;
	s->best = NULL;
	s->d = 0;
}

void
suggest_offer(suggest *s, const char *name)
{
	if (!name)
		return;
	size_t lw = strlen(s->word), ln = strlen(name);
	size_t longer = lw > ln ? lw : ln;
	/* the lengths alone bound the distance from below */
	if ((lw > ln ? lw - ln : ln - lw) > (size_t)suggest_limit(lw))
		return;
	int d = suggest_distance(s->word, name);
	if (d < 0 || d > suggest_limit(lw) || (size_t)d >= longer)
		return;
	if (!s->best || d < s->d) {
		s->best = name;
		s->d = d;
	}
}

const char *
suggest_note(char *buf, size_t cap, const char *list, const char *prefix, const char *best)
{
	if (!list && !best) {
		if (cap)
			buf[0] = 0;
	} else if (!best)
		snprintf(buf, cap, " (%s)", list);
	else
		snprintf(buf, cap, " (%s%sdid you mean '%s%s'?)", list ? list : "",
			 list ? "; " : "", prefix ? prefix : "", best);
	return buf;
}
