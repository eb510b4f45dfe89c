#!/usr/bin/env python3
"""wire_frame.py - one remote-worker message (docs/formats.md, "Remote-worker
messages") on stdout, for tests that speak to a daemon's --workers-listen
socket as a hostile or broken peer would (with bus_client.py reqat):
  wire_frame.py hello [HOST]     a first hello (valid), host HOST
  wire_frame.py short            12 bytes, shorter than a header
  wire_frame.py magic            a hello with another magic
  wire_frame.py proto1           a hello of protocol 1
  wire_frame.py crc              a hello whose checksum is wrong
  wire_frame.py pull ID          a pull from worker ID (never welcomed)
  wire_frame.py big MIB          a hello of MIB MiB (over a receive limit)
"""
import json
import struct
import sys
import zlib


def frame(kind, payload=b"", proto=4, magic=b"SLW1", worker=0xFFFFFFFF, bad_crc=False):
    h = bytearray(80)
    h[0:4] = magic
    struct.pack_into("<HH", h, 4, proto, kind)
    struct.pack_into("<II", h, 16, worker, 1234)
    struct.pack_into("<I", h, 68, len(payload))
    crc = zlib.crc32(bytes(h) + payload) & 0xFFFFFFFF
    struct.pack_into("<I", h, 44, crc ^ (1 if bad_crc else 0))
    return bytes(h) + payload


def main():
    what = sys.argv[1]
    hello = json.dumps({"host": sys.argv[2] if len(sys.argv) > 2 else "raw",
                        "threads": 1}).encode()
    out = {
        "hello": lambda: frame(1, hello),
        "short": lambda: b"not a frame!",
        "magic": lambda: frame(1, hello, magic=b"XXW1"),
        "proto1": lambda: frame(1, hello, proto=1),
        "crc": lambda: frame(1, hello, bad_crc=True),
        "pull": lambda: frame(7, b"", worker=int(sys.argv[2])),
        "big": lambda: frame(1, b" " * (int(sys.argv[2]) << 20)),
    }[what]()
    sys.stdout.buffer.write(out)


if __name__ == "__main__":
    main()
