/* busc.h - the TUI's bus client (docs/bus.md): a SUB socket on the daemon's
 * PUB URL and a REQ socket on its sibling. Nothing here blocks: receives
 * use NN_DONTWAIT, connections are made (and remade after a daemon restart)
 * by nanomsg in the background. The only TUI file that includes nanomsg. */
#ifndef SL_TUI_BUSC_H
#define SL_TUI_BUSC_H

#include <stddef.h>

typedef struct busc busc;

/* The REP URL of a PUB URL: tcp://H:P -> tcp://H:(P+1), ipc://PATH ->
 * ipc://PATH.rep. 0, or -1 with err saying what is wrong with url. */
int busc_sibling(const char *url, char *out, size_t cap, char *err, size_t errcap);

/* The REP URL for a PUB URL: rep when given (a daemon started with
 * --bus-rep), else url's sibling; both checked. 0, or -1 with err. */
int busc_rep_url(const char *url, const char *rep, char *out, size_t cap, char *err,
		 size_t errcap);

/* Connect to url and to rep (NULL: url's sibling). NULL with err on a bad
 * URL. */
busc *busc_open(const char *url, const char *rep, char *err, size_t errcap);
void busc_close(busc *b);

/* The next published message (topic, a space, JSON) into *msg (NUL
 * terminated, free with busc_free): 1, or 0 when none is waiting. */
int busc_recv(busc *b, char **msg);
/* A request (one JSON object): 0, or -1 when it could not be queued. */
int busc_send(busc *b, const char *text);
/* The reply to the request in flight into *msg: 1, or 0 when none yet. */
int busc_reply(busc *b, char **msg);
/* Forget the request in flight (its reply, should one come, is dropped,
 * and nanomsg will not re-send it later): 0 or -1. */
int busc_cancel(busc *b);
void busc_free(char *msg);

#endif
