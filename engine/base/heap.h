/* heap.h - a binary min-heap of one element type, as static functions a
 * file instantiates: SL_HEAP(NAME, TYPE, BEFORE) defines
 *   int  NAME_push(TYPE **v, size_t *n, size_t *cap, TYPE e)   0, or -1 (no memory)
 *   TYPE NAME_pop(TYPE *v, size_t *n)                         the first (n > 0)
 * over an array *v of *n elements (capacity *cap, grown by doubling),
 * ordered by BEFORE(const TYPE *a, const TYPE *b): 1 when a comes first.
 * Typed, so the compiler sees the element's size and the comparison. */
#ifndef SL_HEAP_H
#define SL_HEAP_H

#include <stdlib.h>

#define SL_HEAP(NAME, TYPE, BEFORE)                                                   \
	static int NAME##_push(TYPE **v, size_t *n, size_t *cap, TYPE e)              \
	{                                                                             \
		if (*n == *cap) {                                                     \
			size_t c = *cap ? 2 * *cap : 1024;                            \
			TYPE *g = realloc(*v, sizeof(TYPE) * c);                      \
			if (!g)                                                       \
				return -1;                                            \
			*v = g;                                                       \
			*cap = c;                                                     \
		}                                                                     \
		size_t i = (*n)++;                                                    \
		while (i && BEFORE(&e, &(*v)[(i - 1) / 2])) {                         \
			(*v)[i] = (*v)[(i - 1) / 2];                                  \
			i = (i - 1) / 2;                                              \
		}                                                                     \
		(*v)[i] = e;                                                          \
		return 0;                                                             \
	}                                                                             \
	static TYPE NAME##_pop(TYPE *v, size_t *n)                                    \
	{                                                                             \
		TYPE top = v[0], last = v[--*n];                                      \
		size_t i = 0, m = *n;                                                 \
		for (;;) {                                                            \
			size_t c = 2 * i + 1;                                         \
			if (c >= m)                                                   \
				break;                                                \
			if (c + 1 < m && BEFORE(&v[c + 1], &v[c]))                    \
				c++;                                                  \
			if (!BEFORE(&v[c], &last))                                    \
				break;                                                \
			v[i] = v[c];                                                  \
			i = c;                                                        \
		}                                                                     \
		if (m)                                                                \
			v[i] = last;                                                  \
		return top;                                                           \
	}

#endif
