// api.js - the daemon's HTTP API as seen from the page: JSON calls with the
// bearer token (asked for once, when the daemon first answers 401), errors
// turned into readable messages, and the Server-Sent Events stream with
// reconnection.

const TOKEN_KEY = "stalelab.token";

// An API error: status, the API's code and its own message.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
  // the field a 400's message names ("lr: -1 is out of range ..." -> "lr";
  // "model.nodes[2] (conv2d): ..." -> "model.nodes[2]")
  get field() {
    const m = /^([A-Za-z_][\w.\[\]]*)(?: \([^)]*\))?: /.exec(this.message);
    return this.status === 400 && m ? m[1] : null;
  }
}

let askToken = null; // async (refused) -> token or null; set by the page
let tokenAsk = null; // the question in progress, so parallel calls ask once
let memToken = ""; // the token given in this page (also when storage fails)

export function setTokenPrompt(fn) {
  askToken = fn;
}

function token() {
  try {
    return localStorage.getItem(TOKEN_KEY) || "";
  } catch {
    return "";
  }
}

function saveToken(t) {
  try {
    localStorage.setItem(TOKEN_KEY, t);
  } catch {
    /* private mode: the token lives as long as the page */
  }
  memToken = t;
}


async function send(method, path, body) {
  const headers = {};
  const t = memToken || token();
  if (t) headers.Authorization = "Bearer " + t;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let r;
  try {
    r = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
  } catch (e) {
    throw new ApiError(0, "network", `${method} ${path}: the daemon cannot be reached`);
  }
  const text = await r.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!r.ok) {
    const err = data && data.error;
    throw new ApiError(r.status, err ? err.code : "http",
      err ? err.message : `${method} ${path}: HTTP ${r.status}`);
  }
  return data;
}

// A JSON call; on 401 the token is asked for (once for all calls waiting)
// and the call is tried again with it.
export async function api(method, path, body) {
  for (let refused = false; ; refused = true) {
    try {
      return await send(method, path, body);
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 401 || !askToken) throw e;
      if (!tokenAsk) {
        tokenAsk = askToken(refused || !!(memToken || token())).finally(() => {
          tokenAsk = null;
        });
      }
      const t = await tokenAsk;
      if (!t) throw e;
      saveToken(t);
    }
  }
}

// The event stream: handlers[name](data) for each event; status(s) with
// "open", "lost" (retrying; s.retryIn seconds) as the connection changes.
// Reconnects with a growing pause (0.5 s to 4 s) until it gets through.
export function connectEvents(hz, handlers, status) {
  let es = null;
  let wait = 0.5;
  let timer = null;
  let closed = false;
  const names = ["snapshot", "change", "eval", "run", "diverged", "end", "caption", "checkpoint"];
  function open() {
    timer = null;
    es = new EventSource(`/api/v1/events?hz=${encodeURIComponent(hz)}`);
    es.onopen = () => {
      wait = 0.5;
      status({ state: "open" });
    };
    es.onerror = () => {
      es.close();
      if (closed) return;
      status({ state: "lost", retryIn: wait });
      timer = setTimeout(open, wait * 1000);
      wait = Math.min(wait * 2, 4);
    };
    for (const n of names) {
      es.addEventListener(n, (ev) => {
        let d;
        try {
          d = JSON.parse(ev.data);
        } catch {
          return;
        }
        if (handlers[n]) handlers[n](d);
      });
    }
  }
  open();
  return {
    close() {
      closed = true;
      if (timer) clearTimeout(timer);
      if (es) es.close();
    },
  };
}
