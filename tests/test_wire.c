/* test_wire.c - the remote-worker messages (engine/wire/): the header's
 * bytes at their offsets, a round trip of every kind, and each refusal:
 * short, bad magic, another protocol, unknown kind, augmentation bytes
 * outside a WEIGHTS (or an unknown augmentation in one), unknown flags, a length that lies, a push of the wrong size or layers, a partial
 * flag that disagrees, another model, another run, a flipped bit; a
 * local step's settings at their offsets and their refusals, and the
 * lengths of its WEIGHTS and PUSH with and without the model. */
#include <math.h>

#include "sl.h"
#include "testutil.h"
#include "wire.h"
#include "wiremsg.h"

/* a model of three layers: 10, 20 and 5 parameters */
static wire_model
model3(void)
{
	wire_model m = {.n_params = 35, .n_layers = 3, .run_id = 7};
	m.layer_off[0] = 0;
	m.layer_off[1] = 10;
	m.layer_off[2] = 30;
	m.layer_off[3] = 35;
	m.model_fp = wire_fingerprint("mlp:4-2-5", "synthetic:10", &m);
	return m;
}

static uint8_t buf[WIRE_HEADER + 4096];

static int
hdr_eq(const wire_hdr *a, const wire_hdr *b)
{
	return a->kind == b->kind && a->flags == b->flags && a->worker_id == b->worker_id &&
	       a->incarnation == b->incarnation && a->seq == b->seq && a->run_id == b->run_id &&
	       a->ps_epoch == b->ps_epoch && a->version_read == b->version_read &&
	       a->model_fp == b->model_fp && a->layer_lo == b->layer_lo &&
	       a->layer_hi == b->layer_hi && a->payload_len == b->payload_len &&
	       a->send_ns == b->send_ns && a->augment == b->augment &&
	       a->aug_pad == b->aug_pad && a->data_epoch == b->data_epoch;
}

static size_t
push(const wire_model *m, int lo, wire_hdr *h)
{
	static float g[66]; /* the loss (8 bytes), then the gradients */
	for (int i = 0; i < 66; i++)
		g[i] = (float)i * 0.5f;
	*h = (wire_hdr){.kind = WIRE_PUSH, .flags = lo ? WIRE_F_PARTIAL : 0, .worker_id = 3,
			.incarnation = 9, .seq = 42, .run_id = m->run_id, .ps_epoch = 2,
			.version_read = 1234, .model_fp = m->model_fp, .layer_lo = (uint16_t)lo,
			.layer_hi = (uint16_t)m->n_layers,
			.payload_len = (uint32_t)wire_push_bytes(m, lo, m->n_layers),
			.send_ns = 99};
	return wire_encode(h, g, buf);
}

static int
parse(size_t n, const wire_model *m, char *err)
{
	wire_hdr h;
	const uint8_t *p;
	return wire_parse(buf, n, m, &h, &p, err);
}

START_TEST(header_layout)
{
	wire_model m = model3();
	wire_hdr h;
	size_t n = push(&m, 0, &h);
	ck_assert_uint_eq(n, WIRE_HEADER + 148);
	ck_assert_mem_eq(buf, "SLW1", 4);
	ck_assert_uint_eq(buf[4] | buf[5] << 8, WIRE_PROTO);
	ck_assert_uint_eq(buf[6], WIRE_PUSH);
	ck_assert_uint_eq(buf[16], 3);  /* worker id, little-endian */
	ck_assert_uint_eq(buf[24], 42); /* seq */
	ck_assert_uint_eq(buf[48] | buf[49] << 8, 1234); /* version read */
	ck_assert_uint_eq(buf[68], 148); /* payload length */
	float f;
	memcpy(&f, buf + WIRE_HEADER + 4 * 3, 4);
	ck_assert_float_eq(f, 1.5f);
	/* a WEIGHTS' augmentation key: kind, padding, the epoch at 12 */
	h = (wire_hdr){.kind = WIRE_WEIGHTS, .model_fp = m.model_fp, .layer_hi = 3,
		       .payload_len = 140 + 4};
	aug_key k = {.kind = AUG_CROP_FLIP, .pad = 4, .seed = 5, .epoch = 0x01020304};
	wiremsg_put_aug(&h, &k);
	static const uint8_t zero[144];
	wire_encode(&h, zero, buf);
	ck_assert_uint_eq(buf[10], AUG_CROP_FLIP);
	ck_assert_uint_eq(buf[11], 4);
	ck_assert_uint_eq(buf[12], 4);
	ck_assert_uint_eq(buf[15], 1);
}
END_TEST

START_TEST(augmentation_key_round_trip)
{
	/* what the daemon puts in a WEIGHTS is the key the worker draws its
	 * views from (with the run's seed from the welcome) */
	wire_model m = model3();
	static const uint8_t zero[144];
	const aug_key keys[] = {
		{.kind = AUG_CROP_FLIP, .pad = AUG_PAD, .seed = 77, .epoch = 0},
		{.kind = AUG_CROP_FLIP, .pad = 2, .seed = 77, .epoch = 0xfffffffeu},
		{.kind = AUG_NONE, .pad = 0, .seed = 77, .epoch = 0},
	};
	for (int i = 0; i < 3; i++) {
		wire_hdr h = {.kind = WIRE_WEIGHTS, .model_fp = m.model_fp, .layer_hi = 3,
			      .payload_len = 144}, back;
		wiremsg_put_aug(&h, &keys[i]);
		const uint8_t *p;
		char err[SL_ERR_LEN] = "";
		ck_assert_msg(wire_parse(buf, wire_encode(&h, zero, buf), &m, &back, &p, err) == 0,
			      "%s", err);
		aug_key k;
		wiremsg_get_aug(&back, 77, &k);
		ck_assert_int_eq(k.kind, keys[i].kind);
		ck_assert_int_eq(k.pad, keys[i].pad);
		ck_assert_uint_eq(k.epoch, keys[i].epoch);
		ck_assert_uint_eq(k.seed, 77);
	}
	/* none sends no key at all: the bytes stay zero whatever the epoch */
	wire_hdr h = {.kind = WIRE_WEIGHTS};
	aug_key off = {.kind = AUG_NONE, .pad = 4, .seed = 1, .epoch = 9};
	wiremsg_put_aug(&h, &off);
	ck_assert_uint_eq(h.augment | h.aug_pad | h.data_epoch, 0);
}
END_TEST

START_TEST(round_trip)
{
	wire_model m = model3();
	wire_hdr h, back;
	const uint8_t *p;
	char err[SL_ERR_LEN] = "";
	for (int lo = 0; lo < 3; lo++) {
		size_t n = push(&m, lo, &h);
		ck_assert_int_eq(wire_parse(buf, n, &m, &back, &p, err), 0);
		ck_assert(hdr_eq(&back, &h));
		ck_assert_ptr_eq(p, buf + WIRE_HEADER);
	}
	/* documents and empty messages of every other kind */
	for (int k = WIRE_HELLO; k <= WIRE_KIND_MAX; k++) {
		if (k == WIRE_PUSH || k == WIRE_WEIGHTS)
			continue;
		h = (wire_hdr){.kind = (uint16_t)k, .worker_id = WIRE_ANY_ID,
			       .model_fp = k == WIRE_HELLO ? 0 : m.model_fp, .payload_len = 5};
		size_t n = wire_encode(&h, "hello", buf);
		ck_assert_msg(wire_parse(buf, n, &m, &back, &p, err) == 0, "%s: %s",
			      wire_kind_name(k), err);
		ck_assert_mem_eq(p, "hello", 5);
	}
	h = (wire_hdr){.kind = WIRE_WEIGHTS, .model_fp = m.model_fp, .layer_hi = 3,
		       .payload_len = 140 + 8}; /* and two sample indices */
	uint8_t w[148] = {1};
	ck_assert_int_eq(wire_parse(buf, wire_encode(&h, w, buf), &m, &back, &p, err), 0);
	ck_assert_str_eq(wire_kind_name(WIRE_HB), "hb");
	ck_assert_str_eq(wire_kind_name(0), "?");
	ck_assert_uint_eq(wire_max_message(&m), WIRE_HEADER + WIRE_LOCAL_LEN + WIRE_RANGES_HDR +
						  16 * WIRE_RANGES_MAX + 140 + 4 * WIRE_BATCH_MAX);
}
END_TEST

/* err contains want */
#define REFUSED(n, m, want)                                                   \
	do {                                                                  \
		char e_[SL_ERR_LEN] = "";                                     \
		ck_assert_int_eq(parse((n), (m), e_), -SL_EFORMAT);           \
		ck_assert_msg(strstr(e_, (want)) != NULL, "got \"%s\", want \"%s\"", e_, (want)); \
	} while (0)

START_TEST(refusals)
{
	wire_model m = model3();
	wire_hdr h;
	size_t n = push(&m, 0, &h);
	REFUSED(WIRE_HEADER - 1, &m, "shorter than the 80-byte header");
	REFUSED(n - 1, &m, "147 payload bytes, the header says 148");
	buf[0] = 'X';
	REFUSED(n, &m, "bad magic");
	n = push(&m, 0, &h);
	buf[4] = 1;
	REFUSED(n, &m, "protocol 1, this build speaks 4");
	n = push(&m, 0, &h);
	buf[6] = 99;
	REFUSED(n, &m, "unknown message kind 99");
	n = push(&m, 0, &h);
	buf[12] = 1;
	REFUSED(n, &m, "push: augmentation bytes set on a message that carries no batch");
	n = push(&m, 0, &h);
	buf[10] = 1;
	REFUSED(n, &m, "push: augmentation bytes");
	/* the checks after the framing work on a freshly encoded header */
	h.flags = 16;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "unknown flags 0x10");
	push(&m, 0, &h);
	h.payload_len = 136;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "push: payload 136 bytes, layers [0, 3) need 148");
	push(&m, 0, &h);
	h.layer_lo = 1;
	h.layer_hi = 2;
	h.flags = WIRE_F_PARTIAL;
	h.payload_len = 80;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "not the top of the model's 3");
	push(&m, 1, &h);
	h.flags = 0;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "the partial flag says whole");
	push(&m, 0, &h);
	h.layer_hi = 4;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "outside the model's 3");
	push(&m, 0, &h);
	h.model_fp ^= 1;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "for another model");
	push(&m, 0, &h);
	h.run_id = 8;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "for run 8, this is run 7");
	/* one bit flipped anywhere: the checksum */
	n = push(&m, 0, &h);
	buf[WIRE_HEADER + 17] ^= 0x10;
	REFUSED(n, &m, "checksum mismatch");
	n = push(&m, 0, &h);
	buf[72] ^= 1; /* even in the telemetry */
	REFUSED(n, &m, "checksum mismatch");
	/* a push before the model is known */
	n = push(&m, 0, &h);
	REFUSED(n, NULL, "before welcome");
	/* documents: bounded, no layers */
	h = (wire_hdr){.kind = WIRE_HB, .model_fp = m.model_fp, .payload_len = WIRE_CTRL_MAX + 1};
	static uint8_t big[WIRE_HEADER + WIRE_CTRL_MAX + 1];
	n = wire_encode(&h, big + WIRE_HEADER, big);
	{
		wire_hdr o;
		const uint8_t *p;
		char e[SL_ERR_LEN];
		ck_assert_int_eq(wire_parse(big, n, &m, &o, &p, e), -SL_EFORMAT);
		ck_assert_ptr_nonnull(strstr(e, "hb: payload 65537 bytes, over 65536"));
	}
	h = (wire_hdr){.kind = WIRE_CTRL, .model_fp = m.model_fp, .layer_hi = 1};
	n = wire_encode(&h, NULL, buf);
	REFUSED(n, &m, "carries no gradient");
	h = (wire_hdr){.kind = WIRE_WEIGHTS, .model_fp = m.model_fp, .layer_hi = 3, .payload_len = 140};
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "weights: payload 140 bytes, the model's 35 parameters need 140 and 1 to");
	h.payload_len = 146;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "weights: payload 146 bytes");
	h.payload_len = 144;
	h.layer_lo = 3;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "weights: backprop from layer 3 of [0, 3)");
	h.layer_lo = 0;
	h.augment = WIRE_AUG_MAX + 1;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "weights: unknown augmentation 2");
	h.augment = AUG_NONE;
	h.data_epoch = 3;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "weights: no augmentation, yet a padding or an epoch");
}
END_TEST

START_TEST(fingerprints)
{
	wire_model a = model3(), b = model3();
	ck_assert_uint_eq(a.model_fp, b.model_fp);
	ck_assert_uint_ne(wire_fingerprint("mlp:4-2-5", "synthetic:11", &a), a.model_fp);
	ck_assert_uint_ne(wire_fingerprint("mlp:4-2-6", "synthetic:10", &a), a.model_fp);
	b.layer_off[1] = 11;
	ck_assert_uint_ne(wire_fingerprint("mlp:4-2-5", "synthetic:10", &b), a.model_fp);
	ck_assert_uint_eq(wire_push_bytes(&a, 2, 3), 8 + 20);
	ck_assert_uint_eq(wire_push_bytes(&a, 3, 3), 0);
}
END_TEST

START_TEST(local_steps)
{
	wire_model m = model3();
	char err[SL_ERR_LEN];
	uint8_t b[WIRE_LOCAL_LEN];
	wire_local l = {.opt = 4, .lflags = WIRE_L_EXCHANGE | WIRE_L_RESET, .lr = 0.25f,
			.mu = 0.5f, .wd = 0.125f, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
			.clip = 1.5};
	wire_local_put(b, &l);
	/* at their offsets, little-endian */
	ck_assert_uint_eq(b[0], 4);
	ck_assert_uint_eq(b[1], 3);
	ck_assert_uint_eq(b[2] | b[3], 0);
	ck_assert_uint_eq((uint32_t)b[4] | (uint32_t)b[5] << 8 | (uint32_t)b[6] << 16 |
			  (uint32_t)b[7] << 24, 0x3e800000u); /* 0.25f */
	ck_assert_uint_eq(b[47], 0x3f); /* clip 1.5: 0x3ff8000000000000 */
	ck_assert_uint_eq(b[46], 0xf8);
	wire_local r;
	ck_assert_int_eq(wire_local_get(b, &r, err), 0);
	ck_assert(r.opt == 4 && r.lflags == 3 && r.lr == 0.25f && r.mu == 0.5f &&
		  r.wd == 0.125f && r.beta1 == 0.9 && r.beta2 == 0.95 && r.eps == 1e-8 &&
		  r.clip == 1.5);
	struct {
		wire_local l;
		int pad;
		const char *want;
	} bad[] = {
		{{.opt = WIRE_OPT_MAX + 1}, 0, "unknown optimiser 5"},
		{{.lflags = 4}, 0, "unknown flags 0x4"},
		{{0}, 1, "unknown flags"},
		{{.lr = NAN}, 0, "lr is not finite"},
		{{.eps = INFINITY}, 0, "eps is not finite"},
		{{.lr = -1}, 0, "lr below 0"},
		{{.clip = -1}, 0, "clip below 0"},
	};
	for (int i = 0; i < (int)(sizeof(bad) / sizeof(bad[0])); i++) {
		wire_local_put(b, &bad[i].l);
		b[2] = (uint8_t)bad[i].pad;
		err[0] = 0;
		ck_assert_int_eq(wire_local_get(b, &r, err), -SL_EFORMAT);
		ck_assert_msg(strstr(err, bad[i].want), "%d: \"%s\"", i, err);
	}
	/* its WEIGHTS: the settings, the model only with WIRE_F_MODEL, then
	 * the batch */
	wire_hdr h = {.kind = WIRE_WEIGHTS, .flags = WIRE_F_LOCAL, .model_fp = m.model_fp,
		      .layer_hi = 3, .payload_len = WIRE_LOCAL_LEN + 8};
	memset(buf + WIRE_HEADER, 0, 4096);
	size_t n = wire_encode(&h, buf + WIRE_HEADER, buf);
	ck_assert_int_eq(parse(n, &m, err), 0);
	h.payload_len = WIRE_LOCAL_LEN + 140 + 8;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	ck_assert_int_eq(parse(n, &m, err), 0); /* 37 indices: a batch of them */
	h.flags = WIRE_F_LOCAL | WIRE_F_MODEL;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	ck_assert_int_eq(parse(n, &m, err), 0);
	h.payload_len = WIRE_LOCAL_LEN + 140;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "a local step's settings and the model's 35 parameters need 188");
	h.flags = WIRE_F_LOCAL;
	h.payload_len = WIRE_LOCAL_LEN;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "weights: payload 48 bytes, a local step's settings need 48");
	h.flags = WIRE_F_MODEL;
	h.payload_len = 148;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "weights: a model flag outside a local step");
	h.flags = WIRE_F_PARTIAL;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "weights: the partial flag is a push's");
	/* its PUSH: the loss, then the model with WIRE_F_MODEL */
	h = (wire_hdr){.kind = WIRE_PUSH, .flags = WIRE_F_LOCAL, .model_fp = m.model_fp,
		       .run_id = 7, .layer_hi = 3, .payload_len = 8};
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	ck_assert_int_eq(parse(n, &m, err), 0);
	h.flags = WIRE_F_LOCAL | WIRE_F_MODEL;
	h.payload_len = 8 + 140;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	ck_assert_int_eq(parse(n, &m, err), 0);
	h.flags = WIRE_F_LOCAL;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "push: a local step's payload 148 bytes, its loss needs 8");
	h.flags = WIRE_F_LOCAL | WIRE_F_MODEL;
	h.payload_len = 8;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "push: a local step's payload 8 bytes, its loss and the model needs 148");
	h.flags = WIRE_F_MODEL;
	h.payload_len = 8 + 140;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "push: a model flag outside a local step");
	/* the receive limit has room for the largest: settings, the most
	 * ranges, the model, the batch */
	ck_assert_uint_eq(wire_max_message(&m),
			  WIRE_HEADER + WIRE_LOCAL_LEN + WIRE_RANGES_HDR + 16 * WIRE_RANGES_MAX +
			  140 + 4 * (size_t)WIRE_BATCH_MAX);
}
END_TEST

/* a local WEIGHTS with a range section: 2 up ([0, 10) and [30, 35)), 1
 * down ([10, 14), its 4 floats), mix 0.5, then a batch of 2 */
static size_t
ranged(const wire_model *m, uint16_t flags)
{
	uint8_t pl[512];
	memset(pl, 0, sizeof(pl));
	wire_local l = {.opt = 4, .lflags = WIRE_L_EXCHANGE, .lr = 0.1f};
	wire_local_put(pl, &l);
	const uint64_t off[] = {0, 30, 10}, len[] = {10, 5, 4};
	size_t at = WIRE_LOCAL_LEN + wire_ranges_put(pl + WIRE_LOCAL_LEN, 2, 1, 0.5f, off, len);
	at += 16; /* the down floats (zero) */
	if (flags & WIRE_F_MODEL)
		at += 140;
	at += 8; /* two indices */
	wire_hdr h = {.kind = WIRE_WEIGHTS, .flags = flags, .model_fp = m->model_fp,
		      .layer_hi = 3, .payload_len = (uint32_t)at};
	return wire_encode(&h, pl, buf);
}

START_TEST(ranges)
{
	wire_model m = model3();
	char err[SL_ERR_LEN];
	size_t n = ranged(&m, WIRE_F_LOCAL | WIRE_F_RANGES);
	ck_assert_int_eq(parse(n, &m, err), 0);
	wire_ranges r;
	const uint8_t *sec = buf + WIRE_HEADER + WIRE_LOCAL_LEN;
	ck_assert_int_eq(wire_ranges_get(sec, 16 + 24 + 16, 35, &r, err), 0);
	ck_assert(r.n_up == 2 && r.n_down == 1 && r.mix == 0.5f && r.up_floats == 15 &&
		  r.down_floats == 4 && r.bytes == 16 + 24 + 16);
	uint64_t o, l;
	wire_range_at(&r, 1, &o, &l);
	ck_assert(o == 30 && l == 5);
	wire_range_at(&r, 2, &o, &l);
	ck_assert(o == 10 && l == 4);
	/* the section's bytes: offsets 4 and 8 */
	ck_assert_uint_eq(sec[4], 1);
	ck_assert_uint_eq(sec[16 + 8], 30);
	/* the model and ranges that come down, together: refused */
	n = ranged(&m, WIRE_F_LOCAL | WIRE_F_RANGES | WIRE_F_MODEL);
	REFUSED(n, &m, "weights: the model and ranges of it coming down together");
	n = ranged(&m, WIRE_F_RANGES);
	REFUSED(n, &m, "weights: a ranges flag outside a local step");
	/* each refusal of the section, named */
	struct {
		uint32_t nu, nd, pad;
		float mix;
		uint64_t off, len;
		size_t avail;
		const char *want;
	} bad[] = {
		{0, 0, 0, 0, 0, 1, 64, "0 ranges up and 0 down"},
		{WIRE_RANGES_MAX + 1, 0, 0, 0, 0, 1, 64, "513 ranges up"},
		{1, 0, 1, 0, 0, 1, 64, "pad is not zero"},
		{1, 0, 0, NAN, 0, 1, 64, "mix is not finite"},
		{1, 0, 0, 0, 3, 0, 64, "range 0, [3, 3), is empty"},
		{1, 0, 0, 0, 30, 6, 64, "[30, 36), is empty or outside the model's 35"},
		{1, 0, 0, 0, 0, 1, 20, "20 bytes, its 1 ranges need 24"},
		{0, 1, 0, 0, 0, 2, 26, "26 bytes, its down ranges' floats need 32"},
		{1, 0, 0, 0, 0, 1, 8, "too few for its ranges' header"},
	};
	for (int i = 0; i < (int)(sizeof(bad) / sizeof(bad[0])); i++) {
		uint8_t b[64] = {0};
		wire_ranges_put(b, bad[i].nu > 8 ? 0 : bad[i].nu, bad[i].nd, bad[i].mix,
				&bad[i].off, &bad[i].len);
		b[0] = (uint8_t)(bad[i].nu & 0xff);
		b[1] = (uint8_t)(bad[i].nu >> 8);
		b[12] = (uint8_t)bad[i].pad;
		err[0] = 0;
		ck_assert_int_eq(wire_ranges_get(b, bad[i].avail, 35, &r, err), -SL_EFORMAT);
		ck_assert_msg(strstr(err, bad[i].want), "%d: \"%s\"", i, err);
	}
	/* its PUSH: the loss and 1 to n floats */
	wire_hdr h = {.kind = WIRE_PUSH, .flags = WIRE_F_LOCAL | WIRE_F_RANGES,
		      .model_fp = m.model_fp, .run_id = 7, .layer_hi = 3, .payload_len = 8 + 60};
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	ck_assert_int_eq(parse(n, &m, err), 0);
	h.payload_len = 8;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "its loss and 1 to 35 floats of its ranges need 12 to 148");
	h.payload_len = 8 + 144;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "payload 152 bytes");
	h.payload_len = 8 + 140;
	h.flags |= WIRE_F_MODEL;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "push: the model and ranges of it");
	h.flags = WIRE_F_RANGES;
	n = wire_encode(&h, buf + WIRE_HEADER, buf);
	REFUSED(n, &m, "push: a ranges flag outside a local step");
}
END_TEST

static Suite *
wire_suite(void)
{
	Suite *s = suite_create("wire");
	TCase *tc = tcase_create("messages");
	tcase_add_test(tc, header_layout);
	tcase_add_test(tc, round_trip);
	tcase_add_test(tc, augmentation_key_round_trip);
	tcase_add_test(tc, refusals);
	tcase_add_test(tc, fingerprints);
	tcase_add_test(tc, local_steps);
	tcase_add_test(tc, ranges);
	suite_add_tcase(s, tc);
	return s;
}

SL_TEST_MAIN(wire_suite)
