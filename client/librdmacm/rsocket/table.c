/*
 * The fd -> rsocket map.  An rsocket's fd is its CM channel's, so fds are
 * small and unique while the rsocket lives: a growing array indexed by fd.
 * Lookups take a read lock only and a reference, which every call drops
 * when it returns: rclose() removes the entry and drops the table's, and
 * the rsocket (with its fd) goes when the last call using it leaves, so a
 * call blocked in another thread never runs on freed memory and a reused
 * fd never finds a stale rsocket.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rs.h"

static pthread_rwlock_t table_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct rsocket **table;
static size_t table_len;
/*
 * Read by every call (rs_get): kept up to date by a fork handler rather
 * than asked of the kernel each time.
 */
static pid_t table_pid;

static void forked_child(void)
{
	table_pid = getpid();
}

/* glibc drops the fork handler when the library is unloaded. */
__attribute__((constructor)) static void table_init(void)
{
	table_pid = getpid();
	pthread_atfork(NULL, NULL, forked_child);
}

pid_t rs_table_pid(void)
{
	return table_pid;
}

static int grow(size_t need)
{
	size_t len = table_len ? table_len : 64;
	struct rsocket **t;

	while (len <= need)
		len *= 2;
	t = realloc(table, len * sizeof(*t));
	if (!t)
		return -ENOMEM;
	memset(t + table_len, 0, (len - table_len) * sizeof(*t));
	table = t;
	table_len = len;
	return 0;
}

int rs_table_insert(struct rsocket *rs)
{
	int ret = 0;

	if (rs->fd < 0)
		return -EBADF;
	pthread_rwlock_wrlock(&table_lock);
	if ((size_t)rs->fd >= table_len)
		ret = grow((size_t)rs->fd);
	if (!ret)
		table[rs->fd] = rs;
	pthread_rwlock_unlock(&table_lock);
	return ret;
}

/* False if rs was not there (another rclose took it first). */
bool rs_table_remove(struct rsocket *rs)
{
	bool was = false;

	pthread_rwlock_wrlock(&table_lock);
	if (rs->fd >= 0 && (size_t)rs->fd < table_len && table[rs->fd] == rs) {
		table[rs->fd] = NULL;
		was = true;
	}
	pthread_rwlock_unlock(&table_lock);
	return was;
}

/* Taken under the table's lock, so rclose cannot free rs in between. */
struct rsocket *rs_get_inherited(int fd)
{
	struct rsocket *rs = NULL;

	if (fd < 0)
		return NULL;
	pthread_rwlock_rdlock(&table_lock);
	if ((size_t)fd < table_len)
		rs = table[fd];
	if (rs)
		__atomic_add_fetch(&rs->refs, 1, __ATOMIC_RELAXED);
	pthread_rwlock_unlock(&table_lock);
	return rs;
}

void rs_put(struct rsocket *rs)
{
	if (__atomic_sub_fetch(&rs->refs, 1, __ATOMIC_ACQ_REL) == 0)
		rs_free(rs);
}

struct rsocket *rs_get(int fd)
{
	struct rsocket *rs = rs_get_inherited(fd);

	if (rs && rs->owner != table_pid) {
		rs_put(rs);
		return NULL;
	}
	return rs;
}
