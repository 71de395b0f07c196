#!/usr/bin/env python3
"""Hostile RoCEv2 traffic at a daemon's RoCE device (roce-hostile.sh).

Sends, through a raw IPv4 socket, from the namespace it runs in to DST:
  - random bytes as UDP payloads to port 4791;
  - every RoCEv2 packet of the reference capture, re-addressed to DST and
    mutated (random bytes changed, truncated, lengthened), some with their
    ICRC made good again after the mutation so that the parsers behind the
    ICRC check see them too;
  - well-formed packets for every opcode to QP numbers that exist
    (QPN given on the command line) and that do not, with random PSNs,
    keys and lengths.
Usage: roce-hostile.py PCAP SRC DST COUNT SEED [QPN...]
Prints how many packets it sent.  The daemon must survive and keep its
promises; the shell test checks that.

       roce-hostile.py --ud SRC DST QPN QKEY
sends one well-formed UD SEND_ONLY datagram (source QP 0x10, 64 bytes of
payload) from SRC to QPN at DST with that Q_Key, as a peer would.

       roce-hostile.py --run SRC DST QPN QKEY N
sends N such datagrams (PSNs 0 to N-1) as one run: a single IP datagram
with identification 0 that a receiver cuts into N good packets, as a
peer's UDP segmentation offload sends them (daemon/transport/roce/gso.c).
"""
import random
import socket
import struct
import sys
import zlib

ROCE_PORT = 4791


def read_pcap(path):
    """IPv4 packets (starting at the IP header) of a classic Ethernet pcap."""
    data = open(path, "rb").read()
    off = 24
    out = []
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack("<IIII", data[off:off + 16])
        off += 16
        frame = data[off:off + incl]
        off += incl
        if len(frame) > 42 and frame[12:14] == b"\x08\x00" and frame[23] == 17:
            ihl = (frame[14] & 0xF) * 4
            ip = frame[14:]
            if struct.unpack(">H", ip[ihl + 2:ihl + 4])[0] == ROCE_PORT:
                out.append(ip[:struct.unpack(">H", ip[2:4])[0]])
    return out


def checksum(hdr):
    s = sum(struct.unpack("!10H", hdr))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ip_udp(src, dst, payload, ident, sport=None):
    total = 20 + 8 + len(payload)
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, ident, 0x4000, 64, 17, 0,
                      socket.inet_aton(src), socket.inet_aton(dst))
    hdr = hdr[:10] + struct.pack("!H", checksum(hdr)) + hdr[12:]
    if sport is None:
        sport = 0xC000 | (ident & 0x3FFF)
    udp = struct.pack("!HHHH", sport, ROCE_PORT, 8 + len(payload), 0)
    return hdr + udp + payload


def icrc(pkt):
    """The ICRC of an IPv4 RoCE packet whose last 4 bytes are the ICRC."""
    if len(pkt) < 44:
        return pkt                 # no room for headers and an ICRC
    m = bytearray(pkt[:40])
    m[1] = 0xFF                    # TOS
    m[8] = 0xFF                    # TTL
    m[10:12] = b"\xff\xff"         # IP checksum
    m[26:28] = b"\xff\xff"         # UDP checksum
    m[32] = 0xFF                   # BTH FECN, BECN, reserved
    crc = zlib.crc32(b"\xff" * 8 + bytes(m) + pkt[40:-4])
    return pkt[:-4] + struct.pack("<I", crc)


def icrc6(src, dst, sport, payload):
    """payload (its last 4 bytes the ICRC) with the ICRC it has when a UDP
    socket sends it from [src]:sport to [dst]:4791 over IPv6."""
    udp_len = 8 + len(payload)
    m = bytearray(b"\x6f\xff\xff\xff")   # version; traffic class, flow label
    m += struct.pack("!HBB", udp_len, 17, 0xFF) # hop limit masked
    m += socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst)
    m += struct.pack("!HHHH", sport, ROCE_PORT, udp_len, 0xFFFF)
    bth = bytearray(payload[:12])
    bth[4] = 0xFF                  # BTH FECN, BECN, reserved
    crc = zlib.crc32(b"\xff" * 8 + bytes(m) + bytes(bth) + payload[12:-4])
    return payload[:-4] + struct.pack("<I", crc)


def readdress(pkt, src, dst, ident):
    """pkt's UDP payload, re-sent from src to dst with a good ICRC."""
    ihl = (pkt[0] & 0xF) * 4
    return icrc(ip_udp(src, dst, pkt[ihl + 8:], ident))


def mutate(rng, pkt):
    b = bytearray(pkt)
    kind = rng.randrange(4)
    if kind == 0:                  # a few bytes changed past the IP/UDP headers
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(28, len(b))
            b[i] = rng.randrange(256)
    elif kind == 1:                # truncated
        b = b[:rng.randrange(28, len(b))]
    elif kind == 2:                # lengthened
        b += bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    else:                          # the BTH opcode replaced
        b[28] = rng.randrange(256)
    return bytes(b)


def fix_lengths(b):
    """IP and UDP lengths that fit a mutated packet, so that it gets past them."""
    b = bytearray(b)
    b[2:4] = struct.pack("!H", len(b))
    b[10:12] = b"\0\0"
    b[10:12] = struct.pack("!H", checksum(bytes(b[:20])))
    b[24:26] = struct.pack("!H", len(b) - 20)
    return bytes(b)


def forged(rng, qpns):
    """A well-formed request or response for a random opcode and QP."""
    op = rng.choice(list(range(0x00, 0x18)) + list(range(0x20, 0x2C)) + [0x64, 0x65])
    qpn = rng.choice(qpns + [rng.randrange(1 << 24)]) if qpns else rng.randrange(1 << 24)
    bth = struct.pack("!BBHI I", op, rng.randrange(256) & 0xB0, 0xFFFF, qpn,
                      (rng.randrange(2) << 31) | rng.randrange(1 << 24))
    ext = bytes(rng.randrange(256) for _ in range(rng.choice([0, 4, 8, 16, 28, 32])))
    pay = bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 256, 1024])))
    return bth + ext + pay + b"\0\0\0\0"


def ud_datagram(src, dst, qpn, qkey):
    """One UD SEND_ONLY (opcode 0x64) with its DETH, as a peer sends it."""
    bth = struct.pack("!BBHII", 0x64, 0, 0xFFFF, qpn & 0xFFFFFF, 0)
    deth = struct.pack("!II", qkey, 0x10)
    return icrc(ip_udp(src, dst, bth + deth + bytes(64) + b"\0\0\0\0", 1))


def ud_run(src, dst, qpn, qkey, n):
    """n UD SEND_ONLY datagrams as one run: its identification 0 (DF set,
    as an unconnected raw socket leaves it), segment i as segmentation
    makes it (identification i, its own lengths, the run's ports), each
    with the ICRC it has then."""
    sport = 0xC001
    segs = []
    for i in range(n):
        bth = struct.pack("!BBHII", 0x64, 0, 0xFFFF, qpn & 0xFFFFFF, i)
        deth = struct.pack("!II", qkey, 0x10)
        pkt = icrc(ip_udp(src, dst, bth + deth + bytes(64) + b"\0\0\0\0", i, sport))
        segs.append(pkt[28:])
    return ip_udp(src, dst, b"".join(segs), 0, sport)


def main():
    if sys.argv[1] == "--run":
        src, dst, qpn, qkey, n = sys.argv[2:7]
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        s.sendto(ud_run(src, dst, int(qpn, 0), int(qkey, 0), int(n)), (dst, 0))
        print(1)
        return
    if sys.argv[1] == "--ud":
        src, dst, qpn, qkey = sys.argv[2:6]
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        s.sendto(ud_datagram(src, dst, int(qpn, 0), int(qkey, 0)), (dst, 0))
        print(1)
        return
    path, src, dst, count, seed = sys.argv[1:6]
    qpns = [int(q, 0) for q in sys.argv[6:]]
    rng = random.Random(int(seed))
    caps = read_pcap(path)
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    sent = 0
    for n in range(int(count)):
        ident = (n % 0xFFFE) + 1
        kind = n % 4
        if kind == 0:
            pkt = ip_udp(src, dst, bytes(rng.randrange(256)
                                         for _ in range(rng.randrange(0, 300))), ident)
        elif kind == 1:
            pkt = fix_lengths(mutate(rng, readdress(rng.choice(caps), src, dst, ident)))
        elif kind == 2:
            pkt = icrc(fix_lengths(mutate(rng, readdress(rng.choice(caps), src, dst, ident))))
        else:
            pkt = icrc(ip_udp(src, dst, forged(rng, qpns), ident))
        try:
            s.sendto(pkt, (dst, 0))
            sent += 1
        except OSError:
            pass                   # a length the kernel refuses: not sent
    print(sent)


if __name__ == "__main__":
    main()
