#!/usr/bin/env python3
"""Seeds for the handlers harness from captured frames (capture-frames).

usage: sessions.py FRAMES_DIR OUT_DIR

FRAMES_DIR holds TYPE-PID-N-SOCK files, one frame each, header included.
Each process's frames become one input of tests/fuzz/handlers.c: a first
byte (0: unprivileged uid 0... see handlers.c; 2 gives uid 1001), then per
frame a record (u16 type, u8 fds 0 = what the row wants, u16 len, the
payload), with a new-session record (type 0xffff) where the process
switched to another connection.  Inputs over 64 KiB are cut at a record.
"""
import os
import struct
import sys

NEW_SESSION = 0xFFFF
MAX_RECORDS = 64


def main():
    src, out = sys.argv[1], sys.argv[2]
    procs = {}
    for name in os.listdir(src):
        type_hex, pid, n, sock = name.split("-")
        procs.setdefault(pid, []).append((int(n), int(sock), name))
    os.makedirs(out, exist_ok=True)
    for i, pid in enumerate(sorted(procs, key=int)):
        data, last_sock, records = bytearray([2]), None, 0
        for n, sock, name in sorted(procs[pid]):
            with open(os.path.join(src, name), "rb") as f:
                frame = f.read()
            type_, length = struct.unpack_from("<H", frame, 6)[0], len(frame) - 16
            if last_sock is not None and sock != last_sock:
                data += struct.pack("<HBH", NEW_SESSION, 2, 0)
                records += 1
            last_sock = sock
            if records >= MAX_RECORDS or len(data) + 5 + length > 65536:
                break
            data += struct.pack("<HBH", type_, 0, length) + frame[16:]
            records += 1
        with open(os.path.join(out, "session-%02d" % i), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
