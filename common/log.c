/*
 * Line-oriented logging to stderr, journald-aware.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sys/stat.h>

#include "log.h"

static const char *log_ident = "ibverbsd";
static enum ibvd_log_level log_level = IBVD_LOG_INFO;
static int log_to_journal;

static const char *const level_names[] = {
	[IBVD_LOG_ERR] = "err",
	[IBVD_LOG_WARNING] = "warning",
	[IBVD_LOG_NOTICE] = "notice",
	[IBVD_LOG_INFO] = "info",
	[IBVD_LOG_DEBUG] = "debug",
};

/* systemd sets JOURNAL_STREAM=dev:ino when stderr is connected to journald. */
static int stderr_is_journal(void)
{
	const char *env = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!env || sscanf(env, "%llu:%llu", &dev, &ino) != 2)
		return 0;
	if (fstat(2, &st) < 0)
		return 0;
	return st.st_dev == dev && st.st_ino == ino;
}

void ibvd_log_init(const char *ident, enum ibvd_log_level level)
{
	log_ident = ident;
	log_level = level;
	log_to_journal = stderr_is_journal();
}

void ibvd_log_set_level(enum ibvd_log_level level)
{
	log_level = level;
}

enum ibvd_log_level ibvd_log_get_level(void)
{
	return log_level;
}

int ibvd_log_level_parse(const char *name)
{
	int i;

	for (i = IBVD_LOG_ERR; i <= IBVD_LOG_DEBUG; i++)
		if (strcasecmp(name, level_names[i]) == 0)
			return i;
	if (strcasecmp(name, "error") == 0)
		return IBVD_LOG_ERR;
	if (strcasecmp(name, "warn") == 0)
		return IBVD_LOG_WARNING;
	return -EINVAL;
}

const char *ibvd_log_level_name(enum ibvd_log_level level)
{
	if (level < IBVD_LOG_ERR || level > IBVD_LOG_DEBUG)
		return "unknown";
	return level_names[level];
}

/*
 * Control characters become \xNN: a client-supplied word with a newline in
 * it must not forge a log line of its own (or a journald "<N>" priority).
 */
static void escape_controls(const char *in, char *out, size_t outlen)
{
	size_t n = 0;

	for (; *in && n + 5 <= outlen; in++) {
		unsigned char c = (unsigned char)*in;

		if (c < 0x20 || c == 0x7f)
			n += (size_t)snprintf(out + n, outlen - n, "\\x%02x", c);
		else
			out[n++] = (char)c;
	}
	out[n] = '\0';
}

void ibvd_vlog(enum ibvd_log_level level, const char *fmt, va_list ap)
{
	char raw[1024], line[1024];
	int saved_errno = errno;

	if (level > log_level)
		return;
	vsnprintf(raw, sizeof(raw), fmt, ap);
	escape_controls(raw, line, sizeof(line));
	if (log_to_journal)
		fprintf(stderr, "<%d>%s\n", level, line);
	else
		fprintf(stderr, "%s: %s: %s\n", log_ident,
			ibvd_log_level_name(level), line);
	errno = saved_errno;
}

void ibvd_log(enum ibvd_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ibvd_vlog(level, fmt, ap);
	va_end(ap);
}

int ibvd_ratelimit_ok(struct ibvd_ratelimit *rl, unsigned int *missed)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (now.tv_sec != rl->window) {
		rl->window = now.tv_sec;
		rl->count = 0;
	}
	if (rl->count >= rl->burst) {
		rl->missed++;
		return 0;
	}
	rl->count++;
	*missed = rl->missed;
	rl->missed = 0;
	return 1;
}

int ibvd_vlog_ratelimited(struct ibvd_ratelimit *rl, enum ibvd_log_level level,
			  const char *fmt, va_list ap)
{
	/* Engine threads log through here too. */
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	char msg[1024];
	unsigned int missed;
	int ok;

	if (level > log_level)
		return 1;
	pthread_mutex_lock(&lock);
	ok = ibvd_ratelimit_ok(rl, &missed);
	pthread_mutex_unlock(&lock);
	if (!ok)
		return 0;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (missed)
		ibvd_log(level, "%s (%u similar messages suppressed)", msg, missed);
	else
		ibvd_log(level, "%s", msg);
	return 1;
}

void ibvd_log_ratelimited(struct ibvd_ratelimit *rl, enum ibvd_log_level level,
			  const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ibvd_vlog_ratelimited(rl, level, fmt, ap);
	va_end(ap);
}
