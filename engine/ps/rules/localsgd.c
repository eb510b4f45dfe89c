/* localsgd.c - local SGD (model averaging): each worker takes H plain SGD
 * steps on its own weights, then sends them; when every running worker's
 * model is in, the server's weights become their mean and the workers
 * start again from it. The staleness recorded is the number of local
 * steps since the last average. */
#include "model.h"
#include "ps.h"
#include "rules.h"

const rule_class rule_localsgd = {
	.name = "localsgd",
	.doc = "local SGD: H local steps, then the models' average",
	.flags = RULE_LOCAL | RULE_PHASES,
	.params = (const char *const[]){"H", RULE_PUSH_PARAMS, NULL},
	.pull = rule_pull_model,
	.deliver = rule_local_deliver_model,
	.exchanges = rule_local_exchanges,
	.phase_h = rule_local_phase_h,
	.stale_unit = "local steps",
};
