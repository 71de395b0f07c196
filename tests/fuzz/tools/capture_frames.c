/*
 * LD_PRELOAD shim that keeps the frames a client sends the daemon, to make
 * the frame harness's seed corpus from real traffic
 * (tests/fuzz/tools/capture-frames).  Every sendmsg() whose message starts
 * with our frame magic is written, header and payload as recvmsg() gives
 * them to the daemon, to $FUZZ_CAPTURE_DIR/TYPE-PID-N-SOCK (TYPE in hex,
 * N counting the process's frames, SOCK the connection's fd).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#define FRAME_MAGIC	0x44564249u

static void keep(int sock, const struct msghdr *mh)
{
	const char *dir = getenv("FUZZ_CAPTURE_DIR");
	static unsigned int n;
	uint8_t buf[65536];
	size_t len = 0, i;
	uint32_t magic;
	uint16_t type;
	char path[4096];
	int fd;

	for (i = 0; i < mh->msg_iovlen; i++) {
		size_t part = mh->msg_iov[i].iov_len;

		if (part > sizeof(buf) - len)
			return;
		memcpy(buf + len, mh->msg_iov[i].iov_base, part);
		len += part;
	}
	if (!dir || len < 16)
		return;
	memcpy(&magic, buf, sizeof(magic));
	memcpy(&type, buf + 6, sizeof(type));
	if (magic != FRAME_MAGIC)
		return;
	snprintf(path, sizeof(path), "%s/%04x-%d-%u-%d", dir, type, (int)getpid(),
		 n++, sock);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, buf, len) != (ssize_t)len)
		unlink(path);
	close(fd);
}

ssize_t sendmsg(int sock, const struct msghdr *mh, int flags)
{
	static ssize_t (*real)(int, const struct msghdr *, int);

	if (!real)
		real = (ssize_t (*)(int, const struct msghdr *, int))
			dlsym(RTLD_NEXT, "sendmsg");
	keep(sock, mh);
	return real(sock, mh, flags);
}
