#!/usr/bin/python3
# preload-backlog: a burst of connections to a server whose backlog is
# small (Python's socketserver asks for 5), run under librspreload
# (rsockets.sh, case "backlog").  Nothing here knows of rsockets.
#
#   preload-backlog.py server PORT N   listen on 127.0.0.1:PORT with a
#                                      backlog of 1, let the burst come
#                                      (2 s), then accept N connections,
#                                      echo each one's byte; print
#                                      "served N"
#   preload-backlog.py client PORT N   N connections at once, each sends a
#                                      byte and reads it back: none may
#                                      be refused, as TCP refuses none
#                                      for a full backlog (the kernel
#                                      drops the SYN, the client sends it
#                                      again); print "connected N"
# Exit status 0, or 1 with a message.
import socket
import sys
import threading
import time

WAIT_S = 20


def fail(msg):
    print("preload-backlog: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def server(port, n):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(1)
    time.sleep(2)
    s.settimeout(WAIT_S)
    for i in range(n):
        try:
            c, _ = s.accept()
        except OSError as e:
            fail("accept %d: %s" % (i, e))
        with c:
            c.settimeout(WAIT_S)
            b = c.recv(1)
            if len(b) != 1:
                fail("connection %d sent nothing" % i)
            c.sendall(b)
    print("served %d" % n, flush=True)


def client(port, n):
    errors = []

    def one(i):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as c:
                c.sendall(bytes([i & 0xff]))
                if c.recv(1) != bytes([i & 0xff]):
                    errors.append("connection %d: another byte back" % i)
        except OSError as e:
            errors.append("connection %d: %s" % (i, e))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S * 2)
    if errors:
        fail("; ".join(errors))
    print("connected %d" % n, flush=True)


if len(sys.argv) != 4 or sys.argv[1] not in ("server", "client"):
    fail("usage: preload-backlog.py server|client PORT N")
(server if sys.argv[1] == "server" else client)(int(sys.argv[2]), int(sys.argv[3]))
