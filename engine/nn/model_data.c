/* model_data.c - the data a model reads: a spec's context (a language
 * model's T tokens a sample) and the data set loaded to match it. */
#include <string.h>

#include "dataset.h"
#include "model.h"
#include "model_impl.h"

int
model_spec_context(const char *spec)
{
	gpt_dims g;
	char err[SL_ERR_LEN];
	if (strncmp(spec, "gpt:", 4))
		return 0;
	return model_parse_gpt(spec, &g, err) < 0 ? -1 : g.t;
}

int
model_data_load(const char *model_spec, const char *data_spec, uint64_t seed,
		dataset_pair *out, char *err)
{
	int ctx = model_spec_context(model_spec);
	gpt_dims g;
	if (ctx < 0)
		return model_parse_gpt(model_spec, &g, err);
	if (ds_spec_is_text(data_spec) && !ctx)
		return sl_fail(err, SL_EINVAL,
			       "dataset: %s is text, read as contexts of a language model's T "
			       "bytes; model %s has no context: give a gpt:L<layers>-H<heads>-"
			       "E<width>-T<context> model (e.g. gpt:L4-H4-E128-T64)",
			       data_spec, model_spec[0] == '{' ? "(a graph)" : model_spec);
	return ds_load_ctx(data_spec, ctx, seed, out, err);
}
