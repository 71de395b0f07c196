/*
 * preload-stdio: a TCP pair that talks through stdio streams, fdopen(3)
 * on its sockets, under librspreload (rsockets.sh, case "stdio").
 * Nothing here knows of rsockets.
 *
 *   preload-stdio server PORT  accept one connection on 127.0.0.1:PORT,
 *                              fdopen it "r+": fileno(3) is its fd;
 *                              read a line with fgets, answer it with
 *                              fprintf and fflush, fclose; the fd is then
 *                              closed (read fails with EBADF, not with
 *                              the connection's bytes), and a file opened
 *                              on its number reads as that file; print
 *                              "server ok"
 *   preload-stdio client PORT  connect, write a line with fputs through
 *                              fdopen "w" (the stream flushed, not
 *                              closed), read the answer with read(2);
 *                              then the peer's end of file; print
 *                              "client ok"
 * Every wait is bounded (alarm).  Exit status 0, or 1 with a message on
 * stderr.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "preload-test.h"

#define WAIT_S	20	/* the whole run, at most */
#define LINE	"a line through stdio\n"
#define ANSWER	"answer: " LINE
/* After the connection's bytes, what the server writes behind it. */
#define AFTER	"after\n"

static int die(const char *what)
{
	fprintf(stderr, "preload-stdio: %s: %s\n", what, strerror(errno));
	return 1;
}

/*
 * The fd number an fclose'd stream had, taken again by a file: reading
 * it must find the file's bytes.  Before the stream closed its rsocket,
 * the number stayed an rsocket's and read returned the connection's.
 */
static int reused(int fd)
{
	char path[] = "/tmp/preload-stdio.XXXXXX", buf[16] = "";
	int tmp, ret = 1;
	ssize_t n;

	tmp = mkstemp(path);
	if (tmp < 0)
		return die("mkstemp");
	unlink(path);
	if (write(tmp, AFTER, strlen(AFTER)) != (ssize_t)strlen(AFTER) ||
	    lseek(tmp, 0, SEEK_SET) != 0) {
		ret = die("the temporary file");
		goto out;
	}
	if (tmp != fd && dup2(tmp, fd) != fd) {
		ret = die("dup2 onto the closed number");
		goto out;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	if (n != (ssize_t)strlen(AFTER) || strcmp(buf, AFTER)) {
		fprintf(stderr, "preload-stdio: fd %d, a file now, read %zd bytes \"%s\"\n",
			fd, n, buf);
		goto out;
	}
	ret = 0;
out:
	if (tmp != fd)
		close(fd);
	close(tmp);
	return ret;
}

static int server(int port)
{
	int lfd, fd;
	char line[128], c;
	FILE *f;

	fd = accept_loopback(port, &lfd);
	if (fd < 0)
		return die("listen/accept");
	f = fdopen(fd, "r+");
	if (!f)
		return die("fdopen");
	if (fileno(f) != fd) {
		fprintf(stderr, "preload-stdio: fileno says %d, the socket is %d\n",
			fileno(f), fd);
		return 1;
	}
	if (!fgets(line, sizeof(line), f))
		return die("fgets");
	if (strcmp(line, LINE)) {
		fprintf(stderr, "preload-stdio: fgets read \"%s\"\n", line);
		return 1;
	}
	if (fprintf(f, "answer: %s", line) < 0 || fflush(f))
		return die("fprintf/fflush");
	if (fclose(f))
		return die("fclose");
	if (read(fd, &c, 1) != -1 || errno != EBADF) {
		fprintf(stderr, "preload-stdio: read after fclose: not EBADF (%s)\n",
			strerror(errno));
		return 1;
	}
	if (reused(fd))
		return 1;
	close(lfd);
	printf("server ok\n");
	return 0;
}

static int client(int port)
{
	struct sockaddr_in sin = loopback(port);
	char buf[128] = "";
	size_t got = 0;
	ssize_t n;
	FILE *f;
	int fd;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return die("socket");
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		return die("connect");
	f = fdopen(fd, "w");
	if (!f)
		return die("fdopen");
	if (fputs(LINE, f) < 0 || fflush(f))
		return die("fputs/fflush");
	while (got < sizeof(buf) - 1) {
		n = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (n < 0)
			return die("read");
		if (n == 0)
			break;	/* the server's fclose */
		got += (size_t)n;
	}
	if (strcmp(buf, ANSWER)) {
		fprintf(stderr, "preload-stdio: the answer was \"%s\"\n", buf);
		return 1;
	}
	if (fclose(f))
		return die("fclose");
	printf("client ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: preload-stdio server|client PORT\n");
		return 2;
	}
	alarm(WAIT_S);
	if (!strcmp(argv[1], "server"))
		return server(atoi(argv[2]));
	if (!strcmp(argv[1], "client"))
		return client(atoi(argv[2]));
	fprintf(stderr, "preload-stdio: unknown role %s\n", argv[1]);
	return 2;
}
