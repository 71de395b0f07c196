#!/usr/bin/env python3
"""Hostile MADs at a daemon's QP1 (roce-cm.sh).

Sends, through a raw IPv4 socket, from SRC (any address: the connected
peer's own included) to DST's QP1, every packet with a good ICRC so that
the CM's decoder and state machine see it:
  - random 256-byte MADs, and MADs of other sizes or another Q_Key;
  - the CM MADs of the reference capture with random bytes changed;
  - well-formed REQs and SIDR REQs with rdma_cm's header for ports in
    AVOID's complement (nobody listens there: each earns a REJ or a SIDR
    REP, no state);
  - REP, RTU, REJ, MRA, DREQ and DREP naming random comm IDs (an
    attacker who cannot see the connection cannot know them).
Usage: roce-mad-hostile.py PCAP SRC DST COUNT SEED AVOID-PORT...
Prints how many packets it sent.

       roce-mad-hostile.py probe SRC DST PKEY SRC-QP PORT [HDR-SRC]
One REQ for PORT to DST's QP1, with BTH P_Key PKEY and DETH source QP
SRC-QP, its rdma_cm header naming HDR-SRC (default SRC) as its source;
prints what DST's QP1 sends back to SRC within 2 s ("answer: attr 0x0012
to QP 0x000001", a REJ) or "no answer".

       roce-mad-hostile.py resend SRC DST PORT COMM-ID
One REQ for PORT to DST's QP1 naming local comm ID COMM-ID, and after
0.5 s the same REQ again, as a peer resends one it got no answer to;
prints each MAD DST's QP1 sends back within 2 s of the second
("answer: attr 0x0011 remote comm ID 0x00000000", an MRA).

       roce-mad-hostile.py local6 SRC SRC-IF DST DST-IF PKEY [freebind]
One MAD with BTH P_Key PKEY and a good ICRC from [SRC%SRC-IF] to
[DST%DST-IF]'s QP1 through an ordinary UDP socket, as any process of DST's
host may send one (with IPV6_FREEBIND, SRC need not be an address of the
host).
"""
import importlib.util
import os
import random
import socket
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("roce_hostile",
                                               os.path.join(HERE, "roce-hostile.py"))
rh = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rh)

GSI_QKEY = 0x80010000
IPV6_FREEBIND = 78                 # linux/in6.h
UD_SEND_ONLY = 0x64
MAD_LEN = 256
# MAD header: base 1, class CM (7), version 2, method Send (3)
ATTRS = [0x0010, 0x0011, 0x0012, 0x0013, 0x0014, 0x0015, 0x0016, 0x0017, 0x0018]


def qp1_packet(mad, qkey=GSI_QKEY, src_qp=1, pkey=0xFFFF):
    """BTH (UD SEND_ONLY to QP1), DETH, the MAD, room for the ICRC."""
    bth = struct.pack("!BBHII", UD_SEND_ONLY, 0, pkey, 1, random.randrange(1 << 24))
    deth = struct.pack("!II", qkey, src_qp)
    return bth + deth + mad + b"\0\0\0\0"


def mad_header(attr, tid):
    return struct.pack("!BBBBHHQHHI", 1, 7, 2, 3, 0, 0, tid, attr, 0, 0)


def capture_mads(caps):
    """The MADs of the capture's QP1 packets."""
    out = []
    for ip in caps:
        ihl = (ip[0] & 0xF) * 4
        udp = ip[ihl + 8:]
        if len(udp) >= 12 + 8 + MAD_LEN + 4 and udp[0] == UD_SEND_ONLY and \
                struct.unpack("!I", udp[4:8])[0] & 0xFFFFFF == 1:
            out.append(udp[20:20 + MAD_LEN])
    return out


def forged_request(rng, avoid, src, dst):
    """A REQ or SIDR REQ to a TCP/UDP port nobody listens on."""
    port = rng.randrange(1, 65536)
    while port in avoid:
        port = rng.randrange(1, 65536)
    sidr = rng.randrange(2)
    ps = 0x0111 if sidr else 0x0106
    sid = (ps << 16) | port
    cma = struct.pack("!BBH", 0, 0x40, rng.randrange(1 << 16)) + \
        b"\0" * 12 + socket.inet_aton(src) + b"\0" * 12 + socket.inet_aton(dst)
    if sidr:
        body = struct.pack("!IHHQ", rng.randrange(1 << 32), 0xFFFF, 0, sid) + cma
        attr = 0x0017
    else:
        body = struct.pack("!IIQ", rng.randrange(1 << 32), 0, sid) + bytes(124) + cma
        attr = 0x0010
    mad = mad_header(attr, rng.randrange(1 << 64)) + body
    return mad + bytes(MAD_LEN - len(mad))


def forged_answer(rng):
    """An answer of some kind naming random comm IDs."""
    attr = rng.choice(ATTRS[1:7])
    body = struct.pack("!II", rng.randrange(1 << 32), rng.randrange(1 << 32))
    body += bytes(rng.randrange(256) for _ in range(rng.randrange(0, 32)))
    mad = mad_header(attr, rng.randrange(1 << 64)) + body
    return mad + bytes(MAD_LEN - len(mad))


def request_for(port, src, dst, comm_id=None):
    """A REQ (not a SIDR REQ) for PORT, with COMM-ID if given."""
    rng = random.Random(port)
    avoid = set(range(1, 65536)) - {port}
    mad = forged_request(rng, avoid, src, dst)
    while mad[24 + 8:24 + 16] != struct.pack("!Q", (0x0106 << 16) | port):
        mad = forged_request(rng, avoid, src, dst)
    if comm_id is not None:
        mad = mad[:24] + struct.pack("!I", comm_id) + mad[28:]
    return mad


def answers(rx, src, dst, seconds):
    """The MADs DST's QP1 sends to SRC's QP1 for SECONDS: (attr, MAD)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            pkt = rx.recv(4096)
        except socket.timeout:
            continue
        ihl = (pkt[0] & 0xF) * 4
        if socket.inet_ntoa(pkt[12:16]) != dst or socket.inet_ntoa(pkt[16:20]) != src:
            continue
        udp = pkt[ihl:]
        if len(udp) < 8 + 12 + 8 + 24 or struct.unpack("!H", udp[2:4])[0] != 4791:
            continue
        bth = udp[8:20]
        deth = udp[20:28]
        if bth[0] != UD_SEND_ONLY or struct.unpack("!I", deth[4:8])[0] & 0xFFFFFF != 1:
            continue
        mad = udp[28:28 + MAD_LEN]
        yield struct.unpack("!H", mad[16:18])[0], mad, \
            struct.unpack("!I", bth[4:8])[0] & 0xFFFFFF


def listening_sockets():
    rx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
    rx.settimeout(0.2)
    tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    return rx, tx


def probe(src, dst, pkey, src_qp, port, hdr_src):
    """One REQ, then DST's QP1 answers to SRC for 2 s (raw UDP socket)."""
    rx, tx = listening_sockets()
    mad = request_for(port, hdr_src, dst)
    tx.sendto(rh.icrc(rh.ip_udp(src, dst, qp1_packet(mad, src_qp=src_qp, pkey=pkey), 7)),
              (dst, 0))
    for attr, _, qpn in answers(rx, src, dst, 2):
        print("answer: attr 0x%04x to QP 0x%06x" % (attr, qpn))
        return
    print("no answer")


def resend(src, dst, port, comm_id):
    """The same REQ twice; every answer to the second, with the comm ID
    it names as ours (the remote one, from DST)."""
    rx, tx = listening_sockets()
    pkt = rh.icrc(rh.ip_udp(src, dst, qp1_packet(request_for(port, src, dst, comm_id)), 7))
    tx.sendto(pkt, (dst, 0))
    for attr, mad, _ in answers(rx, src, dst, 0.5):
        print("first answer: attr 0x%04x" % attr)
    tx.sendto(pkt, (dst, 0))
    n = 0
    for attr, mad, _ in answers(rx, src, dst, 2):
        print("answer: attr 0x%04x remote comm ID 0x%08x" %
              (attr, struct.unpack("!I", mad[28:32])[0]))
        n += 1
    if not n:
        print("no answer")


def local6(src, src_if, dst, dst_if, pkey, freebind):
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    if freebind:
        s.setsockopt(socket.IPPROTO_IPV6, IPV6_FREEBIND, 1)
    s.bind((src, 0, 0, socket.if_nametoindex(src_if)))
    sport = s.getsockname()[1]
    mad = mad_header(0x0010, random.randrange(1 << 64))
    payload = qp1_packet(mad + bytes(MAD_LEN - len(mad)), pkey=pkey)
    s.sendto(rh.icrc6(src, dst, sport, payload), (dst, 4791, 0, socket.if_nametoindex(dst_if)))


def main():
    if sys.argv[1] == "local6":
        local6(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6], 0),
               len(sys.argv) > 7 and sys.argv[7] == "freebind")
        return
    if sys.argv[1] == "resend":
        resend(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5], 0))
        return
    if sys.argv[1] == "probe":
        src, dst = sys.argv[2:4]
        pkey, src_qp, port = (int(v, 0) for v in sys.argv[4:7])
        probe(src, dst, pkey, src_qp, port, sys.argv[7] if len(sys.argv) > 7 else src)
        return
    path, src, dst, count, seed = sys.argv[1:6]
    avoid = {int(p) for p in sys.argv[6:]}
    rng = random.Random(int(seed))
    random.seed(int(seed))
    mads = capture_mads(rh.read_pcap(path))
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    sent = 0
    for n in range(int(count)):
        kind = n % 6
        if kind == 0:
            payload = qp1_packet(bytes(rng.randrange(256) for _ in range(MAD_LEN)))
        elif kind == 1:
            size = rng.choice([0, 24, 255, 257, 512])
            qkey = rng.choice([GSI_QKEY, 0, 0x80010001])
            payload = qp1_packet(bytes(rng.randrange(256) for _ in range(size)), qkey)
        elif kind == 2 and mads:
            mad = bytearray(rng.choice(mads))
            for _ in range(rng.randint(1, 8)):
                mad[rng.randrange(MAD_LEN)] = rng.randrange(256)
            payload = qp1_packet(bytes(mad))
        elif kind == 3:
            payload = qp1_packet(forged_request(rng, avoid, src, dst))
        else:
            payload = qp1_packet(forged_answer(rng))
        pkt = rh.icrc(rh.ip_udp(src, dst, payload, (n % 0xFFFE) + 1))
        try:
            s.sendto(pkt, (dst, 0))
            sent += 1
        except OSError:
            pass
    print(sent)


if __name__ == "__main__":
    main()
