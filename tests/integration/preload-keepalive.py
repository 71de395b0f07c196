#!/usr/bin/python3
# preload-keepalive: an idle connection with SO_KEEPALIVE and TCP_KEEPIDLE 1
# under librspreload (rsockets.sh, case "keepalive"), as servers set them
# (Redis, PostgreSQL, nginx's so_keepalive).  Nothing here knows of
# rsockets.
#
#   preload-keepalive.py server PORT   accept one connection on
#                                      127.0.0.1:PORT, sit idle 3.5 s
#                                      (keepalives due every second),
#                                      then echo a byte; print "server ok"
#   preload-keepalive.py client PORT   connect, sit idle 3.5 s, send a
#                                      byte and read it back within 10 s;
#                                      print "client ok"
#   preload-keepalive.py watch-server IP PORT
#   preload-keepalive.py watch-client IP PORT
#                                      (rsockets-wire.sh) SO_KEEPALIVE with
#                                      TCP_KEEPIDLE 2, TCP_KEEPINTVL 1,
#                                      TCP_KEEPCNT 2; a byte each way,
#                                      print "connected", then wait for
#                                      the connection's end (60 s at
#                                      most) and print "ended after S s
#                                      revents R errno E" (E: the read's
#                                      errno, 0 for an end of file)
#   preload-keepalive.py quit-server PORT
#                                      accept one connection on
#                                      127.0.0.1:PORT with SO_KEEPALIVE
#                                      and TCP_KEEPIDLE 1, read a byte,
#                                      sit idle 3.5 s, then read an end
#                                      of file, as TCP's after its peer's
#                                      FIN; print "quit-server ok"
#   preload-keepalive.py quit-client PORT
#                                      connect, send a byte, and leave the
#                                      process without closing the socket
# Exit status 0, or 1 with a message.  A keepalive that hung the process
# (its thread stuck on the rsocket's lock) leaves both ends silent.
import os
import select
import socket
import sys
import time

IDLE_S = 3.5
WAIT_S = 10


def fail(msg):
    print("preload-keepalive: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def keepalive(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 1)


def watch(role, ip, port):
    def opts(s):
        keepalive(s)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 2)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 1)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 2)
    if role == "watch-server":
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        opts(ls)
        ls.bind((ip, port))
        ls.listen(1)
        c, _ = ls.accept()
    else:
        c = socket.socket()
        opts(c)
        c.connect((ip, port))
    c.sendall(b"w")
    if c.recv(1) != b"w":
        fail("no byte from the peer")
    print("connected", flush=True)
    t0 = time.monotonic()
    p = select.poll()
    p.register(c, select.POLLIN)
    ev = p.poll(60000)
    took = time.monotonic() - t0
    rev = ev[0][1] if ev else 0
    err = 0
    try:
        c.recv(16)
    except OSError as e:
        err = e.errno
    print("ended after %.1f s revents %#x errno %d" % (took, rev, err), flush=True)


def quit_pair(role, port):
    if role == "quit-client":
        c = socket.socket()
        c.connect(("127.0.0.1", port))
        c.sendall(b"q")
        os._exit(0)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(1)
    c, _ = ls.accept()
    keepalive(c)
    if c.recv(1) != b"q":
        fail("no byte from the client")
    time.sleep(IDLE_S)
    c.settimeout(WAIT_S)
    try:
        b = c.recv(16)
    except OSError as e:
        fail("read after the client left, idle %.1f s: %s, want an end of file" % (IDLE_S, e))
    if b != b"":
        fail("read %r after the client left, want an end of file" % b)
    print(role + " ok", flush=True)


def main():
    if sys.argv[1].startswith("quit-"):
        quit_pair(sys.argv[1], int(sys.argv[2]))
        return
    if sys.argv[1].startswith("watch-"):
        watch(sys.argv[1], sys.argv[2], int(sys.argv[3]))
        return
    role, port = sys.argv[1], int(sys.argv[2])
    if role == "server":
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        keepalive(ls)
        ls.bind(("127.0.0.1", port))
        ls.listen(1)
        c, _ = ls.accept()
    else:
        c = socket.socket()
        keepalive(c)
        c.connect(("127.0.0.1", port))
    time.sleep(IDLE_S)
    c.settimeout(WAIT_S)
    try:
        if role == "server":
            b = c.recv(1)
            if b != b"k":
                fail("server read %r, want b'k'" % b)
            c.sendall(b)
        else:
            c.sendall(b"k")
            b = c.recv(1)
            if b != b"k":
                fail("client read %r, want b'k'" % b)
    except OSError as e:
        fail("%s after %.1f s idle: %s" % (role, IDLE_S, e))
    print(role + " ok", flush=True)


main()
