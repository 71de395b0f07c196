#!/usr/bin/python3
# preload-orphan: a TCP server that accepts whenever select(2) says its
# listener is ready (rsockets.sh, case "orphan"), run under librspreload
# while its daemon is killed.  Nothing here knows of rsockets.
#
#   preload-orphan.py PORT   listen on 127.0.0.1:PORT, print "listening",
#                            wait (20 s at most) for the listener's first
#                            readiness: its accept must fail (the daemon
#                            went); then, for 3 s, the listener may be
#                            ready twice more at most (a server that
#                            accepts on readiness must not spin), and a
#                            nonblocking accept finds nothing (EAGAIN);
#                            print "orphan: READY readiness after the
#                            first, accept: ERROR"
# Exit status 0, or 1 with a message.
import errno
import select
import socket
import sys
import time

FIRST_S = 20
AFTER_S = 3


def fail(msg):
    print("preload-orphan: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def main(port):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.bind(("127.0.0.1", port))
    ls.listen(8)
    print("listening", flush=True)
    ready, _, _ = select.select([ls], [], [], FIRST_S)
    if not ready:
        fail("the listener was never ready after its daemon went")
    try:
        conn, _ = ls.accept()
        fail("an accept after the daemon went gave a connection")
    except OSError as e:
        first = errno.errorcode.get(e.errno, str(e.errno))
    more = 0
    end = time.monotonic() + AFTER_S
    while True:
        left = end - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([ls], [], [], left)
        if not ready:
            continue
        more += 1
        if more > 2:
            fail("the listener was ready %d times after the accept failed (%s): a spin" %
                 (more, first))
        try:
            ls.accept()
        except OSError:
            pass
    ls.setblocking(False)
    try:
        ls.accept()
        fail("a nonblocking accept gave a connection")
    except BlockingIOError:
        pass
    except OSError as e:
        fail("a nonblocking accept failed with %s, not EAGAIN" %
             errno.errorcode.get(e.errno, str(e.errno)))
    print("orphan: %d readiness after the first, accept: %s" % (more, first), flush=True)
    ls.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: preload-orphan.py PORT", file=sys.stderr)
        sys.exit(2)
    main(int(sys.argv[1]))
