/* run_resume.c - `stalelab run --resume` and --checkpoint-every/-dir/-keep:
 * reading the checkpoint, the changes the flags make to its run, the
 * checkpoint directory and the checkpoints written as the run goes. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "augment.h"
#include "cmd_run_impl.h"
#include "ckpt.h"
#include "config_json.h"
#include "sl.h"

void
runcli_on_checkpoint(void *ud, const run_cmd *cmd, const uint8_t *buf, size_t len)
{
	run_ctx *c = ud;
	char err[SL_ERR_LEN] = "out of memory", path[4200];
	uint64_t v = 0;
	int rc = -1;
	snprintf(path, sizeof(path), "%s", cmd->path);
	if (buf && !cmd->path[0]) {
		/* --checkpoint-every: named by its version in --checkpoint-dir */
		rc = run_checkpoint_version(buf, len, &v, err);
		if (rc == 0) {
			ckpt_dir_path(c->ckpt_dir, v, path, sizeof(path));
			rc = ckpt_dir_put(c->ckpt_dir, buf, len, v, c->ckpt_keep, err);
		}
	} else if (buf) {
		rc = ckpt_write_buf(cmd->path, buf, len, err);
	}
	if (rc < 0) {
		fprintf(stderr, "%sstalelab run: checkpoint %s failed: %s\n",
			c->bar ? "\r\033[K" : "", path, err);
		c->log_failed = 1;
	} else if (!c->quiet && cmd->path[0]) {
		fprintf(stderr, "%sstalelab run: checkpoint in %s (%zu bytes)\n",
			c->bar ? "\r\033[K" : "", path, len);
	}
}

/* The fields a resumed run cannot change, then the changes it can take:
 * those differing between the checkpoint's run object (ck) and the one
 * the flags made (cfg) go in as one change. 0, 1 (a change in *cmd), or
 * -SL_EINVAL with err naming the flag. */
static int
resume_changes(const run_config *ck, const run_config *cfg, run_cmd *cmd, char *err)
{
	static const struct {
		const char *flag;
		size_t off;
	} fixed[] = {
		{"model", offsetof(run_config, model)},
		{"dataset", offsetof(run_config, dataset)},
		{"device", offsetof(run_config, device)},
		{"clock", offsetof(run_config, clock)},
	};
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		const char *a = (const char *)ck + fixed[i].off, *b = (const char *)cfg + fixed[i].off;
		if (strcmp(a, b))
			return sl_fail(err, SL_EINVAL,
				       "--%s: %s differs from the checkpoint's %s; a resumed run "
				       "keeps its model, dataset, device, clock and seed",
				       fixed[i].flag, b, a);
	}
	int aug_ck = aug_resolve(ck->augment, ck->dataset), aug = aug_resolve(cfg->augment, cfg->dataset);
	if (aug != aug_ck)
		return sl_fail(err, SL_EINVAL,
			       "--augment: %s differs from the checkpoint's %s; a resumed run "
			       "keeps its augmentation (its views go on where they were)",
			       aug_kind_name(aug), aug_kind_name(aug_ck));
	if (strcmp(ck->data_split, cfg->data_split))
		return sl_fail(err, SL_EINVAL,
			       "--data-split: %s differs from the checkpoint's %s; a resumed run "
			       "keeps its data split (its workers go on in their parts)",
			       cfg->data_split, ck->data_split);
	if (ck->seed != cfg->seed)
		return sl_fail(err, SL_EINVAL,
			       "--seed: %llu differs from the checkpoint's %llu; a resumed run "
			       "keeps its model, dataset, device, clock and seed",
			       (unsigned long long)cfg->seed, (unsigned long long)ck->seed);
	json_t *set = json_object();
	if (strcmp(ck->rule, cfg->rule))
		json_object_set_new(set, "rule", json_string(cfg->rule));
	if (ck->workers != cfg->workers)
		json_object_set_new(set, "workers", json_integer(cfg->workers));
	if (ck->lr != cfg->lr)
		json_object_set_new(set, "lr", json_real(cfg->lr));
	if (ck->momentum != cfg->momentum)
		json_object_set_new(set, "momentum", json_real(cfg->momentum));
	if (ck->weight_decay != cfg->weight_decay)
		json_object_set_new(set, "weight_decay", json_real(cfg->weight_decay));
	if (ck->batch != cfg->batch)
		json_object_set_new(set, "batch", json_integer(cfg->batch));
	if (ck->eval_every != cfg->eval_every)
		json_object_set_new(set, "eval_every", json_integer(cfg->eval_every));
	/* --param: the rule parameters that differ from the checkpoint's */
	json_t *jck = config_to_json(ck), *jcfg = config_to_json(cfg), *rp = json_object();
	json_t *pck = json_object_get(jck, "rule_params"), *pcfg = json_object_get(jcfg, "rule_params");
	const char *key;
	json_t *v;
	json_object_foreach(pcfg, key, v) {
		if (!json_equal(v, json_object_get(pck, key)))
			json_object_set(rp, key, v);
	}
	if (json_object_size(rp))
		json_object_set(set, "rule_params", rp);
	json_decref(rp);
	json_decref(jck);
	json_decref(jcfg);
	int rc = 0;
	if (json_object_size(set)) {
		char e2[SL_ERR_LEN];
		rc = cmd_from_json(set, -1, ck, "", cmd, e2) < 0
			     ? sl_fail(err, SL_EINVAL, "--resume: %s", e2) : 1;
		snprintf(cmd->origin, sizeof(cmd->origin), "resume");
	}
	json_decref(set);
	return rc;
}

/* --checkpoint-dir: made if missing; holding no checkpoint past the
 * version the run starts at (a new run: none at all), which would be
 * another run's, or the newest (what --resume DIR picks) would not be this
 * run's */
int
runcli_check_ckpt_dir(const char *dir, uint64_t start_v, int resumed, int keep, char *err)
{
	char e2[SL_ERR_LEN];
	uint64_t *vs;
	int n;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return sl_fail(err, SL_EINVAL, "--checkpoint-dir: cannot make %s: %s", dir,
			       strerror(errno));
	if (ckpt_dir_list(dir, &vs, &n, e2) < 0)
		return sl_fail(err, SL_EINVAL, "--checkpoint-dir: %s", e2);
	uint64_t top = n ? vs[n - 1] : 0;
	free(vs);
	if (n && (!resumed || top > start_v))
		return sl_fail(err, SL_EINVAL,
			       "--checkpoint-dir: %s holds a checkpoint at v %llu %s; resume "
			       "from it (--resume %s) or pick another directory",
			       dir, (unsigned long long)top,
			       resumed ? "past this one's (another run's)" : "of an earlier run",
			       dir);
	ckpt_dir_prune(dir, keep); /* what a kill left */
	return 0;
}

int
runcli_resume_read(const char *arg, runcli_resume *rs, run_config *cfg, char *err)
{
	struct stat st;
	rs->path = arg;
	if (stat(arg, &st) == 0 && S_ISDIR(st.st_mode)) {
		if (ckpt_dir_newest(arg, rs->newest, sizeof(rs->newest), err) < 0) {
			fprintf(stderr, "stalelab run: --resume: %s\n", err);
			return -1;
		}
		rs->path = rs->newest;
	}
	if (ckpt_read(rs->path, &rs->buf, &rs->len, cfg, err) < 0 ||
	    run_checkpoint_version(rs->buf, rs->len, &rs->start_v, err) < 0) {
		free(rs->buf);
		rs->buf = NULL;
		runcli_usage_error(NULL, err);
		return -1;
	}
	rs->ck = *cfg;
	/* the stop is the command line's alone */
	cfg->stop_epochs = cfg->stop_seconds = cfg->stop_target_acc = 0;
	cfg->stop_steps = 0;
	return 0;
}

int
runcli_resume_merge(runcli_resume *rs, run_config *cfg, char *err)
{
	int has_stop = progress_has_stop(cfg);
	run_config want = *cfg;
	rs->n_cmd = resume_changes(&rs->ck, &want, &rs->cmd, err);
	if (rs->n_cmd >= 0 && !has_stop && !progress_has_stop(&rs->ck))
		rs->n_cmd = sl_fail(err, SL_EINVAL,
				    "--resume: %s has no stop (a daemon's checkpoint): give "
				    "--epochs, --steps, --seconds or --target-acc", rs->path);
	if (rs->n_cmd < 0)
		return rs->n_cmd;
	/* the run is the checkpoint's; the stop the flags' or else its own */
	*cfg = rs->ck;
	cfg->threads = want.threads;
	if (has_stop) {
		cfg->stop_epochs = want.stop_epochs;
		cfg->stop_steps = want.stop_steps;
		cfg->stop_seconds = want.stop_seconds;
		cfg->stop_target_acc = want.stop_target_acc;
	}
	return 0;
}
