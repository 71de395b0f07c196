#!/usr/bin/python3
# preload-asyncio: an asyncio echo pair (rsockets.sh, case "epoll"), run
# under librspreload: asyncio waits in epoll_wait, its sockets are
# rsockets.  Nothing here knows of rsockets.
#
#   preload-asyncio.py server PORT        echo one connection; print
#                                         "echoed BYTES"
#   preload-asyncio.py client PORT BYTES  open_connection, send BYTES in
#                                         pieces while reading the echo,
#                                         compare; print "echoed BYTES"
# Every wait has a timeout: exit status 1 with a message, never a hang.
import asyncio
import hashlib
import sys

WAIT_S = 20


async def server(port):
    done = asyncio.get_running_loop().create_future()

    async def handle(reader, writer):
        total = 0
        while True:
            data = await asyncio.wait_for(reader.read(65536), WAIT_S)
            if not data:
                break
            total += len(data)
            writer.write(data)
            await asyncio.wait_for(writer.drain(), WAIT_S)
        writer.close()
        await writer.wait_closed()
        done.set_result(total)

    srv = await asyncio.start_server(handle, "127.0.0.1", port)
    total = await asyncio.wait_for(done, WAIT_S * 3)
    srv.close()
    print("echoed", total)


def pattern(n):
    return hashlib.sha256(b"seed").digest() * (n // 32 + 1)


async def client(port, nbytes):
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port), WAIT_S)
    data = pattern(nbytes)[:nbytes]

    async def send():
        for off in range(0, nbytes, 10000):
            writer.write(data[off:off + 10000])
            await asyncio.wait_for(writer.drain(), WAIT_S)
        writer.write_eof()

    sender = asyncio.ensure_future(send())
    got = bytearray()
    while len(got) < nbytes:
        piece = await asyncio.wait_for(reader.read(65536), WAIT_S)
        if not piece:
            sys.exit("preload-asyncio: end of file after %d bytes" % len(got))
        got += piece
    await sender
    if bytes(got) != data:
        sys.exit("preload-asyncio: the echo differs from what was sent")
    if await asyncio.wait_for(reader.read(1), WAIT_S) != b"":
        sys.exit("preload-asyncio: no end of file after the echo")
    writer.close()
    print("echoed", nbytes)


def main():
    try:
        if len(sys.argv) == 3 and sys.argv[1] == "server":
            asyncio.run(server(int(sys.argv[2])))
        elif len(sys.argv) == 4 and sys.argv[1] == "client":
            asyncio.run(client(int(sys.argv[2]), int(sys.argv[3])))
        else:
            sys.exit("usage: preload-asyncio.py server PORT | client PORT BYTES")
    except asyncio.TimeoutError:
        sys.exit("preload-asyncio: timed out waiting")


main()
