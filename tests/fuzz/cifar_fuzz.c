/* cifar_fuzz.c - libFuzzer harness for CIFAR-10 binary batches
 * (ds_parse_cifar). The first byte picks how many batches (1 to 4) the
 * rest of the input is cut into, in equal parts (the last takes what is
 * left over). An accepted set has 3x32x32 pixels in [0, 1] and labels
 * below 10. */
#include "dataset.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int nb = 1 + data[0] % 4;
	data++;
	size--;
	const uint8_t *bufs[4];
	size_t lens[4], part = size / (size_t)nb, total = 0;
	for (int i = 0; i < nb; i++) {
		bufs[i] = data + (size_t)i * part;
		lens[i] = i == nb - 1 ? size - (size_t)i * part : part;
		total += lens[i];
	}
	char err[SL_ERR_LEN] = "";
	dataset d;
	int rc = ds_parse_cifar(bufs, lens, nb, &d, "", err);
	FUZZ_EXPECT(rc == 0 || (rc < 0 && err[0]), "rc %d without a message", rc);
	if (rc < 0)
		return 0;
	FUZZ_EXPECT(d.c == 3 && d.h == 32 && d.w == 32 && d.dim == 3072 && d.classes == 10,
		    "shape %dx%dx%d, %d classes", d.c, d.h, d.w, d.classes);
	FUZZ_EXPECT((size_t)d.n * 3073 == total, "%u records in %zu bytes", d.n, total);
	for (uint32_t i = 0; i < d.n; i++)
		FUZZ_EXPECT(d.y[i] < 10, "label %u of record %u", d.y[i], i);
	for (size_t i = 0; i < (size_t)d.n * 3072; i++)
		FUZZ_EXPECT(d.x[i] >= 0.0f && d.x[i] <= 1.0f, "pixel %zu = %g", i, d.x[i]);
	ds_free(&d);
	return 0;
}
