/* sweep_fuzz.c - libFuzzer harness for a sweep file (sweep_expand_max:
 * lists as axes, variants, seeds, target), at most 256 cells. A refused
 * file says why; an accepted one has as many cells as its axes multiply
 * to, each with a label and a name of its own, and no file differs from
 * itself. */
#include <string.h>

#include "fuzz.h"
#include "sweep.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[SL_ERR_LEN] = "";
	json_t *spec = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
	if (!spec)
		return 0;
	sweep_grid g;
	int rc = sweep_expand_max(spec, 256, &g, err);
	FUZZ_EXPECT(rc == 0 || (rc < 0 && err[0]), "rc %d without a message", rc);
	if (rc == 0) {
		FUZZ_EXPECT(g.n_cells >= 1 && g.n_cells <= 256, "%d cells", g.n_cells);
		for (int i = 0; i < g.n_cells; i++) {
			const sweep_cell *c = &g.cell[i];
			FUZZ_EXPECT(c->index == i && c->label && c->name[0] && json_is_object(c->run),
				    "cell %d", i);
			FUZZ_EXPECT(!strpbrk(c->name, "/\\"), "cell %d's name %s", i, c->name);
			for (int j = 0; j < i; j++)
				FUZZ_EXPECT(strcmp(c->name, g.cell[j].name), "cells %d and %d: %s", j,
					    i, c->name);
			FUZZ_EXPECT(!json_object_get(c->run, "seeds") &&
					    !json_object_get(c->run, "variants"),
				    "cell %d keeps a sweep key", i);
		}
		sweep_grid_free(&g);
	}
	char out[64];
	FUZZ_EXPECT(sweep_diff(spec, spec, out, sizeof(out)) == 0, "differs from itself: %s", out);
	json_decref(spec);
	return 0;
}
