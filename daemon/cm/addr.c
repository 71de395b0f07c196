/*
 * Addresses for the CM: parsing, which addresses are this host's, the
 * port spaces (bind, ephemeral ports, listener lookup), address and route
 * resolution, and the CmIdInfo that tells the client where an id is.
 *
 * This daemon is one host's fabric: an address of a RoCE device's
 * interface belongs to that device, every other local address (127.0.0.1
 * and ::1 included) to the first device, port 1.  Another host is
 * reachable through a RoCE device: the kernel's routing table says which
 * source address (so which device) a destination is reached from, and the
 * IB CM's MADs go there (remote.c).  Binding follows the kernel's RDMA CM: a port of a port
 * space is shared only by ids whose addresses differ, or that both set
 * REUSEADDR (never by a listener); a wildcard overlaps every address
 * unless both ids are AFONLY and of different families.
 *
 * AF_IB addresses (struct sockaddr_ib: a GID, the port in the service
 * id's low 16 bits) name a port of a software device by one of its GIDs,
 * as Linux's RDMA CM takes them on InfiniBand ports; they are AFONLY and
 * never reach another host (a RoCE device's addresses are IP ones).
 */
#include <config.h>

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/ib.h>

#include "core/device.h"
#include "core/neigh.h"
#include "core/roce.h"
#include "core/route.h"
#include "cma_hdr.h"
#include "internal.h"
#include "server/call.h"
#include "server/session.h"
#include "verbs/query.h"
#include "verbs/verbs.h"

/* ---- sockaddrs ------------------------------------------------------ */

static const struct sockaddr_in *sin4(const struct sockaddr_storage *ss)
{
	return (const struct sockaddr_in *)(const void *)ss;
}

static const struct sockaddr_in6 *sin6(const struct sockaddr_storage *ss)
{
	return (const struct sockaddr_in6 *)(const void *)ss;
}

static const struct sockaddr_ib *sib(const struct sockaddr_storage *ss)
{
	return (const struct sockaddr_ib *)(const void *)ss;
}

static const uint8_t *sib_gid(const struct sockaddr_storage *ss)
{
	return sib(ss)->sib_addr.sib_raw;
}

int cm_addr_parse(struct ibvd_call *call, const ProtobufCBinaryData *b,
		  const char *what, struct sockaddr_storage *ss)
{
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)(void *)ss;
	struct sockaddr_in *s4 = (struct sockaddr_in *)(void *)ss;
	sa_family_t family;

	memset(ss, 0, sizeof(*ss));
	if (b->len < sizeof(family) || b->len > sizeof(*ss))
		return ibvd_call_error(call, -EINVAL, "bad %s address (%zu bytes)",
				       what, b->len);
	memcpy(&family, b->data, sizeof(family));
	switch (family) {
	case AF_INET:
		if (b->len < sizeof(*s4))
			break;
		memcpy(s4, b->data, sizeof(*s4));
		memset(s4->sin_zero, 0, sizeof(s4->sin_zero));
		return 0;
	case AF_INET6:
		if (b->len < sizeof(*s6))
			break;
		memcpy(s6, b->data, sizeof(*s6));
		return 0;
	case AF_IB:
		if (b->len < sizeof(struct sockaddr_ib))
			break;
		memcpy(ss, b->data, sizeof(struct sockaddr_ib));
		return 0;
	default:
		return ibvd_call_error(call, -EINVAL, "%s address of family %u",
				       what, family);
	}
	return ibvd_call_error(call, -EINVAL, "short %s address", what);
}

uint16_t cm_addr_port(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(sin4(ss)->sin_port);
	if (ss->ss_family == AF_INET6)
		return ntohs(sin6(ss)->sin6_port);
	if (ss->ss_family == AF_IB)
		return (uint16_t)be64toh(sib(ss)->sib_sid);
	return 0;
}

void cm_addr_set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)(void *)ss)->sin_port = htons(port);
	else if (ss->ss_family == AF_INET6)
		((struct sockaddr_in6 *)(void *)ss)->sin6_port = htons(port);
	else if (ss->ss_family == AF_IB)
		((struct sockaddr_ib *)(void *)ss)->sib_sid =
			htobe64((be64toh(sib(ss)->sib_sid) & ~0xFFFFull) | port);
}

socklen_t cm_addr_len(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return sizeof(struct sockaddr_in);
	if (ss->ss_family == AF_INET6)
		return sizeof(struct sockaddr_in6);
	if (ss->ss_family == AF_IB)
		return sizeof(struct sockaddr_ib);
	return 0;
}

bool cm_addr_is_any(const struct sockaddr_storage *ss)
{
	static const uint8_t zero[16];

	if (ss->ss_family == AF_INET)
		return sin4(ss)->sin_addr.s_addr == htonl(INADDR_ANY);
	if (ss->ss_family == AF_IB)
		return !memcmp(sib_gid(ss), zero, sizeof(zero));
	return IN6_IS_ADDR_UNSPECIFIED(&sin6(ss)->sin6_addr);
}

static bool addr_is_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return (ntohl(sin4(ss)->sin_addr.s_addr) >> 24) == IN_LOOPBACKNET;
	if (ss->ss_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&sin6(ss)->sin6_addr);
	return false;
}

/*
 * The kernel's rdma_cm takes a loopback address for the wildcard when it
 * matches a request to a listener (its cma_any_addr): a listener on
 * 127.0.0.1 takes connections to every address of the host.  Its port
 * check does too (EADDRNOTAVAIL beside any other binding of the port);
 * ours keeps EADDRINUSE for the same loopback address, which apps ported
 * from sockets wait on while a restarted server's port frees.
 */
bool cm_addr_is_wild(const struct sockaddr_storage *ss)
{
	return cm_addr_is_any(ss) || addr_is_loopback(ss);
}

bool cm_addr_is_multicast(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return IN_MULTICAST(ntohl(sin4(ss)->sin_addr.s_addr));
	if (ss->ss_family == AF_IB)
		return sib_gid(ss)[0] == 0xFF;
	return IN6_IS_ADDR_MULTICAST(&sin6(ss)->sin6_addr);
}

bool cm_addr_equal(const struct sockaddr_storage *a,
		   const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return sin4(a)->sin_addr.s_addr == sin4(b)->sin_addr.s_addr;
	if (a->ss_family == AF_IB)
		return !memcmp(sib_gid(a), sib_gid(b), 16);
	return IN6_ARE_ADDR_EQUAL(&sin6(a)->sin6_addr, &sin6(b)->sin6_addr);
}

void cm_addr_str(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET)
		inet_ntop(AF_INET, &sin4(ss)->sin_addr, host, sizeof(host));
	else if (ss->ss_family == AF_INET6)
		inet_ntop(AF_INET6, &sin6(ss)->sin6_addr, host, sizeof(host));
	else if (ss->ss_family == AF_IB)
		inet_ntop(AF_INET6, sib_gid(ss), host, sizeof(host));
	snprintf(buf, len, "%s:%u", host, cm_addr_port(ss));
}

/* The wildcard (or loopback) address of a family, port 0. */
static void addr_make(struct sockaddr_storage *ss, sa_family_t family,
		      bool loopback)
{
	memset(ss, 0, sizeof(*ss));
	ss->ss_family = family;
	if (family == AF_IB)
		((struct sockaddr_ib *)(void *)ss)->sib_pkey = htobe16(0xFFFF);
	if (family == AF_INET && loopback)
		((struct sockaddr_in *)(void *)ss)->sin_addr.s_addr =
			htonl(INADDR_LOOPBACK);
	else if (family == AF_INET6 && loopback)
		((struct sockaddr_in6 *)(void *)ss)->sin6_addr = in6addr_loopback;
}

/* ---- this host's addresses ------------------------------------------ */

/*
 * Read at most once a second: a netlink dump per resolve would let one
 * client loop make the daemon busy; addresses rarely change faster.
 */
#define LOCAL_MAX_AGE_S	1

static struct {
	struct in_addr *v4;
	struct in6_addr *v6;
	size_t n4, n6;
	time_t read_at;		/* CLOCK_MONOTONIC seconds; 0: never */
} local;

static void local_store(const struct ifaddrs *list, struct in_addr *v4,
			struct in6_addr *v6)
{
	const struct ifaddrs *ifa;

	local.n4 = local.n6 = 0;
	for (ifa = list; ifa; ifa = ifa->ifa_next) {
		if (!ifa->ifa_addr)
			continue;
		if (ifa->ifa_addr->sa_family == AF_INET)
			v4[local.n4++] = ((const struct sockaddr_in *)
					  (const void *)ifa->ifa_addr)->sin_addr;
		else if (ifa->ifa_addr->sa_family == AF_INET6)
			v6[local.n6++] = ((const struct sockaddr_in6 *)
					  (const void *)ifa->ifa_addr)->sin6_addr;
	}
	free(local.v4);
	free(local.v6);
	local.v4 = v4;
	local.v6 = v6;
}

static void local_refresh(void)
{
	struct ifaddrs *list, *ifa;
	struct in_addr *v4;
	struct in6_addr *v6;
	struct timespec now;
	size_t n = 1;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (local.read_at && now.tv_sec - local.read_at < LOCAL_MAX_AGE_S)
		return;
	if (getifaddrs(&list) < 0)
		return;		/* keep what we had */
	for (ifa = list; ifa; ifa = ifa->ifa_next)
		n++;
	v4 = calloc(n, sizeof(*v4));
	v6 = calloc(n, sizeof(*v6));
	if (v4 && v6) {
		local_store(list, v4, v6);
		local.read_at = now.tv_sec ? now.tv_sec : 1;
	} else {
		free(v4);
		free(v6);
	}
	freeifaddrs(list);
}

static bool local_v4(struct in_addr a)
{
	size_t i;

	/* The whole of 127/8 is routed to this host, as on Linux. */
	if ((ntohl(a.s_addr) >> 24) == IN_LOOPBACKNET)
		return true;
	for (i = 0; i < local.n4; i++)
		if (local.v4[i].s_addr == a.s_addr)
			return true;
	return false;
}

static bool local_v6(const struct in6_addr *a)
{
	struct in_addr v4;
	size_t i;

	if (IN6_IS_ADDR_LOOPBACK(a))
		return true;
	if (IN6_IS_ADDR_V4MAPPED(a)) {
		memcpy(&v4, &a->s6_addr[12], sizeof(v4));
		return local_v4(v4);
	}
	for (i = 0; i < local.n6; i++)
		if (IN6_ARE_ADDR_EQUAL(&local.v6[i], a))
			return true;
	return false;
}

/* Does gid name a port of dev?  Its number in *port_num if so. */
static bool port_has_gid(const struct ibvd_device *dev, const uint8_t gid[16],
			 uint8_t *port_num)
{
	unsigned int n = ibvd_device_gid_tbl_len(dev), p, i;
	const struct ibvd_port *port;
	struct ibvd_gid g;

	for (p = 1; p <= dev->nports; p++) {
		port = ibvd_device_port(dev, (uint8_t)p);
		for (i = 0; port && i < n; i++)
			if (ibvd_device_gid(dev, port, i, &g) == 0 &&
			    !memcmp(g.raw, gid, 16)) {
				*port_num = (uint8_t)p;
				return true;
			}
	}
	return false;
}

/* The software device port that gid names (AF_IB), or NULL. */
static struct ibvd_device *ib_gid_port(const struct ibvd_cm *cm,
				       const uint8_t gid[16],
				       uint8_t *port_num)
{
	struct ibvd_device *dev;

	TAILQ_FOREACH(dev, &cm->session->daemon->devices, link)
		if (!cm_dev_is_roce(dev) && port_has_gid(dev, gid, port_num))
			return dev;
	return NULL;
}

/* The software device port an AF_IB address names; NULL for the rest. */
static struct ibvd_device *ib_addr_port(const struct ibvd_cm *cm,
					const struct sockaddr_storage *ss,
					uint8_t *port_num)
{
	if (ss->ss_family != AF_IB || cm_addr_is_any(ss))
		return NULL;
	return ib_gid_port(cm, sib_gid(ss), port_num);
}

bool cm_addr_is_local(const struct ibvd_cm *cm,
		      const struct sockaddr_storage *ss)
{
	uint8_t port_num;

	if (cm_addr_is_any(ss))
		return true;
	if (ss->ss_family == AF_IB)
		return ib_addr_port(cm, ss, &port_num) != NULL;
	local_refresh();
	if (ss->ss_family == AF_INET)
		return local_v4(sin4(ss)->sin_addr);
	return local_v6(&sin6(ss)->sin6_addr);
}

/* ---- port spaces ---------------------------------------------------- */

static struct cm_port_space *id_ps(const struct ibvd_cm_id *id)
{
	return &cm_world.ps[cm_ps_index(id->ps)];
}

#define PORT_IDS(space, port)	(&(space)->ports[port])

/*
 * Would b, bound already, clash with a binding to addr by a (reuse: a's
 * flag)?  As the kernel's cma_check_port: a wildcard on either side is
 * EADDRNOTAVAIL, the same address EADDRINUSE.  A loopback address is a
 * wildcard there too, as it is to a listener (cm_addr_is_wild), but for
 * the same loopback address, EADDRINUSE as sockets say: else an id on
 * 127.0.0.2 and another uid's server on 127.0.0.1 would both listen on
 * the port, and the first to listen would take the other's connections.
 */
static int clash(const struct ibvd_cm_id *a, const struct sockaddr_storage *addr,
		 const struct ibvd_cm_id *b, bool reuse)
{
	if (reuse && b->reuseaddr)
		return 0;
	if (a->afonly && b->afonly && addr->ss_family != b->src.ss_family)
		return 0;
	if (cm_addr_is_any(addr) || cm_addr_is_any(&b->src))
		return -EADDRNOTAVAIL;
	if (cm_addr_equal(addr, &b->src))
		return -EADDRINUSE;
	return cm_addr_is_wild(addr) || cm_addr_is_wild(&b->src) ?
	       -EADDRNOTAVAIL : 0;
}

static int port_conflict(const struct ibvd_cm_id *id,
			 const struct sockaddr_storage *addr, bool reuse)
{
	uint16_t port = cm_addr_port(addr);
	const struct ibvd_cm_id *b;
	int ret;

	LIST_FOREACH(b, PORT_IDS(id_ps(id), port), bind_link)
		if (b != id && (ret = clash(id, addr, b, reuse)) < 0)
			return ret;
	return 0;
}

/* Bound ids go after those that listened, which lead the port's list. */
static void port_link(struct ibvd_cm_id *id, uint16_t port)
{
	struct ibvd_cm_id *b, *last = NULL;

	LIST_FOREACH(b, PORT_IDS(id_ps(id), port), bind_link) {
		if (!b->listened)
			break;
		last = b;
	}
	if (last)
		LIST_INSERT_AFTER(last, id, bind_link);
	else
		LIST_INSERT_HEAD(PORT_IDS(id_ps(id), port), id, bind_link);
}

void cm_port_lead(struct ibvd_cm_id *id)
{
	LIST_REMOVE(id, bind_link);
	LIST_INSERT_HEAD(PORT_IDS(id_ps(id), cm_addr_port(&id->src)), id,
			 bind_link);
	id->listened = true;
}

static bool port_unused(const struct cm_port_space *space, uint16_t port)
{
	return LIST_EMPTY(PORT_IDS(space, port));
}

/* A port nobody holds in id's port space, from a random start; 0 if none. */
static uint16_t ephemeral_port(const struct ibvd_cm_id *id)
{
	const uint32_t range = CM_EPHEMERAL_HIGH - CM_EPHEMERAL_LOW + 1;
	uint32_t start = ibvd_random32() % range, i;
	uint16_t port;

	for (i = 0; i < range; i++) {
		port = (uint16_t)(CM_EPHEMERAL_LOW + (start + i) % range);
		if (port_unused(id_ps(id), port))
			return port;
	}
	return 0;
}

/*
 * As the kernel: IPv4 ids are AFONLY, IPv6 ones follow bindv6only; AF_IB
 * ones are AFONLY too, having no address in common with the others.
 */
static bool default_afonly(sa_family_t family)
{
	FILE *f;
	int v = 0;

	if (family == AF_INET || family == AF_IB)
		return true;
	f = fopen("/proc/sys/net/ipv6/bindv6only", "re");
	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v != 0;
}

/* The uid's share of the port spaces: room for one more bound id? */
static int port_share(struct ibvd_call *call, struct ibvd_cm_id *id)
{
	struct ibvd_tenant *t = id->cm->session->tenant;

	if (!t || t->uid == 0 || t->cm_ports < ibvd_uid_max_cm_ports())
		return 0;
	t->counters.refused[IBVD_LIMIT_CM_ID]++;
	ibvd_tenant_log(t, IBVD_LOG_NOTICE,
			"uid %u: binding an rdma_cm id refused: the daemon's "
			"cap of %u ids bound to ports a uid: EAGAIN",
			(unsigned int)t->uid, ibvd_uid_max_cm_ports());
	return ibvd_call_error(call, -EAGAIN,
			       "uid %u has %u ids bound to ports, the daemon's "
			       "cap", (unsigned int)t->uid, t->cm_ports);
}

static void port_take(struct ibvd_cm_id *id)
{
	struct ibvd_tenant *t = id->cm->session->tenant;

	if (!t)
		return;
	id->port_payer = t;
	ibvd_tenant_ref(t);
	t->cm_ports++;
}

/*
 * A loopback address names no RoCE device: the kernel's rdma_cm binds an
 * id to 127.0.0.1 or ::1 as to the wildcard, without a device (its
 * cma_any_addr), and a resolution or a connection picks one later.
 * Middleware relies on it: libfabric's verbs provider binds "localhost"
 * and, finding no device there, advertises the devices' own interface
 * addresses; given a device, it advertised 127.0.0.1, which no other host
 * reaches (Open MPI's mtl ofi across two hosts: every connection refused).
 * On a host with no RoCE device our software devices keep theirs: they
 * have no interface of their own, and rsockets and the CM's users on one
 * host bind 127.0.0.1 to reach them.  Beside a RoCE device a loopback
 * address is the wildcard whichever device the configuration lists first:
 * a software one listed first had libfabric advertise 127.0.0.1 again.
 */
static bool have_roce(const struct ibvd_cm *cm)
{
	const struct ibvd_device *dev;

	TAILQ_FOREACH(dev, &cm->session->daemon->devices, link)
		if (cm_dev_is_roce(dev))
			return true;
	return false;
}

int cm_bind(struct ibvd_call *call, struct ibvd_cm_id *id,
	    const struct sockaddr_storage *addr)
{
	struct ibvd_device *dev = cm_addr_device(id->cm, addr);
	bool no_dev = cm_addr_is_any(addr) ||
		      (addr_is_loopback(addr) && have_roce(id->cm));
	struct sockaddr_storage ss = *addr;
	uint16_t port = cm_addr_port(addr);
	int ret;

	if (addr->ss_family == AF_INET6 &&
	    IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)addr)->sin6_addr) &&
	    !((const struct sockaddr_in6 *)addr)->sin6_scope_id)
		return ibvd_call_error(call, -EINVAL,
				       "a link-local address needs its interface (scope id)");
	if (!cm_addr_is_local(id->cm, addr))
		return ibvd_call_error(call, -EADDRNOTAVAIL,
				       "not an address of this host");
	if (!no_dev && !dev)
		return ibvd_call_error(call, -ENODEV, "no RDMA device");
	if (!id->afonly_set)
		id->afonly = default_afonly(addr->ss_family);
	if (port && port < CM_PRIVILEGED_PORT && !ibvd_call_root(call))
		return ibvd_call_error(call, -EACCES,
				       "port %u is for root only", port);
	ret = port_share(call, id);
	if (ret < 0)
		return ret;
	if (!port) {
		port = ephemeral_port(id);
		if (!port)
			return ibvd_call_error(call, -EADDRNOTAVAIL,
					       "no free port left");
		cm_addr_set_port(&ss, port);
	} else if ((ret = port_conflict(id, &ss, id->reuseaddr)) < 0) {
		return ibvd_call_error(call, ret, "port %u is in use", port);
	}
	id->src = ss;
	/* As the kernel: a bound id's peer is the family's wildcard, port 0. */
	if (!id->dst.ss_family)
		addr_make(&id->dst, ss.ss_family, false);
	port_link(id, port);
	port_take(id);
	id->bound = true;
	if (!no_dev)
		cm_attach_device(id, dev, cm_addr_port_num(id->cm, &ss));
	return 0;
}

void cm_unbind(struct ibvd_cm_id *id)
{
	if (id->bound)
		LIST_REMOVE(id, bind_link);
	if (id->port_payer) {
		id->port_payer->cm_ports--;
		ibvd_tenant_put(id->port_payer);
		id->port_payer = NULL;
	}
	id->bound = false;
	id->listened = false;
}

int cm_check_listen(struct ibvd_call *call, struct ibvd_cm_id *id)
{
	/* A listener shares its address with nobody, REUSEADDR or not. */
	int ret = port_conflict(id, &id->src, false);

	if (ret < 0)
		return ibvd_call_error(call, ret, "port %u is in use",
				       cm_addr_port(&id->src));
	return 0;
}

static bool listener_matches(const struct ibvd_cm_id *l,
			     const struct sockaddr_storage *dst)
{
	if (cm_addr_is_wild(&l->src))
		return !l->afonly || l->src.ss_family == dst->ss_family;
	return cm_addr_equal(&l->src, dst);
}

struct ibvd_cm_id *cm_find_listener(uint32_t ps,
				    const struct sockaddr_storage *dst)
{
	int psi = cm_ps_index(ps);
	uint16_t port = cm_addr_port(dst);
	struct ibvd_cm_id *l, *wild = NULL;

	if (psi < 0)
		return NULL;
	LIST_FOREACH(l, PORT_IDS(&cm_world.ps[psi], port), bind_link) {
		if (!l->listened)
			break;		/* the rest are merely bound */
		if (l->state != CM_LISTEN || l->cm->dead ||
		    !listener_matches(l, dst))
			continue;
		if (!cm_addr_is_wild(&l->src))
			return l;	/* the specific address wins */
		wild = l;
	}
	return wild;
}

/* ---- devices and paths ---------------------------------------------- */

bool cm_dev_is_roce(const struct ibvd_device *dev)
{
	return dev && dev->kind == IBVD_DEV_ROCE;
}

void cm_addr_to_gid(const struct sockaddr_storage *ss, uint8_t gid[16])
{
	memset(gid, 0, 16);
	if (ss->ss_family == AF_INET) {
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, &sin4(ss)->sin_addr, 4);
	} else if (ss->ss_family == AF_INET6) {
		memcpy(gid, &sin6(ss)->sin6_addr, 16);
	} else if (ss->ss_family == AF_IB) {
		memcpy(gid, sib_gid(ss), 16);
	}
}

/* Index of gid in port 1's table of dev, or -1. */
static int dev_gid_index(const struct ibvd_device *dev, const uint8_t gid[16])
{
	const struct ibvd_port *port = ibvd_device_port(dev, 1);
	unsigned int i, n = ibvd_device_gid_tbl_len(dev);
	struct ibvd_gid g;

	for (i = 0; port && i < n; i++)
		if (ibvd_device_gid(dev, port, i, &g) == 0 &&
		    !memcmp(g.raw, gid, 16))
			return (int)i;
	return -1;
}

int cm_gid_index(const struct ibvd_cm_id *id, const uint8_t gid[16])
{
	return id->dev ? dev_gid_index(id->dev, gid) : -1;
}

int cm_gid_family(const uint8_t gid[16])
{
	return ibvd_gid_is_v4(gid) ? AF_INET : AF_INET6;
}

int cm_gid_index_of_family(const struct ibvd_cm_id *id, int family)
{
	const struct ibvd_port *port;
	static const uint8_t zero[16];
	unsigned int i, n;
	struct ibvd_gid g;

	if (!id->dev)
		return -1;
	port = ibvd_device_port(id->dev, 1);
	n = ibvd_device_gid_tbl_len(id->dev);
	for (i = 0; port && i < n; i++)
		if (ibvd_device_gid(id->dev, port, i, &g) == 0 &&
		    memcmp(g.raw, zero, 16) && cm_gid_family(g.raw) == family)
			return (int)i;
	return -1;
}

struct ibvd_device *cm_addr_device(const struct ibvd_cm *cm,
				   const struct sockaddr_storage *ss)
{
	struct ibvd_device *dev;
	uint8_t gid[16], port_num;

	if (ss->ss_family == AF_IB && !cm_addr_is_any(ss))
		return ib_addr_port(cm, ss, &port_num);
	cm_addr_to_gid(ss, gid);
	TAILQ_FOREACH(dev, &cm->session->daemon->devices, link)
		if (cm_dev_is_roce(dev) && dev->roce.gids &&
		    dev_gid_index(dev, gid) >= 0)
			return dev;
	return cm_default_device(cm);
}

/* The LID of the port an AF_IB address names; dflt if none. */
static uint16_t ib_port_lid(const struct ibvd_cm *cm,
			    const struct sockaddr_storage *ss, uint16_t dflt)
{
	const struct ibvd_device *dev;
	const struct ibvd_port *port;
	uint8_t port_num;

	dev = ib_addr_port(cm, ss, &port_num);
	port = dev ? ibvd_device_port(dev, port_num) : NULL;
	return port ? port->lid : dflt;
}

/* The port of its device that an address names: an AF_IB GID's, else 1. */
uint8_t cm_addr_port_num(const struct ibvd_cm *cm,
			 const struct sockaddr_storage *ss)
{
	uint8_t port_num;

	return ib_addr_port(cm, ss, &port_num) ? port_num : 1;
}

/*
 * A loopback address is no GID of a RoCE device: its path runs between
 * the device's own GID of the family (the first, else GID 0) and itself,
 * as the kernel's rdma_cm resolves one (cma_resolve_loopback).
 */
static void roce_own_gid(const struct ibvd_cm_id *id, sa_family_t family,
			 uint8_t gid[16])
{
	const struct ibvd_port *port = ibvd_device_port(id->dev, 1);
	int index = cm_gid_index_of_family(id, family);
	struct ibvd_gid g;

	memset(gid, 0, 16);
	if (index < 0)
		index = 0;
	if (port && ibvd_device_gid(id->dev, port, (unsigned int)index, &g) == 0)
		memcpy(gid, g.raw, 16);
}

void cm_path_gids(const struct ibvd_cm_id *id, uint8_t sgid[16],
		  uint8_t dgid[16])
{
	if (cm_dev_is_roce(id->dev)) {
		if (addr_is_loopback(&id->src))
			roce_own_gid(id, id->src.ss_family, sgid);
		else
			cm_addr_to_gid(&id->src, sgid);
		if (addr_is_loopback(&id->dst))
			memcpy(dgid, sgid, 16);
		else
			cm_addr_to_gid(&id->dst, dgid);
		return;
	}
	/* A software port: its GIDs, or the ones AF_IB addresses name. */
	if (id->src.ss_family == AF_IB && !cm_addr_is_any(&id->src))
		cm_addr_to_gid(&id->src, sgid);
	else
		cm_port_gid0(id, sgid);
	if (id->dst.ss_family == AF_IB && !cm_addr_is_any(&id->dst))
		cm_addr_to_gid(&id->dst, dgid);
	else
		memcpy(dgid, sgid, 16);
}

bool cm_dst_is_far(const struct ibvd_cm_id *id)
{
	return cm_dev_is_roce(id->dev) && !cm_addr_is_local(id->cm, &id->dst);
}

void cm_attach_device(struct ibvd_cm_id *id, struct ibvd_device *dev,
		      uint8_t port_num)
{
	id->dev = dev;
	id->port_num = port_num;
}

uint16_t cm_port_lid(const struct ibvd_cm_id *id)
{
	const struct ibvd_port *port;

	port = id->dev ? ibvd_device_port(id->dev, id->port_num) : NULL;
	return port ? port->lid : 0;
}

void cm_port_gid0(const struct ibvd_cm_id *id, uint8_t gid[16])
{
	const struct ibvd_port *port;

	memset(gid, 0, 16);
	port = id->dev ? ibvd_device_port(id->dev, id->port_num) : NULL;
	if (port)
		ibvd_port_gid0(port, gid);
}

uint32_t cm_port_mtu(const struct ibvd_cm_id *id)
{
	const struct ibvd_port *port = ibvd_device_port(id->dev, id->port_num);
	Ibvd__PortAttr pa;

	if (!port)
		return IBV_MTU_1024;
	ibvd_port_attr(id->dev, port, &pa);
	return pa.active_mtu;
}

/* enum ibv_rate of an Ethernet link, as the kernel's iboe_get_rate. */
static uint32_t iboe_rate(unsigned int mbps)
{
	if (mbps >= 40000)
		return IBV_RATE_40_GBPS;
	if (mbps >= 30000)
		return IBV_RATE_30_GBPS;
	if (mbps >= 20000)
		return IBV_RATE_20_GBPS;
	if (mbps >= 10000)
		return IBV_RATE_10_GBPS;
	return IBV_RATE_MAX;		/* 0: the port's current rate */
}

void cm_route_found(struct ibvd_cm_id *id)
{
	uint8_t sgid[16], dgid[16];

	id->route_valid = true;
	id->hop_limit = 0;
	if (!cm_dev_is_roce(id->dev))
		return;
	cm_path_gids(id, sgid, dgid);
	id->hop_limit = ibvd_roce_hop_limit(&id->dev->roce.netdev, sgid, dgid, 0);
}

uint8_t cm_route_hop_limit(const struct ibvd_cm_id *id)
{
	return id->hop_limit ? id->hop_limit : CM_GRH_HOP_LIMIT;
}

/*
 * The rest of a RoCE path as the kernel's rdma_cm makes it
 * (cma_resolve_iboe_route): the route's hop limit, the id's ToS, the
 * flow label of the two ports (the initiator's first), the link's rate,
 * a packet lifetime one below the ACK timeout asked for, else 16
 * (reversible, as every path here: the client says so).
 */
static void roce_path(const struct ibvd_cm_id *id, Ibvd__CmIdInfo *info)
{
	const struct ibvd_netdev *nd = &id->dev->roce.netdev;
	bool initiator = id->active || id->phase == CM_PH_NONE;
	uint16_t own = cm_addr_port(&id->src), peer = cm_addr_port(&id->dst);

	info->hop_limit = cm_route_hop_limit(id);
	info->traffic_class = id->tos;
	info->flow_label = initiator ? cma_flow_label(own, peer) :
				       cma_flow_label(peer, own);
	info->rate = iboe_rate(nd->speed_mbps);
	info->packet_life_time = id->timeout_set && id->timeout ?
				 id->timeout - 1u : CM_PACKET_LIFETIME;
}

void cm_fill_info(const struct ibvd_cm_id *id, Ibvd__CmIdInfo *info,
		  struct cm_info_buf *buf)
{
	ibvd__cm_id_info__init(info);
	info->src.data = (uint8_t *)&id->src;
	info->src.len = cm_addr_len(&id->src);
	info->dst.data = (uint8_t *)&id->dst;
	info->dst.len = cm_addr_len(&id->dst);
	info->ps = id->ps;
	snprintf(buf->devname, sizeof(buf->devname), "%s",
		 id->dev ? id->dev->name : "");
	info->device = buf->devname;
	if (!id->dev)
		return;
	info->port_num = id->port_num;
	cm_path_gids(id, buf->sgid, buf->dgid);
	info->sgid.data = buf->sgid;
	info->sgid.len = 16;
	info->pkey = IBVD_DEFAULT_PKEY;
	if (!id->route_valid)
		return;
	info->dgid.data = buf->dgid;
	info->dgid.len = 16;
	info->slid = id->slid;
	info->dlid = id->dlid;
	info->mtu = cm_port_mtu(id);
	info->num_paths = 1;
	if (cm_dev_is_roce(id->dev))
		roce_path(id, info);
}

/* ---- requests ------------------------------------------------------- */

static int reply_info(struct ibvd_call *call, const struct ibvd_cm_id *id)
{
	struct cm_info_buf buf;
	Ibvd__CmIdInfo info;

	cm_fill_info(id, &info, &buf);
	return ibvd_call_reply(call, &info.base, NULL, 0);
}

int ibvd_req_cm_bind_addr(struct ibvd_call *call)
{
	const Ibvd__CmAddr *req = (const Ibvd__CmAddr *)call->msg;
	struct ibvd_cm_id *id = cm_id_get(call, req->id);
	struct sockaddr_storage addr;
	int ret;

	if (!id)
		return -EINVAL;
	if (id->state != CM_IDLE)
		return ibvd_call_error(call, -EINVAL, "the id is bound already");
	ret = cm_addr_parse(call, &req->src, "source", &addr);
	if (ret == 0)
		ret = cm_bind(call, id, &addr);
	if (ret < 0)
		return ret;
	id->state = CM_ADDR_BOUND;
	return reply_info(call, id);
}


int ibvd_req_cm_query(struct ibvd_call *call)
{
	const Ibvd__CmId *req = (const Ibvd__CmId *)call->msg;
	struct ibvd_cm_id *id = cm_id_get(call, req->id);

	return id ? reply_info(call, id) : -EINVAL;
}


/* Bind an idle id for resolution: to src if given, else dst's wildcard. */
static int resolve_bind(struct ibvd_call *call, struct ibvd_cm_id *id,
			const Ibvd__CmAddr *req,
			const struct sockaddr_storage *dst)
{
	struct sockaddr_storage src;
	int ret;

	if (req->src.len) {
		ret = cm_addr_parse(call, &req->src, "source", &src);
		if (ret < 0)
			return ret;
	} else {
		addr_make(&src, dst->ss_family, false);
	}
	if (src.ss_family != dst->ss_family)
		return ibvd_call_error(call, -EINVAL,
				       "source and destination families differ");
	/* A link-local destination names the interface for the source. */
	if (dst->ss_family == AF_INET6 && !req->src.len)
		((struct sockaddr_in6 *)(void *)&src)->sin6_scope_id =
			sin6(dst)->sin6_scope_id;
	ret = cm_bind(call, id, &src);
	if (ret == 0)
		id->state = CM_ADDR_BOUND;
	return ret;
}

/* dst is this host: pick the addresses a loopback route would use. */
static void resolve_local(struct ibvd_cm_id *id)
{
	uint16_t port;

	if (cm_addr_is_any(&id->dst)) {
		port = cm_addr_port(&id->dst);
		addr_make(&id->dst, id->dst.ss_family, true);
		cm_addr_set_port(&id->dst, port);
	}
	if (cm_addr_is_any(&id->src) && !cm_addr_is_multicast(&id->dst)) {
		port = cm_addr_port(&id->src);
		id->src = id->dst;
		cm_addr_set_port(&id->src, port);
	}
}

/* After the reply: the outcome of a resolution that needs no waiting. */
static void resolve_now(struct ibvd_cm_id *id)
{
	struct ibvd_device *dev = id->dev ? id->dev :
					    cm_addr_device(id->cm, &id->dst);

	if (!dev) {
		id->state = CM_ADDR_BOUND;
		cm_event_simple(id, RDMA_CM_EVENT_ADDR_ERROR, -ENODEV);
		return;
	}
	resolve_local(id);
	if (!id->dev)
		cm_attach_device(id, dev, cm_addr_port_num(id->cm, &id->dst));
	id->state = CM_ADDR_RESOLVED;
	cm_event_simple(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
}

/*
 * The source address the kernel's routing table picks toward dst (in the
 * daemon's network namespace): connecting a datagram socket looks the
 * route up and sends nothing.
 */
static int route_source(const struct sockaddr_storage *dst,
			struct sockaddr_storage *src)
{
	struct sockaddr_storage to = *dst;
	socklen_t len = sizeof(*src);
	int fd, ret = 0;

	fd = socket(dst->ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	cm_addr_set_port(&to, CM_ROUTE_PROBE_PORT);
	memset(src, 0, sizeof(*src));
	if (connect(fd, (struct sockaddr *)&to, cm_addr_len(&to)) < 0 ||
	    getsockname(fd, (struct sockaddr *)src, &len) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

/* The routing table's refusal of dst (-ENETUNREACH...), or 0. */
static int route_missing(const struct sockaddr_storage *dst)
{
	struct sockaddr_storage src;
	int ret = route_source(dst, &src);

	return ret == -ENETUNREACH || ret == -EHOSTUNREACH ? ret : 0;
}

/*
 * Another host's address: the RoCE device of the source address toward
 * it (the id's own if it is bound to one), with that address in *src; or
 * NULL when no RoCE device of ours reaches it.
 */
static struct ibvd_device *far_device(const struct ibvd_cm_id *id,
				      const struct sockaddr_storage *dst,
				      struct sockaddr_storage *src)
{
	struct ibvd_device *dev;

	if (!cm_addr_is_any(&id->src))
		*src = id->src;
	else if (route_source(dst, src) < 0)
		return NULL;
	dev = cm_addr_device(id->cm, src);
	return cm_dev_is_roce(dev) ? dev : NULL;
}

/* After the reply: dst is another host's, reached from src on dev. */
static void resolve_far(struct ibvd_cm_id *id, struct ibvd_device *dev,
			const struct sockaddr_storage *src)
{
	uint16_t port = cm_addr_port(&id->src);

	/* Still in its port's list: only the address gets specific. */
	id->src = *src;
	cm_addr_set_port(&id->src, port);
	cm_attach_device(id, dev, 1);
	id->state = CM_ADDR_RESOLVED;
	cm_event_simple(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
}

/* ---- the next hop's neighbour ----------------------------------------- */

/*
 * The kernel's rdma_cm resolves another host's address once the route's
 * next hop has a valid neighbour entry (addr_resolve_neigh): until then
 * it looks again whenever an entry changes, and gives ADDR_ERROR
 * ETIMEDOUT when the app's timeout has passed.  The daemon looks again
 * after 1 ms, then twice as long each time up to this.
 */
#define NEIGH_FIRST_LOOK_MS	1
#define NEIGH_MAX_LOOK_MS	64

static uint64_t mono_ms(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
}

enum neigh_verdict {
	NEIGH_READY,		/* valid, or nothing to wait for */
	NEIGH_WAIT,		/* being resolved */
	NEIGH_FAILED,		/* resolving it failed (NUD_FAILED) */
};

/*
 * The neighbour entry of the next hop from src to dst out of dev; first
 * (the request itself): have the kernel resolve it if it is not valid.
 * An interface without neighbours (loopback, NOARP: tun, WireGuard), a
 * group, or a route or a kernel that cannot tell leave nothing to wait
 * for, as before such waits.
 */
static enum neigh_verdict far_neighbour(const struct ibvd_device *dev,
					const struct sockaddr_storage *src,
					const struct sockaddr_storage *dst,
					bool first)
{
	const struct ibvd_netdev *nd = &dev->roce.netdev;
	uint8_t sgid[16], dgid[16], hop[16];
	int oif, state;

	if (nd->loopback || nd->noarp || cm_addr_is_multicast(dst))
		return NEIGH_READY;
	cm_addr_to_gid(src, sgid);
	cm_addr_to_gid(dst, dgid);
	if (ibvd_route_next_hop(nd, sgid, dgid, hop, &oif) < 0)
		return NEIGH_READY;
	state = ibvd_neigh_state(oif, hop);
	if (ibvd_neigh_valid(state) || (state < 0 && state != -ENOENT))
		return NEIGH_READY;
	if (!first && ibvd_neigh_failed(state))
		return NEIGH_FAILED;
	/* A failed entry of an earlier try resolves anew on a packet. */
	if (first || ibvd_neigh_absent(state))
		ibvd_neigh_prompt(oif, hop);
	return NEIGH_WAIT;
}

/* Look again at the entry after id's next step, or at its deadline. */
static int neigh_wait_arm(struct ibvd_cm_id *id, uint64_t now)
{
	uint64_t left = id->neigh.deadline_ms > now ? id->neigh.deadline_ms - now : 0;

	return cm_timer_arm(id, CM_TIMER_ADDR,
			    left < id->neigh.step_ms ? (uint32_t)left :
			    id->neigh.step_ms);
}

/* Before the reply: wait for the next hop's entry if it is not valid. */
static int neigh_wait_start(struct ibvd_cm_id *id, const struct ibvd_device *dev,
			    const struct sockaddr_storage *src,
			    const struct sockaddr_storage *dst, uint32_t timeout_ms)
{
	uint64_t now = mono_ms();

	id->neigh.waiting = false;
	if (far_neighbour(dev, src, dst, true) == NEIGH_READY)
		return 0;
	id->neigh.step_ms = NEIGH_FIRST_LOOK_MS;
	id->neigh.deadline_ms = now + timeout_ms;
	id->neigh.waiting = true;
	return neigh_wait_arm(id, now);
}

/* The timer of a wait: resolved, failed, or another look later. */
static void neigh_wait_look(struct ibvd_cm_id *id)
{
	struct sockaddr_storage src;
	struct ibvd_device *dev = far_device(id, &id->dst, &src);
	enum neigh_verdict v = dev ? far_neighbour(dev, &src, &id->dst, false) :
				     NEIGH_WAIT;
	uint64_t now = mono_ms();

	if (v == NEIGH_READY) {
		id->neigh.waiting = false;
		resolve_far(id, dev, &src);
		return;
	}
	if (v == NEIGH_WAIT && now < id->neigh.deadline_ms) {
		if (id->neigh.step_ms < NEIGH_MAX_LOOK_MS)
			id->neigh.step_ms *= 2;
		if (neigh_wait_arm(id, now) == 0)
			return;
	}
	id->neigh.waiting = false;
	id->state = CM_ADDR_BOUND;
	cm_event_simple(id, RDMA_CM_EVENT_ADDR_ERROR, -ETIMEDOUT);
}

void cm_addr_timeout(struct ibvd_cm_id *id)
{
	if (id->state != CM_ADDR_QUERY)
		return;
	if (id->neigh.waiting) {
		neigh_wait_look(id);
		return;
	}
	id->state = CM_ADDR_BOUND;
	cm_event_simple(id, RDMA_CM_EVENT_ADDR_ERROR, -EHOSTUNREACH);
}

int ibvd_req_cm_resolve_addr(struct ibvd_call *call)
{
	const Ibvd__CmAddr *req = (const Ibvd__CmAddr *)call->msg;
	struct ibvd_cm_id *id = cm_id_get(call, req->id);
	struct sockaddr_storage dst, far_src;
	struct ibvd_device *far_dev = NULL;
	bool reachable, loop_far;
	int ret;

	if (!id)
		return -EINVAL;
	ret = cm_addr_parse(call, &req->dst, "destination", &dst);
	if (ret < 0)
		return ret;
	if (id->state == CM_IDLE) {
		ret = resolve_bind(call, id, req, &dst);
		if (ret < 0)
			return ret;
	}
	if (id->state != CM_ADDR_BOUND)
		return ibvd_call_error(call, -EINVAL, "the id is %s",
				       cm_state_name(id->state));
	if (id->src.ss_family != dst.ss_family)
		return ibvd_call_error(call, -EINVAL,
				       "the id is bound to another family");
	reachable = cm_addr_is_local(id->cm, &dst) || cm_addr_is_multicast(&dst);
	/*
	 * A loopback source reaches no other host.  The kernel's IPv4 routing
	 * refuses a route from 127/8 out of any interface but lo, and its
	 * rdma_resolve_addr fails at once with EINVAL; IPv6 finds a route
	 * from ::1, but no device has ::1 for a GID: ADDR_ERROR, ENODEV.
	 * Resolved here, the request named 127.0.0.1 as its source to the
	 * peer, whose CM rejected it: the app learnt only at connect.
	 */
	loop_far = !reachable && addr_is_loopback(&id->src);
	if (loop_far && id->src.ss_family == AF_INET)
		return ibvd_call_error(call, -EINVAL,
				       "a loopback source reaches no other host");
	/*
	 * No route at all to another host's address: the kernel's
	 * rdma_resolve_addr fails at once with what its routing said
	 * (ENETUNREACH, EHOSTUNREACH for an unreachable route), not with an
	 * ADDR_ERROR once the timeout has passed.
	 */
	if (!reachable && !loop_far) {
		ret = route_missing(&dst);
		if (ret < 0)
			return ibvd_call_error(call, ret, "no route to the destination");
	}
	/*
	 * A group is on the network its route leaves by, as the kernel
	 * resolves one: a RoCE device's there; without such a route, this
	 * host's (the default device).
	 */
	if ((!reachable && !loop_far) ||
	    (cm_addr_is_multicast(&dst) && !id->dev))
		far_dev = far_device(id, &dst, &far_src);
	/* Arm before replying: a timer that cannot be armed is an error. */
	if (!reachable && !far_dev && !loop_far) {
		ret = cm_timer_arm(id, CM_TIMER_ADDR, req->timeout_ms);
		if (ret < 0)
			return ret;
	}
	id->neigh.waiting = false;
	if (!reachable && far_dev) {
		ret = neigh_wait_start(id, far_dev, &far_src, &dst, req->timeout_ms);
		if (ret < 0)
			return ret;
	}
	id->dst = dst;
	id->state = CM_ADDR_QUERY;
	ret = ibvd_call_reply(call, NULL, NULL, 0);
	if (ret < 0)
		return ret;
	if (loop_far) {
		id->state = CM_ADDR_BOUND;
		cm_event_simple(id, RDMA_CM_EVENT_ADDR_ERROR, -ENODEV);
	} else if (far_dev && !id->neigh.waiting) {
		resolve_far(id, far_dev, &far_src);
	} else if (reachable) {
		resolve_now(id);
	}
	return 0;
}


int ibvd_req_cm_resolve_route(struct ibvd_call *call)
{
	const Ibvd__CmAddr *req = (const Ibvd__CmAddr *)call->msg;
	struct ibvd_cm_id *id = cm_id_get(call, req->id);
	int ret;

	if (!id)
		return -EINVAL;
	if (id->state != CM_ADDR_RESOLVED || !id->dev)
		return ibvd_call_error(call, -EINVAL, "the id is %s, not ADDR_RESOLVED",
				       cm_state_name(id->state));
	id->state = CM_ROUTE_QUERY;
	ret = ibvd_call_reply(call, NULL, NULL, 0);
	if (ret < 0)
		return ret;
	/* The peer is a port of this daemon: the path is known at once. */
	id->slid = id->dlid = cm_port_lid(id);
	if (id->dst.ss_family == AF_IB)
		id->dlid = ib_port_lid(id->cm, &id->dst, id->dlid);
	cm_route_found(id);
	id->state = CM_ROUTE_RESOLVED;
	cm_event_simple(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
	return 0;
}

