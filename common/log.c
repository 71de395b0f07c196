/*
 * Line-oriented logging to stderr, journald-aware.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

void ibvd_vlog(enum ibvd_log_level level, const char *fmt, va_list ap)
{
	char line[1024];
	int saved_errno = errno;

	if (level > log_level)
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
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
