/*
 * ibverbsd.conf: jansson decodes, this file checks every key against a
 * table per object and turns the first problem into one line that names
 * file, line, column and key path.  The positions come from config_pos.c
 * because jansson keeps none for decoded values.
 */
#include <config.h>	/* the generated one; "config.h" below is ours */

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <net/if.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <jansson.h>

#include "config.h"
#include "config_pos.h"
#include "core/roce.h"
#include "log.h"
#include "util.h"

/* A real config is a few hundred bytes; refuse to slurp anything absurd. */
#define CONFIG_MAX_BYTES	(1 << 20)
/* limits.uid.N.devices.DEV.key is the deepest path a valid config has. */
#define PATH_MAX_DEPTH		6
/* Long enough to recognise a value, short enough to keep one line. */
#define VALUE_SHOWN_MAX		40

struct parser {
	const char *text;
	size_t len;
	const char *name;	/* file name for messages */
	char *err;
	size_t errlen;
	struct ibvd_json_step path[PATH_MAX_DEPTH];
	size_t depth;
	json_t *limits;		/* the "limits" section, parsed last */
	/*
	 * The rules parsed so far by identity (rule index + 1, 0 empty):
	 * a file may hold tens of thousands, each checked against all the
	 * others for a second name of the same uid, group or cgroup.
	 */
	size_t *rule_index;
	size_t rule_index_len;		/* a power of two, or 0 */
	/* the configuration being reloaded over, or NULL */
	const struct ibvd_config *running;
};

/* Checks one member's value and stores it into obj. */
typedef int (*member_fn)(struct parser *p, json_t *value, void *obj);

struct member {
	const char *key;
	member_fn parse;
};

static void put_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Messages are one line, whatever control characters the file holds. */
static void put_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	char *c;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	for (c = err; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
}

static void push_key(struct parser *p, const char *key)
{
	p->path[p->depth].key = key;
	p->path[p->depth].index = 0;
	p->depth++;
}

static void push_index(struct parser *p, size_t index)
{
	p->path[p->depth].key = NULL;
	p->path[p->depth].index = index;
	p->depth++;
}

static void pop(struct parser *p)
{
	p->depth--;
}

/* "devices[0].lid" */
static void format_path(const struct parser *p, char *buf, size_t len)
{
	size_t i, used = 0;
	int n;

	buf[0] = '\0';
	for (i = 0; i < p->depth; i++) {
		if (p->path[i].key)
			n = snprintf(buf + used, len - used, "%s%s",
				     i ? "." : "", p->path[i].key);
		else
			n = snprintf(buf + used, len - used, "[%zu]",
				     p->path[i].index);
		if (n < 0 || (size_t)n >= len - used)
			break;
		used += (size_t)n;
	}
}

/* Reports a message at the current path.  Always returns -EINVAL. */
static int vfail(struct parser *p, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

static int vfail(struct parser *p, const char *fmt, va_list ap)
{
	struct ibvd_json_pos pos;
	char path[256], msg[256];

	if (!p->err)
		return -EINVAL;
	ibvd_json_locate(p->text, p->len, p->path, p->depth, &pos);
	format_path(p, path, sizeof(path));
	vsnprintf(msg, sizeof(msg), fmt, ap);
	put_err(p->err, p->errlen, "%s:%u:%u: %s%s%s", p->name, pos.line,
		pos.column, path, path[0] ? ": " : "", msg);
	return -EINVAL;
}

static int fail(struct parser *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int fail(struct parser *p, const char *fmt, ...)
{
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = vfail(p, fmt, ap);
	va_end(ap);
	return ret;
}

/* The same, at member key of the current object (checks across members). */
static int fail_at(struct parser *p, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail_at(struct parser *p, const char *key, const char *fmt, ...)
{
	va_list ap;
	int ret;

	push_key(p, key);
	va_start(ap, fmt);
	ret = vfail(p, fmt, ap);
	va_end(ap);
	pop(p);
	return ret;
}

static int out_of_memory(struct parser *p)
{
	put_err(p->err, p->errlen, "%s: out of memory", p->name);
	return -ENOMEM;
}

/* The offending value as the user wrote it (roughly), for "got ...". */
static const char *describe(json_t *v, char *buf, size_t len)
{
	char *s;
	size_t n;

	if (json_is_object(v))
		return "an object";
	if (json_is_array(v))
		return "an array";
	s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
	if (!s)
		return "a value";
	n = strlen(s);
	if (n > VALUE_SHOWN_MAX && len > VALUE_SHOWN_MAX + 3) {
		n = VALUE_SHOWN_MAX;
		/* do not cut a UTF-8 sequence in half */
		while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
			n--;
		snprintf(buf, len, "%.*s...", (int)n, s);
	} else {
		snprintf(buf, len, "%s", s);
	}
	free(s);
	return buf;
}

static int wrong(struct parser *p, const char *expected, json_t *v)
{
	char what[VALUE_SHOWN_MAX + 8];

	return fail(p, "expected %s, got %s", expected,
		    describe(v, what, sizeof(what)));
}

static int get_bool(struct parser *p, json_t *v, bool *out)
{
	if (!json_is_boolean(v))
		return wrong(p, "true or false", v);
	*out = json_is_true(v);
	return 0;
}

static int get_int(struct parser *p, json_t *v, long long min, long long max,
		   long long *out)
{
	char expected[64];

	if (!json_is_integer(v) || json_integer_value(v) < min ||
	    json_integer_value(v) > max) {
		snprintf(expected, sizeof(expected), "an integer %lld..%lld",
			 min, max);
		wrong(p, expected, v);
		return -EINVAL;	/* visibly nonzero: *out stays unset */
	}
	*out = json_integer_value(v);
	return 0;
}

/* The string value, or NULL once the message has been written. */
static const char *get_string(struct parser *p, json_t *v, const char *expected)
{
	if (!json_is_string(v)) {
		wrong(p, expected, v);
		return NULL;
	}
	return json_string_value(v);
}

static int replace_string(struct parser *p, char **dst, const char *src)
{
	char *s = strdup(src);

	if (!s)
		return out_of_memory(p);
	free(*dst);
	*dst = s;
	return 0;
}

static int parse_object(struct parser *p, json_t *v, const struct member *table,
			size_t n, void *obj)
{
	const char *key;
	json_t *val;
	size_t i;
	int ret;

	if (!json_is_object(v))
		return wrong(p, "an object", v);
	/* jansson iterates in file order, so the first problem is reported */
	json_object_foreach(v, key, val) {
		for (i = 0; i < n && strcmp(table[i].key, key) != 0; i++)
			;
		push_key(p, key);
		ret = i < n ? table[i].parse(p, val, obj) : fail(p, "unknown key");
		pop(p);
		if (ret)
			return ret;
	}
	return 0;
}

/* --- socket --- */

static int socket_path(struct parser *p, json_t *v, void *obj)
{
	struct ibvd_config *cfg = obj;
	const size_t max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;
	const char *s;

	s = get_string(p, v, "an absolute path");
	if (!s)
		return -EINVAL;
	if (s[0] != '/')
		return wrong(p, "an absolute path", v);
	if (strlen(s) > max)
		return fail(p, "longer than %zu bytes, the limit for a socket",
			    max);
	return replace_string(p, &cfg->socket_path, s);
}

/* JSON has no octal numbers, and 660 would silently mean 01224. */
static int socket_mode(struct parser *p, json_t *v, void *obj)
{
	static const char expected[] = "an octal mode string \"0000\"..\"0777\"";
	struct ibvd_config *cfg = obj;
	unsigned long mode;
	const char *s;

	s = get_string(p, v, expected);
	if (!s)
		return -EINVAL;
	if (s[0] == '\0' || strlen(s) > 4 || strspn(s, "01234567") != strlen(s))
		return wrong(p, expected, v);
	mode = strtoul(s, NULL, 8);
	if (mode > 0777)
		return wrong(p, expected, v);
	cfg->socket_mode = (mode_t)mode;
	return 0;
}

/* 1 and *gid if group name exists, 0 if not, else a negative errno. */
static int group_by_name(const char *name, gid_t *gid)
{
	struct group grp, *res = NULL;
	size_t size = 1024;
	char *buf;
	int ret;

	for (;;) {
		buf = malloc(size);
		if (!buf)
			return -ENOMEM;
		ret = getgrnam_r(name, &grp, buf, size, &res);
		if (ret == 0 && res)
			*gid = res->gr_gid;
		free(buf);
		if (ret != ERANGE || size >= CONFIG_MAX_BYTES)
			break;
		size *= 2;	/* a group with very many members */
	}
	/* getgrnam_r(3): these mean "not found" on some NSS back ends */
	if (ret == ENOENT || ret == ESRCH)
		return 0;
	if (ret)
		return -ret;
	return res != NULL;
}

static int group_exists(const char *name)
{
	gid_t gid;

	return group_by_name(name, &gid);
}

static int socket_group(struct parser *p, json_t *v, void *obj)
{
	struct ibvd_config *cfg = obj;
	const char *s;
	int ret;

	s = get_string(p, v, "a group name");
	if (!s)
		return -EINVAL;
	if (s[0] == '\0') {
		free(cfg->socket_group);
		cfg->socket_group = NULL;
		return 0;
	}
	/* now rather than at bind(): a typo must fail the load, not the start */
	ret = group_exists(s);
	if (ret == 0)
		return fail(p, "no such group \"%s\"", s);
	if (ret == -ENOMEM)
		return out_of_memory(p);
	if (ret < 0)
		return fail(p, "cannot look up group \"%s\": %s", s,
			    strerror(-ret));
	return replace_string(p, &cfg->socket_group, s);
}

static const struct member socket_members[] = {
	{ "path", socket_path },
	{ "mode", socket_mode },
	{ "group", socket_group },
};

/* --- engine, log --- */

/* An integer 1..64, or "auto": the engine decides at start (engine.c). */
static int engine_threads(struct parser *p, json_t *v, void *obj)
{
	struct ibvd_config *cfg = obj;

	if (json_is_string(v) && strcmp(json_string_value(v), "auto") == 0) {
		cfg->engine_threads = IBVD_ENGINE_THREADS_AUTO;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 1 ||
	    json_integer_value(v) > IBVD_MAX_ENGINE_THREADS)
		return wrong(p, "an integer 1..64 or \"auto\"", v);
	cfg->engine_threads = (unsigned int)json_integer_value(v);
	return 0;
}

/* Same-host SENDs through transit rings (common/transit.h), no engine. */
static int engine_direct(struct parser *p, json_t *v, void *obj)
{
	struct ibvd_config *cfg = obj;

	return get_bool(p, v, &cfg->engine_direct);
}

/* KiB of each QP's staging block (verbs/rings/staging.c), 0 for none. */
static int engine_staging(struct parser *p, json_t *v, void *obj)
{
	struct ibvd_config *cfg = obj;

	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > IBVD_STAGING_MAX_KIB)
		return wrong(p, "an integer 0..65536 (KiB)", v);
	cfg->engine_staging = (uint32_t)json_integer_value(v) * 1024u;
	return 0;
}

/* When a copy of client memory that has not returned is logged. */
static int engine_stuck_copy(struct parser *p, json_t *v, void *obj)
{
	struct ibvd_config *cfg = obj;

	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > IBVD_STUCK_COPY_MAX_MS)
		return wrong(p, "an integer 0..3600000 (ms)", v);
	cfg->engine_stuck_copy_ms = (uint32_t)json_integer_value(v);
	return 0;
}

static const struct member engine_members[] = {
	{ "threads", engine_threads },
	{ "direct", engine_direct },
	{ "staging", engine_staging },
	{ "stuck_copy_ms", engine_stuck_copy },
};

static int log_level(struct parser *p, json_t *v, void *obj)
{
	static const char expected[] = "err, warning, notice, info or debug";
	struct ibvd_config *cfg = obj;
	const char *s;
	int ret;

	s = get_string(p, v, expected);
	if (!s)
		return -EINVAL;
	ret = ibvd_log_level_parse(s);
	if (ret < 0)
		return wrong(p, expected, v);
	cfg->log_level = ret;
	return 0;
}

static const struct member log_members[] = {
	{ "level", log_level },
};

static int cm_handshake_timeout(struct parser *p, json_t *v, void *obj)
{
	struct ibvd_config *cfg = obj;

	if (!json_is_integer(v) || json_integer_value(v) < IBVD_CM_HANDSHAKE_MIN_MS ||
	    json_integer_value(v) > IBVD_CM_HANDSHAKE_MAX_MS)
		return wrong(p, "an integer 100..3600000 (ms)", v);
	cfg->cm_handshake_ms = (uint32_t)json_integer_value(v);
	return 0;
}

static const struct member cm_members[] = {
	{ "handshake_timeout_ms", cm_handshake_timeout },
};

/* --- devices --- */

static int device_name(struct parser *p, json_t *v, void *obj)
{
	static const char allowed[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				      "abcdefghijklmnopqrstuvwxyz0123456789_-";
	struct ibvd_config_device *dev = obj;
	char expected[64];
	const char *s = NULL;
	size_t n;

	snprintf(expected, sizeof(expected), "1..%d characters of A-Z a-z 0-9 _ -",
		 IBVD_DEV_NAME_MAX - 1);
	if (json_is_string(v))
		s = json_string_value(v);
	n = s ? strlen(s) : 0;
	if (n == 0 || n >= IBVD_DEV_NAME_MAX || strspn(s, allowed) != n)
		return wrong(p, expected, v);
	memcpy(dev->name, s, n + 1);
	return 0;
}

static int device_ports(struct parser *p, json_t *v, void *obj)
{
	struct ibvd_config_device *dev = obj;
	long long n;
	int ret;

	ret = get_int(p, v, 1, IBVD_MAX_PORTS, &n);
	if (!ret)
		dev->ports = (unsigned int)n;
	return ret;
}

static int device_lid(struct parser *p, json_t *v, void *obj)
{
	struct ibvd_config_device *dev = obj;
	long long n;
	int ret;

	ret = get_int(p, v, 0, IBVD_MAX_LID, &n);
	if (!ret)
		dev->lid = (uint16_t)n;
	return ret;
}

/* "xxxx:xxxx:xxxx:xxxx", as ibv_devinfo prints a GUID; 0 if malformed. */
static uint64_t parse_guid(const char *s)
{
	uint64_t guid = 0;
	int i;

	if (strlen(s) != 19)
		return 0;
	for (i = 0; i < 19; i++) {
		char c = s[i];

		if (i % 5 == 4) {
			if (c != ':')
				return 0;
			continue;
		}
		if (c >= '0' && c <= '9')
			guid = guid << 4 | (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			guid = guid << 4 | (uint64_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			guid = guid << 4 | (uint64_t)(c - 'A' + 10);
		else
			return 0;
	}
	return guid;
}

static int device_guid(struct parser *p, json_t *v, void *obj)
{
	static const char expected[] =
		"\"auto\" or a non-zero \"xxxx:xxxx:xxxx:xxxx\" in hex";
	struct ibvd_config_device *dev = obj;
	const char *s;

	s = get_string(p, v, expected);
	if (!s)
		return -EINVAL;
	if (strcmp(s, "auto") == 0) {
		dev->guid = 0;	/* derived when the device is created */
		return 0;
	}
	dev->guid = parse_guid(s);
	return dev->guid ? 0 : wrong(p, expected, v);
}

/*
 * The kernel's rule for interface names (dev_valid_name()): 1..15 bytes,
 * not "." or "..", no '/', ':' or white space.
 */
static bool valid_ifname(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n < IFNAMSIZ && strcmp(s, ".") != 0 &&
	       strcmp(s, "..") != 0 && strcspn(s, "/: \t\n\v\f\r") == n;
}

/*
 * An interface the running configuration names already: gone for now,
 * its device waits for one of that name, and a reload (of the limits,
 * say) must not fail for it.
 */
static bool awaited(const struct parser *p, const char *ifname)
{
	unsigned int i;

	for (i = 0; p->running && i < p->running->ndevices; i++)
		if (strcmp(p->running->devices[i].netdev, ifname) == 0)
			return true;
	return false;
}

/*
 * Now rather than when the device is built: a typo must fail the load,
 * with its position.  rxe cannot be added on a missing interface either.
 */
static int device_netdev(struct parser *p, json_t *v, void *obj)
{
	static const char expected[] =
		"a network interface name of 1..15 characters";
	struct ibvd_config_device *dev = obj;
	const char *s;

	s = get_string(p, v, expected);
	if (!s)
		return -EINVAL;
	if (!valid_ifname(s))
		return wrong(p, expected, v);
	if (if_nametoindex(s) == 0 && !(errno == ENODEV && awaited(p, s)))
		return errno == ENODEV ?
		       fail(p, "no such network interface \"%s\"", s) :
		       fail(p, "cannot look up network interface \"%s\": %s",
			    s, strerror(errno));
	snprintf(dev->netdev, sizeof(dev->netdev), "%s", s);
	return 0;
}

static int parse_peer(struct parser *p, json_t *v, struct ibvd_cidr *c)
{
	static const char expected[] =
		"a CIDR such as \"10.0.0.0/8\" or \"fd00::/64\"";
	char meant[64];
	const char *s;
	int ret;

	s = get_string(p, v, expected);
	if (!s)
		return -EINVAL;
	ret = ibvd_cidr_parse(s, c);
	if (ret == -ERANGE)
		return fail(p, "prefix length of \"%s\" is past the address (/32 for IPv4, /128 for IPv6)",
			    s);
	if (ret == -EDOM) {
		ibvd_cidr_clear_host_bits(c);
		return fail(p, "\"%s\" has host bits set: the block is \"%s\"",
			    s, ibvd_cidr_str(c, meant, sizeof(meant)));
	}
	return ret ? wrong(p, expected, v) : 0;
}

static int device_peers(struct parser *p, json_t *v, void *obj)
{
	struct ibvd_config_device *dev = obj;
	json_t *pv;
	size_t i;
	int ret = 0;

	if (!json_is_array(v))
		return wrong(p, "an array of CIDRs", v);
	if (json_array_size(v) == 0)
		return fail(p, "expected at least one CIDR (leave \"peers\" out for the interface's own subnets)");
	json_array_foreach(v, i, pv) {
		push_index(p, i);
		if (i >= IBVD_MAX_PEERS)
			ret = fail(p, "too many peers (at most %d)", IBVD_MAX_PEERS);
		else
			ret = parse_peer(p, pv, &dev->peers[i]);
		pop(p);
		if (ret)
			return ret;
	}
	dev->npeers = (unsigned int)i;
	return 0;
}

static const struct member device_members[] = {
	{ "name", device_name },
	{ "ports", device_ports },
	{ "lid", device_lid },
	{ "guid", device_guid },
	{ "netdev", device_netdev },
	{ "peers", device_peers },
};

static void set_default_device(struct ibvd_config_device *dev, size_t index)
{
	memset(dev, 0, sizeof(*dev));
	snprintf(dev->name, sizeof(dev->name), "ibvd%zu", index);
	dev->ports = 1;
}

static unsigned int last_lid(const struct ibvd_config_device *dev)
{
	return dev->lid + dev->ports - 1;
}

/* Names, GUIDs and LIDs identify a device or port: no two may share one. */
static int check_unique(struct parser *p, const struct ibvd_config *cfg,
			size_t i)
{
	const struct ibvd_config_device *dev = &cfg->devices[i], *o;
	size_t j;

	for (j = 0; j < i; j++) {
		o = &cfg->devices[j];
		if (strcmp(o->name, dev->name) == 0)
			return fail_at(p, "name", "name \"%s\" is already used by devices[%zu]",
				       dev->name, j);
		if (dev->guid && o->guid == dev->guid)
			return fail_at(p, "guid", "GUID is already used by devices[%zu] \"%s\"",
				       j, o->name);
		if (dev->netdev[0] && strcmp(o->netdev, dev->netdev) == 0)
			return fail_at(p, "netdev", "interface \"%s\" is already used by devices[%zu] \"%s\"",
				       dev->netdev, j, o->name);
		if (dev->lid && o->lid && dev->lid <= last_lid(o) &&
		    o->lid <= last_lid(dev))
			return fail_at(p, "lid", "LIDs %u..%u overlap LIDs %u..%u of devices[%zu] \"%s\"",
				       dev->lid, last_lid(dev), o->lid,
				       last_lid(o), j, o->name);
	}
	return 0;
}

/* What a RoCE device (with "netdev") may have, and only it. */
static int check_kind(struct parser *p, const struct ibvd_config_device *dev)
{
	if (!dev->netdev[0])
		return dev->npeers ?
		       fail_at(p, "peers", "only a RoCE device (one with \"netdev\") has peers") : 0;
	if (dev->ports != 1)
		return fail_at(p, "ports", "a RoCE device has one port");
	if (dev->lid)
		return fail_at(p, "lid", "a RoCE device has no LID (its port's LID is 0)");
	return 0;
}

static int parse_device(struct parser *p, json_t *v, struct ibvd_config *cfg,
			size_t i)
{
	struct ibvd_config_device *dev = &cfg->devices[i];
	int ret;

	set_default_device(dev, i);
	ret = parse_object(p, v, device_members, ARRAY_SIZE(device_members), dev);
	if (ret)
		return ret;
	cfg->ndevices = (unsigned int)i + 1;
	ret = check_kind(p, dev);
	if (ret)
		return ret;
	if (dev->lid && last_lid(dev) > IBVD_MAX_LID)
		return fail_at(p, "lid", "LIDs %u..%u of %u ports run past the last unicast LID %u",
			       dev->lid, last_lid(dev), dev->ports, IBVD_MAX_LID);
	return check_unique(p, cfg, i);
}

static int parse_devices(struct parser *p, json_t *v, void *obj)
{
	struct ibvd_config *cfg = obj;
	json_t *dv;
	size_t i;
	int ret = 0;

	if (!json_is_array(v))
		return wrong(p, "an array of devices", v);
	if (json_array_size(v) == 0)
		return fail(p, "expected at least one device");
	cfg->ndevices = 0;
	json_array_foreach(v, i, dv) {
		push_index(p, i);
		if (i >= IBVD_MAX_DEVICES)
			ret = fail(p, "too many devices (at most %d)",
				   IBVD_MAX_DEVICES);
		else
			ret = parse_device(p, dv, cfg, i);
		pop(p);
		if (ret)
			return ret;
	}
	return 0;
}

/* --- limits --- */

const char *const ibvd_limit_names[IBVD_LIMIT_NKINDS] = {
	[IBVD_LIMIT_MEMLOCK] = "memlock",
	[IBVD_LIMIT_HCA_HANDLE] = "hca_handle",
	[IBVD_LIMIT_HCA_OBJECT] = "hca_object",
	[IBVD_LIMIT_QP] = "qp",
	[IBVD_LIMIT_CQ] = "cq",
	[IBVD_LIMIT_MR] = "mr",
	[IBVD_LIMIT_PD] = "pd",
	[IBVD_LIMIT_SRQ] = "srq",
	[IBVD_LIMIT_AH] = "ah",
	[IBVD_LIMIT_CM_ID] = "cm_id",
	[IBVD_LIMIT_SESSION] = "session",
	[IBVD_LIMIT_COMP_CHANNEL] = "comp_channel",
	[IBVD_LIMIT_MCAST_ATTACH] = "mcast_attach",
	[IBVD_LIMIT_MCAST_JOIN] = "mcast_join",
};

/*
 * Far above what rping, cmtime, perftest, UCX or an MPI job on one host
 * use, far below what would starve the other uids: 1024 connections (the
 * old fixed per-uid cap) and a multicast group per connection; as many
 * CM ids as one event channel may hold (each may arm timers: they are
 * bounded with it).  Completion channels: librdmacm's rdma_create_qp
 * makes two per connection, so `cmtime -c 8000` fits (a socket each: the
 * daemon's fd budget, 1048576 under the unit, holds 64 uids at the limit).
 */
#define BUILTIN_CM_ID		65536
#define BUILTIN_SESSION		1024
#define BUILTIN_COMP_CHANNEL	16384
#define BUILTIN_MCAST_ATTACH	1024
#define BUILTIN_MCAST_JOIN	1024

uint64_t ibvd_limit_builtin(enum ibvd_limit_kind kind)
{
	switch (kind) {
	case IBVD_LIMIT_CM_ID:		return BUILTIN_CM_ID;
	case IBVD_LIMIT_SESSION:	return BUILTIN_SESSION;
	case IBVD_LIMIT_COMP_CHANNEL:	return BUILTIN_COMP_CHANNEL;
	case IBVD_LIMIT_MCAST_ATTACH:	return BUILTIN_MCAST_ATTACH;
	case IBVD_LIMIT_MCAST_JOIN:	return BUILTIN_MCAST_JOIN;
	default:			return IBVD_LIMIT_UNLIMITED;
	}
}

int ibvd_limit_all_devices_only(int kind)
{
	return kind == IBVD_LIMIT_BANDWIDTH || kind == IBVD_LIMIT_CM_ID ||
	       kind == IBVD_LIMIT_SESSION || kind == IBVD_LIMIT_MCAST_JOIN;
}

static const char *const match_names[] = {
	[IBVD_LIMIT_MATCH_UID] = "uid",
	[IBVD_LIMIT_MATCH_GROUP] = "group",
	[IBVD_LIMIT_MATCH_CGROUP] = "cgroup",
};

int ibvd_limit_key(const char *name)
{
	int i;

	if (strcmp(name, "bandwidth") == 0)
		return IBVD_LIMIT_BANDWIDTH;
	for (i = 0; i < IBVD_LIMIT_NKINDS; i++)
		if (strcmp(ibvd_limit_names[i], name) == 0)
			return i;
	return -1;
}

int ibvd_config_device_index(const struct ibvd_config *cfg, const char *name)
{
	unsigned int i;

	for (i = 0; i < cfg->ndevices; i++)
		if (strcmp(cfg->devices[i].name, name) == 0)
			return (int)i;
	return -1;
}

static void keys_init(struct ibvd_limit_keys *ks)
{
	int k;

	for (k = 0; k < IBVD_LIMIT_NKINDS; k++)
		ks->q.max[k] = IBVD_LIMIT_UNLIMITED;
	ks->q.bandwidth = IBVD_LIMIT_UNLIMITED;
	ks->given = 0;
}

static void entry_init(struct ibvd_limit_entry *e)
{
	int i;

	keys_init(&e->all);
	for (i = 0; i < IBVD_MAX_DEVICES; i++)
		keys_init(&e->dev[i]);
	e->runtime = 0;
}

/* Is a limit of kind a byte count (which takes k/m/g suffixes)? */
static bool limit_is_bytes(int kind)
{
	return kind == IBVD_LIMIT_MEMLOCK || kind == IBVD_LIMIT_BANDWIDTH;
}

/* 1024-based suffixes, as sizes in rlimits and cgroup files are. */
static int suffix_shift(char c)
{
	switch (c) {
	case 'k': case 'K': return 10;
	case 'm': case 'M': return 20;
	case 'g': case 'G': return 30;
	default: return -1;
	}
}

int ibvd_limit_parse_value(int kind, const char *s, uint64_t *ret)
{
	bool bytes = limit_is_bytes(kind);
	unsigned long long n;
	int shift = 0;
	char *end;

	if (!strcmp(s, "max")) {
		*ret = IBVD_LIMIT_UNLIMITED;
		return 0;
	}
	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	n = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	if (*end && bytes && end[1] == '\0')
		shift = suffix_shift(*end);
	if (shift < 0 || (*end && !shift) || n > (uint64_t)INT64_MAX >> shift)
		return -EINVAL;
	*ret = (uint64_t)n << shift;
	return 0;
}

/*
 * An integer of at least min (0 or 1), or "max", or, for byte counts, a
 * string as ibvctl limit set takes it ("64M").
 */
static int limit_value(struct parser *p, json_t *v, int kind, json_int_t min,
		       uint64_t *out)
{
	bool bytes = limit_is_bytes(kind);
	uint64_t n;

	if (json_is_string(v) &&
	    (bytes || strcmp(json_string_value(v), "max") == 0) &&
	    ibvd_limit_parse_value(kind, json_string_value(v), &n) == 0 &&
	    n >= (uint64_t)min) {
		*out = n;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < min)
		return wrong(p, bytes ? (min ? "a positive byte count (\"64M\") or \"max\"" :
				  "a byte count (\"64M\") or \"max\"") :
			     min ? "a positive integer or \"max\"" :
			     "a non-negative integer or \"max\"", v);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/* One "key": value of a limits object; all: not inside "devices". */
static int parse_limit_key(struct parser *p, const char *key, json_t *v,
			   struct ibvd_limit_keys *ks, bool all)
{
	int kind = ibvd_limit_key(key), ret;

	if (kind < 0)
		return fail(p, "unknown limit");
	if (!all && ibvd_limit_all_devices_only(kind))
		return fail(p, "%s limits all devices together, not one", key);
	/* the engine would run "0 bytes/s" at 1: say so rather than do it */
	if (kind == IBVD_LIMIT_BANDWIDTH)
		ret = limit_value(p, v, kind, 1, &ks->q.bandwidth);
	else
		ret = limit_value(p, v, kind, 0, &ks->q.max[kind]);
	if (!ret)
		ks->given |= 1u << kind;
	return ret;
}

static int parse_device_keys(struct parser *p, json_t *v,
			     struct ibvd_limit_keys *ks)
{
	const char *key;
	json_t *val;
	int ret;

	if (!json_is_object(v))
		return wrong(p, "an object of limits", v);
	json_object_foreach(v, key, val) {
		push_key(p, key);
		ret = parse_limit_key(p, key, val, ks, false);
		pop(p);
		if (ret)
			return ret;
	}
	return 0;
}

/* "devices": { "ibvd0": {...} }, names from the top-level "devices". */
static int parse_entry_devices(struct parser *p, json_t *v,
			       const struct ibvd_config *cfg,
			       struct ibvd_limit_entry *e)
{
	const char *name;
	json_t *val;
	int i, ret;

	if (!json_is_object(v))
		return wrong(p, "an object of devices", v);
	json_object_foreach(v, name, val) {
		push_key(p, name);
		i = ibvd_config_device_index(cfg, name);
		if (i < 0)
			ret = fail(p, "unknown device \"%s\"", name);
		else
			ret = parse_device_keys(p, val, &e->dev[i]);
		pop(p);
		if (ret)
			return ret;
	}
	return 0;
}

/* "default" or one rule's object: limit keys and "devices". */
static int parse_entry(struct parser *p, json_t *v,
		       const struct ibvd_config *cfg, struct ibvd_limit_entry *e)
{
	const char *key;
	json_t *val;
	int ret;

	if (!json_is_object(v))
		return wrong(p, "an object of limits", v);
	json_object_foreach(v, key, val) {
		push_key(p, key);
		if (strcmp(key, "devices") == 0)
			ret = parse_entry_devices(p, val, cfg, e);
		else
			ret = parse_limit_key(p, key, val, &e->all, true);
		pop(p);
		if (ret)
			return ret;
	}
	return 0;
}

static int limits_default(struct parser *p, json_t *v, void *obj)
{
	struct ibvd_config *cfg = obj;

	return parse_entry(p, v, cfg, &cfg->limit_default);
}

/* Decimal digits only, no sign, within [0, max]. */
static int parse_id(const char *s, unsigned long max, unsigned long *out)
{
	char *end;

	if (!s[0] || strspn(s, "0123456789") != strlen(s))
		return -EINVAL;
	errno = 0;
	*out = strtoul(s, &end, 10);
	return errno || *out > max ? -EINVAL : 0;
}

/* The gid of group name (or of a decimal gid); -EINVAL says why. */
int ibvd_config_lookup_group(const char *name, gid_t *gid, char *why,
			     size_t len)
{
	unsigned long n;
	int ret;

	if (parse_id(name, (gid_t)-2, &n) == 0) {
		*gid = (gid_t)n;
		return 0;
	}
	ret = group_by_name(name, gid);
	if (ret > 0)
		return 0;
	if (ret < 0) {
		snprintf(why, len, "cannot look up group \"%s\": %s", name,
			 strerror(-ret));
		return -EIO;
	}
	snprintf(why, len, "no such group \"%s\"", name);
	return -ENOENT;
}

/*
 * What a rule matches, from its key as written: 0, -ENOMEM, or -EINVAL
 * with the reason in why.  Also used by ibvctl limit set.
 */
static int rule_identity(struct ibvd_config_limit_rule *r, const char *key,
			 char *why, size_t len)
{
	unsigned long n;

	if (r->match == IBVD_LIMIT_MATCH_UID) {
		if (parse_id(key, (uid_t)-2, &n)) {
			snprintf(why, len, "expected a decimal uid");
			return -EINVAL;
		}
		r->uid = (uid_t)n;
	} else if (r->match == IBVD_LIMIT_MATCH_GROUP) {
		if (ibvd_config_lookup_group(key, &r->gid, why, len))
			return -EINVAL;
	} else if (key[0] != '/') {
		snprintf(why, len, "expected a cgroup path starting with \"/\"");
		return -EINVAL;
	} else if (!(r->cgroup = strdup(key))) {
		return -ENOMEM;
	}
	r->name = strdup(key);
	return r->name ? 0 : -ENOMEM;
}

/* Do a and b match exactly the same clients? */
static bool same_identity(const struct ibvd_config_limit_rule *a,
			  const struct ibvd_config_limit_rule *b)
{
	if (a->match != b->match)
		return false;
	switch (a->match) {
	case IBVD_LIMIT_MATCH_UID:
		return a->uid == b->uid;
	case IBVD_LIMIT_MATCH_GROUP:
		return a->gid == b->gid;
	default:
		return strcmp(a->cgroup, b->cgroup) == 0;
	}
}

/* The rule matching exactly what want matches (not the best for a peer). */
static struct ibvd_config_limit_rule *
find_same(struct ibvd_config *cfg, const struct ibvd_config_limit_rule *want)
{
	size_t i;

	for (i = 0; i < cfg->nlimit_rules; i++)
		if (same_identity(&cfg->limit_rules[i], want))
			return &cfg->limit_rules[i];
	return NULL;
}

/* FNV-1a of a rule's identity. */
static size_t identity_hash(const struct ibvd_config_limit_rule *r)
{
	uint64_t h = 14695981039346656037ull ^ (uint64_t)r->match;
	const char *c;

	if (r->match == IBVD_LIMIT_MATCH_CGROUP) {
		for (c = r->cgroup; *c; c++)
			h = (h ^ (uint8_t)*c) * 1099511628211ull;
	} else {
		h = (h ^ (r->match == IBVD_LIMIT_MATCH_UID ? r->uid : r->gid)) *
		    1099511628211ull;
	}
	return (size_t)(h ^ (h >> 29));
}

/* The index's slot holding a rule like want, or the empty one it would take. */
static size_t *index_slot(const struct parser *p, const struct ibvd_config *cfg,
			  const struct ibvd_config_limit_rule *want)
{
	size_t mask = p->rule_index_len - 1, i = identity_hash(want) & mask;

	while (p->rule_index[i] &&
	       !same_identity(&cfg->limit_rules[p->rule_index[i] - 1], want))
		i = (i + 1) & mask;
	return &p->rule_index[i];
}

/* The rule parsed so far matching exactly what want matches, or NULL. */
static struct ibvd_config_limit_rule *
index_find(const struct parser *p, struct ibvd_config *cfg,
	   const struct ibvd_config_limit_rule *want)
{
	size_t at;

	if (!p->rule_index_len)
		return NULL;
	at = *index_slot(p, cfg, want);
	return at ? &cfg->limit_rules[at - 1] : NULL;
}

/* The last rule of cfg into the index, which stays at most half full. */
static int index_add(struct parser *p, const struct ibvd_config *cfg)
{
	size_t n = cfg->nlimit_rules, len = p->rule_index_len, i;

	if (2 * n > len) {
		free(p->rule_index);
		p->rule_index_len = len ? 2 * len : 64;
		p->rule_index = calloc(p->rule_index_len, sizeof(*p->rule_index));
		if (!p->rule_index) {
			p->rule_index_len = 0;
			return -ENOMEM;
		}
		for (i = 0; i + 1 < n; i++)
			*index_slot(p, cfg, &cfg->limit_rules[i]) = i + 1;
	}
	*index_slot(p, cfg, &cfg->limit_rules[n - 1]) = n;
	return 0;
}

static int add_rule(struct ibvd_config *cfg, enum ibvd_limit_match match,
		    struct ibvd_config_limit_rule **rule)
{
	struct ibvd_config_limit_rule *r;
	size_t n = cfg->nlimit_rules;

	/* room for 16, then twice as many each time it is full */
	if (n == 0 || (n >= 16 && !(n & (n - 1)))) {
		r = realloc(cfg->limit_rules, (n ? 2 * n : 16) * sizeof(*r));
		if (!r)
			return -ENOMEM;
		cfg->limit_rules = r;
	}
	r = &cfg->limit_rules[cfg->nlimit_rules++];
	memset(r, 0, sizeof(*r));
	r->match = match;
	entry_init(&r->limits);
	*rule = r;
	return 0;
}

static int parse_rule(struct parser *p, const char *key, json_t *v,
		      struct ibvd_config *cfg, enum ibvd_limit_match match)
{
	struct ibvd_config_limit_rule want = { .match = match }, *r, *same;
	char why[256];
	int ret;

	ret = rule_identity(&want, key, why, sizeof(why));
	if (ret == -ENOMEM)
		ret = out_of_memory(p);
	else if (ret)
		ret = fail(p, "%s", why);
	/* "01001" beside "1001", a group by name and by gid: one would be dead */
	else if ((same = index_find(p, cfg, &want)))
		ret = fail(p, "the same %s as \"%s\"", match_names[match],
			   same->name);
	else if (add_rule(cfg, match, &r))
		ret = out_of_memory(p);
	if (ret) {
		free(want.cgroup);
		free(want.name);
		return ret;
	}
	r->uid = want.uid;
	r->gid = want.gid;
	r->cgroup = want.cgroup;	/* the rule takes the strings over */
	r->name = want.name;
	if (index_add(p, cfg))
		return out_of_memory(p);
	return parse_entry(p, v, cfg, &r->limits);
}

static int parse_rules(struct parser *p, json_t *v, struct ibvd_config *cfg,
		       enum ibvd_limit_match match)
{
	const char *key;
	json_t *val;
	int ret;

	if (!json_is_object(v))
		return wrong(p, "an object", v);
	json_object_foreach(v, key, val) {
		push_key(p, key);
		ret = parse_rule(p, key, val, cfg, match);
		pop(p);
		if (ret)
			return ret;
	}
	return 0;
}

static int limits_uid(struct parser *p, json_t *v, void *cfg)
{
	return parse_rules(p, v, cfg, IBVD_LIMIT_MATCH_UID);
}

static int limits_group(struct parser *p, json_t *v, void *cfg)
{
	return parse_rules(p, v, cfg, IBVD_LIMIT_MATCH_GROUP);
}

static int limits_cgroup(struct parser *p, json_t *v, void *cfg)
{
	return parse_rules(p, v, cfg, IBVD_LIMIT_MATCH_CGROUP);
}

static const struct member limits_members[] = {
	{ "default", limits_default },
	{ "uid", limits_uid },
	{ "group", limits_group },
	{ "cgroup", limits_cgroup },
};

/*
 * Device names in "limits" refer to the top-level "devices", which may
 * come later in the file: the section is only noted here and parsed once
 * the rest of the file is (parse_text()).
 */
static int parse_limits(struct parser *p, json_t *v, void *obj)
{
	(void)obj;
	p->limits = v;
	return 0;
}

static int parse_limits_now(struct parser *p, struct ibvd_config *cfg)
{
	int ret;

	if (!p->limits)
		return 0;
	push_key(p, "limits");
	ret = parse_object(p, p->limits, limits_members,
			   ARRAY_SIZE(limits_members), cfg);
	pop(p);
	return ret;
}

/* ---- which limits apply ---- */

/* Is gid one of who's groups, its primary one or a supplementary one? */
static bool in_groups(gid_t gid, const struct ibvd_limit_who *who)
{
	size_t i;

	if (gid == who->gid)
		return true;
	for (i = 0; i < who->ngroups; i++)
		if (who->groups[i] == gid)
			return true;
	return false;
}

static const struct ibvd_config_limit_rule *
find_uid(const struct ibvd_config *cfg, uid_t uid)
{
	size_t i;

	for (i = 0; i < cfg->nlimit_rules; i++)
		if (cfg->limit_rules[i].match == IBVD_LIMIT_MATCH_UID &&
		    cfg->limit_rules[i].uid == uid)
			return &cfg->limit_rules[i];
	return NULL;
}

/*
 * The first group entry (file order, then runtime ones as added) whose
 * group is any of who's.  Which one is primary does not matter: a user
 * picks it with sg(1) or newgrp(1), so it must not pick the entry.
 */
static const struct ibvd_config_limit_rule *
find_group(const struct ibvd_config *cfg, const struct ibvd_limit_who *who)
{
	const struct ibvd_config_limit_rule *r;
	size_t i;

	for (i = 0; i < cfg->nlimit_rules; i++) {
		r = &cfg->limit_rules[i];
		if (r->match == IBVD_LIMIT_MATCH_GROUP && in_groups(r->gid, who))
			return r;
	}
	return NULL;
}

bool ibvd_config_has_cgroup_rules(const struct ibvd_config *cfg)
{
	size_t i;

	for (i = 0; i < cfg->nlimit_rules; i++)
		if (cfg->limit_rules[i].match == IBVD_LIMIT_MATCH_CGROUP)
			return true;
	return false;
}

static const struct ibvd_config_limit_rule *
find_cgroup(const struct ibvd_config *cfg, const char *cgroup)
{
	const struct ibvd_config_limit_rule *r, *best = NULL;
	size_t i, len, best_len = 0;

	for (i = 0; cgroup && i < cfg->nlimit_rules; i++) {
		r = &cfg->limit_rules[i];
		if (r->match != IBVD_LIMIT_MATCH_CGROUP)
			continue;
		len = strlen(r->cgroup);
		if (len > best_len && strncmp(r->cgroup, cgroup, len) == 0) {
			best = r;
			best_len = len;
		}
	}
	return best;
}

const struct ibvd_config_limit_rule *
ibvd_config_limit_rule_for(const struct ibvd_config *cfg,
			   const struct ibvd_limit_who *who)
{
	const struct ibvd_config_limit_rule *r;

	r = find_uid(cfg, who->uid);
	if (!r)
		r = find_group(cfg, who);
	if (!r)
		r = find_cgroup(cfg, who->cgroup);
	return r;
}

/*
 * own's key if it sets it, else dflt's, else the built-in default over
 * all devices (builtin) or "max" on one device.
 */
static uint64_t key_value(const struct ibvd_limit_keys *own,
			  const struct ibvd_limit_keys *dflt, int kind,
			  bool builtin)
{
	const struct ibvd_limit_keys *ks = NULL;
	unsigned int bit = 1u << kind;

	if (own && (own->given & bit))
		ks = own;
	else if (dflt && (dflt->given & bit))
		ks = dflt;
	if (ks)
		return kind == IBVD_LIMIT_BANDWIDTH ? ks->q.bandwidth :
		       ks->q.max[kind];
	if (builtin && kind != IBVD_LIMIT_BANDWIDTH)
		return ibvd_limit_builtin((enum ibvd_limit_kind)kind);
	return IBVD_LIMIT_UNLIMITED;
}

static void resolve(const struct ibvd_limit_keys *own,
		    const struct ibvd_limit_keys *dflt, bool builtin,
		    struct ibvd_quota *out)
{
	int k;

	for (k = 0; k < IBVD_LIMIT_NKINDS; k++)
		out->max[k] = key_value(own, dflt, k, builtin);
	out->bandwidth = key_value(own, dflt, IBVD_LIMIT_BANDWIDTH, builtin);
}

void ibvd_config_limits_all(const struct ibvd_config *cfg,
			    const struct ibvd_config_limit_rule *rule,
			    struct ibvd_quota *out)
{
	resolve(rule ? &rule->limits.all : NULL, &cfg->limit_default.all, true,
		out);
}

void ibvd_config_limits_dev(const struct ibvd_config *cfg,
			    const struct ibvd_config_limit_rule *rule,
			    const char *dev, struct ibvd_quota *out)
{
	int i = ibvd_config_device_index(cfg, dev);

	if (i < 0)
		resolve(NULL, NULL, false, out);
	else
		resolve(rule ? &rule->limits.dev[i] : NULL,
			&cfg->limit_default.dev[i], false, out);
	out->bandwidth = IBVD_LIMIT_UNLIMITED;
}

void ibvd_config_rule_name(const struct ibvd_config *cfg,
			   const struct ibvd_config_limit_rule *rule,
			   char *buf, size_t len)
{
	const struct ibvd_limit_entry *e = rule ? &rule->limits :
					   &cfg->limit_default;
	const char *runtime = e->runtime ? "runtime " : "";

	if (rule)
		snprintf(buf, len, "%s%s %s", runtime, match_names[rule->match],
			 rule->name);
	else
		snprintf(buf, len, "%sdefault", runtime);
}

int ibvd_config_limit_rule_get(struct ibvd_config *cfg,
			       enum ibvd_limit_match match, const char *key,
			       struct ibvd_limit_entry **ret,
			       char *err, size_t errlen)
{
	struct ibvd_config_limit_rule want = { .match = match }, *r;
	int rc;

	rc = rule_identity(&want, key, err, errlen);
	if (rc)
		goto out;
	r = find_same(cfg, &want);
	if (!r) {
		rc = add_rule(cfg, match, &r);
		if (rc)
			goto out;
		r->uid = want.uid;
		r->gid = want.gid;
		/* the new rule takes the strings over */
		r->cgroup = want.cgroup;
		r->name = want.name;
		want.cgroup = want.name = NULL;
	}
	*ret = &r->limits;
out:
	free(want.cgroup);
	free(want.name);
	return rc;
}

/* --- top level --- */

static int parse_socket(struct parser *p, json_t *v, void *cfg)
{
	return parse_object(p, v, socket_members, ARRAY_SIZE(socket_members), cfg);
}

static int parse_engine(struct parser *p, json_t *v, void *cfg)
{
	return parse_object(p, v, engine_members, ARRAY_SIZE(engine_members), cfg);
}

static int parse_log(struct parser *p, json_t *v, void *cfg)
{
	return parse_object(p, v, log_members, ARRAY_SIZE(log_members), cfg);
}

static int parse_cm(struct parser *p, json_t *v, void *cfg)
{
	return parse_object(p, v, cm_members, ARRAY_SIZE(cm_members), cfg);
}

/* --- the memlock emulation and device links --- */

static int rlimit_memlock(struct parser *p, json_t *v, void *obj)
{
	static const char expected[] = "\"enforce\" or \"ignore\"";
	struct ibvd_config *cfg = obj;
	const char *s;

	s = get_string(p, v, expected);
	if (!s)
		return -EINVAL;
	if (strcmp(s, "enforce") == 0)
		cfg->rlimit_memlock_enforce = true;
	else if (strcmp(s, "ignore") == 0)
		cfg->rlimit_memlock_enforce = false;
	else
		return wrong(p, expected, v);
	return 0;
}

static int device_links(struct parser *p, json_t *v, void *obj)
{
	struct ibvd_config *cfg = obj;

	return get_bool(p, v, &cfg->device_links);
}

/* A user that must exist at load time, as the socket's group must. */
static int daemon_user(struct parser *p, json_t *v, void *obj)
{
	struct ibvd_config *cfg = obj;
	const char *s;

	s = get_string(p, v, "a user name or uid");
	if (!s)
		return -EINVAL;
	if (s[0] == '\0') {
		free(cfg->user);
		cfg->user = NULL;
		return 0;
	}
	errno = 0;
	if (!getpwnam(s) && !(s[strspn(s, "0123456789")] == '\0' &&
			      strlen(s) < 10))
		return fail(p, "no such user \"%s\"", s);
	return replace_string(p, &cfg->user, s);
}

/*
 * "admin_group": its members administer the daemon as root does, if the
 * group exists (it is looked up at start and at each reload, so it may
 * come later); "" is nobody but root.  Never the group of the socket's
 * users: administering means every tenant's limits and objects.
 */
static int admin_group(struct parser *p, json_t *v, void *obj)
{
	struct ibvd_config *cfg = obj;
	const char *s;

	s = get_string(p, v, "a group name");
	if (!s)
		return -EINVAL;
	if (s[0] == '\0') {
		free(cfg->admin_group);
		cfg->admin_group = NULL;
		return 0;
	}
	return replace_string(p, &cfg->admin_group, s);
}

static const struct member top_members[] = {
	{ "user", daemon_user },
	{ "admin_group", admin_group },
	{ "socket", parse_socket },
	{ "engine", parse_engine },
	{ "log", parse_log },
	{ "cm", parse_cm },
	{ "rlimit_memlock", rlimit_memlock },
	{ "device_links", device_links },
	{ "devices", parse_devices },
	{ "limits", parse_limits },
};

/*
 * jansson's own position, plus the key path the walker finds there.  A
 * duplicate key is reported where that key begins, like an unknown one.
 */
static void syntax_error(struct parser *p, const json_error_t *e)
{
	struct ibvd_json_pos pos = {
		.line = e->line > 0 ? (unsigned int)e->line : 1,
		.column = e->column > 0 ? (unsigned int)e->column : 1,
	};
	struct ibvd_json_pos kpos;
	char path[256] = "";
	int in = 0;

	if (e->position > 0)
		in = ibvd_json_path_at(p->text, p->len, (size_t)e->position,
				       path, sizeof(path), &kpos);
	if (in && json_error_code(e) == json_error_duplicate_key) {
		put_err(p->err, p->errlen, "%s:%u:%u: %s: duplicate key",
			p->name, kpos.line, kpos.column, path);
		return;
	}
	put_err(p->err, p->errlen, "%s:%u:%u: %s%s%s", p->name, pos.line,
		pos.column, path, in ? ": " : "", e->text);
}

static struct ibvd_config *config_new(void)
{
	struct ibvd_config *cfg = calloc(1, sizeof(*cfg));

	if (!cfg)
		return NULL;
	cfg->socket_path = strdup(IBVERBSD_DEFAULT_SOCKET);
	if (!cfg->socket_path) {
		free(cfg);
		return NULL;
	}
	cfg->socket_mode = 0666;
	cfg->admin_group = strdup(IBVD_ADMIN_GROUP_DEFAULT);
	if (!cfg->admin_group) {
		free(cfg->socket_path);
		free(cfg);
		return NULL;
	}
	cfg->engine_threads = IBVD_ENGINE_THREADS_AUTO;
	cfg->engine_direct = true;
	cfg->engine_staging = IBVD_STAGING_DEFAULT;
	cfg->engine_stuck_copy_ms = IBVD_STUCK_COPY_DEFAULT_MS;
	cfg->log_level = IBVD_LOG_INFO;
	cfg->cm_handshake_ms = IBVD_CM_HANDSHAKE_DEFAULT_MS;
	cfg->rlimit_memlock_enforce = true;
	cfg->device_links = true;
	cfg->ndevices = 1;
	set_default_device(&cfg->devices[0], 0);
	entry_init(&cfg->limit_default);
	return cfg;
}

static struct ibvd_config *parse_text(const char *text, size_t len,
				      const char *name, const char *path,
				      const struct ibvd_config *running,
				      char *err, size_t errlen)
{
	struct parser p = {
		.text = text, .len = len, .name = name,
		.err = err, .errlen = errlen, .running = running,
	};
	struct ibvd_config *cfg = NULL;
	json_error_t jerr;
	json_t *root;
	int ret;

	/*
	 * Without JSON_REJECT_DUPLICATES jansson silently keeps the last of
	 * two equal keys.  Trailing garbage is an error unless
	 * JSON_DISABLE_EOF_CHECK, which we do not pass.
	 */
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		syntax_error(&p, &jerr);
		return NULL;
	}
	cfg = config_new();
	if (!cfg) {
		ret = out_of_memory(&p);
		goto out;
	}
	ret = parse_object(&p, root, top_members, ARRAY_SIZE(top_members), cfg);
	if (!ret)
		ret = parse_limits_now(&p, cfg);
	if (!ret && path && !(cfg->path = strdup(path)))
		ret = out_of_memory(&p);
out:
	json_decref(root);
	free(p.rule_index);
	if (ret) {
		ibvd_config_free(cfg);
		cfg = NULL;
	}
	return cfg;
}

static int read_all(int fd, char **text, size_t *len)
{
	size_t size = 4096, used = 0;
	char *buf = NULL, *nbuf;
	ssize_t n;

	for (;;) {
		if (used == size || !buf) {
			if (buf)
				size *= 2;
			if (size > CONFIG_MAX_BYTES)
				goto too_big;
			nbuf = realloc(buf, size);
			if (!nbuf)
				goto nomem;
			buf = nbuf;
		}
		n = read(fd, buf + used, size - used);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto fail;
		if (n == 0)
			break;
		used += (size_t)n;
	}
	*text = buf;
	*len = used;
	return 0;
too_big:
	free(buf);
	return -EFBIG;
nomem:
	free(buf);
	return -ENOMEM;
fail:
	n = -errno;
	free(buf);
	return (int)n;
}

/*
 * Whoever can write the file sets every tenant's limits and the socket's
 * permissions at the next reload: as sshd's StrictModes, refuse a file
 * anyone but root, us, or our group may write.  -EPERM with the reason.
 */
static int check_file(int fd, const char *path, char *err, size_t errlen)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode)) {
		put_err(err, errlen, "%s: not a regular file", path);
		return -EPERM;
	}
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		put_err(err, errlen, "%s: owned by uid %u, not by root or by the daemon's uid",
			path, (unsigned int)st.st_uid);
		return -EPERM;
	}
	if ((st.st_mode & S_IWOTH) ||
	    ((st.st_mode & S_IWGRP) && st.st_gid != 0 && st.st_gid != getegid())) {
		put_err(err, errlen, "%s: writable by others (mode %04o): anyone who may write it may lift every limit",
			path, (unsigned int)(st.st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

struct ibvd_config *ibvd_config_load(const char *path, char *err, size_t errlen)
{
	return ibvd_config_load_over(path, NULL, err, errlen);
}

struct ibvd_config *ibvd_config_load_over(const char *path,
					  const struct ibvd_config *running,
					  char *err, size_t errlen)
{
	struct ibvd_config *cfg;
	char *text = NULL;
	size_t len = 0;
	int fd, ret;

	/* O_NONBLOCK: a FIFO put there must not hang the control thread */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		put_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return NULL;
	}
	ret = check_file(fd, path, err, errlen);
	if (ret == 0)
		ret = read_all(fd, &text, &len);
	close(fd);
	if (ret == -EPERM)
		return NULL;
	if (ret) {
		put_err(err, errlen, "%s: cannot read: %s", path, strerror(-ret));
		return NULL;
	}
	cfg = parse_text(text, len, path, path, running, err, errlen);
	free(text);
	return cfg;
}

struct ibvd_config *ibvd_config_parse(const char *text, const char *name,
				      char *err, size_t errlen)
{
	return parse_text(text, strlen(text), name, NULL, NULL, err, errlen);
}

struct ibvd_config *ibvd_config_default(void)
{
	return config_new();
}

void ibvd_config_free(struct ibvd_config *cfg)
{
	if (!cfg)
		return;
	free(cfg->path);
	free(cfg->user);
	free(cfg->socket_path);
	free(cfg->socket_group);
	free(cfg->admin_group);
	for (size_t i = 0; i < cfg->nlimit_rules; i++) {
		free(cfg->limit_rules[i].cgroup);
		free(cfg->limit_rules[i].name);
	}
	free(cfg->limit_rules);
	free(cfg);
}
