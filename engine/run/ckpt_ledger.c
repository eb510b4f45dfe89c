/* ckpt_ledger.c - the ledger of remote pushes in a checkpoint: the
 * section "ledger" with the generation, the counters, and one entry per
 * worker id ever seen as four arrays (ids, incarnations, the last sequence
 * number issued and applied). Optional: a run that never had a remote
 * worker has none. */
#include <stdlib.h>
#include <string.h>

#include "ckpt_fields.h"

void
ckpt_put_ledger(tlv_w *w, const ledger *l)
{
	if (!l)
		return;
	uint32_t n = 0;
	for (uint32_t i = 0; i < LEDGER_MAX; i++)
		n += l->w[i].known;
	uint32_t *id = malloc(sizeof(uint32_t) * (n ? n : 1));
	uint32_t *inc = malloc(sizeof(uint32_t) * (n ? n : 1));
	uint64_t *iss = malloc(sizeof(uint64_t) * (n ? n : 1));
	uint64_t *app = malloc(sizeof(uint64_t) * (n ? n : 1));
	tlv_open(w, "ledger", TLV_SEC);
	if (id && inc && iss && app) {
		uint32_t k = 0;
		for (uint32_t i = 0; i < LEDGER_MAX; i++) {
			const ledger_entry *e = &l->w[i];
			if (!e->known)
				continue;
			id[k] = i;
			inc[k] = e->incarnation;
			iss[k] = e->issued;
			app[k] = e->applied;
			k++;
		}
		tlv_u64(w, "generation", l->generation);
		tlv_u64(w, "applied", l->applied);
		tlv_u64(w, "duplicates", l->duplicates);
		tlv_u64(w, "abandoned", l->abandoned);
		tlv_u64(w, "old_incarnation", l->old_incarnation);
		tlv_u64(w, "old_epoch", l->old_epoch);
		tlv_u64(w, "restarts", l->restarts);
		tlv_array(w, "id", TLV_U32S, id, n);
		tlv_array(w, "incarnation", TLV_U32S, inc, n);
		tlv_array(w, "issued", TLV_U64S, iss, n);
		tlv_array(w, "applied_seq", TLV_U64S, app, n);
	} /* out of memory: an empty section, which a reader refuses */
	tlv_close(w);
	free(id);
	free(inc);
	free(iss);
	free(app);
}

int
ckpt_get_ledger(const tlv_sec *root, ledger **out, char *err)
{
	*out = NULL;
	tlv_sec s;
	int rc = tlv_get_sec(root, "ledger", OPT, TLV_SEC, &s, err);
	if (rc <= 0)
		return rc;
	ledger *l = malloc(sizeof(*l));
	if (!l)
		return sl_fail(err, SL_ENOMEM, "checkpoint: out of memory");
	ledger_init(l);
	uint64_t gen = 0;
	const void *id, *inc, *iss, *app;
	size_t n = 0;
	if ((rc = tlv_get_u64(&s, "generation", REQ, &gen, err)) < 0 ||
	    (rc = tlv_get_u64(&s, "applied", REQ, &l->applied, err)) < 0 ||
	    (rc = tlv_get_u64(&s, "duplicates", REQ, &l->duplicates, err)) < 0 ||
	    (rc = tlv_get_u64(&s, "abandoned", REQ, &l->abandoned, err)) < 0 ||
	    (rc = tlv_get_u64(&s, "old_incarnation", REQ, &l->old_incarnation, err)) < 0 ||
	    (rc = tlv_get_u64(&s, "old_epoch", REQ, &l->old_epoch, err)) < 0 ||
	    (rc = tlv_get_u64(&s, "restarts", REQ, &l->restarts, err)) < 0 ||
	    (rc = tlv_get_array(&s, "id", REQ, TLV_U32S, SIZE_MAX, &id, &n, err)) < 0 ||
	    (rc = tlv_get_array(&s, "incarnation", REQ, TLV_U32S, n, &inc, NULL, err)) < 0 ||
	    (rc = tlv_get_array(&s, "issued", REQ, TLV_U64S, n, &iss, NULL, err)) < 0 ||
	    (rc = tlv_get_array(&s, "applied_seq", REQ, TLV_U64S, n, &app, NULL, err)) < 0)
		goto fail;
	rc = -SL_EFORMAT;
	if (gen >= UINT32_MAX) {
		tlv_bad(err, &s, "generation", "= %llu is out of range", (unsigned long long)gen);
		goto fail;
	}
	l->generation = (uint32_t)gen;
	for (size_t k = 0; k < n; k++) {
		uint32_t i, in; /* the arrays point into the file, unaligned */
		uint64_t a, b;
		memcpy(&i, (const uint8_t *)id + 4 * k, 4);
		memcpy(&in, (const uint8_t *)inc + 4 * k, 4);
		memcpy(&a, (const uint8_t *)iss + 8 * k, 8);
		memcpy(&b, (const uint8_t *)app + 8 * k, 8);
		if (i >= LEDGER_MAX || l->w[i].known) {
			tlv_bad(err, &s, "id", "[%zu] = %u is out of range or twice", k, i);
			goto fail;
		}
		if (b > a) {
			tlv_bad(err, &s, "applied_seq", "[%zu] is past what was issued", k);
			goto fail;
		}
		l->w[i] = (ledger_entry){.incarnation = in, .known = 1, .issued = a, .applied = b};
	}
	*out = l;
	return 1;
fail:
	free(l);
	return rc;
}
