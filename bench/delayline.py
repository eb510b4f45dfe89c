#!/usr/bin/env python3
"""delayline.py - a TCP relay that holds every byte for a fixed time.

    python3 bench/delayline.py --listen 127.0.0.1:9000 --to 10.78.1.1:8473 --delay-ms 5

A one-way propagation delay in each direction, for kernels without
sch_netem (tc netem delay): what it reads at t it writes at t + delay, in
order, so a message of b bytes over a link shaped to B bit/s (tc tbf on
the interface below) arrives after delay + 8b/B, the virtual clock's
model of a link (docs/rules.md, "Communication"). Standard library only;
one thread per direction per connection.
"""
import argparse
import collections
import socket
import threading
import time


def pump(src, dst, delay):
    q = collections.deque()
    cv = threading.Condition()
    done = [False]

    def writer():
        while True:
            with cv:
                while not q and not done[0]:
                    cv.wait()
                if not q:
                    break
                due, data = q.popleft()
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            try:
                dst.sendall(data)
            except OSError:
                break
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    while True:
        try:
            data = src.recv(1 << 18)
        except OSError:
            data = b""
        with cv:
            if not data:
                done[0] = True
                cv.notify()
                break
            q.append((time.monotonic() + delay, data))
            cv.notify()
    t.join()


def serve(conn, to, delay):
    try:
        up = socket.create_connection(to)
    except OSError:
        conn.close()
        return
    for s in (conn, up):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    a = threading.Thread(target=pump, args=(conn, up, delay), daemon=True)
    b = threading.Thread(target=pump, args=(up, conn, delay), daemon=True)
    a.start()
    b.start()
    a.join()
    b.join()
    conn.close()
    up.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--listen", required=True, help="HOST:PORT to accept on")
    ap.add_argument("--to", required=True, help="HOST:PORT to relay to")
    ap.add_argument("--delay-ms", type=float, required=True, help="one-way delay")
    a = ap.parse_args()
    lh, lp = a.listen.rsplit(":", 1)
    th, tp = a.to.rsplit(":", 1)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((lh, int(lp)))
    ls.listen(64)
    while True:
        conn, _ = ls.accept()
        threading.Thread(target=serve, args=(conn, (th, int(tp)), a.delay_ms / 1000.0),
                         daemon=True).start()


if __name__ == "__main__":
    main()
