/* dataset_impl.h - what the files of the data set module share (never
 * included outside engine/):
 *
 *   dataset.c        data sets by spec: file names, the loaders, ds_load
 *   dataset_gzip.c   gzip decompression (zlib) and whole-file reads
 *   dataset_parse.c  the IDX and CIFAR-10 parsers (bytes in, a dataset out)
 *   dataset_synth.c  the seeded synthetic Gaussian mixture
 *   dataset_text.c   text cut into contexts, the seeded synthetic text
 *   dataset_cache.c  decoded splits kept on disk and mapped */
#ifndef SL_DATASET_IMPL_H
#define SL_DATASET_IMPL_H

#include "dataset.h"

static inline const char *
ds_name_or_buffer(const char *what)
{
	return what && *what ? what : "<buffer>";
}

/* ds_parse_idx with each file named in messages as given (the loaders
 * pass its path); out must be zeroed by the caller. */
int ds_parse_idx_named(const uint8_t *img, size_t img_len, const char *img_name,
		       const uint8_t *lab, size_t lab_len, const char *lab_name,
		       dataset *out, char *err);

/* ds_parse_cifar with names[i] (when names is non-NULL) naming buffer i in
 * messages, otherwise "<what>: buffer i"; out must be zeroed by the caller. */
int ds_parse_cifar_named(const uint8_t *const *bufs, const size_t *lens, int nbufs,
			 const char *const *names, const char *what, dataset *out,
			 char *err);

/* The cache of decoded splits (dataset_cache.c) for the split read from
 * the files paths[0..npaths). ds_cache_load: 1 with out filled from a
 * mapped cache file, 0 when there is none that matches (out untouched).
 * ds_cache_store: writes d for later loads; 0, or -1 when it could not
 * (which costs only the next decode). */
int ds_cache_load(const char *const *paths, int npaths, dataset *out);
int ds_cache_store(const char *const *paths, int npaths, const dataset *d);

#endif
