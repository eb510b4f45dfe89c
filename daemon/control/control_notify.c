/* control_notify.c - what a run tells the daemon: its records to the log
 * and the events ring, lines on the terminal, and a PATCH waiting for its
 * change to be applied. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "config_json.h"
#include "control_impl.h"
#include "jsonout.h"

#define APPLY_WAIT_S 3.0 /* how long a PATCH waits to answer with t and v */

/* ---- terminal and log ------------------------------------------------------ */

void
ctl_say(ctl *c, const char *fmt, ...)
{
	if (!c->term)
		return;
	char line[1024];
	int n = snprintf(line, sizeof(line), "stalelab serve: ");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	strcat(line, "\n");
	fputs(line, c->term); /* one write: whole lines, never interleaved */
}

static void
log_record(ctl *c, json_t *rec)
{
	if (!c->have_log)
		return;
	pthread_mutex_lock(&c->log_mu);
	int failed = runlog_write(&c->log, rec) < 0 && !c->log_failed;
	if (failed)
		c->log_failed = 1;
	pthread_mutex_unlock(&c->log_mu);
	if (failed)
		ctl_say(c, "cannot write the log %s: %s (the records go on to the API "
			"and the bus)", c->log.path, strerror(errno));
}

/* log and publish a record of the current run */
void
ctl_record(ctl *c, const char *name, json_t *rec)
{
	log_record(c, rec);
	events_publish(&c->ev, name, rec);
}

/* ---- the run's callbacks --------------------------------------------------- */

void
ctl_on_eval(void *ud, const run_eval *e)
{
	ctl *c = ud;
	json_t *r = api_log_record(e);
	json_object_set_new(r, "run", json_integer(c->run_id));
	ctl_record(c, e->final ? "end" : "eval", r);
	json_decref(r);
	if (e->final) { /* no change is applied after this: wake who waits for one */
		pthread_mutex_lock(&c->wait_mu);
		c->ended_run = c->run_id;
		for (ctl_waiter *w = c->waiters; w; w = w->next)
			if (w->watch_end && w->run == c->run_id && !w->done)
				w->ended = 1;
		pthread_cond_broadcast(&c->wait_cv);
		pthread_mutex_unlock(&c->wait_mu);
	}
	if (e->final)
		ctl_say(c, "run %d ended (%s) at v %llu, epoch %.2f: test_acc %.4f, best %.4f, staleness mean %.2f",
		        c->run_id, e->stop_reason ? e->stop_reason : "stopped",
		        (unsigned long long)e->v, e->epoch, e->test_acc, e->best_acc,
		        stale_mean(&e->stale));
	else if (c->verbose)
		ctl_say(c, "v %llu epoch %.2f test_acc %.4f staleness %.2f %.0f samples/s",
		        (unsigned long long)e->v, e->epoch, e->test_acc,
		        stale_mean(&e->stale), e->samples_per_s);
}

/* the change record without t and v, as text: what a waiting PATCH and
 * the applied change have in common */
static char *
change_key(const run_cmd *cmd)
{
	json_t *j = cmd_to_json(cmd);
	char *k = jsonout_dumps(j);
	json_decref(j);
	return k;
}

void
ctl_on_change(void *ud, double t, uint64_t v, const run_cmd *cmd)
{
	ctl *c = ud;
	json_t *r = api_change_record(t, v, cmd);
	json_object_set_new(r, "run", json_integer(c->run_id));
	ctl_record(c, "change", r);
	pthread_mutex_lock(&c->changes_mu);
	if (json_array_size(c->changes) < CHANGES_MAX)
		json_array_append(c->changes, r);
	else
		c->changes_dropped++;
	pthread_mutex_unlock(&c->changes_mu);
	if (c->term) {
		char *set = jsonout_dumps(json_object_get(r, "set"));
		json_t *w = json_object_get(r, "worker");
		char who[32] = "";
		if (w)
			snprintf(who, sizeof(who), " worker %d", (int)json_integer_value(w));
		ctl_say(c, "run %d at v %llu:%s set %s (%s)", c->run_id, (unsigned long long)v,
		        who, set ? set : "?", cmd->origin[0] ? cmd->origin : "?");
		free(set);
	}
	json_decref(r);
	pthread_mutex_lock(&c->wait_mu);
	if (c->waiters) {
		char *key = change_key(cmd);
		for (ctl_waiter *w = c->waiters; key && w; w = w->next) {
			if (!w->done && !strcmp(w->key, key)) {
				w->done = 1;
				w->t = t;
				w->v = v;
				pthread_cond_broadcast(&c->wait_cv);
				break;
			}
		}
		free(key);
	}
	pthread_mutex_unlock(&c->wait_mu);
}

void
ctl_on_diverged(void *ud, const run_divergence *d)
{
	ctl *c = ud;
	json_t *r = api_diverged_record(d);
	json_object_set_new(r, "run", json_integer(c->run_id));
	ctl_record(c, "diverged", r);
	json_decref(r);
	ctl_say(c, "run %d diverged at v %llu: worker %d's %s is not finite (computed on v %llu); "
	        "nothing of it was applied. The run waits: POST /api/v1/run/recover resumes it "
	        "from its last good checkpoint with a smaller lr",
	        c->run_id, (unsigned long long)d->v, d->worker, d->what,
	        (unsigned long long)d->v_read);
}

void
ctl_on_split(void *ud, double t, uint64_t v, const run_split *sp)
{
	ctl *c = ud;
	json_t *r = api_split_record(t, v, sp);
	json_object_set_new(r, "run", json_integer(c->run_id));
	ctl_record(c, "split", r);
	json_decref(r);
}

void
ctl_on_remote(void *ud, double t, uint64_t v, int worker, const char *what, const char *host)
{
	ctl *c = ud;
	json_t *r = json_pack("{s:s,s:s,s:i,s:s,s:o,s:I,s:i}", "event", "remote", "what", what,
			      "worker", worker, "host", host, "t", jsonout_real(t), "v",
			      (json_int_t)v, "run", c->run_id);
	ctl_record(c, "remote", r);
	json_decref(r);
	ctl_say(c, "run %d at v %llu: remote worker %d%s%s %s%s", c->run_id,
	        (unsigned long long)v, worker, *host ? " @" : "", host, what,
	        strcmp(what, "joined") ? " (its step in flight dropped)" : "");
}

/* ---- a PATCH waiting for its change --------------------------------------- */

/* wait for a change to be applied (ctl_on_change marks it done): register
 * before it is queued, then wait (up to APPLY_WAIT_S, when it was queued)
 * and unregister */
void
ctl_waiter_add(ctl *c, ctl_waiter *w, const run_cmd *cmd, int watch_end)
{
	memset(w, 0, sizeof(*w));
	w->key = change_key(cmd);
	w->run = c->run_id;
	w->watch_end = watch_end;
	pthread_mutex_lock(&c->wait_mu);
	w->ended = watch_end && c->ended_run == w->run;
	w->next = c->waiters;
	c->waiters = w;
	pthread_mutex_unlock(&c->wait_mu);
}

void
ctl_waiter_wait(ctl *c, ctl_waiter *w, int queued)
{
	pthread_mutex_lock(&c->wait_mu);
	struct timespec ts;
	sl_deadline(APPLY_WAIT_S, &ts);
	while (queued && w->key && !w->done && !w->ended &&
	       pthread_cond_timedwait(&c->wait_cv, &c->wait_mu, &ts) != ETIMEDOUT)
		;
	ctl_waiter **pp = &c->waiters;
	while (*pp != w)
		pp = &(*pp)->next;
	*pp = w->next;
	pthread_mutex_unlock(&c->wait_mu);
	free(w->key);
	w->key = NULL;
}
