/* suggest.h - "did you mean": the nearest of a table's names to a word
 * that matched none (an unknown command, option, field or choice), or
 * nothing when no name is near enough to be what was meant.
 *
 * The distance is Levenshtein's with the swap of two adjacent bytes as one
 * edit (optimal string alignment): "bacth" is 1 from "batch", "srve" 1
 * from "serve". A name is suggested when it is at most max(1, len / 3)
 * edits from a word of len bytes, and not when every byte of the longer
 * must change ("x" is 1 from "s", but has nothing of it). */
#ifndef SL_SUGGEST_H
#define SL_SUGGEST_H

#include <stddef.h>

/* words and names longer than this are never compared (no name is) */
#define SUGGEST_MAX 64

/* The distance between a and b in bytes; -1 when either is longer than
 * SUGGEST_MAX. */
int suggest_distance(const char *a, const char *b);

/* The most edits a word of len bytes may be from a name suggested for
 * it: max(1, len / 3). */
int suggest_limit(size_t len);

/* One search: suggest_start, then suggest_offer each name in table order;
 * best is then the nearest name near enough (the first of equals), or
 * NULL. The strings are the caller's and must outlive the search. */
typedef struct suggest {
	const char *word;
	const char *best;
	int d;        /* best's distance */
} suggest;

void suggest_start(suggest *s, const char *word);
void suggest_offer(suggest *s, const char *name);

/* The end of a message into buf (returned): " (LIST)", " (did you mean
 * 'PREFIXBEST'?)", " (LIST; did you mean 'PREFIXBEST'?)", or "" when
 * list and best are both NULL; prefix may be NULL. */
const char *suggest_note(char *buf, size_t cap, const char *list, const char *prefix,
			 const char *best);

#endif
