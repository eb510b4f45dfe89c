"""A client for the HTTP API of `stalelab serve` (docs/api.md).

One module, the standard library only (urllib, json). Put this directory
on sys.path (or copy the file next to a script) and:

    import stalelab

    c = stalelab.Client("http://127.0.0.1:8470")       # token: see below
    s = c.status()
    print(s["state"], s["rule"], s["version"], s["test_acc"])

    c.update_worker(3, delay={"dist": "const", "mean_ms": 300})  # a straggler
    c.set_rule("dcasgd", {"lambda": 0.04})                        # another rule
    c.set_workers(8)
    print(c.staleness()["window"]["mean"])

    with c.events(hz=2) as stream:                 # Server-Sent Events
        for ev in stream:
            if ev.name == "snapshot":
                print(ev.data["version"], ev.data["staleness"]["window"]["mean"])
            elif ev.name == "end":
                break

Every method is one request and returns the answer's JSON decoded (a
dict), or text for the endpoints that answer text (`index`,
`prometheus`, `sweep_figure`, `cluster_file`). The methods, by endpoint:

    GET    /                                 index()
    GET    /api/v1/status                    status(), wait(pred)
    GET    /api/v1/metrics?since=V           metrics(since)
    GET    /api/v1/staleness                 staleness()
    GET    /api/v1/events?hz=H               events(hz) -> EventStream
    GET    /api/v1/run                       run()
    POST   /api/v1/run                       start(config, **fields), resume(path)
    PATCH  /api/v1/run                       update(**fields), set_rule(rule, params),
                                             pause(), unpause(), stop()
    POST   /api/v1/run/recover               recover(lr)
    GET    /api/v1/workers                   workers()
    PUT    /api/v1/workers                   set_workers(count)
    GET    /api/v1/workers/{id}              worker(id)
    PATCH  /api/v1/workers/{id}              update_worker(id, **fields)
    POST   /api/v1/checkpoint                checkpoint(path)
    GET    /api/v1/schema                    schema(), rules()
    GET    /api/v1/runs                      runs(series)
    GET    /api/v1/runs/{id}                 run_info(id)
    GET    /api/v1/runs/{id}/changes         changes(id)
    GET    /api/v1/sweeps[/{name}]           sweeps(), sweep(name)
    GET    /api/v1/sweeps/{name}/figures/F   sweep_figure(name, file)
    GET    /api/v1/clusters[/{name}]         clusters(), cluster(name)
    GET    /api/v1/clusters/{name}/files/F   cluster_file(name, file)
    GET    /metrics                          prometheus() (parse_prometheus reads it)

Errors. The daemon answers an error as {"error": {"code", "message"}}
with a status; the client raises it as an APIError (a subclass by status:
BadRequest 400, 413 and 415, Unauthorized 401, NotFound 404, Conflict
409) whose `status`, `code` and `message` are the server's and whose
text names the request:

    try:
        c.update(lr=-1)
    except stalelab.BadRequest as e:
        print(e.message)          # lr: must be in (0, 100], got -1

A daemon that cannot be reached (refused, timed out) is a ConnectError.
Both derive from stalelab.Error.

The token. A daemon started with --token-file, STALELAB_TOKEN or --token
needs `Authorization: Bearer TOKEN` on every change (reads need nothing).
Client(token=...) sends it; token_file=FILE reads it from a file's first
line; with neither, the client takes STALELAB_TOKEN from its environment
when that is set (token="" sends none).

The URL defaults to $STALELAB_URL, else http://127.0.0.1:8470.
"""

import collections
import json
import os
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request

__all__ = [
    "Client", "EventStream", "Event", "Sample", "parse_prometheus",
    "Error", "ConnectError", "APIError", "BadRequest", "Unauthorized",
    "NotFound", "Conflict", "DEFAULT_URL",
]

DEFAULT_URL = "http://127.0.0.1:8470"


class Error(Exception):
    """Anything this module raises about the daemon."""


class ConnectError(Error):
    """The daemon could not be reached, or stopped answering."""


class APIError(Error):
    """The daemon answered an error.

    status  -- the HTTP status (400, 401, 404, 405, 409, 413, 415, 5xx)
    code    -- the error's code ("bad_field", "unauthorized", ...)
    message -- the server's message ("lr: must be in (0, 100], got -1")
    method, path -- the request
    """

    def __init__(self, status, code, message, method, path):
        self.status = status
        self.code = code
        self.message = message
        self.method = method
        self.path = path
        Error.__init__(self, "%s %s: %d %s: %s" % (method, path, status, code, message))


class BadRequest(APIError):
    """400 (bad JSON, a bad field: the message names it), 413 or 415."""


class Unauthorized(APIError):
    """401: the token is missing or wrong."""


class NotFound(APIError):
    """404: no such endpoint, worker, run, sweep or simulation."""


class Conflict(APIError):
    """409: not in the run's state (finished, diverged, ended, no run)."""


_BY_STATUS = {400: BadRequest, 413: BadRequest, 415: BadRequest,
              401: Unauthorized, 404: NotFound, 409: Conflict}

Event = collections.namedtuple("Event", "name data id")
Event.__doc__ = """One Server-Sent Event: its name ("snapshot", "change",
"eval", "run", "diverged", "end", "caption", "checkpoint"), its data
(the JSON decoded; the text when it is not JSON) and its id (a string)."""

Sample = collections.namedtuple("Sample", "name labels value")
Sample.__doc__ = """One sample of the Prometheus text: the metric's name
(with _bucket, _sum or _count for a histogram's), its labels (a dict) and
its value (a float)."""


def _quote(name):
    return urllib.parse.quote(str(name), safe="")


def _api_error(method, path, status, reason, body):
    code, message = "http", reason or "HTTP %d" % status
    try:
        e = json.loads(body.decode("utf-8"))["error"]
        code, message = e["code"], e["message"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        text = body.decode("utf-8", "replace").strip()
        if text:
            message = text[:500]
    return _BY_STATUS.get(status, APIError)(status, code, message, method, path)


class EventStream:
    """The event stream of GET /api/v1/events, as an iterator of Event.

    Made by Client.events(). Iterate it for events as they come (the
    keepalive comments are skipped); close() it, or use it in a with
    statement, to hang up. Iteration ends when the daemon closes the
    stream; a stream silent past the client's timeout raises
    ConnectError (the daemon sends a keepalive at least every 15 s).
    """

    def __init__(self, response, method, path):
        self._r = response
        self._where = "%s %s" % (method, path)

    def __iter__(self):
        return self

    def __next__(self):
        name, data, eid = None, [], None
        while True:
            try:
                raw = self._r.readline() if self._r else b""
            except (socket.timeout, OSError) as e:
                self.close()
                raise ConnectError("%s: the stream stopped: %s" % (self._where, e))
            if not raw:
                self.close()
                raise StopIteration
            line = raw.decode("utf-8").rstrip("\r\n")
            if not line:
                if data:
                    text = "\n".join(data)
                    try:
                        value = json.loads(text)
                    except ValueError:
                        value = text
                    return Event(name or "message", value, eid)
                name, data = None, []
                continue
            if line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
            elif field == "id":
                eid = value

    def close(self):
        """Hang up (the daemon drops the stream)."""
        if self._r:
            self._r.close()
            self._r = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Client:
    """A daemon at url (default $STALELAB_URL or http://127.0.0.1:8470).

    token      -- sent as `Authorization: Bearer TOKEN` with every request;
                  None: $STALELAB_TOKEN when set; "": none
    token_file -- read the token from this file's first line instead
    timeout    -- seconds a request (or an event stream's silence) may take
    """

    def __init__(self, url=None, token=None, token_file=None, timeout=30.0):
        self.url = (url or os.environ.get("STALELAB_URL") or DEFAULT_URL).rstrip("/")
        if token_file is not None:
            with open(token_file) as f:
                token = f.readline().strip()
        elif token is None:
            token = os.environ.get("STALELAB_TOKEN", "")
        self.token = token
        self.timeout = timeout

    def __repr__(self):
        return "stalelab.Client(%r%s)" % (self.url, ", token=..." if self.token else "")

    # ---- the requests ----------------------------------------------------

    def _open(self, method, path, body=None, timeout=None):
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            return urllib.request.urlopen(req, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as e:
            try:
                body = e.read() if e.fp else b""
            except OSError:
                body = b""
            e.close()
            raise _api_error(method, path, e.code, e.reason, body) from None
        except (urllib.error.URLError, OSError) as e:
            why = getattr(e, "reason", e)
            raise ConnectError("%s %s: cannot reach %s: %s" % (method, path, self.url, why)) from None

    def request(self, method, path, body=None, text=False):
        """One request: method and path ("/api/v1/status", with its query),
        body (JSON-encoded when not None). Returns the JSON decoded, or the
        text with text=True; raises APIError or ConnectError."""
        with self._open(method, path, body) as r:
            try:
                raw = r.read()
            except OSError as e:
                raise ConnectError("%s %s: the answer broke off: %s" % (method, path, e)) from None
        if text:
            return raw.decode("utf-8")
        return json.loads(raw.decode("utf-8")) if raw else None

    def _get(self, path, **query):
        q = {k: v for k, v in query.items() if v is not None}
        return self.request("GET", path + ("?" + urllib.parse.urlencode(q) if q else ""))

    @staticmethod
    def _merge(changes, fields):
        body = dict(changes or {})
        body.update(fields)
        return body

    # ---- reads -----------------------------------------------------------

    def index(self):
        """GET /: the plain-text list of the endpoints."""
        return self.request("GET", "/", text=True)

    def status(self):
        """GET /api/v1/status: state, version, rule, accuracy, the config
        with every live change applied, and a row per worker."""
        return self._get("/api/v1/status")

    def metrics(self, since=None):
        """GET /api/v1/metrics: the evaluation series with v > since
        ({"version", "since", "series": [{"v", "t", "test_acc", ...}]})."""
        return self._get("/api/v1/metrics", since=since)

    def staleness(self):
        """GET /api/v1/staleness: the histograms overall, over the last 5 s
        ("window") and per worker, plus age_ms."""
        return self._get("/api/v1/staleness")

    def events(self, hz=None, timeout=None):
        """GET /api/v1/events: the Server-Sent Events as an EventStream of
        Event(name, data, id): snapshots at hz a second (0.1 to 50; the
        daemon's default is 4) and every change, eval, run, end, ... as it
        happens. A bad hz raises BadRequest at once."""
        path = "/api/v1/events" + ("?hz=%g" % hz if hz is not None else "")
        return EventStream(self._open("GET", path, timeout=timeout), "GET", path)

    def wait(self, predicate, timeout=60.0, interval=0.2):
        """Poll status() until predicate(status) is true and return that
        status; TimeoutError after timeout seconds (the last status in
        its message)."""
        end = time.monotonic() + timeout
        while True:
            s = self.status()
            if predicate(s):
                return s
            if time.monotonic() >= end:
                raise TimeoutError("%s: status not as wanted within %g s (state %s, version %s)"
                                   % (self.url, timeout, s.get("state"), s.get("version")))
            time.sleep(interval)

    def run(self):
        """GET /api/v1/run: {"run", "state", "config"}, the current run
        object with every live change applied."""
        return self._get("/api/v1/run")

    def workers(self):
        """GET /api/v1/workers: {"count", "workers": [...]}."""
        return self._get("/api/v1/workers")

    def worker(self, worker_id):
        """GET /api/v1/workers/{id}: one worker's row of status."""
        return self._get("/api/v1/workers/%d" % worker_id)

    def schema(self):
        """GET /api/v1/schema: every field of the run object, of a worker
        and of PATCH's controls, and every rule with its parameters."""
        return self._get("/api/v1/schema")

    def rules(self):
        """The rule names the daemon knows, in its table's order."""
        return [r["name"] for r in self.schema()["rules"]]

    def runs(self, series=False):
        """GET /api/v1/runs: this run and the earlier ones, oldest first
        (series=True adds each one's evaluation series)."""
        return self._get("/api/v1/runs", series=1 if series else None)

    def run_info(self, run_id):
        """GET /api/v1/runs/{id}: one run's summary with its series."""
        return self._get("/api/v1/runs/%d" % run_id)

    def changes(self, run_id):
        """GET /api/v1/runs/{id}/changes: {"run", "changes": [...]}, the
        run's change records as in its log ({"t", "v", "event", ...})."""
        return self._get("/api/v1/runs/%d/changes" % run_id)

    def _served(self, base, name=None, files=None, file=None):
        # a directory the daemon serves: its list, one entry, one file
        path = base + ("" if name is None else "/" + _quote(name))
        if file is None:
            return self._get(path)
        return self.request("GET", "%s/%s/%s" % (path, files, _quote(file)), text=True)

    def sweeps(self):
        """GET /api/v1/sweeps: the finished sweeps of serve --sweeps DIR."""
        return self._served("/api/v1/sweeps")

    def sweep(self, name):
        """GET /api/v1/sweeps/{name}: its spec, results and summary."""
        return self._served("/api/v1/sweeps", name)

    def sweep_figure(self, name, file):
        """GET /api/v1/sweeps/{name}/figures/{file}: an SVG, as text."""
        return self._served("/api/v1/sweeps", name, "figures", file)

    def clusters(self):
        """GET /api/v1/clusters: the simulations of serve --clusters DIR."""
        return self._served("/api/v1/clusters")

    def cluster(self, name):
        """GET /api/v1/clusters/{name}: its spec, summary and series."""
        return self._served("/api/v1/clusters", name)

    def cluster_file(self, name, file):
        """GET /api/v1/clusters/{name}/files/{file}: a CSV or SVG, as text."""
        return self._served("/api/v1/clusters", name, "files", file)

    def prometheus(self):
        """GET /metrics: the Prometheus text (parse_prometheus reads it)."""
        return self.request("GET", "/metrics", text=True)

    # ---- changes (these need the token where the daemon has one) -----------

    def start(self, config=None, **fields):
        """POST /api/v1/run: start a new run from a run object (a dict, or
        the name of a JSON file such as examples/dcasgd.json), fields
        overriding its keys (start("examples/ssp.json", workers=2)).
        Returns the new run's status; the old run ends once the new one
        is built, so a bad run object (BadRequest) leaves it running."""
        if isinstance(config, (str, os.PathLike)):
            with open(config) as f:
                config = json.load(f)
        return self.request("POST", "/api/v1/run", self._merge(config, fields))

    def resume(self, path):
        """POST /api/v1/run {"resume": path}: a new run from a checkpoint
        inside the daemon's --checkpoint-dir."""
        return self.request("POST", "/api/v1/run", {"resume": path})

    def update(self, changes=None, **fields):
        """PATCH /api/v1/run: change the running run (rule, rule_params,
        lr, momentum, batch, delay, workers, paused, stop, ...; schema()
        lists them). Returns {"accepted", "applied", "change"}: the change
        as logged, with its t and v once applied (the daemon waits up to
        3 s for that)."""
        return self.request("PATCH", "/api/v1/run", self._merge(changes, fields))

    def set_rule(self, rule, params=None, **fields):
        """Switch the rule mid-run: update(rule=rule, rule_params=params)
        (params merged onto the current ones: {"s": 2}, {"lambda": 0.1})."""
        if params is not None:
            fields["rule_params"] = params
        return self.update(rule=rule, **fields)

    def pause(self):
        """Pause every worker (update(paused=True))."""
        return self.update(paused=True)

    def unpause(self):
        """Let the workers go on (update(paused=False))."""
        return self.update(paused=False)

    def stop(self):
        """End the run now (update(stop=True)): it logs its end record."""
        return self.update(stop=True)

    def recover(self, lr=None):
        """POST /api/v1/run/recover: a diverged run goes on from its last
        good checkpoint with lr (default: half the current one)."""
        return self.request("POST", "/api/v1/run/recover", {} if lr is None else {"lr": lr})

    def set_workers(self, count):
        """PUT /api/v1/workers {"count": count}."""
        return self.request("PUT", "/api/v1/workers", {"count": count})

    def update_worker(self, worker_id, changes=None, **fields):
        """PATCH /api/v1/workers/{id}: delay (merged onto the worker's),
        spb_depth, speed, step_ms, paused, link. Answers like update()."""
        return self.request("PATCH", "/api/v1/workers/%d" % worker_id,
                            self._merge(changes, fields))

    def checkpoint(self, path=None):
        """POST /api/v1/checkpoint: write the whole run to path, a file
        name inside the daemon's --checkpoint-dir (default
        stalelab-run<N>-v<V>.ckpt there). Returns {"path", "version",
        "bytes"}."""
        return self.request("POST", "/api/v1/checkpoint", {} if path is None else {"path": path})


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$')
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def parse_prometheus(text):
    """The samples of a Prometheus text exposition (Client.prometheus()),
    in order, as Sample(name, labels, value); comments skipped."""
    out = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise ValueError("not a Prometheus sample: %r" % line)
        labels = {k: re.sub(r'\\[\\"n]', lambda x: _UNESCAPE[x.group(0)], v)
                  for k, v in _LABEL.findall(m.group(2) or "")}
        out.append(Sample(m.group(1), labels, float(m.group(3))))
    return out
