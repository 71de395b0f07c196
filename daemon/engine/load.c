/*
 * Is it fair for an idle engine thread to spin?
 *
 * Spinning for a while after the last piece of work saves the ~30 us
 * wakeups of a sleeping thread (perf-anchors) when the next message comes
 * soon, as in a ping-pong whose clients block in ibv_get_cq_event.  But
 * when every CPU is taken by a runnable thread (clients that busy-poll
 * their CQs), a spinning engine keeps one of them, likely the one waiting
 * for what we just completed, off its CPU, and on a small machine that
 * costs whole scheduler slices.  Then it is better to sleep at once and be
 * kicked.
 *
 * "Crowded" needs both signs: no idle CPU time over the last
 * ENG_LOAD_WINDOW_NS (/proc/stat, a 3 us read at most once per window),
 * and right now more runnable threads than CPUs (/proc/loadavg's R field,
 * half a microsecond; we count ourselves).  Idle time alone would blame
 * our own spinning next to one busy-polling client, which hurts nobody;
 * the runnable count alone flickers as clients wake up to handle events.
 * Without procfs the answer is always "no".
 */
#include <config.h>

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/sysinfo.h>

#include "internal.h"

void ibvd_eng_load_init(struct eng_load *l)
{
	l->stat_fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
	l->loadavg_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
	l->ncpus = (unsigned long)get_nprocs();
	l->busy = false;
	l->checked = 0;
	l->total = l->idle = 0;
}

void ibvd_eng_load_fini(struct eng_load *l)
{
	if (l->stat_fd >= 0)
		close(l->stat_fd);
	if (l->loadavg_fd >= 0)
		close(l->loadavg_fd);
	l->stat_fd = l->loadavg_fd = -1;
}

/* Read a small procfs file from its start into buf (NUL-terminated). */
static bool read_proc(int fd, char *buf, size_t len)
{
	ssize_t n;

	if (fd < 0)
		return false;
	n = pread(fd, buf, len - 1, 0);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return true;
}

/* Refresh l->busy from the CPU time counters, once per window. */
static void judge_window(struct eng_load *l, uint64_t now)
{
	unsigned long long v[8] = { 0 }, total = 0, idle;
	char buf[256];
	int i;

	if (now - l->checked < ENG_LOAD_WINDOW_NS)
		return;
	l->checked = now;
	/* cpu  user nice system idle iowait irq softirq steal (USER_HZ) */
	if (!read_proc(l->stat_fd, buf, sizeof(buf)) ||
	    sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
		   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) < 4)
		return;
	for (i = 0; i < 8; i++)
		total += v[i];
	idle = v[3] + v[4];
	/* Less than a tenth idle (and a previous sample to compare with). */
	l->busy = l->total && total > l->total &&
		  (idle - l->idle) * 10 < total - l->total;
	l->total = total;
	l->idle = idle;
}

static bool more_runnable_than_cpus(const struct eng_load *l)
{
	unsigned long running;
	char buf[128];

	/* "0.26 0.39 0.35 3/94 30865": R/T is the fourth field. */
	if (!read_proc(l->loadavg_fd, buf, sizeof(buf)) ||
	    sscanf(buf, "%*s %*s %*s %lu/", &running) != 1)
		return false;
	return running > l->ncpus;
}

bool ibvd_eng_crowded(struct eng_load *l, uint64_t now)
{
	judge_window(l, now);
	return l->busy && more_runnable_than_cpus(l);
}
