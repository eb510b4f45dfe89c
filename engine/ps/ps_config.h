/* ps_config.h - what configures the parameter server and its rules, as
 * plain data (no JSON, no run): the rules' parameters, whose keys each
 * rule class names (rule.h), and the bound on worker ids. The run object
 * (engine/run/config.h) holds a rule_params; engine/run/fields.c
 * describes its keys. */
#ifndef SL_PS_CONFIG_H
#define SL_PS_CONFIG_H

/* the most workers a run has and a server takes: ids are below it */
#define PS_MAX_WORKERS 256

typedef struct rule_params {
	double s, lambda, H, n, local_lr, m, beta, period, warmup;
	int adaptive;     /* dcasgd: adaptive lambda (DC-ASGD-a) */
	char local_opt[16];
} rule_params;

#endif
