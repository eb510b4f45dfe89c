#!/usr/bin/env python3
"""bus_client.py - a nanomsg client of the daemon's bus for tests/integration/bus.sh,
through ctypes on libnanomsg.so.5 (no pip). Usage:
  bus_client.py sub URL PREFIX COUNT SECONDS [READY]
                                               print COUNT messages starting with
                                               PREFIX (one a line), exit 1 on timeout;
                                               with READY, create that file once the
                                               first message of any topic came (the
                                               subscription is live: a test may then
                                               cause the message it waits for); with
                                               BUS_CLIENT_STAMP=1 in the environment
                                               each line starts with the time it came
                                               (seconds, monotonic) and a space
  bus_client.py req URL SECONDS < REQUEST      send stdin's bytes on a REQ socket to
                                               URL's REP sibling, print the reply
  bus_client.py reqat URL SECONDS < REQUEST    the same, to URL itself
"""
import ctypes
import os
import sys
import time

AF_SP, NN_SUB, NN_REQ = 1, 33, 48
NN_SOL_SOCKET, NN_RCVTIMEO, NN_SUB_SUBSCRIBE = 0, 5, 1
NN_MSG = ctypes.c_size_t(-1).value

nn = ctypes.CDLL("libnanomsg.so.5", use_errno=True)
nn.nn_strerror.restype = ctypes.c_char_p
nn.nn_recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
nn.nn_send.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
nn.nn_freemsg.argtypes = [ctypes.c_void_p]


def die(what):
    e = ctypes.get_errno()
    sys.exit("bus_client: %s: %s" % (what, nn.nn_strerror(e).decode()))


def sibling(url):
    if url.startswith("ipc://"):
        return url + ".rep"
    host, port = url.rsplit(":", 1)
    return "%s:%d" % (host, int(port) + 1)


def recv(s):
    buf = ctypes.c_void_p()
    n = nn.nn_recv(s, ctypes.byref(buf), NN_MSG, 0)
    if n < 0:
        return None
    data = ctypes.string_at(buf, n)
    nn.nn_freemsg(buf)
    return data


def timeout(s, seconds):
    ms = ctypes.c_int(int(seconds * 1000))
    nn.nn_setsockopt(s, NN_SOL_SOCKET, NN_RCVTIMEO, ctypes.byref(ms), 4)


def sub(url, prefix, count, seconds, ready=None):
    s = nn.nn_socket(AF_SP, NN_SUB)
    p = prefix.encode()
    if ready:
        p = b""  # every topic, filtered below, so the first message shows the link is up
    nn.nn_setsockopt(s, NN_SUB, NN_SUB_SUBSCRIBE, p, len(p))
    if nn.nn_connect(s, url.encode()) < 0:
        die("connect " + url)
    end = time.time() + seconds
    got = 0
    stamp = os.environ.get("BUS_CLIENT_STAMP") == "1"
    while got < count:
        left = end - time.time()
        if left <= 0:
            sys.exit("bus_client: %d of %d messages before the timeout" % (got, count))
        timeout(s, left)
        m = recv(s)
        if m is None:
            continue
        if ready:
            open(ready, "a").close()
            if not m.startswith(prefix.encode()):
                continue
        if stamp:
            sys.stdout.write("%.6f " % time.monotonic())
        sys.stdout.write(m.decode() + "\n")
        sys.stdout.flush()
        got += 1


def req(url, seconds):
    s = nn.nn_socket(AF_SP, NN_REQ)
    if nn.nn_connect(s, url.encode()) < 0:
        die("connect " + url)
    timeout(s, seconds)
    data = sys.stdin.buffer.read()
    if nn.nn_send(s, data, len(data), 0) < 0:
        die("send")
    m = recv(s)
    if m is None:
        die("no reply")
    sys.stdout.buffer.write(m + b"\n")  # the bus's JSON, or a wire frame


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) in (5, 6) and a[0] == "sub":
        sub(a[1], a[2], int(a[3]), float(a[4]), a[5] if len(a) == 6 else None)
    elif len(a) == 3 and a[0] in ("req", "reqat"):
        req(sibling(a[1]) if a[0] == "req" else a[1], float(a[2]))
    else:
        sys.exit(__doc__)
