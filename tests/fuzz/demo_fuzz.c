/* demo_fuzz.c - libFuzzer harness for a demo file (`serve --demo FILE`:
 * {"run": {...}, "scenes": [...]}, demo_parse). Refused with a message or
 * accepted with 1..DEMO_MAX_SCENES scenes; demo_free releases it all. */
#include <math.h>

#include "demo.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[SL_ERR_LEN] = "";
	json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
	if (!j)
		return 0;
	demo *d = malloc(sizeof(*d));
	if (!d) {
		json_decref(j);
		return 0;
	}
	int rc = demo_parse(j, d, err);
	FUZZ_EXPECT(rc == 0 || (rc < 0 && err[0]), "rc %d without a message", rc);
	if (rc == 0) {
		FUZZ_EXPECT(d->n >= 1 && d->n <= DEMO_MAX_SCENES, "%d scenes", d->n);
		for (int i = 0; i < d->n; i++)
			FUZZ_EXPECT(isfinite(d->scene[i].seconds) && d->scene[i].seconds > 0,
				    "scene %d lasts %g s", i, d->scene[i].seconds);
	}
	demo_free(d);
	free(d);
	json_decref(j);
	return 0;
}
