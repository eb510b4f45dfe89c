/* wire_fuzz.c - libFuzzer harness of the remote-worker message parser
 * (engine/wire/wire.c): any bytes, with the model known (a three-layer
 * model) and before it is (NULL). Expectations: no crash, no read outside
 * the input; an accepted message's payload lies inside it and is exactly
 * payload_len bytes; re-encoding an accepted message gives the same bytes
 * (nothing is accepted that the encoder would not write). */
#include "fuzz.h"
#include "sl.h"
#include "wire.h"

static uint8_t again[WIRE_HEADER + WIRE_CTRL_MAX + 4096];

static void
one(const uint8_t *data, size_t size, const wire_model *m)
{
	wire_hdr h;
	const uint8_t *p = NULL;
	char err[SL_ERR_LEN] = "";
	if (wire_parse(data, size, m, &h, &p, err) < 0) {
		FUZZ_EXPECT(err[0], "a refusal says why");
		return;
	}
	FUZZ_EXPECT(p == data + WIRE_HEADER, "payload at the header's end");
	FUZZ_EXPECT(h.payload_len == size - WIRE_HEADER, "payload_len %u of %zu", h.payload_len, size);
	if (size <= sizeof(again)) {
		size_t n = wire_encode(&h, p, again);
		FUZZ_EXPECT(n == size && !memcmp(again, data, size), "re-encoded differently");
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	wire_model m = {.n_params = 35, .n_layers = 3, .run_id = 7};
	m.layer_off[1] = 10;
	m.layer_off[2] = 30;
	m.layer_off[3] = 35;
	m.model_fp = wire_fingerprint("mlp:4-2-5", "synthetic:10", &m);
	one(data, size, &m);
	one(data, size, NULL);
	return 0;
}
