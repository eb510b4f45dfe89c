/* wire.c - the daemon <-> remote worker messages (see wire.h). */
#include "wire.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "sl.h"

static const char *const kind_names[] = {
	"?", "hello", "welcome", "refuse", "push", "ack", "held", "pull", "weights",
	"hb", "ctrl", "bye",
};

const char *
wire_kind_name(int kind)
{
	return kind >= 1 && kind <= WIRE_KIND_MAX ? kind_names[kind] : "?";
}

/* ---- little-endian fields ---- */

static void
put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void
put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void
put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t
get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* crc-32 of the header with its crc field as zero, then the payload */
static uint32_t
checksum(const uint8_t *hdr, const uint8_t *payload, size_t n)
{
	uint8_t h[WIRE_HEADER];
	memcpy(h, hdr, WIRE_HEADER);
	memset(h + 44, 0, 4);
	uLong c = crc32(0L, Z_NULL, 0);
	c = crc32(c, h, WIRE_HEADER);
	while (n) { /* zlib takes a uInt at a time */
		uInt k = n > (1u << 30) ? 1u << 30 : (uInt)n;
		c = crc32(c, payload, k);
		payload += k;
		n -= k;
	}
	return (uint32_t)c;
}

static void
putf32(uint8_t *p, float v)
{
	uint32_t u;
	memcpy(&u, &v, 4);
	put32(p, u);
}

static void
putf64(uint8_t *p, double v)
{
	uint64_t u;
	memcpy(&u, &v, 8);
	put64(p, u);
}

static float
getf32(const uint8_t *p)
{
	uint32_t u = get32(p);
	float v;
	memcpy(&v, &u, 4);
	return v;
}

static double
getf64(const uint8_t *p)
{
	uint64_t u = get64(p);
	double v;
	memcpy(&v, &u, 8);
	return v;
}

void
wire_local_put(uint8_t *p, const wire_local *l)
{
	memset(p, 0, WIRE_LOCAL_LEN);
	p[0] = l->opt;
	p[1] = l->lflags;
	putf32(p + 4, l->lr);
	putf32(p + 8, l->mu);
	putf32(p + 12, l->wd);
	putf64(p + 16, l->beta1);
	putf64(p + 24, l->beta2);
	putf64(p + 32, l->eps);
	putf64(p + 40, l->clip);
}

int
wire_local_get(const uint8_t *p, wire_local *l, char *err)
{
	*l = (wire_local){.opt = p[0], .lflags = p[1], .lr = getf32(p + 4), .mu = getf32(p + 8),
			  .wd = getf32(p + 12), .beta1 = getf64(p + 16),
			  .beta2 = getf64(p + 24), .eps = getf64(p + 32), .clip = getf64(p + 40)};
	if (l->opt > WIRE_OPT_MAX)
		return sl_fail(err, SL_EFORMAT, "local step: unknown optimiser %u", l->opt);
	if (l->lflags & ~(WIRE_L_EXCHANGE | WIRE_L_RESET) || p[2] || p[3])
		return sl_fail(err, SL_EFORMAT, "local step: unknown flags 0x%x", l->lflags);
	const double v[] = {l->lr, l->mu, l->wd, l->beta1, l->beta2, l->eps, l->clip};
	static const char *const names[] = {"lr", "mu", "wd", "beta1", "beta2", "eps", "clip"};
	for (int i = 0; i < 7; i++)
		if (!isfinite(v[i]))
			return sl_fail(err, SL_EFORMAT, "local step: %s is not finite", names[i]);
	if (l->lr < 0 || l->clip < 0)
		return sl_fail(err, SL_EFORMAT, "local step: %s below 0", l->lr < 0 ? "lr" : "clip");
	return 0;
}

size_t
wire_ranges_put(uint8_t *p, uint32_t n_up, uint32_t n_down, float mix, const uint64_t *off,
		const uint64_t *len)
{
	put32(p, n_up);
	put32(p + 4, n_down);
	putf32(p + 8, mix);
	put32(p + 12, 0);
	for (uint32_t i = 0; i < n_up + n_down; i++) {
		put32(p + WIRE_RANGES_HDR + 8 * i, (uint32_t)off[i]);
		put32(p + WIRE_RANGES_HDR + 8 * i + 4, (uint32_t)len[i]);
	}
	return WIRE_RANGES_HDR + 8 * (size_t)(n_up + n_down);
}

void
wire_range_at(const wire_ranges *r, uint32_t i, uint64_t *off, uint64_t *len)
{
	*off = get32(r->pairs + 8 * i);
	*len = get32(r->pairs + 8 * i + 4);
}

int
wire_ranges_get(const uint8_t *p, size_t avail, uint64_t n_params, wire_ranges *r, char *err)
{
	memset(r, 0, sizeof(*r));
	if (avail < WIRE_RANGES_HDR)
		return sl_fail(err, SL_EFORMAT, "local step: %zu bytes, too few for its ranges' "
			       "header", avail);
	r->n_up = get32(p);
	r->n_down = get32(p + 4);
	r->mix = getf32(p + 8);
	if (r->n_up > WIRE_RANGES_MAX || r->n_down > WIRE_RANGES_MAX || !(r->n_up + r->n_down))
		return sl_fail(err, SL_EFORMAT, "local step: %u ranges up and %u down (1 to %d "
			       "each way)", r->n_up, r->n_down, WIRE_RANGES_MAX);
	if (get32(p + 12) || !isfinite(r->mix))
		return sl_fail(err, SL_EFORMAT, "local step: %s", get32(p + 12) ?
			       "its ranges' pad is not zero" : "mix is not finite");
	size_t head = WIRE_RANGES_HDR + 8 * (size_t)(r->n_up + r->n_down);
	if (avail < head)
		return sl_fail(err, SL_EFORMAT, "local step: %zu bytes, its %u ranges need %zu",
			       avail, r->n_up + r->n_down, head);
	r->pairs = p + WIRE_RANGES_HDR;
	for (uint32_t i = 0; i < r->n_up + r->n_down; i++) {
		uint64_t o, n;
		wire_range_at(r, i, &o, &n);
		if (!n || o + n > n_params)
			return sl_fail(err, SL_EFORMAT, "local step: range %u, [%llu, %llu), is "
				       "empty or outside the model's %llu parameters", i,
				       (unsigned long long)o, (unsigned long long)(o + n),
				       (unsigned long long)n_params);
		if (i < r->n_up)
			r->up_floats += n;
		else
			r->down_floats += n;
	}
	if (r->up_floats > n_params || r->down_floats > n_params)
		return sl_fail(err, SL_EFORMAT, "local step: its ranges cover %llu floats, more "
			       "than the model's %llu", (unsigned long long)(r->up_floats >
			       r->down_floats ? r->up_floats : r->down_floats),
			       (unsigned long long)n_params);
	r->bytes = head + 4 * r->down_floats;
	if (avail < r->bytes)
		return sl_fail(err, SL_EFORMAT, "local step: %zu bytes, its down ranges' floats "
			       "need %zu", avail, r->bytes);
	return 0;
}

uint64_t
wire_push_bytes(const wire_model *m, int lo, int hi)
{
	if (lo < 0 || hi > m->n_layers || lo >= hi)
		return 0;
	return WIRE_PUSH_LOSS + 4 * (m->layer_off[hi] - m->layer_off[lo]);
}

size_t
wire_max_message(const wire_model *m)
{
	uint64_t w = WIRE_LOCAL_LEN + WIRE_RANGES_HDR + 16 * (uint64_t)WIRE_RANGES_MAX +
		     4 * m->n_params + 4 * (uint64_t)WIRE_BATCH_MAX;
	return WIRE_HEADER + (size_t)(w > WIRE_CTRL_MAX ? w : WIRE_CTRL_MAX);
}

size_t
wire_encode(const wire_hdr *h, const void *payload, uint8_t *out)
{
	memset(out, 0, WIRE_HEADER);
	put32(out, WIRE_MAGIC);
	put16(out + 4, WIRE_PROTO);
	put16(out + 6, h->kind);
	put16(out + 8, h->flags);
	out[10] = h->augment;
	out[11] = h->aug_pad;
	put32(out + 12, h->data_epoch);
	put32(out + 16, h->worker_id);
	put32(out + 20, h->incarnation);
	put64(out + 24, h->seq);
	put64(out + 32, h->run_id);
	put32(out + 40, h->ps_epoch);
	put64(out + 48, h->version_read);
	put64(out + 56, h->model_fp);
	put16(out + 64, h->layer_lo);
	put16(out + 66, h->layer_hi);
	put32(out + 68, h->payload_len);
	put64(out + 72, h->send_ns);
	if (h->payload_len && payload != out + WIRE_HEADER) /* else already in place */
		memcpy(out + WIRE_HEADER, payload, h->payload_len);
	put32(out + 44, checksum(out, out + WIRE_HEADER, h->payload_len));
	return WIRE_HEADER + h->payload_len;
}

/* the payload a kind must carry, against the model (m may be NULL) */
static int
check_payload(const wire_hdr *h, const uint8_t *payload, const wire_model *m, char *err)
{
	const char *k = wire_kind_name(h->kind);
	switch (h->kind) {
	case WIRE_PUSH: {
		if (!m)
			return sl_fail(err, SL_EFORMAT, "push: no model known yet (a push before welcome)");
		if (h->layer_hi > m->n_layers || h->layer_lo >= h->layer_hi)
			return sl_fail(err, SL_EFORMAT, "push: layers [%u, %u) outside the model's %d",
				       h->layer_lo, h->layer_hi, m->n_layers);
		if (h->layer_hi != m->n_layers)
			return sl_fail(err, SL_EFORMAT, "push: layers [%u, %u) are not the top of the "
				       "model's %d (partial backprop sends a contiguous tail)",
				       h->layer_lo, h->layer_hi, m->n_layers);
		if (!!(h->flags & WIRE_F_PARTIAL) != (h->layer_lo > 0))
			return sl_fail(err, SL_EFORMAT, "push: the partial flag says %s, the layers "
				       "[%u, %u) say otherwise", h->flags & WIRE_F_PARTIAL ? "partial" : "whole",
				       h->layer_lo, h->layer_hi);
		if ((h->flags & WIRE_F_LOCAL) && (h->flags & WIRE_F_RANGES)) {
			uint64_t nf = (h->payload_len - WIRE_PUSH_LOSS) / 4;
			if (h->flags & WIRE_F_MODEL)
				return sl_fail(err, SL_EFORMAT, "push: the model and ranges of it");
			if (h->payload_len < WIRE_PUSH_LOSS + 4 || (h->payload_len - WIRE_PUSH_LOSS) % 4 ||
			    nf > m->n_params)
				return sl_fail(err, SL_EFORMAT, "push: a local step's payload %u bytes, its "
					       "loss and 1 to %llu floats of its ranges need 12 to %llu",
					       h->payload_len, (unsigned long long)m->n_params,
					       (unsigned long long)(WIRE_PUSH_LOSS + 4 * m->n_params));
			return 0;
		}
		if (h->flags & WIRE_F_RANGES)
			return sl_fail(err, SL_EFORMAT, "push: a ranges flag outside a local step");
		if (h->flags & WIRE_F_LOCAL) {
			uint64_t want = WIRE_PUSH_LOSS + (h->flags & WIRE_F_MODEL ? 4 * m->n_params : 0);
			if (h->payload_len != want)
				return sl_fail(err, SL_EFORMAT, "push: a local step's payload %u bytes, "
					       "%s needs %llu", h->payload_len, h->flags & WIRE_F_MODEL ?
					       "its loss and the model" : "its loss",
					       (unsigned long long)want);
			return 0;
		}
		if (h->flags & WIRE_F_MODEL)
			return sl_fail(err, SL_EFORMAT, "push: a model flag outside a local step");
		uint64_t want = wire_push_bytes(m, h->layer_lo, h->layer_hi);
		if (h->payload_len != want)
			return sl_fail(err, SL_EFORMAT, "push: payload %u bytes, layers [%u, %u) need %llu",
				       h->payload_len, h->layer_lo, h->layer_hi, (unsigned long long)want);
		return 0;
	}
	case WIRE_WEIGHTS: {
		if (h->flags & WIRE_F_PARTIAL)
			return sl_fail(err, SL_EFORMAT, "weights: the partial flag is a push's");
		if ((h->flags & (WIRE_F_MODEL | WIRE_F_RANGES)) && !(h->flags & WIRE_F_LOCAL))
			return sl_fail(err, SL_EFORMAT, "weights: a %s flag outside a local step",
				       h->flags & WIRE_F_MODEL ? "model" : "ranges");
		if (!m)
			return 0;
		int local = (h->flags & WIRE_F_LOCAL) != 0;
		uint64_t w = (local ? WIRE_LOCAL_LEN : 0) +
			     (!local || (h->flags & WIRE_F_MODEL) ? 4 * m->n_params : 0);
		if (h->flags & WIRE_F_RANGES) {
			wire_ranges r;
			if (h->payload_len < WIRE_LOCAL_LEN)
				return sl_fail(err, SL_EFORMAT, "weights: payload %u bytes, a local "
					       "step's settings need %d", h->payload_len,
					       WIRE_LOCAL_LEN);
			if (wire_ranges_get(payload + WIRE_LOCAL_LEN, h->payload_len - WIRE_LOCAL_LEN,
					    m->n_params, &r, err) < 0)
				return -SL_EFORMAT;
			if ((h->flags & WIRE_F_MODEL) && r.n_down)
				return sl_fail(err, SL_EFORMAT, "weights: the model and ranges of it "
					       "coming down together");
			w += r.bytes;
		}
		uint64_t extra = h->payload_len - w;
		if (h->payload_len < w || extra % 4 || extra / 4 > WIRE_BATCH_MAX || !extra) {
			char what[96];
			if (!local || (h->flags & WIRE_F_MODEL))
				snprintf(what, sizeof(what), "%sthe model's %llu parameters",
					 local ? "a local step's settings and " : "",
					 (unsigned long long)m->n_params);
			else
				snprintf(what, sizeof(what), "a local step's settings");
			return sl_fail(err, SL_EFORMAT, "weights: payload %u bytes, %s need %llu "
				       "and 1 to %d sample indices after them", h->payload_len, what,
				       (unsigned long long)w, WIRE_BATCH_MAX);
		}
		if (h->layer_lo >= m->n_layers || h->layer_hi != m->n_layers)
			return sl_fail(err, SL_EFORMAT, "weights: backprop from layer %u of [0, %d)",
				       h->layer_lo, m->n_layers);
		return 0;
	}
	case WIRE_PULL: case WIRE_ACK: case WIRE_HELD: case WIRE_BYE:
		if (h->payload_len > WIRE_CTRL_MAX)
			return sl_fail(err, SL_EFORMAT, "%s: payload %u bytes, over %d", k,
				       h->payload_len, WIRE_CTRL_MAX);
		return 0;
	default: /* documents */
		if (h->payload_len > WIRE_CTRL_MAX)
			return sl_fail(err, SL_EFORMAT, "%s: payload %u bytes, over %d", k,
				       h->payload_len, WIRE_CTRL_MAX);
		if (h->flags || h->layer_lo || h->layer_hi)
			return sl_fail(err, SL_EFORMAT, "%s: flags or layers set on a message that "
				       "carries no gradient", k);
		return 0;
	}
}

int
wire_parse(const uint8_t *buf, size_t len, const wire_model *m, wire_hdr *h,
	   const uint8_t **payload, char *err)
{
	if (!buf || len < WIRE_HEADER)
		return sl_fail(err, SL_EFORMAT, "message of %zu bytes, shorter than the %d-byte header",
			       len, WIRE_HEADER);
	if (get32(buf) != WIRE_MAGIC)
		return sl_fail(err, SL_EFORMAT, "not a stalelab worker message (bad magic)");
	uint16_t proto = get16(buf + 4);
	if (proto != WIRE_PROTO)
		return sl_fail(err, SL_EFORMAT, "protocol %u, this build speaks %d (run the same "
			       "stalelab version on both sides)", proto, WIRE_PROTO);
	memset(h, 0, sizeof(*h));
	h->kind = get16(buf + 6);
	h->flags = get16(buf + 8);
	h->worker_id = get32(buf + 16);
	h->incarnation = get32(buf + 20);
	h->seq = get64(buf + 24);
	h->run_id = get64(buf + 32);
	h->ps_epoch = get32(buf + 40);
	h->version_read = get64(buf + 48);
	h->model_fp = get64(buf + 56);
	h->layer_lo = get16(buf + 64);
	h->layer_hi = get16(buf + 66);
	h->payload_len = get32(buf + 68);
	h->send_ns = get64(buf + 72);
	if (h->kind < 1 || h->kind > WIRE_KIND_MAX)
		return sl_fail(err, SL_EFORMAT, "unknown message kind %u", h->kind);
	h->augment = buf[10];
	h->aug_pad = buf[11];
	h->data_epoch = get32(buf + 12);
	if (h->kind != WIRE_WEIGHTS && (h->augment || h->aug_pad || h->data_epoch))
		return sl_fail(err, SL_EFORMAT, "%s: augmentation bytes set on a message "
			       "that carries no batch", wire_kind_name(h->kind));
	if (h->augment > WIRE_AUG_MAX)
		return sl_fail(err, SL_EFORMAT, "weights: unknown augmentation %u", h->augment);
	if (!h->augment && (h->aug_pad || h->data_epoch))
		return sl_fail(err, SL_EFORMAT, "weights: no augmentation, yet a padding or an "
			       "epoch for it");
	if (h->flags & ~(WIRE_F_PARTIAL | WIRE_F_LOCAL | WIRE_F_MODEL | WIRE_F_RANGES))
		return sl_fail(err, SL_EFORMAT, "%s: unknown flags 0x%x", wire_kind_name(h->kind),
			       h->flags);
	if (len - WIRE_HEADER != h->payload_len)
		return sl_fail(err, SL_EFORMAT, "%s: %zu payload bytes, the header says %u",
			       wire_kind_name(h->kind), len - WIRE_HEADER, h->payload_len);
	if (check_payload(h, buf + WIRE_HEADER, m, err) < 0)
		return -SL_EFORMAT;
	if (checksum(buf, buf + WIRE_HEADER, h->payload_len) != get32(buf + 44))
		return sl_fail(err, SL_EFORMAT, "%s: checksum mismatch (a corrupt message)",
			       wire_kind_name(h->kind));
	if (m && h->kind != WIRE_HELLO && h->kind != WIRE_REFUSE && h->model_fp != m->model_fp)
		return sl_fail(err, SL_EFORMAT, "%s: for another model (fingerprint %016llx, the "
			       "run's is %016llx)", wire_kind_name(h->kind),
			       (unsigned long long)h->model_fp, (unsigned long long)m->model_fp);
	if (m && m->run_id && h->run_id && h->run_id != m->run_id && h->kind != WIRE_HELLO)
		return sl_fail(err, SL_EFORMAT, "%s: for run %llu, this is run %llu",
			       wire_kind_name(h->kind), (unsigned long long)h->run_id,
			       (unsigned long long)m->run_id);
	*payload = buf + WIRE_HEADER;
	return 0;
}

static uint64_t
fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

uint64_t
wire_fingerprint(const char *model_spec, const char *data_spec, const wire_model *m)
{
	uint64_t h = 0xcbf29ce484222325ull;
	uint8_t b[8];
	h = fnv(h, "stalelab-model/float32/", 23);
	h = fnv(h, model_spec, strlen(model_spec) + 1);
	h = fnv(h, data_spec, strlen(data_spec) + 1);
	put64(b, m->n_params);
	h = fnv(h, b, 8);
	for (int l = 0; l <= m->n_layers && l <= WIRE_LAYERS_MAX; l++) {
		put64(b, m->layer_off[l]);
		h = fnv(h, b, 8);
	}
	return h;
}
