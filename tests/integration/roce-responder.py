#!/usr/bin/env python3
"""A peer made by hand for a RoCE QP's responder (roce-responder.sh).

Runs as root in the peer's namespace (raw sockets: the packets are made
here, ICRC and all) and starts roce-qp-helper in the daemon's namespace:
  roce-responder.py CASE NS_DAEMON SOCKET UID RUNNER HELPER IP_DAEMON IP_PEER
CASE:
  write_past  a WRITE whose RETH runs past its MR: NAKed (remote access)
              at its first packet, and no byte of it lands
  no_rd       max_dest_rd_atomic 0: a READ and a FETCH_ADD are NAKed
              (invalid request) and do nothing
  dup_read    one 1 MiB READ, then 2,000 copies of it (roce-responder.sh
              counts how many were answered again, in sent_pkts)
  spoof_self  a packet from the daemon's own address at a QP connected to
              itself: dropped, and the daemon still answers another QP
  send_grh    a SEND lands in a posted receive, whose completion says
              IBV_WC_GRH (rxe's do: every RoCE packet has its IP header)
  moved       a QP connected to IP_OTHER (an address of this namespace)
              moved in SQD to IP_PEER: from then on a WRITE from
              IP_OTHER lands nothing, one from IP_PEER lands and is ACKed;
              ibv_query_qp's rq_psn is then 2, past the two taken
  srq_dup     SENDs into an SRQ (roce-qp-helper's "srq"), some sent again
              whole, one with its middle packet lost first: each takes
              one WQE, whole and once; the SRQ's limit event comes when
              the third message takes the SRQ below it, not before
  srq_rnr     a 3-packet SEND into an empty SRQ is RNR NAKed at its first
              PSN; once a WQE is posted it lands once
  xrc_srq     two XRC targets (roce-qp-helper's "xrc") into one SRQ: an
              empty SRQ's XRC RNR NAK, then a message to each with a
              packet lost, interleaved, sent again, one twice: each whole
              in its own WQE, once
  rnr_late    the daemon's requester (rnr_retry 2) against RNR NAKs each
              coming after its ACK timeout: the SEND still fails with
              RNR_RETRY_EXC_ERR
  xrc_gone    the SRQ destroyed while a message into it is half in: the
              rest of it, and a message to the other target, NAKed
              (invalid request), the daemon unharmed
Prints what it saw; exits 1 with a reason when the daemon did not do it.
"""
import os
import select
import socket
import struct
import subprocess
import sys
import time
import zlib

ROCE_PORT = 4791
MTU = 1024
OP_SEND_ONLY, OP_WRITE_FIRST, OP_WRITE_LAST, OP_WRITE_ONLY = 0x04, 0x06, 0x08, 0x0A
OP_WRITE_LAST_IMM, OP_WRITE_ONLY_IMM = 0x09, 0x0B
OP_READ, OP_ACK, OP_ATOMIC_ACK, OP_FETCH_ADD = 0x0C, 0x11, 0x12, 0x14
READ_RESPONSES = (0x0D, 0x0E, 0x0F, 0x10)
NAK_INVALID, NAK_ACCESS = 0x61, 0x62
SO_RCVBUFFORCE = 33     # Linux; not in the socket module

CASE, NS, SOCK, UID, RUNNER, HELPER, IP_D, IP_P = sys.argv[1:9]
IP_OTHER = sys.argv[9] if len(sys.argv) > 9 else None
TMO = float(os.environ.get("TMO", "10"))


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def ip_checksum(hdr):
    s = sum(struct.unpack("!10H", hdr))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def packet(src, body):
    """IPv4 + UDP + body + ICRC (RoCEv2's CRC32 over the masked headers)."""
    total = 28 + len(body) + 4
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 1, 0x4000, 64, 17, 0,
                     socket.inet_aton(src), socket.inet_aton(IP_D))
    ip = ip[:10] + struct.pack("!H", ip_checksum(ip)) + ip[12:]
    udp = struct.pack("!HHHH", 0xC001, ROCE_PORT, 8 + len(body) + 4, 0)
    masked = bytearray(ip + udp + body[:12])
    masked[1] = 0xFF                    # TOS
    masked[8] = 0xFF                    # TTL
    masked[10:12] = b"\xff\xff"         # IP checksum
    masked[26:28] = b"\xff\xff"         # UDP checksum
    masked[32] = 0xFF                   # BTH resv8a
    crc = zlib.crc32(b"\xff" * 8 + bytes(masked) + body[12:])
    return ip + udp + body + struct.pack("<I", crc)


def bth(op, qpn, psn, pad=0, ack=1):
    return struct.pack("!BBHII", op, pad << 4, 0xFFFF, qpn & 0xFFFFFF,
                       (ack << 31) | (psn & 0xFFFFFF))


def reth(va, rkey, length):
    return struct.pack("!QII", va, rkey, length)


class Wire:
    def __init__(self):
        self.tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        self.rx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
        # past rmem_max (we are root): a READ's responses come in a burst
        self.rx.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 << 20)
        # something listens on the port: no ICMP back to the daemon
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("0.0.0.0", ROCE_PORT))

    def send(self, op, qpn, psn, hdrs=b"", payload=b"", ack=1, src=None):
        pad = (-len(payload)) & 3
        body = bth(op, qpn, psn, pad, ack) + hdrs + payload + b"\0" * pad
        self.tx.sendto(packet(src or IP_P, body), (IP_D, 0))

    def recv(self, seconds, until=None):
        """(opcode, psn, the bytes after the BTH) of the daemon's packets."""
        out, end = [], time.time() + seconds
        self.dest = []                  # each packet's DestQP
        while True:
            left = end - time.time()
            if left <= 0 or (until and until(out)):
                return out
            if not select.select([self.rx], [], [], left)[0]:
                return out
            d = self.rx.recv(70000)
            ihl = (d[0] & 0xF) * 4
            if socket.inet_ntoa(d[12:16]) != IP_D or \
               struct.unpack("!H", d[ihl + 2:ihl + 4])[0] != ROCE_PORT:
                continue
            b = d[ihl + 8:]
            out.append((b[0], struct.unpack("!I", b[8:12])[0] & 0xFFFFFF, b[12:-4]))
            self.dest.append(struct.unpack("!I", b[4:8])[0] & 0xFFFFFF)


def syndromes(pkts):
    """The AETH syndromes of the ACKs and NAKs among pkts (RC's or XRC's)."""
    return [rest[0] for op, _, rest in pkts if op in (OP_ACK, 0xA0 | OP_ACK)]


class Helper:
    """roce-qp-helper in the daemon's namespace, as UID."""

    def __init__(self, peer, dqpn, rd=16, srq=None):
        cmd = ["ip", "netns", "exec", NS, "setpriv", "--reuid=" + UID, "--regid=" + UID,
               "--clear-groups", "--", "env", "IBVERBSD_SOCKET=" + SOCK, RUNNER, HELPER,
               "roce0", peer, str(dqpn), str(rd)] + ([srq] if srq else [])
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.buf = b""
        words = self.line().split()
        if len(words) != 8 or words[0] != "QPN":
            fail("roce-qp-helper: %r" % " ".join(words))
        self.qpn, self.rkey, self.addr, self.len = (int(w) for w in words[1::2])

    def line(self):
        """Its next line, read unbuffered: select() sees only the pipe."""
        fd = self.p.stdout.fileno()
        while b"\n" not in self.buf:
            if not select.select([fd], [], [], TMO)[0]:
                self.p.kill()
                fail("roce-qp-helper said nothing for %g s: is the daemon stuck?" % TMO)
            more = os.read(fd, 65536)
            if not more:
                fail("roce-qp-helper ended")
            self.buf += more
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def cmd(self, c):
        self.p.stdin.write((c + "\n").encode())
        self.p.stdin.flush()
        out = []
        while (line := self.line()) != "ok":
            out.append(line)
        return out

    def dump(self, off, n):
        return bytes.fromhex(self.cmd("dump %d %d" % (off, n))[0])

    def close(self):
        self.p.stdin.write(b"quit\n")
        self.p.stdin.flush()
        self.p.wait(TMO)


def case_write_past(w):
    h = Helper(IP_P, 0x123)
    va = h.addr + h.len - MTU
    w.send(OP_WRITE_FIRST, h.qpn, 0, reth(va, h.rkey, 2 * MTU), b"X" * MTU, ack=0)
    w.send(OP_WRITE_LAST, h.qpn, 1, b"", b"Y" * MTU)
    got = syndromes(w.recv(2, until=syndromes))
    tail = h.dump(h.len - MTU, MTU)
    h.close()
    print("answers %s; the MR's last KiB %r..." % ([hex(s) for s in got], tail[:8]))
    if NAK_ACCESS not in got:
        fail("no remote access NAK for a WRITE past its MR")
    if tail != b"B" * MTU:
        fail("a WRITE past its MR landed its first packet")


def case_write_imm_key(w):
    """A WRITE Only with Immediate with a wrong rkey: NAKed, nothing lands,
    the receive its immediate takes completes with LOC_ACCESS_ERR (8)
    before the QP's error flushes the next one (5)."""
    h = Helper(IP_P, 0x123)
    for off in (0, 64):
        if h.cmd("recv %d 64" % off) != ["posted"]:
            fail("could not post a receive")
    imm = struct.pack("!I", 0x12345678)
    w.send(OP_WRITE_ONLY_IMM, h.qpn, 0, reth(h.addr + 128, h.rkey ^ 0x10000, 8) + imm,
           b"K" * 8)
    got = syndromes(w.recv(2, until=syndromes))
    wcs = [wc.split()[4] for wc in srq_wcs(h)]
    mem = h.dump(128, 8)
    h.close()
    print("answers %s; receives' statuses %s" % ([hex(s) for s in got], wcs))
    if NAK_ACCESS not in got or mem == b"K" * 8:
        fail("a WRITE with immediate and a wrong rkey was not NAKed, or landed")
    if wcs != ["8", "5"]:
        fail("its receive did not complete with LOC_ACCESS_ERR, then the next flushed: %r" % wcs)


def case_write_imm_order(w):
    """Where a WRITE with immediate meets its receive and its key, as rxe's
    responder: a WRITE Only with Immediate and a wrong rkey, no receive
    posted, is RNR NAKed (the receive comes first) and lands nothing; a
    WRITE First with a wrong rkey is NAKed at once, before the Last with
    Immediate that would take a receive, so both posted receives are
    flushed (5), none completed LOC_ACCESS_ERR."""
    h = Helper(IP_P, 0x123)
    imm = struct.pack("!I", 0x12345678)
    w.send(OP_WRITE_ONLY_IMM, h.qpn, 0, reth(h.addr + 128, h.rkey ^ 0x10000, 8) + imm,
           b"K" * 8)
    rnr = syndromes(w.recv(2, until=syndromes))
    for off in (0, 64):
        if h.cmd("recv %d 64" % off) != ["posted"]:
            fail("could not post a receive")
    w.send(OP_WRITE_FIRST, h.qpn, 0, reth(h.addr + 256, h.rkey ^ 0x10000, 2 * MTU),
           b"F" * MTU, ack=0)
    w.send(OP_WRITE_LAST_IMM, h.qpn, 1, imm, b"L" * MTU)
    got = syndromes(w.recv(2, until=syndromes))
    wcs = [wc.split()[4] for wc in srq_wcs(h)]
    mem = h.dump(128, 8) + h.dump(256, 2 * MTU)
    h.close()
    print("no receive: %s; First refused: %s; receives' statuses %s" %
          ([hex(s) for s in rnr], [hex(s) for s in got], wcs))
    if not rnr or rnr[0] & 0xE0 != RNR_NAK:
        fail("a WRITE Only with Immediate, wrong rkey, no receive: not RNR NAKed first")
    if got[:1] != [NAK_ACCESS] or set(mem) & set(b"KFL"):
        fail("a WRITE First with a wrong rkey was not NAKed, or something landed")
    if wcs != ["5", "5"]:
        fail("the receives after a refused WRITE First: %r, not both flushed" % wcs)


def case_no_rd(w):
    h = Helper(IP_P, 0x123, rd=0)
    w.send(OP_READ, h.qpn, 0, reth(h.addr, h.rkey, 16))
    got = w.recv(2, until=syndromes)
    h.close()
    print("READ: %s" % [hex(op) for op, _, _ in got])
    if any(op in READ_RESPONSES for op, _, _ in got) or NAK_INVALID not in syndromes(got):
        fail("a READ to a QP without responder resources was not NAKed")
    h = Helper(IP_P, 0x123, rd=0)
    w.send(OP_FETCH_ADD, h.qpn, 0, struct.pack("!QIQQ", h.addr, h.rkey, 5, 0))
    got = w.recv(2, until=syndromes)
    first = h.dump(0, 8)
    h.close()
    print("FETCH_ADD: %s; memory %r" % ([hex(op) for op, _, _ in got], first))
    if any(op == OP_ATOMIC_ACK for op, _, _ in got) or NAK_INVALID not in syndromes(got):
        fail("an atomic to a QP without responder resources was not NAKed")
    if first != b"B" * 8:
        fail("an atomic to a QP without responder resources changed memory")


def case_dup_read(w):
    h = Helper(IP_P, 0x123)
    n = h.len // MTU
    w.send(OP_READ, h.qpn, 0, reth(h.addr, h.rkey, h.len))
    first = [p for p in w.recv(5, until=lambda o: len(o) >= n) if p[0] in READ_RESPONSES]
    if not first:
        fail("a 1 MiB READ got no response")
    t0 = time.monotonic()
    for _ in range(2000):
        w.send(OP_READ, h.qpn, 0, reth(h.addr, h.rkey, h.len))
    took = time.monotonic() - t0
    again = [p for p in w.recv(3) if p[0] in READ_RESPONSES]
    h.close()
    print("a 1 MiB READ: %d responses seen; 2000 duplicates: %d seen"
          % (len(first), len(again)))
    print("duplicates sent in %.3f s" % took)


def case_spoof_self(w):
    h = Helper(IP_D, 0)
    # a PSN ahead of the expected one: the responder would NAK, to itself
    w.send(OP_SEND_ONLY, h.qpn, 5, src=IP_D)
    time.sleep(0.5)
    state = h.cmd("state")
    other = Helper(IP_P, 0x456)
    w.send(OP_WRITE_ONLY, other.qpn, 0, reth(other.addr, other.rkey, 8), b"Q" * 8)
    got = syndromes(w.recv(3, until=syndromes))
    other.close()
    h.close()
    print("the self-connected QP in state %s; another QP's WRITE answered %s"
          % (state, [hex(s) for s in got]))
    if not got or got[0] >> 5 != 0:
        fail("the daemon did not ACK another QP's WRITE after the forged packet")


def case_moved(w):
    h = Helper(IP_OTHER, 0x123)
    w.send(OP_WRITE_ONLY, h.qpn, 0, reth(h.addr, h.rkey, 8), b"O" * 8, src=IP_OTHER)
    first = syndromes(w.recv(3, until=syndromes))
    if not first or first[0] >> 5 != 0:
        fail("no ACK for a WRITE from the first address: %r" % first)
    said = h.cmd("move " + IP_P)
    if said != ["moved"]:
        fail("the move: %r" % said)
    w.send(OP_WRITE_ONLY, h.qpn, 1, reth(h.addr + 8, h.rkey, 8), b"X" * 8, src=IP_OTHER)
    stale = syndromes(w.recv(1, until=syndromes))
    w.send(OP_WRITE_ONLY, h.qpn, 1, reth(h.addr + 16, h.rkey, 8), b"P" * 8)
    acked = syndromes(w.recv(3, until=syndromes))
    mem = h.dump(0, 24)
    psns = h.cmd("psn")
    h.close()
    print("after the move: the old address answered %s, the new %s; memory %r"
          % ([hex(s) for s in stale], [hex(s) for s in acked], mem))
    if stale or mem[8:16] != b"B" * 8:
        fail("a WRITE from the address the QP moved away from was taken")
    if not acked or acked[0] >> 5 != 0 or mem != b"O" * 8 + b"B" * 8 + b"P" * 8:
        fail("a WRITE from the address the QP moved to was not taken")
    # PSNs 0 and 1 taken, nothing sent: what rxe's query answers
    print("ibv_query_qp: %s" % psns)
    if psns != ["sq_psn 0 rq_psn 2"]:
        fail("ibv_query_qp's PSNs are not where the QP is: %r" % psns)


def case_send_grh(w):
    h = Helper(IP_P, 0x123)
    if h.cmd("recv 0 64") != ["posted"]:
        fail("roce-qp-helper could not post a receive")
    w.send(OP_SEND_ONLY, h.qpn, 0, b"", b"G" * 16)
    acked = syndromes(w.recv(3, until=syndromes))
    wc = h.cmd("poll")
    mem = h.dump(0, 16)
    h.close()
    print("SEND: answered %s; %s; memory %r" % ([hex(s) for s in acked], wc, mem))
    words = wc[0].split() if wc else []
    if len(words) != 9 or words[2] != "0" or mem != b"G" * 16:
        fail("the SEND did not land whole: %r" % wc)
    if not int(words[6], 16) & 1:      # IBV_WC_GRH
        fail("a receive completion on RoCE without IBV_WC_GRH: %r" % wc)


OP_SEND_FIRST, OP_SEND_MIDDLE, OP_SEND_LAST = 0x00, 0x01, 0x02
NAK_PSN, RNR_NAK = 0x60, 0x20


def srq_wcs(h, ms=300):
    """The SRQ QP's completions until none comes within ms."""
    out = []
    while (wc := h.cmd("wc %d" % ms)) != ["none"]:
        out.append(wc[0])
    return out


def send_msg(w, qpn, psn, data, skip=(), srqn=None):
    """A SEND of data from psn, MTU packets, those at the PSNs in skip lost;
    with srqn, an XRC SEND into that SRQ."""
    chunks = [data[i:i + MTU] for i in range(0, len(data), MTU)] or [b""]
    xrc, hdr = (0xA0, struct.pack("!I", srqn)) if srqn is not None else (0, b"")
    for i, c in enumerate(chunks):
        n = len(chunks)
        op = OP_SEND_ONLY if n == 1 else OP_SEND_FIRST if i == 0 else \
            OP_SEND_LAST if i == n - 1 else OP_SEND_MIDDLE
        if psn + i not in skip:
            w.send(xrc | op, qpn, psn + i, hdr, c, ack=int(i == n - 1))
    return psn + len(chunks)



def case_srq_dup(w):
    h = Helper(IP_P, 0x123, srq="srq")
    for off in (0, 8192, 16384, 24576):
        if h.cmd("recv %d 8192" % off) != ["posted"]:
            fail("could not post to the SRQ")
    if h.cmd("arm 2") != ["armed"]:
        fail("could not arm the SRQ's limit")
    one = b"A" * 100
    two = bytes(range(256)) * 12            # 3 packets
    three = b"C" * 50
    send_msg(w, h.qpn, 0, one)
    a1 = syndromes(w.recv(2, until=syndromes))
    for _ in range(3):                      # the link sends it again
        send_msg(w, h.qpn, 0, one)
    w.recv(0.5)
    # the middle packet lost: NAKed at its PSN, then all of it again
    send_msg(w, h.qpn, 1, two, skip=(2,))
    nak = [(op, psn, r[0]) for op, psn, r in w.recv(2, until=syndromes) if op == OP_ACK]
    send_msg(w, h.qpn, 1, two)
    a2 = [(psn, r[0]) for op, psn, r in w.recv(2, until=lambda o: any(
        p[0] == OP_ACK and p[1] == 3 for p in o)) if op == OP_ACK]
    ev1 = h.cmd("event 300")
    send_msg(w, h.qpn, 4, three)
    send_msg(w, h.qpn, 4, three)            # and that one twice
    w.recv(1)
    wcs = srq_wcs(h)
    ev2 = h.cmd("event 300")
    mem = h.dump(0, 100), h.dump(8192, len(two)), h.dump(16384, 50), h.dump(24576, 8)
    h.close()
    print("first ACK %s; NAK %s; ACKs %s" % (a1, nak, a2))
    print("completions: %s; events %s %s" % (wcs, ev1, ev2))
    want = ["wc wr_id 0 status 0 opcode 128 len 100",
            "wc wr_id 8192 status 0 opcode 128 len %d" % len(two),
            "wc wr_id 16384 status 0 opcode 128 len 50"]
    if wcs != want:
        fail("SENDs into an SRQ, some sent twice: completions %r, not %r" % (wcs, want))
    if mem != (one, two, three, b"B" * 8):
        fail("SENDs into an SRQ: the data is not what was sent")
    if not nak or nak[0][1:] != (2, NAK_PSN):
        fail("a lost middle packet was not NAKed at its PSN: %r" % nak)
    # 4 posted, limit 2: below it only once the third message took one
    if ev1 != ["none"] or ev2 != ["event 15"]:    # IBV_EVENT_SRQ_LIMIT_REACHED
        fail("SRQ limit event: %r before the third message, %r after" % (ev1, ev2))


def case_srq_rnr(w):
    h = Helper(IP_P, 0x123, srq="srq")
    data = b"R" * (3 * MTU)
    send_msg(w, h.qpn, 0, data)             # nothing posted
    got = [(psn, r[0]) for op, psn, r in w.recv(2, until=syndromes) if op == OP_ACK]
    if not got or got[0] != (0, RNR_NAK | 1):
        fail("an empty SRQ: no RNR NAK at the message's first PSN: %r" % got)
    w.recv(0.3)
    if h.cmd("recv 0 8192") != ["posted"]:
        fail("could not post to the SRQ")
    send_msg(w, h.qpn, 0, data)
    acks = [(psn, r[0]) for op, psn, r in w.recv(2, until=lambda o: any(
        p[0] == OP_ACK and p[1] == 2 for p in o)) if op == OP_ACK]
    wcs = srq_wcs(h)
    mem = h.dump(0, len(data))
    h.close()
    print("RNR %s; then %s; completions %s" % (got, acks, wcs))
    if (2, 0x1F) not in acks or wcs != ["wc wr_id 0 status 0 opcode 128 len %d" % len(data)] \
       or mem != data:
        fail("after an RNR NAK and a WQE posted, the SEND did not land once")


def case_xrc_srq(w):
    """Two XRC targets into one SRQ: a message of each with a packet lost,
    interleaved, sent again, their copies too."""
    h = Helper(IP_P, 0x123, srq="xrc")
    words = h.line().split()
    if len(words) != 5 or words[0] != "XRC":
        fail("roce-qp-helper xrc: %r" % words)
    t2, srqn = int(words[2]), int(words[4])
    # nothing posted yet: the second target's SEND is RNR NAKed, and sent
    # again below
    send_msg(w, t2, 0, b"R" * 8, srqn=srqn)
    got0 = w.recv(2, until=syndromes)
    rnr = [(q, psn, r[0]) for q, (op, psn, r) in zip(w.dest, got0) if op == 0xB1]
    if rnr != [(0x124, 0, RNR_NAK | 1)]:
        fail("an empty XRC SRQ: not one XRC RNR NAK to the second target's peer: %r" % rnr)
    for off in (0, 8192, 16384, 24576):
        if h.cmd("recv %d 8192" % off) != ["posted"]:
            fail("could not post to the XRC SRQ")
    a = bytes((i * 7) & 0xFF for i in range(3 * MTU))
    b = bytes((i * 13 + 1) & 0xFF for i in range(2 * MTU + 5))
    c = b"C" * 40
    send_msg(w, h.qpn, 0, a, skip=(1,), srqn=srqn)     # A's middle lost
    send_msg(w, t2, 0, b, skip=(2,), srqn=srqn)        # B's last lost
    got1 = w.recv(1)
    naks = sorted((q, psn, r[0]) for q, (op, psn, r) in zip(w.dest, got1) if op == 0xB1)
    send_msg(w, h.qpn, 0, a, srqn=srqn)                # all again
    send_msg(w, t2, 0, b, srqn=srqn)
    send_msg(w, t2, 0, b, srqn=srqn)                   # and B twice
    send_msg(w, h.qpn, 3, c, srqn=srqn)
    got2 = w.recv(1)
    ends = sorted(set((q, psn, r[0]) for q, (op, psn, r) in zip(w.dest, got2)
                      if op == 0xB1 and r[0] == 0x1F))
    wcs = sorted(srq_wcs(h))
    mem = h.dump(0, len(a)), h.dump(8192, len(b)), h.dump(16384, len(c)), h.dump(24576, 8)
    h.close()
    print("RNR NAK %s; NAKs %s; then ACKs %s" % (rnr, naks, ends))
    print("completions: %s" % wcs)
    want = sorted(["wc wr_id 0 status 0 opcode 128 len %d" % len(a),
                   "wc wr_id 8192 status 0 opcode 128 len %d" % len(b),
                   "wc wr_id 16384 status 0 opcode 128 len %d" % len(c)])
    if naks != [(0x123, 2, NAK_PSN), (0x124, 1, NAK_PSN)] and \
       naks != [(0x123, 1, NAK_PSN)]:
        fail("the lost packets were not NAKed as expected: %r" % naks)
    if wcs != want:
        fail("XRC SENDs into one SRQ from two targets: %r, not %r" % (wcs, want))
    if mem != (a, b, c, b"B" * 8):
        fail("XRC SENDs into one SRQ: the data is not what was sent")


def case_xrc_gone(w):
    """The XRC SRQ destroyed while a message into it is half in."""
    h = Helper(IP_P, 0x123, srq="xrc")
    words = h.line().split()
    t2, srqn = int(words[2]), int(words[4])
    h.cmd("recv 0 8192")
    hdr = struct.pack("!I", srqn)
    w.send(0xA0 | OP_SEND_FIRST, h.qpn, 0, hdr, b"F" * MTU, ack=0)
    w.send(0xA0 | OP_SEND_MIDDLE, h.qpn, 1, hdr, b"M" * MTU, ack=0)
    w.recv(0.3)
    gone = h.cmd("unsrq")
    w.send(0xA0 | OP_SEND_MIDDLE, h.qpn, 2, hdr, b"M" * MTU, ack=0)
    w.send(0xA0 | OP_SEND_LAST, h.qpn, 3, hdr, b"L" * 8)
    got = w.recv(2, until=syndromes)
    rest = [(q, psn, r[0]) for q, (op, psn, r) in zip(w.dest, got) if op == 0xB1]
    w.send(0xA0 | OP_SEND_ONLY, t2, 0, hdr, b"x" * 8)
    got = w.recv(2, until=syndromes)
    other = [(q, psn, r[0]) for q, (op, psn, r) in zip(w.dest, got) if op == 0xB1]
    h.close()
    print("destroyed: %s; the rest of the message answered %s; the other target %s"
          % (gone, rest, other))
    if gone != ["0"] or rest != [(0x123, 2, NAK_INVALID)] or other != [(0x124, 0, NAK_INVALID)]:
        fail("packets into a destroyed XRC SRQ were not NAKed as invalid requests")


def case_rnr_late(w):
    """RNR NAKs that come after the requester's ACK timeout (67 ms) each
    time: the QP's rnr_retry of 2 still runs out, after three."""
    h = Helper(IP_P, 0x123, srq="rnr2")
    if h.cmd("send 64") != ["0"]:
        fail("roce-qp-helper could not post a SEND")
    naks, end = 0, time.time() + 3
    while time.time() < end:
        # what came in 100 ms, then an RNR NAK (timer 10 us) for each
        for op, psn, _ in w.recv(0.1):
            if op == OP_SEND_ONLY:
                naks += 1
                w.send(OP_ACK, h.qpn, psn, struct.pack("!I", (RNR_NAK | 1) << 24))
    wc = h.cmd("poll")
    h.close()
    print("%d RNR NAKs sent, late; the SEND: %s" % (naks, wc))
    words = wc[0].split() if wc else []
    if len(words) != 9 or words[2] != "13":      # IBV_WC_RNR_RETRY_EXC_ERR
        fail("rnr_retry 2 against late RNR NAKs: not RNR_RETRY_EXC_ERR: %r" % wc)


globals()["case_" + CASE](Wire())
print("ok", flush=True)
