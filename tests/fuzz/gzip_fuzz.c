/* gzip_fuzz.c - libFuzzer harness for gzip input (ds_gunzip, which reads
 * every data set file). Output is bounded (1 MiB here: a bomb is refused,
 * not inflated); input without the gzip magic comes back as it went in. */
#include <string.h>

#include "dataset.h"
#include "fuzz.h"

#define MAX_OUT ((size_t)1 << 20)

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[SL_ERR_LEN] = "";
	uint8_t *out = NULL;
	size_t n = 0;
	int rc = ds_gunzip(data, size, MAX_OUT, &out, &n, "", err);
	FUZZ_EXPECT(rc == 0 || (rc < 0 && err[0]), "rc %d without a message", rc);
	if (rc == 0) {
		FUZZ_EXPECT(n <= MAX_OUT, "%zu bytes out", n);
		if (size < 2 || data[0] != 0x1f || data[1] != 0x8b)
			FUZZ_EXPECT(n == size && (!n || !memcmp(out, data, n)),
				    "plain input changed");
	}
	free(out);
	return 0;
}
