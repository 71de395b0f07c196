#!/usr/bin/python3
"""Stand in for systemd's notification socket (sd_notify(3)).

usage: notify-listen.py SOCKET OUTFILE

Binds an AF_UNIX datagram socket at SOCKET and writes every assignment of
every datagram to OUTFILE as "N KEY=VALUE" (N counts datagrams from 1), one
line each, flushed at once.  File descriptors that come with a datagram
(sd_notify_barrier sends one) are closed.  Runs until SIGTERM.
"""
import array
import os
import signal
import socket
import sys


def main():
    path, outfile = sys.argv[1], sys.argv[2]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    os.chmod(path, 0o666)
    # a notify socket must accept SCM_CREDENTIALS like systemd's
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    n = 0
    with open(outfile, "a", buffering=1) as out:
        while True:
            data, anc, _, _ = sock.recvmsg(4096, socket.CMSG_SPACE(16 * 4) + 64)
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds = array.array("i")
                    fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
                    for fd in fds:
                        os.close(fd)
            n += 1
            for line in data.decode("utf-8", "replace").split("\n"):
                if line:
                    out.write(f"{n} {line}\n")


if __name__ == "__main__":
    main()
