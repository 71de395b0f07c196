/*
 * Logging for the daemon and tools: one line per message on stderr, with a
 * "<N>" priority prefix when stderr is the journal (so journald records the
 * priority), otherwise "ibverbsd: LEVEL: ".  Library code never logs here.
 */
#ifndef IBVD_LOG_H
#define IBVD_LOG_H

#include <stdarg.h>
#include <time.h>

enum ibvd_log_level {
	IBVD_LOG_ERR = 3,
	IBVD_LOG_WARNING = 4,
	IBVD_LOG_NOTICE = 5,
	IBVD_LOG_INFO = 6,
	IBVD_LOG_DEBUG = 7,
};

/* ident: program name used as prefix; level: the most verbose level shown. */
void ibvd_log_init(const char *ident, enum ibvd_log_level level);
void ibvd_log_set_level(enum ibvd_log_level level);
enum ibvd_log_level ibvd_log_get_level(void);

/* "err", "warning", "notice", "info", "debug" -> level; -EINVAL if unknown. */
int ibvd_log_level_parse(const char *name);
const char *ibvd_log_level_name(enum ibvd_log_level level);

void ibvd_log(enum ibvd_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void ibvd_vlog(enum ibvd_log_level level, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

/*
 * Allow a burst of `burst` events per second, then stay quiet and count
 * what was suppressed.  Used to keep a misbehaving client from flooding the
 * log.  ibvd_ratelimit_ok() returns 1 if the caller may log; *missed then
 * holds how many events were suppressed since the last permitted one.
 */
struct ibvd_ratelimit {
	time_t window;
	unsigned int burst;
	unsigned int count;
	unsigned int missed;
};

#define IBVD_RATELIMIT_INIT(b)	{ .burst = (b) }

int ibvd_ratelimit_ok(struct ibvd_ratelimit *rl, unsigned int *missed);

/*
 * One line through rl, saying how many were suppressed since the last one.
 * Thread-safe (ibvd_ratelimit_ok() alone is not).
 */
void ibvd_log_ratelimited(struct ibvd_ratelimit *rl, enum ibvd_log_level level,
			  const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * The same with a va_list; 0 if rl suppressed the line (a line below the
 * log level is not suppressed, only not wanted), else 1.
 */
int ibvd_vlog_ratelimited(struct ibvd_ratelimit *rl, enum ibvd_log_level level,
			  const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

#define log_err(...)	ibvd_log(IBVD_LOG_ERR, __VA_ARGS__)
#define log_warn(...)	ibvd_log(IBVD_LOG_WARNING, __VA_ARGS__)
#define log_notice(...)	ibvd_log(IBVD_LOG_NOTICE, __VA_ARGS__)
#define log_info(...)	ibvd_log(IBVD_LOG_INFO, __VA_ARGS__)
#define log_debug(...)	ibvd_log(IBVD_LOG_DEBUG, __VA_ARGS__)

#endif /* IBVD_LOG_H */
