/*
 * Client memory: ATTACH_MEMORY (the client's /proc/self/mem fd, through
 * which the engine reaches registered memory), the checks a registration
 * makes against the client's address space (the /proc/self/maps fd it
 * sent beside it: the daemon, an unprivileged user, could not open another
 * uid's maps itself), and
 * RLIMIT_MEMLOCK accounting as the kernel's ib_umem does it: pages spanned,
 * charged per client process across all its contexts, checked against the
 * process's own soft limit unless it has CAP_IPC_LOCK.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "verbs/context.h"
#include "core/device.h"
#include "engine/watch/copy_watch.h"
#include "ibverbsd.pb-c.h"
#include "log.h"
#include "maps.h"
#include "config/config.h"
#include "server/call.h"
#include "server/daemon.h"
#include "server/session.h"
#include "verbs/fdstat.h"
#include "verbs/verbs.h"

#define CAP_IPC_LOCK_BIT	14

/* Pinned pages of one client process (pid + start time: PID reuse safe). */
struct ibvd_memlock {
	LIST_ENTRY(ibvd_memlock) link;
	pid_t pid;
	unsigned long long start_time;
	unsigned int refs;		/* ibvd_mem objects (contexts) */
	uint64_t pages;
};

static LIST_HEAD(, ibvd_memlock) memlocks = LIST_HEAD_INITIALIZER(memlocks);

static struct ibvd_ratelimit memlock_rl = IBVD_RATELIMIT_INIT(5);

/* ---- /proc readers ---------------------------------------------------- */

/* Read /proc/PID/name into buf (NUL-terminated); bytes or a negative errno. */
static ssize_t proc_read(pid_t pid, const char *name, char *buf, size_t size)
{
	char path[64];
	ssize_t n, total = 0;
	int fd, ret;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while ((size_t)total < size - 1) {
		n = read(fd, buf + total, size - 1 - (size_t)total);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			close(fd);
			return ret;
		}
		if (n == 0)
			break;
		total += n;
	}
	close(fd);
	buf[total] = '\0';
	return total;
}

/* The process's start time (field 22 of /proc/PID/stat), or -ESRCH. */
static int proc_start_time(pid_t pid, unsigned long long *ret)
{
	char buf[1024], *p;
	unsigned int field;

	if (proc_read(pid, "stat", buf, sizeof(buf)) < 0)
		return -ESRCH;
	/* comm may hold spaces and parentheses: fields start after the last ')'. */
	p = strrchr(buf, ')');
	if (!p)
		return -ESRCH;
	for (field = 2; field < 21 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p + 1, "%llu", ret) != 1)
		return -ESRCH;
	return 0;
}

/* The value after "key" at the start of a line of text, or NULL. */
static const char *line_value(const char *text, const char *key)
{
	size_t len = strlen(key);
	const char *p = text;

	while (p && *p) {
		if (!strncmp(p, key, len))
			return p + len;
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return NULL;
}

/* The pid a process has in its own PID namespace (last NSpid entry). */
static pid_t proc_own_pid(pid_t pid)
{
	char buf[4096];
	const char *v;
	long last = -1, x;
	char *end;

	if (proc_read(pid, "status", buf, sizeof(buf)) < 0)
		return -1;
	v = line_value(buf, "NSpid:");
	while (v) {
		x = strtol(v, &end, 10);
		if (end == v)
			break;
		last = x;
		v = end;
	}
	return (pid_t)last;
}

/* The soft RLIMIT_MEMLOCK of pid in bytes (UINT64_MAX: unlimited). */
static int proc_memlock_limit(pid_t pid, uint64_t *ret)
{
	char buf[4096];
	const char *v;

	if (proc_read(pid, "limits", buf, sizeof(buf)) < 0)
		return -ESRCH;
	v = line_value(buf, "Max locked memory");
	if (!v)
		return -ESRCH;
	v += strspn(v, " ");
	if (!strncmp(v, "unlimited", 9)) {
		*ret = UINT64_MAX;
		return 0;
	}
	return sscanf(v, "%" SCNu64, ret) == 1 ? 0 : -ESRCH;
}

/*
 * Whether pid may pin without limit as the kernel's capable(CAP_IPC_LOCK)
 * sees it: the capability in its effective set, and it lives in the
 * initial user namespace (a rootless container's full CapEff is only
 * good inside its own namespace).
 */
static bool proc_cap_ipc_lock(pid_t pid)
{
	char buf[4096], *nl;
	const char *v;
	unsigned long long caps;
	unsigned long inside, outside, count;

	if (proc_read(pid, "status", buf, sizeof(buf)) < 0)
		return false;
	v = line_value(buf, "CapEff:");
	if (!v || sscanf(v, "%llx", &caps) != 1 || !(caps >> CAP_IPC_LOCK_BIT & 1))
		return false;
	if (proc_read(pid, "uid_map", buf, sizeof(buf)) < 0 ||
	    sscanf(buf, "%lu %lu %lu", &inside, &outside, &count) != 3)
		return false;
	/* The initial namespace maps all uids onto themselves, in one line. */
	nl = strchr(buf, '\n');
	return inside == 0 && outside == 0 && count == 4294967295ul &&
	       (!nl || !nl[1]);
}

/* ---- accounts --------------------------------------------------------- */

static struct ibvd_memlock *memlock_get(pid_t pid, unsigned long long start)
{
	struct ibvd_memlock *ml;

	LIST_FOREACH(ml, &memlocks, link)
		if (ml->pid == pid && ml->start_time == start) {
			ml->refs++;
			return ml;
		}
	ml = calloc(1, sizeof(*ml));
	if (!ml)
		return NULL;
	ml->pid = pid;
	ml->start_time = start;
	ml->refs = 1;
	LIST_INSERT_HEAD(&memlocks, ml, link);
	return ml;
}

static void memlock_put(struct ibvd_memlock *ml)
{
	if (--ml->refs)
		return;
	if (ml->pages)
		log_err("pid %d: %" PRIu64 " pinned pages unaccounted",
			(int)ml->pid, ml->pages);
	LIST_REMOVE(ml, link);
	free(ml);
}

void ibvd_mem_get(struct ibvd_mem *mem)
{
	__atomic_add_fetch(&mem->refs, 1, __ATOMIC_RELAXED);
}

void ibvd_mem_put(struct ibvd_mem *mem)
{
	if (__atomic_sub_fetch(&mem->refs, 1, __ATOMIC_ACQ_REL))
		return;
	ibvd_copy_watch_client_gone(mem->fd);
	close(mem->fd);
	close(mem->maps_fd);
	memlock_put(mem->memlock);
	free(mem);
}

uint64_t ibvd_mem_pages(uint64_t addr, uint64_t len)
{
	uint64_t psz = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t first = addr / psz, last = (addr + len - 1) / psz;

	return last - first + 1;
}

int ibvd_mem_charge(struct ibvd_call *call, struct ibvd_mem *mem,
		    uint64_t pages, uint64_t release)
{
	struct ibvd_memlock *ml = mem->memlock;
	uint64_t psz = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t total = ml->pages - release + pages, limit;
	unsigned int missed;
	int ret;

	/* Shrinking never fails, as in the kernel. */
	if (pages <= release) {
		ibvd_tenant_dev_uncharge(mem->account, IBVD_LIMIT_MEMLOCK,
					 (release - pages) * psz);
		goto charge;
	}
	/* the tenant's quota first; the process's own rlimit applies on top */
	ret = ibvd_tenant_dev_charge(mem->account, IBVD_LIMIT_MEMLOCK,
				     (pages - release) * psz,
				     "registering memory");
	if (ret < 0)
		return ibvd_call_error(call, ret, "over the memlock limit of uid %u",
				       (unsigned int)mem->account->tenant->uid);
	if (!ibvd_call_daemon(call)->cfg->rlimit_memlock_enforce)
		goto charge;
	ret = proc_memlock_limit(mem->pid, &limit);
	if (ret < 0)
		goto refuse;
	if (limit == UINT64_MAX || total <= limit / psz ||
	    proc_cap_ipc_lock(mem->pid))
		goto charge;
	if (ibvd_ratelimit_ok(&memlock_rl, &missed))
		log_notice("pid %d uid %u: registering %" PRIu64 " bytes would pin %"
			   PRIu64 " bytes, over its RLIMIT_MEMLOCK of %" PRIu64
			   " bytes: ENOMEM%s", (int)mem->pid,
			   (unsigned int)call->session->cred.uid, pages * psz,
			   total * psz, limit,
			   missed ? " (similar messages suppressed)" : "");
	ibvd_tenant_dev_uncharge(mem->account, IBVD_LIMIT_MEMLOCK,
				 (pages - release) * psz);
	return ibvd_call_error(call, -ENOMEM,
			       "over RLIMIT_MEMLOCK (%" PRIu64 " bytes)", limit);
refuse:
	ibvd_tenant_dev_uncharge(mem->account, IBVD_LIMIT_MEMLOCK,
				 (pages - release) * psz);
	return ibvd_call_error(call, ret, "client process %d is gone",
			       (int)mem->pid);
charge:
	ml->pages = total;
	return 0;
}

void ibvd_mem_restore(struct ibvd_mem *mem, uint64_t pages, uint64_t charged)
{
	uint64_t psz = (uint64_t)sysconf(_SC_PAGESIZE);

	mem->memlock->pages = mem->memlock->pages - charged + pages;
	if (charged > pages)
		ibvd_tenant_dev_uncharge(mem->account, IBVD_LIMIT_MEMLOCK,
					 (charged - pages) * psz);
	else
		ibvd_tenant_dev_restore(mem->account, IBVD_LIMIT_MEMLOCK,
					(pages - charged) * psz);
}

void ibvd_mem_uncharge(struct ibvd_mem *mem, uint64_t pages)
{
	mem->memlock->pages -= pages;
	ibvd_tenant_dev_uncharge(mem->account, IBVD_LIMIT_MEMLOCK,
				 pages * (uint64_t)sysconf(_SC_PAGESIZE));
}

/* ---- address-space checks --------------------------------------------- */

/* Is the attached process still the one that attached? */
static int mem_alive(const struct ibvd_mem *mem)
{
	unsigned long long start;

	if (proc_start_time(mem->pid, &start) < 0 || start != mem->start_time)
		return -ESRCH;
	return 0;
}

int ibvd_mem_check_range(struct ibvd_call *call, struct ibvd_mem *mem,
			 uint64_t addr, uint64_t len, bool writable)
{
	int ret = ibvd_maps_cover(mem->maps_fd, addr, addr + len, writable);

	if (ret == -EFAULT && mem_alive(mem) < 0)
		return ibvd_call_error(call, -ESRCH, "client process %d is gone",
				       (int)mem->pid);
	if (ret == -EFAULT)
		return ibvd_call_error(call, ret,
				       "[0x%" PRIx64 ", +%" PRIu64 ") is not mapped %s",
				       addr, len, writable ? "writable" : "readable");
	return ret;
}

/* ---- ATTACH_MEMORY ---------------------------------------------------- */

/*
 * Is fd a read-write /proc/PID/mem?  0 or -EINVAL.  Its type and mode as
 * the kernel has them (fdstat.h), and those first: a client's file on
 * NFS, which fstat() would write back and ask the server about, is most
 * often refused before fstatfs() asks its server anything.
 */
static int check_mem_fd(int fd)
{
	struct statfs sfs;
	struct statx stx;
	int fl;

	if (ibvd_fd_stat_cached(fd, STATX_TYPE | STATX_MODE, &stx) < 0 ||
	    !S_ISREG(stx.stx_mode) || (stx.stx_mode & 07777) != 0600)
		return -EINVAL;
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || (fl & O_ACCMODE) != O_RDWR)
		return -EINVAL;
	if (fstatfs(fd, &sfs) < 0 || sfs.f_type != PROC_SUPER_MAGIC)
		return -EINVAL;
	return 0;
}

/*
 * Is fd a /proc/PID/maps?  0 or -EINVAL.  Many /proc files share its
 * mode, so its name decides: the link /proc/self/fd/N, as the client's
 * own /proc mount named it.
 */
static int check_maps_fd(int fd)
{
	char link[64], name[64];
	struct statfs sfs;
	unsigned int pid;
	int end = 0;
	ssize_t n;

	if (fstatfs(fd, &sfs) < 0 || sfs.f_type != PROC_SUPER_MAGIC)
		return -EINVAL;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, name, sizeof(name) - 1);
	if (n <= 0)
		return -EINVAL;
	name[n] = '\0';
	if (sscanf(name, "/proc/%u/maps%n", &pid, &end) != 1 || end != n)
		return -EINVAL;
	return 0;
}

/* Does the pid the client claims name the peer (in either namespace)? */
static int check_pid(struct ibvd_call *call, uint32_t claimed)
{
	pid_t peer = call->session->cred.pid;

	if (peer <= 0)
		return ibvd_call_error(call, -EPERM,
				       "the client is not in the daemon's PID namespace");
	if ((pid_t)claimed == peer || (pid_t)claimed == proc_own_pid(peer))
		return 0;
	return ibvd_call_error(call, -EPERM, "pid %u is not the peer's (%d)",
			       claimed, (int)peer);
}

int ibvd_req_attach_memory(struct ibvd_call *call)
{
	const Ibvd__AttachMemory *req = (const Ibvd__AttachMemory *)call->msg;
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	pid_t pid = call->session->cred.pid;
	unsigned long long start;
	struct ibvd_mem *mem;
	int fd, ret;

	if (ibvd_call_mem(call))
		return ibvd_call_error(call, -EBUSY, "memory already attached");
	ret = check_pid(call, req->pid);
	if (ret < 0)
		return ret;
	if (check_mem_fd(call->frame->fds[0]) < 0)
		return ibvd_call_error(call, -EINVAL,
				       "the fd is not a read-write /proc/PID/mem");
	if (check_maps_fd(call->frame->fds[1]) < 0)
		return ibvd_call_error(call, -EINVAL,
				       "the second fd is not a /proc/PID/maps");
	if (proc_start_time(pid, &start) < 0)
		return ibvd_call_error(call, -ESRCH, "client process %d is gone",
				       (int)pid);
	mem = calloc(1, sizeof(*mem));
	if (!mem)
		return -ENOMEM;
	/* the account the context was opened with (context.c) */
	mem->account = ctx->handles.charge_owner;
	mem->memlock = memlock_get(pid, start);
	if (!mem->memlock) {
		free(mem);
		return -ENOMEM;
	}
	fd = ibvd_call_take_fd(call, 0);
	mem->fd = fd;
	mem->maps_fd = ibvd_call_take_fd(call, 1);
	/* procfs files, closed with a plain close() (ibvd_mem_put) */
	ibvd_closer_forget(mem->fd);
	ibvd_closer_forget(mem->maps_fd);
	mem->pid = pid;
	mem->start_time = start;
	mem->refs = 1;
	ibvd_copy_watch_client(mem->fd, pid, call->session->cred.uid,
			       mem->maps_fd);
	ibvd_call_set_mem(call, mem);
	return 0;
}
