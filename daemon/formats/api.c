/* api.c - JSON and Prometheus views of run snapshots. */
#include "api.h"
#include "backend.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_json.h"
#include "graph_spec.h"
#include "jsonout.h"

json_t *
api_delay_json(const delay_cfg *d)
{
	return config_delay_json(d);
}

json_t *
api_stale_json(const stale_hist *h, int with_hist)
{
	json_t *o = json_object();
	json_object_set_new(o, "count", json_integer((json_int_t)h->n));
	json_object_set_new(o, "mean", jsonout_real(stale_mean(h)));
	json_object_set_new(o, "p50", jsonout_real(stale_quantile(h, 0.5)));
	json_object_set_new(o, "p99", jsonout_real(stale_quantile(h, 0.99)));
	json_object_set_new(o, "max", json_integer((json_int_t)h->max));
	if (with_hist) {
		json_t *a = json_array();
		for (int i = 0; i < STALE_BUCKETS; i++)
			json_array_append_new(a, json_integer((json_int_t)h->b[i]));
		json_object_set_new(o, "hist", a);
	}
	return o;
}

json_t *
api_age_json(const age_hist *h)
{
	json_t *o = json_object();
	json_object_set_new(o, "mean", jsonout_real(age_mean(h)));
	json_object_set_new(o, "p50", jsonout_real(age_quantile(h, 0.5)));
	json_object_set_new(o, "p99", jsonout_real(age_quantile(h, 0.99)));
	json_object_set_new(o, "max", jsonout_real(h->max_ms));
	return o;
}

/* a language model's held-out loss per token (nats) as perplexity and
 * bits per byte (a token is a byte) */
double
api_ppl(double test_loss)
{
	return exp(test_loss);
}

double
api_bpb(double test_loss)
{
	return test_loss / M_LN2;
}

/* test_ppl and test_bpb beside test_loss, for a language model only */
static void
lm_fields(json_t *o, int lm, double test_loss)
{
	if (!lm)
		return;
	json_object_set_new(o, "test_ppl", jsonout_real(api_ppl(test_loss)));
	json_object_set_new(o, "test_bpb", jsonout_real(api_bpb(test_loss)));
}

/* a language model's sample as JSON text: a byte outside printable ASCII
 * (but a newline or a tab) shows as '?', so the string is always UTF-8 */
static json_t *
sample_json(const char *sample)
{
	char b[sizeof(((run_eval *)0)->sample)];
	size_t n = 0;
	for (; sample[n] && n + 1 < sizeof(b); n++) {
		unsigned char c = (unsigned char)sample[n];
		b[n] = (c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t' ? (char)c : '?';
	}
	b[n] = 0;
	return json_string(b);
}

json_t *
api_eval_json(const run_eval *e)
{
	json_t *o = json_object();
	json_object_set_new(o, "v", json_integer((json_int_t)e->v));
	json_object_set_new(o, "t", jsonout_real(e->t));
	json_object_set_new(o, "epoch", jsonout_real(e->epoch));
	json_object_set_new(o, "samples", json_integer((json_int_t)e->samples));
	json_object_set_new(o, "train_loss", jsonout_real(e->train_loss));
	json_object_set_new(o, "test_loss", jsonout_real(e->test_loss));
	lm_fields(o, e->lm, e->test_loss);
	if (e->lm && e->sample[0])
		json_object_set_new(o, "sample", sample_json(e->sample));
	json_object_set_new(o, "test_acc", jsonout_real(e->test_acc));
	json_object_set_new(o, "samples_per_s", jsonout_real(e->samples_per_s));
	json_object_set_new(o, "updates_per_s", jsonout_real(e->updates_per_s));
	json_object_set_new(o, "staleness_mean", jsonout_real(stale_mean(&e->stale)));
	if (isfinite(e->lr))
		json_object_set_new(o, "lr", jsonout_real(e->lr));
	if (e->coherence_n > 0)
		json_object_set_new(o, "coherence", jsonout_real(e->coherence));
	return o;
}

json_t *
api_log_record(const run_eval *e)
{
	json_t *r = json_object();
	if (e->final)
		json_object_set_new(r, "event", json_string("end"));
	json_object_set_new(r, "t", jsonout_real(e->t));
	json_object_set_new(r, "v", json_integer((json_int_t)e->v));
	json_object_set_new(r, "epoch", jsonout_real(e->epoch));
	json_object_set_new(r, "samples", json_integer((json_int_t)e->samples));
	if (!e->final) {
		json_object_set_new(r, "train_loss", jsonout_real(e->train_loss));
		json_object_set_new(r, "test_loss", jsonout_real(e->test_loss));
		/* only for a language model: image runs' logs stay as they were */
		lm_fields(r, e->lm, e->test_loss);
		if (e->lm && e->sample[0])
			json_object_set_new(r, "sample", sample_json(e->sample));
	}
	json_object_set_new(r, "test_acc", jsonout_real(e->test_acc));
	json_object_set_new(r, "best_acc", jsonout_real(e->best_acc));
	json_object_set_new(r, "samples_per_s", jsonout_real(e->samples_per_s));
	json_object_set_new(r, "updates_per_s", jsonout_real(e->updates_per_s));
	json_object_set_new(r, "train_s", jsonout_real(e->train_s));
	json_object_set_new(r, "staleness", api_stale_json(&e->stale, 1));
	json_object_set_new(r, "age_ms", api_age_json(&e->age));
	if (isfinite(e->lr)) /* only under an lr_schedule: the logs stay as they were */
		json_object_set_new(r, "lr", jsonout_real(e->lr));
	if (e->coherence_n > 0) { /* only with coherence_every: the logs stay as they were */
		json_object_set_new(r, "coherence", jsonout_real(e->coherence));
		json_object_set_new(r, "coherence_n", json_integer(e->coherence_n));
	}
	if (e->final && e->coherence_all_n > 0) {
		json_object_set_new(r, "coherence_all", jsonout_real(e->coherence_all));
		json_object_set_new(r, "coherence_all_n", json_integer(e->coherence_all_n));
	}
	if (e->final)
		json_object_set_new(r, "stop", json_string(e->stop_reason ? e->stop_reason : "stopped"));
	if (e->final && e->error)
		json_object_set_new(r, "error", json_string(e->error));
	return r;
}

json_t *
api_change_record(double t, uint64_t v, const run_cmd *c)
{
	json_t *r = cmd_to_json(c);
	json_object_set_new(r, "t", jsonout_real(t));
	json_object_set_new(r, "v", json_integer((json_int_t)v));
	return r;
}

json_t *
api_diverged_record(const run_divergence *d)
{
	json_t *r = json_pack("{s:s,s:o,s:I,s:i,s:I,s:s,s:o}", "event", "diverged", "t",
			      jsonout_real(d->t), "v", (json_int_t)d->v, "worker", d->worker,
			      "v_read", (json_int_t)d->v_read, "what", d->what, "loss",
			      jsonout_real(d->loss));
	return r;
}

/* n counts as a JSON array */
static json_t *
counts_json(const uint32_t *c, int n)
{
	json_t *a = json_array();
	for (int k = 0; k < n; k++)
		json_array_append_new(a, json_integer(c[k]));
	return a;
}

json_t *
api_split_record(double t, uint64_t v, const run_split *sp)
{
	json_t *w = json_array();
	for (int j = 0; j < sp->n_parts; j++) {
		json_t *e = json_pack("{s:i,s:I}", "id", j, "part",
				      (json_int_t)(sp->off[j + 1] - sp->off[j]));
		if (sp->n_classes)
			json_object_set_new(e, "classes",
					    counts_json(sp->classes + (size_t)j * (size_t)sp->n_classes,
							sp->n_classes));
		json_array_append_new(w, e);
	}
	return json_pack("{s:s,s:o,s:I,s:s,s:I,s:o}", "event", "split", "t", jsonout_real(t), "v",
			 (json_int_t)v, "data_split", sp->spec, "splits", (json_int_t)sp->splits,
			 "workers", w);
}

json_t *
api_worker_json(const run_snapshot *s, int i)
{
	const worker_snap *w = &s->workers[i];
	json_t *o = json_object();
	json_object_set_new(o, "id", json_integer(w->id));
	json_object_set_new(o, "host", json_string(!w->remote ? "local" : w->host[0] ? w->host
								   : "remote"));
	json_object_set_new(o, "remote", json_boolean(w->remote));
	if (w->remote) /* its link's round trip, by its heartbeats */
		json_object_set_new(o, "rtt_ms", jsonout_real(w->rtt_ms));
	json_object_set_new(o, "state", json_string(w->state));
	json_object_set_new(o, "delay", api_delay_json(&w->delay));
	json_object_set_new(o, "spb_depth", json_integer(w->spb_depth));
	json_object_set_new(o, "speed", jsonout_real(w->speed));
	json_object_set_new(o, "step_ms", jsonout_real(w->step_ms));
	json_object_set_new(o, "iterations", json_integer((json_int_t)w->iterations));
	json_object_set_new(o, "samples", json_integer((json_int_t)w->samples));
	json_object_set_new(o, "staleness_mean", jsonout_real(w->staleness_mean));
	if (w->h > 0) /* a rule with local phases: the local steps of its current one */
		json_object_set_new(o, "h", json_integer(w->h));
	json_object_set_new(o, "age_ms_mean", jsonout_real(age_mean(&w->age)));
	/* current (the run's rate window), and since it joined */
	json_object_set_new(o, "samples_per_s", jsonout_real(w->samples_per_s_now));
	json_object_set_new(o, "samples_per_s_avg", jsonout_real(w->samples_per_s));
	json_object_set_new(o, "bytes_sent", jsonout_real(w->bytes_sent));
	json_object_set_new(o, "bytes_recv", jsonout_real(w->bytes_recv));
	json_object_set_new(o, "link", json_pack("{s:o,s:o}", "latency_ms",
						 jsonout_real(w->link.latency_ms),
						 "bandwidth_mbps",
						 jsonout_real(w->link.bandwidth_mbps)));
	json_object_set_new(o, "comm_s", jsonout_real(w->comm_s));
	json_object_set_new(o, "flops_saved", jsonout_real(w->flops_saved));
	if (w->device)
		json_object_set_new(o, "device", json_string(w->device));
	json_object_set_new(o, "mem_bytes", jsonout_real(w->mem_bytes));
	json_object_set_new(o, "part", json_integer((json_int_t)w->part));
	if (s->n_classes)
		json_object_set_new(o, "classes", counts_json(s->classes + (size_t)i * (size_t)s->n_classes,
							      s->n_classes));
	return o;
}

json_t *
api_status_json(const run_snapshot *s)
{
	json_t *o = json_object();
	/* running with no worker that can step (workers 0 and no remote one
	 * yet, or every one paused): "waiting", and for what */
	int stepping = 0;
	for (int i = 0; i < s->n_workers; i++)
		stepping += strcmp(s->workers[i].state, "paused") != 0;
	if (s->state == RUN_RUNNING && !stepping) {
		json_object_set_new(o, "state", json_string("waiting"));
		json_object_set_new(o, "waiting_for", json_string(
			s->n_workers ? "every worker is paused: unpause one (PATCH /api/v1/workers/{id} "
				       "{\"paused\": false})"
				     : "workers: the run has none (add some with PUT /api/v1/workers "
				       "{\"count\": N}, or start remote ones with stalelab worker "
				       "--connect)"));
	} else {
		json_object_set_new(o, "state", json_string(run_state_name(s->state)));
	}
	json_object_set_new(o, "version", json_integer((json_int_t)s->v));
	json_object_set_new(o, "epoch", jsonout_real(s->epoch));
	json_object_set_new(o, "samples", json_integer((json_int_t)s->samples));
	json_object_set_new(o, "rule", json_string(s->cfg.rule));
	json_object_set_new(o, "clock", json_string(s->cfg.clock));
	json_object_set_new(o, "device", json_string(s->device));
	if (s->device_note[0])
		json_object_set_new(o, "device_note", json_string(s->device_note));
	if (s->device_about[0])
		json_object_set_new(o, "device_about", json_string(s->device_about));
	if (!strcmp(s->device, "cpu")) { /* the kernels a cpu run uses, and why */
		const char *kernel, *config, *isa, *lib;
		backend_cpu_blas(&kernel, &config, &isa);
		const char *why = backend_cpu_blas_why(&lib);
		json_t *b = json_pack("{s:s,s:s,s:s}", "kernel", kernel ? kernel : "", "why", why,
				      "isa", isa);
		if (*lib)
			json_object_set_new(b, "library", json_string(lib));
		json_object_set_new(o, "blas", b);
	}
	json_object_set_new(o, "t", jsonout_real(s->t));
	json_object_set_new(o, "train_s", jsonout_real(s->train_s));
	/* what a person reads live: the rates of the last rate_window_s
	 * seconds; the run-long averages beside them */
	json_object_set_new(o, "samples_per_s", jsonout_real(s->samples_per_s_now));
	json_object_set_new(o, "updates_per_s", jsonout_real(s->updates_per_s_now));
	json_object_set_new(o, "samples_per_s_avg", jsonout_real(s->samples_per_s));
	json_object_set_new(o, "updates_per_s_avg", jsonout_real(s->updates_per_s));
	json_object_set_new(o, "rate_window_s", jsonout_real(s->rate_window_s));
	json_object_set_new(o, "train_loss", jsonout_real(s->last_loss));
	json_t *depths = json_array();
	for (int i = 0; i < s->model.n_spb_depths; i++)
		json_array_append_new(depths, json_integer(s->model.spb_depths[i]));
	json_object_set_new(o, "model_summary",
			    json_pack("{s:i,s:i,s:I,s:o,s:o,s:o,s:o}", "nodes", s->model.nodes,
				      "param_layers", s->model.param_layers, "params",
				      (json_int_t)s->model.params, "fwd_flops",
				      jsonout_real(s->model.fwd_flops), "step_flops",
				      jsonout_real(s->model.step_flops), "act_floats",
				      jsonout_real(s->model.act_floats), "spb_depths", depths));
	/* the lr the next update runs at: config.lr under the lr_schedule */
	json_object_set_new(o, "lr_now", jsonout_real(s->lr_now));
	json_object_set_new(o, "test_acc", jsonout_real(s->test_acc));
	json_object_set_new(o, "best_acc", jsonout_real(s->best_acc));
	/* a language model: its held-out loss per token, perplexity and bits
	 * per byte (test_acc is then the next-token accuracy) */
	json_object_set_new(o, "language_model", json_boolean(s->lm));
	if (s->lm) {
		json_object_set_new(o, "test_loss", jsonout_real(s->test_loss));
		lm_fields(o, 1, s->test_loss);
	}
	json_object_set_new(o, "staleness_mean", jsonout_real(stale_mean(&s->stale)));
	if (s->stale_unit) /* what the rule's staleness counts */
		json_object_set_new(o, "staleness_unit", json_string(s->stale_unit));
	if (s->stop_reason)
		json_object_set_new(o, "stop", json_string(s->stop_reason));
	if (s->diverged)
		json_object_set_new(o, "diverged", api_diverged_record(&s->div));
	json_object_set_new(o, "config", config_to_json(&s->cfg));
	json_t *ws = json_array();
	for (int i = 0; i < s->n_workers; i++)
		json_array_append_new(ws, api_worker_json(s, i));
	json_object_set_new(o, "workers", ws);
	if (s->remote_joined) /* remote workers: how many came, were lost, lost steps,
			       * and the ledger's count of pushes */
		json_object_set_new(o, "remote", json_pack(
			"{s:I,s:I,s:I,s:I,s:{s:I,s:I,s:I,s:I},s:i}", "joined",
			(json_int_t)s->remote_joined, "left", (json_int_t)s->remote_left, "lost",
			(json_int_t)s->remote_lost, "dropped", (json_int_t)s->remote_dropped,
			"pushes", "applied", (json_int_t)s->remote_applied, "duplicates",
			(json_int_t)s->remote_duplicates, "abandoned",
			(json_int_t)s->remote_abandoned, "stale", (json_int_t)s->remote_stale,
			"generation", (int)s->remote_generation));
	return o;
}

json_t *
api_staleness_json(const run_snapshot *s)
{
	json_t *o = json_object();
	json_object_set_new(o, "version", json_integer((json_int_t)s->v));
	json_object_set_new(o, "buckets", json_integer(STALE_BUCKETS));
	if (s->stale_unit)
		json_object_set_new(o, "unit", json_string(s->stale_unit));
	json_object_set_new(o, "overall", api_stale_json(&s->stale, 1));
	json_object_set_new(o, "window", api_stale_json(&s->window, 1));
	json_object_set_new(o, "age_ms", api_age_json(&s->age));
	json_t *ws = json_array();
	for (int i = 0; i < s->n_workers; i++) {
		json_t *w = api_stale_json(&s->workers[i].stale, 1);
		json_object_set_new(w, "id", json_integer(s->workers[i].id));
		json_object_set_new(w, "age_ms", api_age_json(&s->workers[i].age));
		json_array_append_new(ws, w);
	}
	json_object_set_new(o, "workers", ws);
	return o;
}

/* ---- Prometheus ---------------------------------------------------------- */

typedef struct pbuf {
	char *p;
	size_t n, cap;
} pbuf;

static void
pf(pbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
pf(pbuf *b, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		va_start(ap, fmt);
		int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
		va_end(ap);
		if (k < 0)
			return;
		if (b->p && b->n + (size_t)k < b->cap) {
			b->n += (size_t)k;
			return;
		}
		size_t cap = b->cap ? b->cap : 4096;
		while (cap <= b->n + (size_t)k)
			cap *= 2;
		char *q = realloc(b->p, cap);
		if (!q)
			return;
		b->p = q;
		b->cap = cap;
	}
}

/* one histogram's buckets (cumulative, le = 0..63, +Inf), sum, count */
static void
prom_hist(pbuf *b, const char *name, const char *labels, const stale_hist *h)
{
	uint64_t c = 0;
	const char *sep = *labels ? "," : "";
	for (int i = 0; i < STALE_BUCKETS - 1; i++) {
		c += h->b[i];
		pf(b, "%s_bucket{%s%sle=\"%d\"} %llu\n", name, labels, sep, i,
		   (unsigned long long)c);
	}
	pf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
	   (unsigned long long)h->n);
	pf(b, "%s_sum%s%s%s %.17g\n", name, *labels ? "{" : "", labels,
	   *labels ? "}" : "", h->sum);
	pf(b, "%s_count%s%s%s %llu\n", name, *labels ? "{" : "", labels,
	   *labels ? "}" : "", (unsigned long long)h->n);
}

/* a label value as the text format wants it: \\, \" and \n escaped */
static const char *
prom_label(char *buf, size_t cap, const char *v)
{
	size_t n = 0;
	for (; v && *v && n + 3 < cap; v++) {
		if (*v == '\\' || *v == '"' || *v == '\n') {
			buf[n++] = '\\';
			buf[n++] = *v == '\n' ? 'n' : *v;
		} else {
			buf[n++] = *v;
		}
	}
	buf[n] = 0;
	return buf;
}

char *
api_prometheus(const run_snapshot *s)
{
	pbuf b = {0};
	char lab[64];
	pf(&b, "# HELP stalelab_staleness Staleness of applied gradients in versions (v at apply - v read).\n");
	pf(&b, "# TYPE stalelab_staleness histogram\n");
	prom_hist(&b, "stalelab_staleness", "", &s->stale);
	for (int i = 0; i < s->n_workers; i++) {
		snprintf(lab, sizeof(lab), "worker=\"%d\"", s->workers[i].id);
		prom_hist(&b, "stalelab_staleness", lab, &s->workers[i].stale);
	}
	pf(&b, "# HELP stalelab_updates_total Updates applied by the parameter server (the version).\n");
	pf(&b, "# TYPE stalelab_updates_total counter\n");
	pf(&b, "stalelab_updates_total %llu\n", (unsigned long long)s->v);
	pf(&b, "# HELP stalelab_samples_total Training samples whose gradients were delivered.\n");
	pf(&b, "# TYPE stalelab_samples_total counter\n");
	pf(&b, "stalelab_samples_total %llu\n", (unsigned long long)s->samples);
	pf(&b, "# HELP stalelab_worker_iterations_total Iterations completed per worker.\n");
	pf(&b, "# TYPE stalelab_worker_iterations_total counter\n");
	for (int i = 0; i < s->n_workers; i++)
		pf(&b, "stalelab_worker_iterations_total{worker=\"%d\"} %llu\n",
		   s->workers[i].id, (unsigned long long)s->workers[i].iterations);
	pf(&b, "# HELP stalelab_worker_bytes_received_total Bytes pulled from the server per worker.\n");
	pf(&b, "# TYPE stalelab_worker_bytes_received_total counter\n");
	for (int i = 0; i < s->n_workers; i++)
		pf(&b, "stalelab_worker_bytes_received_total{worker=\"%d\"} %.17g\n",
		   s->workers[i].id, s->workers[i].bytes_recv);
	pf(&b, "# HELP stalelab_worker_bytes_sent_total Bytes pushed to the server per worker (gradients, or models).\n");
	pf(&b, "# TYPE stalelab_worker_bytes_sent_total counter\n");
	for (int i = 0; i < s->n_workers; i++)
		pf(&b, "stalelab_worker_bytes_sent_total{worker=\"%d\"} %.17g\n",
		   s->workers[i].id, s->workers[i].bytes_sent);
	pf(&b, "# HELP stalelab_test_accuracy Test accuracy at the latest evaluation.\n");
	pf(&b, "# TYPE stalelab_test_accuracy gauge\n");
	pf(&b, "stalelab_test_accuracy %.17g\n", s->test_acc);
	if (s->lm) { /* a language model: test_accuracy is the next-token accuracy */
		pf(&b, "# HELP stalelab_test_loss_per_token Held-out mean cross-entropy per token "
		   "(nats) at the latest evaluation.\n# TYPE stalelab_test_loss_per_token gauge\n"
		   "stalelab_test_loss_per_token %.17g\n", s->test_loss);
		pf(&b, "# HELP stalelab_test_perplexity Held-out perplexity, exp of the loss per "
		   "token, at the latest evaluation.\n# TYPE stalelab_test_perplexity gauge\n"
		   "stalelab_test_perplexity %.17g\n", api_ppl(s->test_loss));
		pf(&b, "# HELP stalelab_test_bits_per_byte Held-out bits per byte, the loss per "
		   "token over ln 2, at the latest evaluation.\n# TYPE stalelab_test_bits_per_byte "
		   "gauge\nstalelab_test_bits_per_byte %.17g\n", api_bpb(s->test_loss));
	}
	pf(&b, "# HELP stalelab_workers Workers in the run.\n");
	pf(&b, "# TYPE stalelab_workers gauge\n");
	pf(&b, "stalelab_workers %d\n", s->n_workers);
	pf(&b, "# HELP stalelab_epoch Epochs of training data consumed.\n");
	pf(&b, "# TYPE stalelab_epoch gauge\n");
	pf(&b, "stalelab_epoch %.17g\n", s->epoch);
	struct { const char *name, *help; double x; } g[] = {
		{"stalelab_samples_per_second", "Training throughput over the last rate window "
		 "(rate_window_s of /api/v1/status).", s->samples_per_s_now},
		{"stalelab_samples_per_second_avg", "Training throughput over the run's training "
		 "time.", s->samples_per_s},
		{"stalelab_updates_per_second", "Server updates per second over the last rate "
		 "window.", s->updates_per_s_now},
		{"stalelab_updates_per_second_avg", "Server updates per second over the run's "
		 "training time.", s->updates_per_s},
		{"stalelab_learning_rate", "The learning rate of the next update (changes mid-run "
		 "and the lr_schedule included).", s->lr_now},
		{"stalelab_train_loss", "Mean training batch loss since the last evaluation.",
		 s->last_loss},
		{"stalelab_best_test_accuracy", "Best test accuracy of the run so far.",
		 s->best_acc},
	};
	for (size_t k = 0; k < sizeof(g) / sizeof(g[0]); k++)
		pf(&b, "# HELP %s %s\n# TYPE %s gauge\n%s %.17g\n", g[k].name, g[k].help,
		   g[k].name, g[k].name, g[k].x);
	pf(&b, "# HELP stalelab_worker_samples_per_second A worker's throughput over the "
	   "last rate window.\n");
	pf(&b, "# TYPE stalelab_worker_samples_per_second gauge\n");
	for (int i = 0; i < s->n_workers; i++)
		pf(&b, "stalelab_worker_samples_per_second{worker=\"%d\"} %.17g\n",
		   s->workers[i].id, s->workers[i].samples_per_s_now);
	/* an info metric: the run's labels, value 1 (joined onto others in
	 * queries: * on() group_left(rule) stalelab_run_info) */
	char rule[96], model[160], clk[32], dev[64], label[64];
	pf(&b, "# HELP stalelab_run_info The run now: its rule, model, clock and device.\n");
	pf(&b, "# TYPE stalelab_run_info gauge\n");
	pf(&b, "stalelab_run_info{rule=\"%s\",model=\"%s\",clock=\"%s\",device=\"%s\"} 1\n",
	   prom_label(rule, sizeof(rule), s->cfg.rule), prom_label(model, sizeof(model),
						graph_spec_label(s->cfg.model, label, sizeof(label))),
	   prom_label(clk, sizeof(clk), s->cfg.clock), prom_label(dev, sizeof(dev), s->device));
	pf(&b, "# HELP stalelab_worker_rtt_seconds A remote worker's link round trip, by its heartbeats.\n");
	pf(&b, "# TYPE stalelab_worker_rtt_seconds gauge\n");
	for (int i = 0; i < s->n_workers; i++)
		if (s->workers[i].remote)
			pf(&b, "stalelab_worker_rtt_seconds{worker=\"%d\",host=\"%s\"} %.9g\n",
			   s->workers[i].id, s->workers[i].host, s->workers[i].rtt_ms / 1000);
	struct { const char *name, *help, *label; const char *vals[4]; uint64_t n[4]; } rc[] = {
		{"stalelab_remote_workers_total",
		 "Remote workers that joined, left (saying so) and were lost.", "event",
		 {"joined", "left", "lost", NULL},
		 {s->remote_joined, s->remote_left, s->remote_lost, 0}},
		{"stalelab_remote_steps_dropped_total",
		 "Steps of lost remote workers, never applied.", NULL, {NULL},
		 {s->remote_dropped}},
		{"stalelab_remote_pushes_total", "Remote pushes by the ledger's verdict.", "verdict",
		 {"applied", "duplicate", "abandoned", "stale"},
		 {s->remote_applied, s->remote_duplicates, s->remote_abandoned, s->remote_stale}},
	};
	for (size_t k = 0; k < sizeof(rc) / sizeof(rc[0]); k++) {
		pf(&b, "# HELP %s %s\n# TYPE %s counter\n", rc[k].name, rc[k].help, rc[k].name);
		if (!rc[k].label)
			pf(&b, "%s %llu\n", rc[k].name, (unsigned long long)rc[k].n[0]);
		for (int i = 0; rc[k].label && i < 4 && rc[k].vals[i]; i++)
			pf(&b, "%s{%s=\"%s\"} %llu\n", rc[k].name, rc[k].label, rc[k].vals[i],
			   (unsigned long long)rc[k].n[i]);
	}
	pf(&b, "# HELP stalelab_worker_staleness_mean Mean staleness per worker.\n");
	pf(&b, "# TYPE stalelab_worker_staleness_mean gauge\n");
	for (int i = 0; i < s->n_workers; i++)
		pf(&b, "stalelab_worker_staleness_mean{worker=\"%d\"} %.17g\n",
		   s->workers[i].id, s->workers[i].staleness_mean);
	pf(&b, "# HELP stalelab_worker_phase_steps A worker's local steps in its current phase "
	   "(its H), under a rule with local phases.\n");
	pf(&b, "# TYPE stalelab_worker_phase_steps gauge\n");
	for (int i = 0; i < s->n_workers; i++)
		if (s->workers[i].h > 0)
			pf(&b, "stalelab_worker_phase_steps{worker=\"%d\"} %d\n", s->workers[i].id,
			   s->workers[i].h);
	return b.p;
}
