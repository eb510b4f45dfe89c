/* asgd.c - asynchronous SGD (Downpour, Dean et al., NIPS 2012): the server
 * applies each gradient on arrival, whatever version it was computed on.
 * Every hook is the default. */
#include "rules.h"

const rule_class rule_asgd = {
	.name = "asgd",
	.doc = "asynchronous SGD: each gradient applied on arrival",
	.params = (const char *const[]){RULE_PUSH_PARAMS, NULL},
};
