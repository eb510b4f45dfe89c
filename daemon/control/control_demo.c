/* control_demo.c - the demo's thread: it starts the demo's run and plays
 * its captioned scenes, over and over, until the daemon stops. */
#include <stdio.h>

#include "config_json.h"
#include "control_impl.h"

/* apply one scene's changes to the current run (c->mu held) */
static void
demo_apply(ctl *c, const demo_scene *sc, char *err)
{
	run_snapshot *snap = run_snapshot_get(c->r);
	run_config cur = snap->cfg;
	run_snapshot_put(snap);
	run_cmd cmd;
	if (sc->set && cmd_from_json(sc->set, -1, &cur, "set", &cmd, err) == 0) {
		snprintf(cmd.origin, sizeof(cmd.origin), "demo");
		run_command(c->r, &cmd, err);
		if (cmd.fields & CMD_WORKERS)
			cur.workers = cmd.workers;
	}
	size_t k;
	json_t *w;
	json_array_foreach(sc->workers, k, w) {
		int id = (int)json_integer_value(json_object_get(w, "id"));
		if (cmd_from_json(json_object_get(w, "set"), id, &cur, "set", &cmd, err) == 0) {
			snprintf(cmd.origin, sizeof(cmd.origin), "demo");
			run_command(c->r, &cmd, err);
		}
	}
}

static void *
demo_main(void *p)
{
	ctl *c = p;
	char err[SL_ERR_LEN];
	for (int loop = 0;; loop++) {
		if (ctl_start(c, &c->demo.base, NULL, 0, NULL, 0, err) < 0) {
			fprintf(stderr, "stalelab serve: demo: %s\n", err);
			return NULL;
		}
		for (int i = 0; i < c->demo.n; i++) {
			const demo_scene *sc = &c->demo.scene[i];
			pthread_mutex_lock(&c->mu);
			if (!c->r) {
				pthread_mutex_unlock(&c->mu);
				return NULL;
			}
			c->demo_scene = i;
			c->demo_loop = loop;
			demo_apply(c, sc, err);
			run_snapshot *snap = run_snapshot_get(c->r);
			json_t *ev = json_pack("{s:s,s:s,s:i,s:i,s:f,s:I,s:i}", "event", "caption",
					       "caption", sc->caption, "scene", i, "loop", loop,
					       "t", snap->t, "v", (json_int_t)snap->v, "run", c->run_id);
			run_snapshot_put(snap);
			pthread_mutex_unlock(&c->mu);
			ctl_record(c, "caption", ev);
			json_decref(ev);
			ctl_say(c, "demo scene %d/%d: %s", i + 1, c->demo.n, sc->caption);
			if (events_sleep(&c->ev, sc->seconds))
				return NULL;
		}
	}
}

int
ctl_demo_start(ctl *c, char *err)
{
	c->demo_on = 1;
	if (pthread_create(&c->demo_th, NULL, demo_main, c))
		return sl_fail(err, SL_ENOMEM, "cannot start the demo");
	c->demo_live = 1;
	return 0;
}
