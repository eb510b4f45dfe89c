/* wire.h - the messages between the daemon and a remote worker (`stalelab
 * worker`, docs/remote.md): a fixed 80-byte header, then the payload.
 *
 *   off size  field
 *     0   4   magic "SLW1"
 *     4   2   proto         WIRE_PROTO; bumped on any change
 *     6   2   kind          WIRE_HELLO .. WIRE_BYE
 *     8   2   flags         WIRE_F_PARTIAL: a push of the top layers only;
 *                           WIRE_F_LOCAL, WIRE_F_MODEL: a local step (below)
 *    10   1   augment       WEIGHTS: the batch's augmentation (0 none,
 *                           1 crop-flip: engine/data/augment.h, read
 *                           and written by daemon/wire), else 0
 *    11   1   aug_pad       WEIGHTS: crop-flip's padding in pixels, else 0
 *    12   4   data_epoch    WEIGHTS: the epoch the batch was taken in (with
 *                           the run's seed, its views' key), else 0
 *    16   4   worker_id     from WELCOME (WIRE_ANY_ID in a first HELLO)
 *    20   4   incarnation   new at every start of the worker process
 *    24   8   seq           per (worker, incarnation), +1 per PUSH;
 *                           a resend reuses it
 *    32   8   run_id        the run it belongs to (0 in a first HELLO)
 *    40   4   ps_epoch      the daemon's incarnation (bumped at every start
 *                           or restore): a push from before is dropped
 *    44   4   crc32         of the header (this field zero) and payload
 *    48   8   version_read  the server version the gradient was computed on
 *    56   8   model_fp      wire_fingerprint(): architecture, sizes, data
 *    64   2   layer_lo      the parameterised layers a push carries,
 *    66   2   layer_hi      [layer_lo, layer_hi) (a contiguous tail)
 *    68   4   payload_len
 *    72   8   send_ns       the sender's clock (telemetry only)
 *    80       payload       PUSH: the batch loss (float64), then the
 *                           float32 gradients of those layers;
 *                           WEIGHTS: every parameter as float32, then the
 *                           batch's sample indices (uint32), with
 *                           layer_lo the first layer to backpropagate
 *                           through (0: all); the others: a JSON document
 *
 * A local step (WIRE_F_LOCAL; the rules with phases of local steps:
 * localsgd, diloco, async-diloco, easgd) moves no gradient: the worker
 * takes the step on its own weights with the optimiser the WEIGHTS name,
 * and keeps them, and the optimiser's state, for the phase's next step.
 *   WEIGHTS  a wire_local (WIRE_LOCAL_LEN bytes), then with WIRE_F_MODEL
 *            every parameter as float32 (the phase starts from them;
 *            without it the worker steps on from its own), then the
 *            batch's sample indices
 *   PUSH     the batch loss (float64), then with WIRE_F_MODEL (the step
 *            that ends the phase: the wire_local said exchange) the model
 *            it reached, every parameter as float32
 * With fragments (streaming-diloco), WIRE_F_RANGES: the WEIGHTS' settings
 * are followed by a range section (wire_ranges: the ranges its exchange
 * brings back, and those that come down, with their floats, to be mixed
 * into the worker's own weights), never with WIRE_F_MODEL and down
 * ranges together; its PUSH carries the loss and the up ranges' floats.
 *
 * All integers little-endian. The parser is a pure function: bytes in, a
 * checked header (or a refusal naming what is wrong) out; it never trusts
 * a length it has not checked, allocates nothing and keeps no state, so a
 * peer's bytes can never crash the daemon (tests/fuzz/wire_fuzz.c). */
#ifndef SL_WIRE_H
#define SL_WIRE_H

#include <stddef.h>
#include <stdint.h>


#define WIRE_MAGIC 0x31574c53u /* "SLW1" read little-endian */
#define WIRE_PROTO 4 /* 2: a push is answered with the next weights;
			* 3: WEIGHTS carry the batch's augmentation key;
			* 4: local steps (WIRE_F_LOCAL) */
#define WIRE_HEADER 80
#define WIRE_CTRL_MAX 65536   /* the largest document payload */
#define WIRE_ANY_ID 0xffffffffu
#define WIRE_F_PARTIAL 1u
#define WIRE_F_LOCAL 2u       /* a local step: WEIGHTS and its PUSH */
#define WIRE_F_MODEL 4u       /* ... carrying the whole model */
#define WIRE_F_RANGES 8u      /* ... carrying ranges of it (fragments) */
#define WIRE_LOCAL_LEN 48     /* a wire_local's bytes */
#define WIRE_LAYERS_MAX 64
#define WIRE_PUSH_LOSS 8      /* a push's payload starts with its loss */
#define WIRE_BATCH_MAX 65536  /* sample indices in a WEIGHTS */
#define WIRE_AUG_MAX 1        /* the largest augment a WEIGHTS names */

typedef enum wire_kind {
	WIRE_HELLO = 1,   /* worker -> daemon: token, host, launcher rank, threads */
	WIRE_WELCOME,     /* daemon -> worker: its id, the run object, the data set */
	WIRE_REFUSE,      /* either way: a reason; the worker does not retry it */
	WIRE_PUSH,        /* worker -> daemon: a gradient */
	WIRE_ACK,         /* daemon -> worker: applied (or a duplicate, re-acked) */
	WIRE_HELD,        /* daemon -> worker: queued behind a barrier */
	WIRE_PULL,        /* worker -> daemon: the weights, please */
	WIRE_WEIGHTS,     /* daemon -> worker: the weights and their version */
	WIRE_HB,          /* worker -> daemon: alive; the answer is a CTRL */
	WIRE_CTRL,        /* daemon -> worker: the control state (delay, spb
			   * depth, pause, rule, acked and held seq) */
	WIRE_BYE,         /* either way: leaving */
	WIRE_KIND_MAX = WIRE_BYE
} wire_kind;

typedef struct wire_hdr {
	uint16_t kind, flags;
	uint8_t augment, aug_pad; /* WEIGHTS only */
	uint32_t data_epoch;      /* WEIGHTS only */
	uint32_t worker_id, incarnation;
	uint64_t seq, run_id;
	uint32_t ps_epoch;
	uint64_t version_read, model_fp;
	uint16_t layer_lo, layer_hi;
	uint32_t payload_len;
	uint64_t send_ns;
} wire_hdr;

/* A local step's settings, at the head of its WEIGHTS' payload:
 *   off size
 *     0   1   opt        the optimiser (opt_kind, engine/ps/ps_config.h)
 *     1   1   lflags     WIRE_L_EXCHANGE, WIRE_L_RESET
 *     2   2   zero
 *     4   4   lr         float32, the step's learning rate
 *     8   4   mu         float32, momentum
 *    12   4   wd         float32, weight decay
 *    16   8   beta1      float64 (Adam's), then beta2, eps and clip (the
 *    24   8   beta2      global norm the gradient is clipped to, 0: none)
 *    32   8   eps
 *    40   8   clip */
enum {
	WIRE_L_EXCHANGE = 1, /* the phase ends with it: push the model */
	WIRE_L_RESET = 2,    /* the optimiser's state afresh before it */
};
#define WIRE_OPT_MAX 4   /* the largest opt a wire_local names (OPT_ADAMW) */

typedef struct wire_local {
	uint8_t opt, lflags;
	float lr, mu, wd;
	double beta1, beta2, eps, clip;
} wire_local;

/* A local step's range section (WIRE_F_RANGES), after its settings:
 *   off size
 *     0   4   n_up       ranges the exchange brings back (0 to
 *     4   4   n_down     ranges that come down     WIRE_RANGES_MAX each)
 *     8   4   mix        float32: x = w + mix (x - w) on the down ranges
 *    12   4   zero
 *    16   8k  the ranges, up then down: uint32 offset, uint32 length
 *             (in floats, inside the model, not empty)
 *    ...      the down ranges' floats, in order */
#define WIRE_RANGES_HDR 16
#define WIRE_RANGES_MAX 512

typedef struct wire_ranges {
	uint32_t n_up, n_down;
	float mix;
	const uint8_t *pairs;        /* n_up + n_down (offset, length) */
	uint64_t up_floats, down_floats;
	size_t bytes;                /* the section's, its floats included */
} wire_ranges;

/* the header and the ranges (offsets and lengths, n_up + n_down of each)
 * at p; returns the bytes written (the down floats follow, the caller's) */
size_t wire_ranges_put(uint8_t *p, uint32_t n_up, uint32_t n_down, float mix,
		       const uint64_t *off, const uint64_t *len);
/* the section at p (avail bytes) for a model of n_params, checked: 0, or
 * -SL_EFORMAT with err naming what is wrong */
int wire_ranges_get(const uint8_t *p, size_t avail, uint64_t n_params, wire_ranges *r,
		    char *err);
/* range i (up ones first) of a checked section */
void wire_range_at(const wire_ranges *r, uint32_t i, uint64_t *off, uint64_t *len);

void wire_local_put(uint8_t *p, const wire_local *l);
/* the settings at p, checked (a known optimiser and flags, finite values,
 * lr and clip not negative): 0, or -SL_EFORMAT with err naming the field */
int wire_local_get(const uint8_t *p, wire_local *l, char *err);

/* What a receiver expects of a message: the model's parameter count and
 * its layers' offsets into the flat parameter vector (layer_off[l] is
 * where parameterised layer l starts; layer_off[n_layers] = n_params),
 * its fingerprint and the run (0: any, for a first HELLO). */
typedef struct wire_model {
	uint64_t n_params;
	int n_layers;
	uint64_t layer_off[WIRE_LAYERS_MAX + 1];
	uint64_t model_fp;
	uint64_t run_id;
} wire_model;

const char *wire_kind_name(int kind);

/* The largest message the model needs (a WEIGHTS with the largest batch,
 * or a document): the
 * receive limit a socket should have, never unlimited. */
size_t wire_max_message(const wire_model *m);

/* The payload bytes a PUSH of layers [lo, hi) carries (with its loss);
 * a local step's carries the loss, and with the model n_params floats. */
uint64_t wire_push_bytes(const wire_model *m, int lo, int hi);

/* Header and payload into out (WIRE_HEADER + h->payload_len bytes, which
 * the caller has room for), the crc computed; returns the length. */
size_t wire_encode(const wire_hdr *h, const void *payload, uint8_t *out);

/* Check a message: magic, proto, kind, the augmentation bytes (zero but
 * in a WEIGHTS, whose augment is at most WIRE_AUG_MAX), length against the
 * kind and the model, the layer range, the fingerprint, the run, the crc.
 * 0 with *h and *payload (inside buf) set, or -SL_EFORMAT with err naming
 * what is wrong ("push: payload 4096 bytes, layers [2, 3) need 5160").
 * m may be NULL before a model is known (then only the framing, kind and
 * crc are checked). */
int wire_parse(const uint8_t *buf, size_t len, const wire_model *m, wire_hdr *h,
	       const uint8_t **payload, char *err);

/* FNV-1a 64 of the model spec, the data set spec and the layer sizes: a
 * worker for another model, or another data set, is refused. */
uint64_t wire_fingerprint(const char *model_spec, const char *data_spec, const wire_model *m);

#endif
