/* api.h - the daemon's JSON views of a run (status, staleness, metrics
 * series, Prometheus text) built from immutable snapshots, shared by the
 * HTTP handlers, the SSE stream and (later) the bus. */
#ifndef SL_API_H
#define SL_API_H

#include <jansson.h>

#include "run.h"

json_t *api_delay_json(const delay_cfg *d);
json_t *api_stale_json(const stale_hist *h, int with_hist);
json_t *api_age_json(const age_hist *h);
/* a language model's perplexity exp(test_loss) and bits per byte
 * test_loss / ln 2 (test_loss: the held-out loss per token, in nats) */
double api_ppl(double test_loss);
double api_bpb(double test_loss);
json_t *api_eval_json(const run_eval *e);
/* A log record (docs/formats.md) for an evaluation, or the end record when
 * e->final: the same for `stalelab run` and `stalelab serve`. */
json_t *api_log_record(const run_eval *e);
/* The log record of a change applied at (t, v). */
json_t *api_change_record(double t, uint64_t v, const run_cmd *c);
/* The log record of a divergence (docs/formats.md): {"event": "diverged",
 * "t", "v", "worker", "v_read", "what", "loss"} (loss null unless finite). */
json_t *api_diverged_record(const run_divergence *d);
/* workers[i] of /api/v1/status (GET /api/v1/workers/{id}), with its
 * part's size and class counts ("part", "classes") */
json_t *api_worker_json(const run_snapshot *s, int i);
/* The log record of a data split made (docs/formats.md): {"event":
 * "split", "t", "v", "data_split", "splits" (made so far), "workers":
 * [{"id", "part", "classes"}]}. */
json_t *api_split_record(double t, uint64_t v, const run_split *sp);
/* GET /api/v1/status */
json_t *api_status_json(const run_snapshot *s);
/* GET /api/v1/staleness */
json_t *api_staleness_json(const run_snapshot *s);
/* GET /metrics (Prometheus text format 0.0.4); malloc'd, caller frees */
char *api_prometheus(const run_snapshot *s);

#endif
