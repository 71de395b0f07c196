/*
 * Device discovery: ibv_get_device_list() asks the daemon for its devices
 * over a short-lived connection.
 *
 * Devices are cached by (socket, name, GUID, index, port count) so that the
 * same daemon device keeps the same struct ibv_device pointer across
 * listings, as with rdma-core.  A device lives while anything references
 * it: a device list, an open context, or the cache (as long as the daemon
 * still lists it).
 */
#include "config.h"

#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "exports.h"
#include "ibverbsd.pb-c.h"
#include "ibvd_verbs.h"

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibvc_device *cache_head;

/* ---- reference counting ------------------------------------------------ */

static void device_get_locked(struct ibvc_device *dev)
{
	dev->refcount++;
}

/* A device with no references is never in the cache (the cache holds one). */
static void device_put_locked(struct ibvc_device *dev)
{
	if (--dev->refcount == 0)
		free(dev);
}

void ibvc_device_get(struct ibvc_device *dev)
{
	pthread_mutex_lock(&cache_lock);
	device_get_locked(dev);
	pthread_mutex_unlock(&cache_lock);
}

void ibvc_device_put(struct ibvc_device *dev)
{
	pthread_mutex_lock(&cache_lock);
	device_put_locked(dev);
	pthread_mutex_unlock(&cache_lock);
}

/* ---- the cache --------------------------------------------------------- */

static struct ibvc_device *cache_find_locked(const char *socket_path,
					     const Ibvd__DeviceInfo *info)
{
	struct ibvc_device *dev;

	for (dev = cache_head; dev; dev = dev->next)
		if (!strcmp(dev->socket_path, socket_path) &&
		    !strcmp(dev->device.name, info->name) &&
		    dev->node_guid == info->node_guid &&
		    dev->index == info->index &&
		    dev->phys_port_cnt == info->phys_port_cnt)
			return dev;
	return NULL;
}

static void cache_insert_locked(struct ibvc_device *dev)
{
	dev->cached = true;
	device_get_locked(dev);
	dev->next = cache_head;
	cache_head = dev;
}

/*
 * Drop the cache's reference on the devices of socket_path that the daemon
 * no longer lists; whoever still holds them keeps them alive.
 */
static void cache_prune_locked(const char *socket_path)
{
	struct ibvc_device **link = &cache_head, *dev;

	while ((dev = *link)) {
		if (strcmp(dev->socket_path, socket_path) || dev->seen) {
			link = &dev->next;
			continue;
		}
		*link = dev->next;
		dev->next = NULL;
		dev->cached = false;
		device_put_locked(dev);
	}
}

static void cache_clear_seen_locked(const char *socket_path)
{
	struct ibvc_device *dev;

	for (dev = cache_head; dev; dev = dev->next)
		if (!strcmp(dev->socket_path, socket_path))
			dev->seen = false;
}

/* ---- building devices -------------------------------------------------- */

static struct ibvc_device *device_new(const char *socket_path,
				      const Ibvd__DeviceInfo *info)
{
	struct ibvc_device *dev = calloc(1, sizeof(*dev));
	struct ibv_device *pub;

	if (!dev)
		return NULL;
	pub = &dev->device;
	pub->node_type = (enum ibv_node_type)info->node_type;
	pub->transport_type = (enum ibv_transport_type)info->transport_type;
	snprintf(pub->name, sizeof(pub->name), "%s", info->name);
	/* There is no uverbs character device; the name is the closest thing. */
	snprintf(pub->dev_name, sizeof(pub->dev_name), "%s", info->name);
	/* The "device node" is the daemon's socket. */
	snprintf(pub->dev_path, sizeof(pub->dev_path), "%s", socket_path);
	/*
	 * No sysfs directory exists for our devices: tools that read sysfs
	 * attributes through this path (ibv_devinfo's board_id) fail cleanly.
	 * It is under ibv_get_sysfs_path(), as rdma-core puts it.
	 */
	snprintf(pub->ibdev_path, sizeof(pub->ibdev_path),
		 "%s/class/infiniband/%s", ibv_get_sysfs_path(), info->name);
	snprintf(dev->socket_path, sizeof(dev->socket_path), "%s", socket_path);
	dev->node_guid = info->node_guid;
	dev->index = info->index;
	dev->phys_port_cnt = info->phys_port_cnt;
	return dev;
}

/*
 * The cached device for info, created if new; NULL when out of memory.
 * A cached device is never updated, as apps read it without our lock: when
 * the daemon's device changed (a reload gave it another port count, and so
 * another index), the listing gets a new one and the old one leaves the
 * cache, living on while a list or context still holds it.
 */
static struct ibvc_device *device_lookup_locked(const char *socket_path,
						const Ibvd__DeviceInfo *info)
{
	struct ibvc_device *dev = cache_find_locked(socket_path, info);

	if (!dev) {
		dev = device_new(socket_path, info);
		if (!dev)
			return NULL;
		cache_insert_locked(dev);
	}
	dev->seen = true;
	return dev;
}

struct ibvc_device *ibvc_device_for(const char *socket_path,
				    const Ibvd__DeviceInfo *info)
{
	struct ibvc_device *dev;

	pthread_mutex_lock(&cache_lock);
	dev = device_lookup_locked(socket_path, info);
	if (dev)
		device_get_locked(dev);
	pthread_mutex_unlock(&cache_lock);
	return dev;
}

static void put_list_locked(struct ibv_device **list)
{
	size_t i;

	for (i = 0; list[i]; i++)
		device_put_locked(to_ibvc_device(list[i]));
}

/* A NULL-terminated list holding one reference per device. */
static int build_list(const char *socket_path,
		      const Ibvd__ListDevicesReply *reply,
		      struct ibv_device ***listp)
{
	struct ibv_device **list;
	size_t i;

	list = calloc(reply->n_devices + 1, sizeof(*list));
	if (!list)
		return -ENOMEM;

	pthread_mutex_lock(&cache_lock);
	cache_clear_seen_locked(socket_path);
	for (i = 0; i < reply->n_devices; i++) {
		struct ibvc_device *dev;

		dev = device_lookup_locked(socket_path, reply->devices[i]);
		if (!dev)
			goto fail;
		device_get_locked(dev);
		list[i] = &dev->device;
	}
	cache_prune_locked(socket_path);
	pthread_mutex_unlock(&cache_lock);
	*listp = list;
	return 0;

fail:
	put_list_locked(list);
	pthread_mutex_unlock(&cache_lock);
	free(list);
	return -ENOMEM;
}

/* ---- talking to the daemon --------------------------------------------- */

/*
 * Tell the user once per process why there are no devices, in the
 * "libibverbs: Warning:" style rdma-core uses.
 */
static void warn_unreachable(const char *socket_path, int err)
{
	static int warned;

	if (__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		return;
	if (err == -EACCES || err == -EPERM)
		fprintf(stderr,
			"libibverbs: Warning: no permission to use the ibverbsd daemon at %s; ask its administrator for access or set IBVERBSD_SOCKET\n",
			socket_path);
	else if (err == -ETIMEDOUT)
		fprintf(stderr,
			"libibverbs: Warning: the ibverbsd daemon at %s did not answer in time (IBVERBSD_TIMEOUT_MS); it may be stopped or overloaded\n",
			socket_path);
	else if (err == -ENOENT || err == -ECONNREFUSED)
		fprintf(stderr,
			"libibverbs: Warning: no ibverbsd daemon at %s; start it (systemctl start ibverbsd.socket, or ibverbsd -f --socket PATH) or set IBVERBSD_SOCKET\n",
			socket_path);
	else
		fprintf(stderr,
			"libibverbs: Warning: cannot reach the ibverbsd daemon at %s: %s\n",
			socket_path, strerror(-err));
}

/*
 * The errno ibv_get_device_list() reports when the daemon cannot be
 * reached (ecosystem.md §4.3): ENOSYS stands for "no RDMA support here",
 * EPERM for "not allowed"; ETIMEDOUT for a daemon that is there but does
 * not answer, whether it stops accepting or stops replying.
 */
static int unreachable_errno(int err)
{
	switch (err) {
	case -EACCES:
	case -EPERM:
		return -EPERM;
	case -ENOMEM:
	case -ETIMEDOUT:
		return err;
	default:
		return -ENOSYS;
	}
}

/*
 * The daemon holds a client's registered memory to its RLIMIT_MEMLOCK
 * ("rlimit_memlock": "enforce", the default), as the kernel would: a
 * limit of 32 KiB or less, the usual default, fails most registrations.
 * Said once per process, as rdma-core says it, at the first device list
 * of a daemon that enforces it (the list's reply says so), and not to
 * root (euid 0), which as a rule has CAP_IPC_LOCK, which the daemon
 * honours.
 */
#define SMALL_MEMLOCK	32768u

static void warn_small_memlock(void)
{
	static int warned;
	struct rlimit lim;

	if (__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		return;
	if (geteuid() == 0 || getrlimit(RLIMIT_MEMLOCK, &lim) != 0)
		return;
	if (lim.rlim_cur <= SMALL_MEMLOCK)
		fprintf(stderr,
			"libibverbs: Warning: RLIMIT_MEMLOCK is %llu bytes.\n"
			"    This will severely limit memory registrations.\n",
			(unsigned long long)lim.rlim_cur);
}

static int list_devices(const char *socket_path, struct ibv_device ***listp)
{
	Ibvd__ListDevicesReply *reply = NULL;
	struct ibvd_conn conn;
	int ret;

	ret = ibvd_conn_open(&conn, socket_path);
	if (ret < 0) {
		if (ret != -ENOMEM)
			warn_unreachable(socket_path, ret);
		return unreachable_errno(ret);
	}
	ret = ibvd_conn_call(&conn, IBVD_MSG_LIST_DEVICES, NULL,
			     &ibvd__list_devices_reply__descriptor,
			     (ProtobufCMessage **)&reply, NULL, NULL);
	ibvd_conn_close(&conn);
	/*
	 * A dying daemon can still accept a connection and then close it
	 * unanswered: that too means there is no daemon.
	 */
	if (ret == -EIO || ret == -ETIMEDOUT) {
		warn_unreachable(socket_path, ret);
		return unreachable_errno(ret);
	}
	/* Refused ("too many clients"): say so, not just fail. */
	if (ret < 0 && conn.err_msg[0])
		fprintf(stderr, "libibverbs: Warning: the ibverbsd daemon at %s: %s\n",
			socket_path, conn.err_msg);
	if (ret < 0)
		return ret;
	if (reply->memlock_enforced)
		warn_small_memlock();
	ret = build_list(socket_path, reply, listp);
	ibvd__list_devices_reply__free_unpacked(reply, NULL);
	return ret;
}

/*
 * What rdma-core's library does once, at its first device list (besides
 * the memlock warning, which waits for the daemon's word):
 * RDMAV_ALLOW_DISASSOC_DESTROY (ibv_open_device(3)):
 * destroying objects of a device that went away (here: a daemon that
 * died) then succeeds, so that an app can free its resources and go on.
 */
static void library_init(void)
{
	const char *allow = getenv("RDMAV_ALLOW_DISASSOC_DESTROY");

	/* set and not "0", as rdma-core reads its variables */
	if (allow && strcmp(allow, "0") != 0)
		verbs_allow_disassociate_destroy = true;
}

void ibvc_library_init(void)
{
	static pthread_once_t initialised = PTHREAD_ONCE_INIT;

	pthread_once(&initialised, library_init);
}

/* ---- exported verbs ---------------------------------------------------- */

struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct ibv_device **list = NULL;
	int ret, n = 0;

	ibvc_library_init();

	/* As rdma-core: 0 devices, not the caller's garbage, on failure. */
	if (num_devices)
		*num_devices = 0;
	ret = list_devices(ibvd_socket_path(), &list);
	if (ret < 0)
		return ibvc_null_ret(ret);
	while (list[n])
		n++;
	if (num_devices)
		*num_devices = n;
	return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
	if (!list)
		return;
	pthread_mutex_lock(&cache_lock);
	put_list_locked(list);
	pthread_mutex_unlock(&cache_lock);
	free(list);
}

const char *ibv_get_device_name(struct ibv_device *device)
{
	return device ? device->name : NULL;
}

__be64 ibv_get_device_guid(struct ibv_device *device)
{
	return device ? htobe64(to_ibvc_device(device)->node_guid) : 0;
}

int ibv_get_device_index(struct ibv_device *device)
{
	uint32_t index;

	if (!device)
		return -1;
	index = to_ibvc_device(device)->index;
	return index <= INT32_MAX ? (int)index : -1;
}
