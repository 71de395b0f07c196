/*
 * fdopen(3) of an rsocket: a stdio stream whose reads, writes and close
 * are the preload library's own.
 *
 * A stream of the C library's fdopen reads, writes and closes its fd by
 * the C library's internal calls, which no preload sees: its reads and
 * writes would reach the CM channel's fd (EINVAL), and fclose(3) would
 * close that fd under the rsocket, whose mark then stays on the number
 * for the next file that takes it (whose reads would return the old
 * connection's bytes).  So an rsocket's stream is made by fopencookie(3)
 * on read(2), write(2) and close(2) as the program calls them here;
 * fileno(3) of it says the rsocket's fd, as for any fdopen'd stream.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>

#include "preload.h"

static int cookie_fd(void *cookie)
{
	return (int)(intptr_t)cookie;
}

static ssize_t rs_stream_read(void *cookie, char *buf, size_t len)
{
	return read(cookie_fd(cookie), buf, len);
}

/*
 * stdio takes a short write for an error (fopencookie(3)): all of it
 * goes, as the C library's own loop over write(2) sends it; on an error
 * what went is returned, 0 if nothing.
 */
static ssize_t rs_stream_write(void *cookie, const char *buf, size_t len)
{
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		n = write(cookie_fd(cookie), buf + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static int rs_stream_close(void *cookie)
{
	return close(cookie_fd(cookie));
}

EXPORT FILE *fdopen(int fd, const char *mode)
{
	static const cookie_io_functions_t io = {
		.read = rs_stream_read,
		.write = rs_stream_write,
		.close = rs_stream_close,	/* no seek: a socket has none */
	};
	FILE *f;

	if (!preload_is_rsocket(fd))
		return preload_real_fdopen(fd, mode);
	f = fopencookie((void *)(intptr_t)fd, mode, io);
	if (f)
		f->_fileno = fd;	/* fileno(3), as the C library's stream has it */
	return f;
}
