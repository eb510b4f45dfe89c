/* ckpt_fields.c - the checkpoint's field tables: every saved member of
 * the run's structs by name, type and whether a file must have it, and
 * the table-driven writing, reading and copying (checkpoint.c and
 * ckpt_read.c use them). A field added to a struct is one row here
 * (optional: older files lack it). */
#include "ckpt_fields.h"
#include "augment.h"
#include "fields.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* ---- field tables ------------------------------------------------------- */

#define MSIZE(T, m) sizeof(((T *)0)->m)
#define FLD(T, name, m, type, req) {name, type, offsetof(T, m), MSIZE(T, m), req, NULL, NULL, 0}
#define FSUB(T, name, m, tab, req) {name, F_SUB, offsetof(T, m), MSIZE(T, m), req, &tab, NULL, 0}
#define FENUM(T, name, m, fn, n, req) {name, F_ENUM, offsetof(T, m), MSIZE(T, m), req, NULL, fn, n}
#define FFLAGS(T, name, m, fn, n, req) {name, F_FLAGS, offsetof(T, m), MSIZE(T, m), req, NULL, fn, n}
#define TABLE(name, rows) static const ftable name = {rows, sizeof(rows) / sizeof(rows[0])}
#define PUB_TABLE(name, rows) const ftable name = {rows, sizeof(rows) / sizeof(rows[0])}

static const char *
dist_label(int i)
{
	return delay_dist_name((delay_dist)i);
}

static const char *
wstate_label(int i)
{
	static const char *const n[] = {"idle", "wait_begin", "compute", "delay",
					"wait_push"};
	return n[i];
}

static const char *
event_label(int i)
{
	static const char *const n[] = {"start", "arrive", "held", "apply"};
	return n[i];
}

/* run_cmd's field bits, by name (bit i of CMD_*): the keys of the fields
 * they change (fields.c) */
static const char *
cmd_label(int i)
{
	return fields_cmd_key(1u << i);
}

static const field delay_rows[] = {
	FENUM(delay_cfg, "dist", dist, dist_label, DELAY_VERSION + 1, REQ),
	FLD(delay_cfg, "mean_ms", mean_ms, F_F64, REQ),
	FLD(delay_cfg, "sigma", sigma, F_F64, OPT),
	FLD(delay_cfg, "alpha", alpha, F_F64, OPT),
	FLD(delay_cfg, "spread", spread, F_F64, OPT),
	FLD(delay_cfg, "s", s, F_INT, OPT),
	FLD(delay_cfg, "at_server", at_server, F_INT, OPT),
	FLD(delay_cfg, "bandwidth_mbps", bandwidth_mbps, F_F64, OPT),
};
TABLE(delay_tab, delay_rows);

static const field link_rows[] = {
	FLD(link_cfg, "latency_ms", latency_ms, F_F64, OPT),
	FLD(link_cfg, "bandwidth_mbps", bandwidth_mbps, F_F64, OPT),
};
TABLE(link_tab, link_rows);

static const field rp_rows[] = {
	FLD(rule_params, "s", s, F_F64, OPT),
	FLD(rule_params, "lambda", lambda, F_F64, OPT),
	FLD(rule_params, "H", H, F_F64, OPT),
	FLD(rule_params, "n", n, F_F64, OPT),
	FLD(rule_params, "local_lr", local_lr, F_F64, OPT),
	FLD(rule_params, "m", m, F_F64, OPT),
	FLD(rule_params, "beta", beta, F_F64, OPT),
	FLD(rule_params, "period", period, F_F64, OPT),
	FLD(rule_params, "warmup", warmup, F_F64, OPT),
	FLD(rule_params, "outer_lr", outer_lr, F_F64, OPT),
	FLD(rule_params, "outer_momentum", outer_momentum, F_F64, OPT),
	FLD(rule_params, "dn_period", dn_period, F_F64, OPT),
	FLD(rule_params, "sparta_p", sparta_p, F_F64, OPT),
	FLD(rule_params, "weighting", weighting, F_STR, OPT),
	FLD(rule_params, "outer_opt", outer_opt, F_STR, OPT),
	FLD(rule_params, "dylu", dylu, F_INT, OPT),
	FLD(rule_params, "grace_ms", grace_ms, F_F64, OPT),
	FLD(rule_params, "inner_reset", inner_reset, F_INT, OPT),
	FLD(rule_params, "compress", compress, F_STR, OPT),
	FLD(rule_params, "compress_ratio", compress_ratio, F_F64, OPT),
	FLD(rule_params, "ef", ef, F_INT, OPT),
	FLD(rule_params, "demo_decay", demo_decay, F_F64, OPT),
	FLD(rule_params, "demo_topk", demo_topk, F_F64, OPT),
	FLD(rule_params, "demo_chunk", demo_chunk, F_F64, OPT),
	FLD(rule_params, "adaptive", adaptive, F_INT, OPT),
	FLD(rule_params, "local_opt", local_opt, F_STR, OPT),
	FLD(rule_params, "fragments", fragments, F_F64, OPT),
	FLD(rule_params, "overlap", overlap, F_F64, OPT),
	FLD(rule_params, "mix", mix, F_F64, OPT),
};
TABLE(rp_tab, rp_rows);

static const field sched_cfg_rows[] = {
	FLD(lr_sched, "kind", kind, F_INT, OPT),
	FLD(lr_sched, "warmup", warmup, F_F64, OPT),
	FLD(lr_sched, "decay_updates", decay_updates, F_F64, OPT),
	FLD(lr_sched, "floor", floor, F_F64, OPT),
	FLD(lr_sched, "step_every", step_every, F_F64, OPT),
	FLD(lr_sched, "gamma", gamma, F_F64, OPT),
};
TABLE(sched_cfg_tab, sched_cfg_rows);

static const field opt_rows[] = {
	FLD(opt_cfg, "kind", kind, F_INT, OPT),
	FLD(opt_cfg, "beta1", beta1, F_F64, OPT),
	FLD(opt_cfg, "beta2", beta2, F_F64, OPT),
	FLD(opt_cfg, "eps", eps, F_F64, OPT),
	FLD(opt_cfg, "clip", clip, F_F64, OPT),
	FSUB(opt_cfg, "lr_schedule", sched, sched_cfg_tab, OPT),
};
TABLE(opt_tab, opt_rows);

static const field override_rows[] = {
	FLD(worker_override, "id", id, F_INT, REQ),
	FLD(worker_override, "has_delay", has_delay, F_INT, OPT),
	FLD(worker_override, "has_spb", has_spb, F_INT, OPT),
	FLD(worker_override, "has_speed", has_speed, F_INT, OPT),
	FLD(worker_override, "has_paused", has_paused, F_INT, OPT),
	FSUB(worker_override, "delay", delay, delay_tab, OPT),
	FLD(worker_override, "spb_depth", spb_depth, F_INT, OPT),
	FLD(worker_override, "speed", speed, F_F64, OPT),
	FLD(worker_override, "has_step_ms", has_step_ms, F_INT, OPT),
	FLD(worker_override, "step_ms", step_ms, F_F64, OPT),
	FLD(worker_override, "paused", paused, F_INT, OPT),
	FLD(worker_override, "has_link", has_link, F_INT, OPT),
	FSUB(worker_override, "link", link, link_tab, OPT),
};
PUB_TABLE(ckpt_override_tab, override_rows);

/* the run object (overrides are a list beside it) */
static const field config_rows[] = {
	FLD(run_config, "model", model, F_STR, REQ),
	FLD(run_config, "dataset", dataset, F_STR, REQ),
	FENUM(run_config, "augment", augment, aug_kind_name, AUG_KINDS, OPT),
	FLD(run_config, "data_split", data_split, F_STR, OPT),
	FLD(run_config, "device", device, F_STR, OPT),
	FLD(run_config, "rule", rule, F_STR, REQ),
	FSUB(run_config, "rule_params", rp, rp_tab, REQ),
	FLD(run_config, "lr", lr, F_F64, REQ),
	FLD(run_config, "momentum", momentum, F_F64, REQ),
	FLD(run_config, "weight_decay", weight_decay, F_F64, REQ),
	FLD(run_config, "batch", batch, F_INT, REQ),
	FLD(run_config, "workers", workers, F_INT, REQ),
	FLD(run_config, "threads", threads, F_INT, OPT),
	FSUB(run_config, "delay", delay, delay_tab, REQ),
	FSUB(run_config, "link", link, link_tab, OPT),
	FLD(run_config, "server_ms", server_ms, F_F64, OPT),
	FLD(run_config, "clock", clock, F_STR, REQ),
	FLD(run_config, "seed", seed, F_UINT, REQ),
	FLD(run_config, "stop_epochs", stop_epochs, F_F64, OPT),
	FLD(run_config, "stop_steps", stop_steps, F_UINT, OPT),
	FLD(run_config, "stop_seconds", stop_seconds, F_F64, OPT),
	FLD(run_config, "stop_target_acc", stop_target_acc, F_F64, OPT),
	FLD(run_config, "eval_every", eval_every, F_INT, REQ),
	FLD(run_config, "n_schedule", n_schedule, F_INT, OPT),
	FLD(run_config, "coherence_every", coherence_every, F_INT, OPT),
	/* written since the optimisers came (an older file: sgd, no schedule) */
	FSUB(run_config, "optimizer", opt, opt_tab, OPT),
};
PUB_TABLE(ckpt_config_tab, config_rows);

static const field stale_rows[] = {
	FLD(stale_hist, "buckets", b, F_U64A, REQ),
	FLD(stale_hist, "n", n, F_UINT, REQ),
	FLD(stale_hist, "sum", sum, F_F64, REQ),
	FLD(stale_hist, "max", max, F_UINT, REQ),
};
TABLE(stale_tab, stale_rows);

static const field age_rows[] = {
	FLD(age_hist, "buckets", b, F_U64A, REQ),
	FLD(age_hist, "n", n, F_UINT, REQ),
	FLD(age_hist, "sum_ms", sum_ms, F_F64, REQ),
	FLD(age_hist, "max_ms", max_ms, F_F64, REQ),
};
TABLE(age_tab, age_rows);

/* the run's own state (and "rule", by name: checkpoint.c); statistics are
 * optional (absent: start at 0) */
static const field run_rows[] = {
	FLD(run, "samples", samples, F_UINT, REQ),
	FLD(run, "updates", updates, F_UINT, REQ),
	FLD(run, "loss_sum", loss_sum, F_F64, REQ),
	FLD(run, "loss_n", loss_n, F_INT, REQ),
	FLD(run, "taken", taken, F_UINT, REQ),
	FLD(run, "take_limit", take_limit, F_UINT, REQ),
	FLD(run, "pos", pos, F_UINT, REQ),
	FLD(run, "shuffles", shuffles, F_UINT, REQ),
	FLD(run, "shuffle_rng", shuf, F_U64A, REQ),
	FLD(run, "split_n", split_n, F_INT, OPT),
	FLD(run, "split_gen", split_gen, F_UINT, OPT),
	FLD(run, "next_eval_v", next_eval_v, F_UINT, REQ),
	FLD(run, "epochs_done", epochs_done, F_UINT, REQ),
	FLD(run, "sched_pos", sched_pos, F_INT, REQ),
	FLD(run, "ev_seq", ev_seq, F_UINT, REQ),
	FLD(run, "paused", paused, F_INT, REQ),
	FLD(run, "vtime", vtime, F_F64, REQ),
	FLD(run, "server_free", server_free, F_F64, OPT),
	FLD(run, "window_t0", rr.window_t0, F_F64, OPT),
	FLD(run, "coh_sum", coh_sum, F_F64, OPT),
	FLD(run, "coh_n", coh_n, F_INT, OPT),
	FLD(run, "coh_all", coh_all, F_F64, OPT),
	FLD(run, "coh_all_n", coh_all_n, F_INT, OPT),
	FLD(run, "clock_gap_max", clock_gap_max, F_UINT, OPT),
	FLD(run, "eval_s", eval_s, F_F64, OPT),
	FLD(run, "best_acc", best_acc, F_F64, OPT),
	FLD(run, "last_acc", last_acc, F_F64, OPT),
	FLD(run, "last_test_loss", last_test_loss, F_F64, OPT),
	FLD(run, "last_train_loss", last_train_loss, F_F64, OPT),
	FSUB(run, "staleness", hist, stale_tab, OPT),
	FSUB(run, "age", age, age_tab, OPT),
};
PUB_TABLE(ckpt_run_tab, run_rows);

static const field eval_rows[] = {
	FLD(run_eval, "t", t, F_F64, REQ),
	FLD(run_eval, "v", v, F_UINT, REQ),
	FLD(run_eval, "epoch", epoch, F_F64, OPT),
	FLD(run_eval, "samples", samples, F_UINT, OPT),
	FLD(run_eval, "train_loss", train_loss, F_F64, OPT),
	FLD(run_eval, "test_loss", test_loss, F_F64, OPT),
	FLD(run_eval, "test_acc", test_acc, F_F64, OPT),
	FLD(run_eval, "best_acc", best_acc, F_F64, OPT),
	FLD(run_eval, "train_s", train_s, F_F64, OPT),
	FLD(run_eval, "samples_per_s", samples_per_s, F_F64, OPT),
	FLD(run_eval, "updates_per_s", updates_per_s, F_F64, OPT),
	FSUB(run_eval, "staleness", stale, stale_tab, OPT),
	FSUB(run_eval, "age", age, age_tab, OPT),
	FLD(run_eval, "coherence", coherence, F_F64, OPT),
	FLD(run_eval, "coherence_n", coherence_n, F_INT, OPT),
	FLD(run_eval, "coherence_all", coherence_all, F_F64, OPT),
	FLD(run_eval, "coherence_all_n", coherence_all_n, F_INT, OPT),
	FLD(run_eval, "final", final, F_INT, OPT),
};
PUB_TABLE(ckpt_eval_tab, eval_rows);

static const field event_rows[] = {
	FLD(vevent, "t", t, F_F64, REQ),
	FLD(vevent, "seq", seq, F_UINT, REQ),
	FLD(vevent, "worker", worker, F_INT, REQ),
	FENUM(vevent, "kind", kind, event_label, EV_APPLY + 1, REQ),
};
PUB_TABLE(ckpt_event_tab, event_rows);

static const field cmd_rows[] = {
	FLD(run_cmd, "worker", worker, F_INT, REQ),
	FFLAGS(run_cmd, "fields", fields, cmd_label, 18, REQ),
	FLD(run_cmd, "rule", rule, F_STR, OPT),
	FSUB(run_cmd, "rule_params", rp, rp_tab, OPT),
	FLD(run_cmd, "lr", lr, F_F64, OPT),
	FLD(run_cmd, "momentum", momentum, F_F64, OPT),
	FLD(run_cmd, "weight_decay", weight_decay, F_F64, OPT),
	FLD(run_cmd, "batch", batch, F_INT, OPT),
	FLD(run_cmd, "workers", workers, F_INT, OPT),
	FLD(run_cmd, "paused", paused, F_INT, OPT),
	FLD(run_cmd, "spb_depth", spb_depth, F_INT, OPT),
	FLD(run_cmd, "eval_every", eval_every, F_INT, OPT),
	FSUB(run_cmd, "delay", delay, delay_tab, OPT),
	FLD(run_cmd, "speed", speed, F_F64, OPT),
	FLD(run_cmd, "step_ms", step_ms, F_F64, OPT),
	FSUB(run_cmd, "link", link, link_tab, OPT),
	FLD(run_cmd, "server_ms", server_ms, F_F64, OPT),
	FLD(run_cmd, "optimizer", optimizer, F_INT, OPT),
	FLD(run_cmd, "clip", clip, F_F64, OPT),
	FLD(run_cmd, "origin", origin, F_STR, OPT),
	FLD(run_cmd, "path", path, F_STR, OPT),
};
TABLE(cmd_tab, cmd_rows);

static const field sched_rows[] = {
	FLD(run_sched, "by_version", by_version, F_INT, REQ),
	FLD(run_sched, "v", v, F_UINT, REQ),
	FLD(run_sched, "t", t, F_F64, REQ),
	FSUB(run_sched, "change", cmd, cmd_tab, REQ),
};
PUB_TABLE(ckpt_sched_tab, sched_rows);

static const field held_rows[] = {
	FLD(held, "worker", worker, F_INT, REQ),
	FLD(held, "due", due, F_F64, REQ),
	FLD(held, "t_read", t_read, F_F64, REQ),
	FLD(held, "v_read", v_read, F_UINT, REQ),
	FLD(held, "seq", seq, F_UINT, REQ),
	FLD(held, "off", off, F_UINT, REQ),
	FLD(held, "batch", batch, F_INT, REQ),
	FLD(held, "loss", loss, F_F64, REQ),
};
PUB_TABLE(ckpt_held_tab, held_rows);

/* a worker's scalars (its buffers and batch are saved beside them; the
 * thread, backend and team width are this process's) */
static const field worker_rows[] = {
	FLD(worker, "id", rw.id, F_INT, REQ),
	FLD(worker, "active", active, F_INT, REQ),
	FLD(worker, "paused", paused, F_INT, REQ),
	FSUB(worker, "delay", delay, delay_tab, REQ),
	FLD(worker, "spb_depth", spb_depth, F_INT, REQ),
	FLD(worker, "speed", speed, F_F64, REQ),
	FLD(worker, "step_ms", step_ms, F_F64, OPT),
	FLD(worker, "rng", rng_delay, F_U64A, REQ),
	FLD(worker, "have", rw.have, F_UINT, REQ),
	FLD(worker, "v_read", rw.v_read, F_UINT, REQ),
	FLD(worker, "t_read", t_read, F_F64, REQ),
	FLD(worker, "clock", rw.clock, F_UINT, REQ),
	FLD(worker, "seq", rw.seq, F_UINT, REQ),
	FLD(worker, "waiting", rw.waiting, F_INT, REQ),
	FLD(worker, "wait_v", rw.wait_v, F_UINT, REQ),
	FLD(worker, "last_round", rw.last_round, F_INT, REQ),
	FLD(worker, "batch_cap", idx_cap, F_INT, REQ),
	FLD(worker, "batch_epoch", idx_epoch, F_UINT, OPT),
	FLD(worker, "part_n", sp_n, F_UINT, OPT),
	FLD(worker, "part_pos", sp_pos, F_UINT, OPT),
	FLD(worker, "part_epochs", sp_epochs, F_UINT, OPT),
	FLD(worker, "depth", depth, F_INT, REQ),
	FLD(worker, "grad_off", rw.grad_off, F_UINT, REQ),
	FLD(worker, "loss", loss, F_F64, REQ),
	FLD(worker, "local_steps", rw.local_steps, F_INT, REQ),
	FLD(worker, "local_h", rw.h, F_INT, OPT),
	FLD(worker, "n_held", n_held, F_INT, REQ),
	FENUM(worker, "state", st, wstate_label, W_WAIT_PUSH + 1, REQ),
	FLD(worker, "due", due, F_F64, REQ),
	FLD(worker, "pending", pending, F_INT, REQ),
	FLD(worker, "iterations", iterations, F_UINT, OPT),
	FLD(worker, "samples", samples, F_UINT, OPT),
	FLD(worker, "bytes_sent", bytes_sent, F_F64, OPT),
	FLD(worker, "bytes_recv", bytes_recv, F_F64, OPT),
	FLD(worker, "comm_s", comm_s, F_F64, OPT),
	FSUB(worker, "link", link, link_tab, OPT),
	FLD(worker, "pull_bytes", pull_bytes, F_F64, OPT),
	FLD(worker, "push_bytes", push_bytes, F_F64, OPT),
	FLD(worker, "reply", rw.reply, F_INT, OPT),
	FLD(worker, "frag", rw.frag, F_INT, OPT),
	FLD(worker, "frag_left", rw.frag_left, F_INT, OPT),
	FLD(worker, "xfer_end", xfer_end, F_F64, OPT),
	FLD(worker, "remote_slot", remote_slot, F_INT, OPT),
	FLD(worker, "flops", flops, F_F64, OPT),
	FLD(worker, "flops_saved", flops_saved, F_F64, OPT),
	FLD(worker, "active_s", active_s, F_F64, OPT),
	FLD(worker, "t_joined", t_joined, F_F64, OPT),
	FSUB(worker, "staleness", hist, stale_tab, OPT),
	FSUB(worker, "age", age, age_tab, OPT),
};
PUB_TABLE(ckpt_worker_tab, worker_rows);

/* ---- table-driven writing, reading and copying ----------------------- */

void
ckpt_put_fields(tlv_w *w, const ftable *t, const void *obj)
{
	const uint8_t *o = obj;
	for (int i = 0; i < t->n; i++) {
		const field *f = &t->f[i];
		const void *m = o + f->off;
		switch (f->type) {
		case F_INT: {
			int64_t v = f->size == 8 ? *(const int64_t *)m : *(const int32_t *)m;
			tlv_i64(w, f->name, v);
			break;
		}
		case F_UINT: {
			uint64_t v = f->size == 8 ? *(const uint64_t *)m : *(const uint32_t *)m;
			tlv_u64(w, f->name, v);
			break;
		}
		case F_F64:
			tlv_f64(w, f->name, *(const double *)m);
			break;
		case F_STR: {
			char s[512];
			snprintf(s, sizeof(s), "%.*s", (int)f->size, (const char *)m);
			tlv_str(w, f->name, s);
			break;
		}
		case F_U64A:
			tlv_array(w, f->name, TLV_U64S, m, f->size / 8);
			break;
		case F_SUB:
			tlv_open(w, f->name, TLV_SEC);
			ckpt_put_fields(w, f->sub, m);
			tlv_close(w);
			break;
		case F_ENUM:
			tlv_str(w, f->name, f->label(*(const int *)m));
			break;
		case F_FLAGS: {
			char s[512] = "";
			size_t k = 0;
			unsigned v = *(const unsigned *)m;
			for (int b = 0; b < f->n_labels; b++)
				if (v & (1u << b))
					k += (size_t)snprintf(s + k, sizeof(s) - k, "%s%s",
							      k ? "," : "", f->label(b));
			tlv_str(w, f->name, s);
			break;
		}
		}
	}
}

/* the label index of s, or -1 */
static int
label_of(const field *f, const char *s, size_t n)
{
	for (int i = 0; i < f->n_labels; i++)
		if (strlen(f->label(i)) == n && !memcmp(f->label(i), s, n))
			return i;
	return -1;
}

int
ckpt_get_fields(const tlv_sec *s, const ftable *t, void *obj, char *err)
{
	uint8_t *o = obj;
	for (int i = 0; i < t->n; i++) {
		const field *f = &t->f[i];
		void *m = o + f->off;
		int rc = 0;
		switch (f->type) {
		case F_INT: {
			int64_t v;
			if ((rc = tlv_get_i64(s, f->name, f->req, &v, err)) <= 0)
				break;
			if (f->size == 8)
				*(int64_t *)m = v;
			else if (v < INT32_MIN || v > INT32_MAX)
				return tlv_bad(err, s, f->name, "= %lld is out of range",
					       (long long)v);
			else
				*(int32_t *)m = (int32_t)v;
			break;
		}
		case F_UINT: {
			uint64_t v;
			if ((rc = tlv_get_u64(s, f->name, f->req, &v, err)) <= 0)
				break;
			if (f->size == 8)
				*(uint64_t *)m = v;
			else if (v > UINT32_MAX)
				return tlv_bad(err, s, f->name, "= %llu is out of range",
					       (unsigned long long)v);
			else
				*(uint32_t *)m = (uint32_t)v;
			break;
		}
		case F_F64:
			rc = tlv_get_f64(s, f->name, f->req, m, err);
			break;
		case F_STR:
			rc = tlv_get_str(s, f->name, f->req, m, f->size, err);
			break;
		case F_U64A: {
			const void *p;
			if ((rc = tlv_get_array(s, f->name, f->req, TLV_U64S, f->size / 8, &p,
						NULL, err)) > 0)
				memcpy(m, p, f->size);
			break;
		}
		case F_SUB: {
			tlv_sec sub;
			if ((rc = tlv_get_sec(s, f->name, f->req, TLV_SEC, &sub, err)) > 0)
				rc = ckpt_get_fields(&sub, f->sub, m, err);
			break;
		}
		case F_ENUM: {
			char v[64];
			if ((rc = tlv_get_str(s, f->name, f->req, v, sizeof(v), err)) <= 0)
				break;
			int k = label_of(f, v, strlen(v));
			if (k < 0)
				return tlv_bad(err, s, f->name, "= \"%s\" is unknown", v);
			*(int *)m = k;
			break;
		}
		case F_FLAGS: {
			char v[512];
			if ((rc = tlv_get_str(s, f->name, f->req, v, sizeof(v), err)) <= 0)
				break;
			unsigned bits = 0;
			for (char *p = v; *p;) {
				size_t n = strcspn(p, ",");
				int k = label_of(f, p, n);
				if (k < 0)
					return tlv_bad(err, s, f->name, "names an unknown \"%.*s\"",
						       (int)(n > 32 ? 32 : n), p);
				bits |= 1u << k;
				p += n + (p[n] == ',');
			}
			*(unsigned *)m = bits;
			break;
		}
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* the table's members from src into dst (pointers and other members
 * untouched) */
void
ckpt_copy_fields(const ftable *t, void *dst, const void *src)
{
	for (int i = 0; i < t->n; i++)
		memcpy((uint8_t *)dst + t->f[i].off, (const uint8_t *)src + t->f[i].off,
		       t->f[i].size);
}

