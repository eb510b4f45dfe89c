/* idx_fuzz.c - libFuzzer harness for IDX image and label files
 * (ds_parse_idx). The first two bytes (big-endian) say where the image
 * file ends and the label file starts in the rest of the input. An
 * accepted pair is checked: dimensions that multiply out, pixels in
 * [0, 1], every label below the class count. */
#include "dataset.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t cut = (size_t)data[0] << 8 | data[1];
	data += 2;
	size -= 2;
	if (cut > size)
		cut = size;
	char err[SL_ERR_LEN] = "";
	dataset d;
	int rc = ds_parse_idx(data, cut, data + cut, size - cut, &d, "", err);
	FUZZ_EXPECT(rc == 0 || (rc < 0 && err[0]), "rc %d without a message", rc);
	if (rc < 0)
		return 0;
	FUZZ_EXPECT(d.c == 1 && d.dim == d.h * d.w && d.h > 0 && d.w > 0,
		    "shape %dx%dx%d, dim %d", d.c, d.h, d.w, d.dim);
	FUZZ_EXPECT((size_t)d.n * (size_t)d.dim + 16 == cut, "%u samples in %zu bytes", d.n, cut);
	FUZZ_EXPECT(d.classes >= 1 && d.classes <= 256, "%d classes", d.classes);
	for (uint32_t i = 0; i < d.n; i++)
		FUZZ_EXPECT(d.y[i] < d.classes, "label %u of sample %u", d.y[i], i);
	for (size_t i = 0; i < (size_t)d.n * (size_t)d.dim; i++)
		FUZZ_EXPECT(d.x[i] >= 0.0f && d.x[i] <= 1.0f, "pixel %zu = %g", i, d.x[i]);
	ds_free(&d);
	return 0;
}
