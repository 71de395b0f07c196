/*
 * ibverbsd.conf parsing: the shipped file, defaults, and one test per kind
 * of mistake, each asserting the exact "file:line:column: key: message".
 *
 * In-memory texts are written with ' for " to stay readable; q() swaps
 * them back.  Expected messages are written as they are.
 */
#include <config.h>

#include <check.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "daemon/config/config.h"
#include "daemon/config/config_pos.h"
#include "daemon/core/roce.h"
#include "daemon/tenant/tenant.h"
#include "log.h"
#include "tests/common/check_run.h"

static char err[512];
static char text[4096];
static char file[PATH_MAX];
static char want[PATH_MAX + 256];

static const char *q(const char *s)
{
	size_t i;

	ck_assert_uint_lt(strlen(s), sizeof(text));
	for (i = 0; s[i]; i++)
		text[i] = s[i] == '\'' ? '"' : s[i];
	text[i] = '\0';
	return text;
}

/* Parses s (after q()), which must be accepted. */
static struct ibvd_config *good(const char *s)
{
	struct ibvd_config *cfg;

	err[0] = '\0';
	cfg = ibvd_config_parse(q(s), "t.conf", err, sizeof(err));
	ck_assert_msg(cfg != NULL, "rejected %s: %s", s, err);
	return cfg;
}

/* The message for s (after q()), or "(accepted)". */
static const char *parse_error(const char *s)
{
	struct ibvd_config *cfg;

	snprintf(err, sizeof(err), "(accepted)");
	cfg = ibvd_config_parse(q(s), "t.conf", err, sizeof(err));
	if (cfg) {
		ibvd_config_free(cfg);
		snprintf(err, sizeof(err), "(accepted)");
	}
	return err;
}

/* $top_srcdir/tests/unit/config/name; the harness exports top_srcdir. */
static const char *input(const char *name)
{
	const char *top = getenv("top_srcdir");

	if (!top || !*top)
		top = IBVD_TEST_SRCDIR;
	snprintf(file, sizeof(file), "%s/tests/unit/config/%s", top, name);
	return file;
}

static struct ibvd_config *load_good(const char *path)
{
	struct ibvd_config *cfg;

	err[0] = '\0';
	cfg = ibvd_config_load(path, err, sizeof(err));
	ck_assert_msg(cfg != NULL, "rejected %s: %s", path, err);
	ck_assert_str_eq(cfg->path, path);
	return cfg;
}

static const char *load_error(const char *path)
{
	struct ibvd_config *cfg;

	snprintf(err, sizeof(err), "(accepted)");
	cfg = ibvd_config_load(path, err, sizeof(err));
	if (cfg) {
		ibvd_config_free(cfg);
		snprintf(err, sizeof(err), "(accepted)");
	}
	return err;
}

/* "<path of input name><rest>" */
static const char *at(const char *name, const char *rest)
{
	snprintf(want, sizeof(want), "%s%s", input(name), rest);
	return want;
}

static void assert_defaults(const struct ibvd_config *cfg)
{
	ck_assert_str_eq(cfg->socket_path, IBVERBSD_DEFAULT_SOCKET);
	ck_assert_uint_eq(cfg->socket_mode, 0666);
	ck_assert_ptr_null(cfg->socket_group);
	ck_assert_str_eq(cfg->admin_group, "ibverbsd-admin");
	ck_assert_uint_eq(cfg->engine_threads, IBVD_ENGINE_THREADS_AUTO);
	ck_assert_int_eq(cfg->log_level, IBVD_LOG_INFO);
	ck_assert(cfg->rlimit_memlock_enforce);
	ck_assert(cfg->device_links);
	ck_assert(cfg->engine_direct);
	ck_assert_uint_eq(cfg->engine_staging, IBVD_STAGING_DEFAULT);
	ck_assert_uint_eq(cfg->engine_stuck_copy_ms, IBVD_STUCK_COPY_DEFAULT_MS);
	ck_assert_uint_eq(cfg->cm_handshake_ms, IBVD_CM_HANDSHAKE_DEFAULT_MS);
	ck_assert_uint_eq(cfg->ndevices, 1);
	ck_assert_str_eq(cfg->devices[0].name, "ibvd0");
	ck_assert_uint_eq(cfg->devices[0].ports, 1);
	ck_assert_uint_eq(cfg->devices[0].lid, 0);
	ck_assert_uint_eq(cfg->devices[0].guid, 0);
}

/* --- accepted --- */

START_TEST(shipped_config)
{
	const char *top = getenv("top_srcdir");
	struct ibvd_config *cfg;

	snprintf(file, sizeof(file), "%s/etc/ibverbsd.conf",
		 top && *top ? top : IBVD_TEST_SRCDIR);
	cfg = load_good(file);
	ck_assert_str_eq(cfg->socket_path, "/run/ibverbsd/ibverbsd.sock");
	ck_assert_uint_eq(cfg->socket_mode, 0666);
	ck_assert_ptr_null(cfg->socket_group);
	ck_assert_uint_eq(cfg->engine_threads, IBVD_ENGINE_THREADS_AUTO);
	ck_assert_int_eq(cfg->log_level, IBVD_LOG_INFO);
	ck_assert_uint_eq(cfg->ndevices, 1);
	ck_assert_str_eq(cfg->devices[0].name, "ibvd0");
	ck_assert_uint_eq(cfg->devices[0].ports, 1);
	ck_assert_uint_eq(cfg->devices[0].lid, 1);
	ck_assert_uint_eq(cfg->devices[0].guid, 0);
	ibvd_config_free(cfg);
}
END_TEST

START_TEST(builtin_defaults)
{
	struct ibvd_config *cfg = ibvd_config_default();

	ck_assert_ptr_nonnull(cfg);
	ck_assert_ptr_null(cfg->path);
	assert_defaults(cfg);
	ibvd_config_free(cfg);
	ibvd_config_free(NULL);
}
END_TEST

START_TEST(omitted_keys_take_defaults)
{
	static const char *const texts[] = {
		"{}",
		" \n\t{ }\n",
		"{'socket': {}, 'engine': {}, 'log': {}}",
		"{'devices': [{}]}",
		"{'socket': {'group': ''}}",
	};
	struct ibvd_config *cfg;
	size_t i;

	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		cfg = good(texts[i]);
		ck_assert_ptr_null(cfg->path);
		assert_defaults(cfg);
		ibvd_config_free(cfg);
	}
	/* one key of a section does not reset its siblings */
	cfg = good("{'socket': {'mode': '0600'}}");
	ck_assert_str_eq(cfg->socket_path, IBVERBSD_DEFAULT_SOCKET);
	ck_assert_uint_eq(cfg->socket_mode, 0600);
	ibvd_config_free(cfg);
}
END_TEST

START_TEST(device_defaults)
{
	struct ibvd_config *cfg = good("{'devices': [{}, {'name': 'x'}, {'ports': 3}]}");

	ck_assert_uint_eq(cfg->ndevices, 3);
	ck_assert_str_eq(cfg->devices[0].name, "ibvd0");
	ck_assert_str_eq(cfg->devices[1].name, "x");
	ck_assert_str_eq(cfg->devices[2].name, "ibvd2");
	ck_assert_uint_eq(cfg->devices[1].ports, 1);
	ck_assert_uint_eq(cfg->devices[2].ports, 3);
	ck_assert_uint_eq(cfg->devices[2].lid, 0);
	ck_assert_uint_eq(cfg->devices[2].guid, 0);
	ibvd_config_free(cfg);
}
END_TEST

START_TEST(accepted_values)
{
	static const struct { const char *text; int level; } levels[] = {
		{ "{'log': {'level': 'err'}}", IBVD_LOG_ERR },
		{ "{'log': {'level': 'warning'}}", IBVD_LOG_WARNING },
		{ "{'log': {'level': 'notice'}}", IBVD_LOG_NOTICE },
		{ "{'log': {'level': 'info'}}", IBVD_LOG_INFO },
		{ "{'log': {'level': 'debug'}}", IBVD_LOG_DEBUG },
	};
	static const struct { const char *text; unsigned int mode; } modes[] = {
		{ "{'socket': {'mode': '0'}}", 0 },
		{ "{'socket': {'mode': '600'}}", 0600 },
		{ "{'socket': {'mode': '0660'}}", 0660 },
		{ "{'socket': {'mode': '0777'}}", 0777 },
	};
	char name63[64], path107[108], buf[256];
	struct ibvd_config *cfg;
	size_t i;

	cfg = good("{'engine': {'threads': 'auto'}}");
	ck_assert_uint_eq(cfg->engine_threads, IBVD_ENGINE_THREADS_AUTO);
	ibvd_config_free(cfg);
	cfg = good("{'engine': {'threads': 64}}");
	ck_assert_uint_eq(cfg->engine_threads, 64);
	ibvd_config_free(cfg);

	for (i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
		cfg = good(levels[i].text);
		ck_assert_int_eq(cfg->log_level, levels[i].level);
		ibvd_config_free(cfg);
	}
	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		cfg = good(modes[i].text);
		ck_assert_uint_eq(cfg->socket_mode, modes[i].mode);
		ibvd_config_free(cfg);
	}

	memset(name63, 'n', 63);
	name63[63] = '\0';
	snprintf(buf, sizeof(buf), "{'devices': [{'name': '%s', 'ports': 8, 'lid': 49144}]}", name63);
	cfg = good(buf);
	ck_assert_str_eq(cfg->devices[0].name, name63);
	ck_assert_uint_eq(cfg->devices[0].ports, 8);
	ck_assert_uint_eq(cfg->devices[0].lid, 49144);
	ibvd_config_free(cfg);

	path107[0] = '/';
	memset(path107 + 1, 'p', 106);
	path107[107] = '\0';
	snprintf(buf, sizeof(buf), "{'socket': {'path': '%s'}}", path107);
	cfg = good(buf);
	ck_assert_str_eq(cfg->socket_path, path107);
	ibvd_config_free(cfg);

	cfg = good("{'devices': [{'guid': 'fedc:BA98:7654:3210', 'lid': 49151}]}");
	ck_assert_uint_eq(cfg->devices[0].guid, 0xfedcba9876543210ULL);
	ck_assert_uint_eq(cfg->devices[0].lid, 49151);
	ibvd_config_free(cfg);

	cfg = good("{'rlimit_memlock': 'ignore', 'device_links': false}");
	ck_assert(!cfg->rlimit_memlock_enforce);
	ck_assert(!cfg->device_links);
	ibvd_config_free(cfg);
	cfg = good("{'rlimit_memlock': 'enforce', 'device_links': true}");
	ck_assert(cfg->rlimit_memlock_enforce);
	ck_assert(cfg->device_links);
	ibvd_config_free(cfg);
	cfg = good("{'engine': {'direct': false}}");
	ck_assert(!cfg->engine_direct);
	ibvd_config_free(cfg);
	/* staging: KiB in the file, bytes here */
	cfg = good("{'engine': {'staging': 0}}");
	ck_assert_uint_eq(cfg->engine_staging, 0);
	ibvd_config_free(cfg);
	cfg = good("{'engine': {'staging': 65536}}");
	ck_assert_uint_eq(cfg->engine_staging, 64u << 20);
	ibvd_config_free(cfg);
	cfg = good("{'engine': {'stuck_copy_ms': 0}}");
	ck_assert_uint_eq(cfg->engine_stuck_copy_ms, 0);
	ibvd_config_free(cfg);
	cfg = good("{'engine': {'stuck_copy_ms': 3600000}}");
	ck_assert_uint_eq(cfg->engine_stuck_copy_ms, 3600000);
	ibvd_config_free(cfg);
	cfg = good("{'cm': {'handshake_timeout_ms': 100}}");
	ck_assert_uint_eq(cfg->cm_handshake_ms, 100);
	ibvd_config_free(cfg);

	/* an escaped key is the same key */
	cfg = good("{'log': {'lev\\u0065l': 'debug'}}");
	ck_assert_int_eq(cfg->log_level, IBVD_LOG_DEBUG);
	ibvd_config_free(cfg);
}
END_TEST

START_TEST(existing_group)
{
	struct group *gr = getgrgid(getegid());
	struct ibvd_config *cfg;
	char buf[256];

	if (!gr)
		return;	/* no name for our group: nothing to test with */
	snprintf(buf, sizeof(buf), "{'socket': {'group': '%s'}}", gr->gr_name);
	cfg = good(buf);
	ck_assert_str_eq(cfg->socket_group, gr->gr_name);
	ibvd_config_free(cfg);
}
END_TEST

/*
 * The admin group: any name (looked up at start and reload, not at load:
 * it may come later), or "" for root alone.  Not the socket's group by
 * default, "rdma" least of all.
 */
START_TEST(admin_group_named_or_none)
{
	struct ibvd_config *cfg = good("{'admin_group': 'no-such-group-yet'}");

	ck_assert_str_eq(cfg->admin_group, "no-such-group-yet");
	ibvd_config_free(cfg);
	cfg = good("{'admin_group': ''}");
	ck_assert_ptr_null(cfg->admin_group);
	ibvd_config_free(cfg);
	cfg = good("{'socket': {'group': 'root'}}");
	ck_assert_str_eq(cfg->admin_group, IBVD_ADMIN_GROUP_DEFAULT);
	ck_assert_str_ne(cfg->admin_group, "rdma");
	ibvd_config_free(cfg);
	ck_assert_str_eq(parse_error("{'admin_group': 0}"),
		"t.conf:1:2: admin_group: expected a group name, got 0");
}
END_TEST

/*
 * An empty socket group is no group; the user named before it stays (it
 * was freed there once, and freed again with the config).
 */
START_TEST(empty_group_keeps_user)
{
	struct ibvd_config *cfg = good("{'user': '4321', 'socket': {'group': ''}}");

	ck_assert_ptr_null(cfg->socket_group);
	ck_assert_str_eq(cfg->user, "4321");
	ibvd_config_free(cfg);
}
END_TEST

START_TEST(good_files)
{
	struct ibvd_config *cfg;

	cfg = load_good(input("good-full.conf"));
	ck_assert_str_eq(cfg->socket_path, "/tmp/ibverbsd-test/ibverbsd.sock");
	ck_assert_uint_eq(cfg->socket_mode, 0600);
	ck_assert_str_eq(cfg->socket_group, "root");
	ck_assert_uint_eq(cfg->engine_threads, 4);
	ck_assert_int_eq(cfg->log_level, IBVD_LOG_DEBUG);
	ck_assert_uint_eq(cfg->ndevices, 1);
	ck_assert_str_eq(cfg->devices[0].name, "soft_rdma-1");
	ck_assert_uint_eq(cfg->devices[0].ports, 2);
	ck_assert_uint_eq(cfg->devices[0].lid, 100);
	ck_assert_uint_eq(cfg->devices[0].guid, 0x0002c90300abcdefULL);
	ibvd_config_free(cfg);

	cfg = load_good(input("good-minimal.conf"));
	assert_defaults(cfg);
	ibvd_config_free(cfg);

	/* adjacent LID ranges, LIDs up to the last unicast one, default names */
	cfg = load_good(input("good-multi.conf"));
	ck_assert_uint_eq(cfg->ndevices, 5);
	ck_assert_str_eq(cfg->devices[0].name, "a");
	ck_assert_uint_eq(cfg->devices[0].lid, 10);
	ck_assert_uint_eq(cfg->devices[0].ports, 2);
	ck_assert_str_eq(cfg->devices[1].name, "b");
	ck_assert_uint_eq(cfg->devices[1].lid, 12);
	ck_assert_str_eq(cfg->devices[2].name, "ibvd2");
	ck_assert_uint_eq(cfg->devices[2].lid, 0);
	ck_assert_str_eq(cfg->devices[3].name, "ibvd3");
	ck_assert_uint_eq(cfg->devices[3].ports, 8);
	ck_assert_uint_eq(cfg->devices[3].lid, 49144);
	ck_assert_uint_eq(cfg->devices[3].guid, 0xffffffffffffffffULL);
	ck_assert_str_eq(cfg->devices[4].name, "e");
	ck_assert_uint_eq(cfg->devices[4].lid, 0);
	ck_assert_uint_eq(cfg->devices[4].guid, 0);
	ibvd_config_free(cfg);
}
END_TEST

START_TEST(sixteen_devices)
{
	struct ibvd_config *cfg;
	char buf[256] = "{'devices': [{}";
	int i;

	for (i = 1; i < IBVD_MAX_DEVICES; i++)
		strcat(buf, ",{}");
	strcat(buf, "]}");
	cfg = good(buf);
	ck_assert_uint_eq(cfg->ndevices, IBVD_MAX_DEVICES);
	ck_assert_str_eq(cfg->devices[15].name, "ibvd15");
	ibvd_config_free(cfg);
}
END_TEST

/* --- JSON syntax: jansson's message and position --- */

START_TEST(syntax_errors)
{
	ck_assert_str_eq(parse_error(""),
		"t.conf:1:1: '[' or '{' expected near end of file");
	ck_assert_str_eq(parse_error("{'log': {'level': info}}"),
		"t.conf:1:22: log.level: invalid token near 'info'");
	ck_assert_str_eq(parse_error("{'log': {'level': 'info'},}"),
		"t.conf:1:27: string or '}' expected near '}'");
	ck_assert_str_eq(parse_error("{\n  'log': {\n    'level': 'info'\n"),
		"t.conf:4:1: log.level: '}' expected near end of file");
	ck_assert_str_eq(load_error(input("bad-syntax.conf")),
		at("bad-syntax.conf", ":4:13: socket.mode: invalid token near '0'"));
}
END_TEST

START_TEST(trailing_garbage)
{
	ck_assert_str_eq(parse_error("{} x"),
		"t.conf:1:4: end of file expected near 'x'");
	ck_assert_str_eq(parse_error("{}{}"),
		"t.conf:1:3: end of file expected near '{'");
	ck_assert_str_eq(load_error(input("bad-trailing.conf")),
		at("bad-trailing.conf", ":4:1: end of file expected near '}'"));
}
END_TEST

START_TEST(duplicate_keys)
{
	ck_assert_str_eq(parse_error("{'log': {}, 'log': {}}"),
		"t.conf:1:13: log: duplicate key");
	ck_assert_str_eq(parse_error("{'socket': {'mode': '0600', 'mode': '0600'}}"),
		"t.conf:1:29: socket.mode: duplicate key");
	/* the position finder steps over nesting deeper than it tracks */
	ck_assert_str_eq(parse_error("{'x': [[[[[[[[[[1]]]]]]]]]], 'x': 1}"),
		"t.conf:1:30: x: duplicate key");
	ck_assert_str_eq(load_error(input("bad-duplicate.conf")),
		at("bad-duplicate.conf", ":3:34: devices[0].lid: duplicate key"));
}
END_TEST

/* --- structure --- */

START_TEST(top_level_not_object)
{
	ck_assert_str_eq(parse_error("[]"),
		"t.conf:1:1: expected an object, got an array");
	ck_assert_str_eq(parse_error("\n  [{}]"),
		"t.conf:2:3: expected an object, got an array");
}
END_TEST

START_TEST(unknown_keys)
{
	ck_assert_str_eq(parse_error("{'sockets': {}}"),
		"t.conf:1:2: sockets: unknown key");
	ck_assert_str_eq(parse_error("{'socket': {'path': '/x', 'moed': 1}}"),
		"t.conf:1:27: socket.moed: unknown key");
	ck_assert_str_eq(parse_error("{'engine': {'thread': 1}}"),
		"t.conf:1:13: engine.thread: unknown key");
	ck_assert_str_eq(parse_error("{'log': {'lvl': 'info'}}"),
		"t.conf:1:10: log.lvl: unknown key");
	ck_assert_str_eq(parse_error("{'devices': [{'nmae': 'x'}]}"),
		"t.conf:1:15: devices[0].nmae: unknown key");
	ck_assert_str_eq(parse_error("{'devices': [{}, {'name': 'x', 'port': 2}]}"),
		"t.conf:1:32: devices[1].port: unknown key");
	/* the first in file order, whatever the section */
	ck_assert_str_eq(parse_error("{'log': {}, 'b': 1, 'a': 2}"),
		"t.conf:1:13: b: unknown key");
	/* a control character must not split the message's line */
	ck_assert_str_eq(parse_error("{'a\\nb': 1}"),
		"t.conf:1:2: a?b: unknown key");
	ck_assert_str_eq(load_error(input("bad-unknown-key.conf")),
		at("bad-unknown-key.conf", ":3:5: socket.moed: unknown key"));
}
END_TEST

START_TEST(positions)
{
	/* lines count from 1, columns count characters, not bytes */
	ck_assert_str_eq(parse_error("{\n  'devices': [\n    {},\n    {'lid': 'x'}\n  ]\n}"),
		"t.conf:4:6: devices[1].lid: expected an integer 0..49151, got \"x\"");
	ck_assert_str_eq(parse_error("{'socket': {'path': '/\xc3\xa9', 'mode': 5}}"),
		"t.conf:1:27: socket.mode: expected an octal mode string \"0000\"..\"0777\", got 5");
	ck_assert_str_eq(parse_error("{'\xc3\xa9': 1}"),
		"t.conf:1:2: \xc3\xa9: unknown key");
	/* an escaped key is found by its decoded name */
	ck_assert_str_eq(parse_error("{'log': {'lev\\u0065l': 5}}"),
		"t.conf:1:10: log.level: expected err, warning, notice, info or debug, got 5");
	/* brackets and quotes inside strings are not structure */
	ck_assert_str_eq(parse_error("{'socket': {'path': '/a\\\"]}{[', 'mode': 'x'}}"),
		"t.conf:1:33: socket.mode: expected an octal mode string \"0000\"..\"0777\", got \"x\"");
}
END_TEST

/* --- wrong types --- */

START_TEST(wrong_types)
{
	ck_assert_str_eq(parse_error("{'socket': 5}"),
		"t.conf:1:2: socket: expected an object, got 5");
	ck_assert_str_eq(parse_error("{'socket': {'path': 5}}"),
		"t.conf:1:13: socket.path: expected an absolute path, got 5");
	ck_assert_str_eq(parse_error("{'socket': {'mode': 438}}"),
		"t.conf:1:13: socket.mode: expected an octal mode string \"0000\"..\"0777\", got 438");
	ck_assert_str_eq(parse_error("{'socket': {'group': true}}"),
		"t.conf:1:13: socket.group: expected a group name, got true");
	ck_assert_str_eq(parse_error("{'engine': []}"),
		"t.conf:1:2: engine: expected an object, got an array");
	ck_assert_str_eq(parse_error("{'engine': {'threads': '1'}}"),
		"t.conf:1:13: engine.threads: expected an integer 1..64 or \"auto\", got \"1\"");
	ck_assert_str_eq(parse_error("{'engine': {'threads': 'Auto'}}"),
		"t.conf:1:13: engine.threads: expected an integer 1..64 or \"auto\", got \"Auto\"");
	ck_assert_str_eq(parse_error("{'engine': {'threads': 1.0}}"),
		"t.conf:1:13: engine.threads: expected an integer 1..64 or \"auto\", got 1.0");
	ck_assert_str_eq(parse_error("{'engine': {'staging': -1}}"),
		"t.conf:1:13: engine.staging: expected an integer 0..65536 (KiB), got -1");
	ck_assert_str_eq(parse_error("{'engine': {'staging': 65537}}"),
		"t.conf:1:13: engine.staging: expected an integer 0..65536 (KiB), got 65537");
	ck_assert_str_eq(parse_error("{'engine': {'stuck_copy_ms': 3600001}}"),
		"t.conf:1:13: engine.stuck_copy_ms: expected an integer 0..3600000 (ms), got 3600001");
	ck_assert_str_eq(parse_error("{'engine': {'stuck_copy_ms': -5}}"),
		"t.conf:1:13: engine.stuck_copy_ms: expected an integer 0..3600000 (ms), got -5");
	ck_assert_str_eq(parse_error("{'engine': {'staging': '1M'}}"),
		"t.conf:1:13: engine.staging: expected an integer 0..65536 (KiB), got \"1M\"");
	ck_assert_str_eq(parse_error("{'cm': {'handshake_timeout_ms': 99}}"),
		"t.conf:1:9: cm.handshake_timeout_ms: expected an integer 100..3600000 (ms), got 99");
	ck_assert_str_eq(parse_error("{'cm': {'handshake_timeout_ms': 3600001}}"),
		"t.conf:1:9: cm.handshake_timeout_ms: expected an integer 100..3600000 (ms), got 3600001");
	ck_assert_str_eq(parse_error("{'log': null}"),
		"t.conf:1:2: log: expected an object, got null");
	ck_assert_str_eq(parse_error("{'log': {'level': 6}}"),
		"t.conf:1:10: log.level: expected err, warning, notice, info or debug, got 6");
	ck_assert_str_eq(parse_error("{'devices': {}}"),
		"t.conf:1:2: devices: expected an array of devices, got an object");
	ck_assert_str_eq(parse_error("{'devices': ['ibvd0']}"),
		"t.conf:1:14: devices[0]: expected an object, got \"ibvd0\"");
	ck_assert_str_eq(parse_error("{'devices': [{'name': 1}]}"),
		"t.conf:1:15: devices[0].name: expected 1..63 characters of A-Z a-z 0-9 _ -, got 1");
	ck_assert_str_eq(parse_error("{'devices': [{'ports': '2'}]}"),
		"t.conf:1:15: devices[0].ports: expected an integer 1..8, got \"2\"");
	ck_assert_str_eq(parse_error("{'devices': [{'lid': false}]}"),
		"t.conf:1:15: devices[0].lid: expected an integer 0..49151, got false");
	ck_assert_str_eq(parse_error("{'devices': [{'guid': 1}]}"),
		"t.conf:1:15: devices[0].guid: expected \"auto\" or a non-zero \"xxxx:xxxx:xxxx:xxxx\" in hex, got 1");
	ck_assert_str_eq(load_error(input("bad-lid.conf")),
		at("bad-lid.conf", ":6:7: devices[0].lid: expected an integer 0..49151, got \"x\""));
	ck_assert_str_eq(parse_error("{'rlimit_memlock': 'off'}"),
		"t.conf:1:2: rlimit_memlock: expected \"enforce\" or \"ignore\", got \"off\"");
	ck_assert_str_eq(parse_error("{'rlimit_memlock': false}"),
		"t.conf:1:2: rlimit_memlock: expected \"enforce\" or \"ignore\", got false");
	ck_assert_str_eq(parse_error("{'device_links': 'yes'}"),
		"t.conf:1:2: device_links: expected true or false, got \"yes\"");
	ck_assert_str_eq(parse_error("{'device_links': 1}"),
		"t.conf:1:2: device_links: expected true or false, got 1");
	ck_assert_str_eq(parse_error("{'engine': {'direct': 'on'}}"),
		"t.conf:1:13: engine.direct: expected true or false, got \"on\"");
}
END_TEST

/* --- values out of range or malformed --- */

START_TEST(out_of_range)
{
	ck_assert_str_eq(parse_error("{'engine': {'threads': 0}}"),
		"t.conf:1:13: engine.threads: expected an integer 1..64 or \"auto\", got 0");
	ck_assert_str_eq(parse_error("{'engine': {'threads': 65}}"),
		"t.conf:1:13: engine.threads: expected an integer 1..64 or \"auto\", got 65");
	ck_assert_str_eq(parse_error("{'engine': {'threads': -1}}"),
		"t.conf:1:13: engine.threads: expected an integer 1..64 or \"auto\", got -1");
	ck_assert_str_eq(parse_error("{'devices': [{'ports': 0}]}"),
		"t.conf:1:15: devices[0].ports: expected an integer 1..8, got 0");
	ck_assert_str_eq(parse_error("{'devices': [{'ports': 9}]}"),
		"t.conf:1:15: devices[0].ports: expected an integer 1..8, got 9");
	ck_assert_str_eq(parse_error("{'devices': [{'lid': -1}]}"),
		"t.conf:1:15: devices[0].lid: expected an integer 0..49151, got -1");
	ck_assert_str_eq(parse_error("{'devices': [{'lid': 49152}]}"),
		"t.conf:1:15: devices[0].lid: expected an integer 0..49151, got 49152");
	ck_assert_str_eq(parse_error("{'devices': [{'lid': 49150, 'ports': 3}]}"),
		"t.conf:1:15: devices[0].lid: LIDs 49150..49152 of 3 ports run past the last unicast LID 49151");
	ck_assert_str_eq(parse_error("{'log': {'level': 'loud'}}"),
		"t.conf:1:10: log.level: expected err, warning, notice, info or debug, got \"loud\"");
}
END_TEST

START_TEST(bad_socket_values)
{
	static const char *const modes[] = {
		"", "0999", "1777", "06600", "0x1ff", "rw-rw-rw-", " 660", "-1",
	};
	char buf[256], expect[256];
	size_t i;

	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		snprintf(buf, sizeof(buf), "{'socket': {'mode': '%s'}}", modes[i]);
		snprintf(expect, sizeof(expect),
			 "t.conf:1:13: socket.mode: expected an octal mode string "
			 "\"0000\"..\"0777\", got \"%s\"", modes[i]);
		ck_assert_str_eq(parse_error(buf), expect);
	}
	ck_assert_str_eq(parse_error("{'socket': {'path': 'run/x.sock'}}"),
		"t.conf:1:13: socket.path: expected an absolute path, got \"run/x.sock\"");
	ck_assert_str_eq(parse_error("{'socket': {'path': ''}}"),
		"t.conf:1:13: socket.path: expected an absolute path, got \"\"");
	buf[0] = '\0';
	strcat(buf, "{'socket': {'path': '/");
	memset(buf + strlen(buf), 'p', 107);
	strcpy(buf + 22 + 107, "'}}");
	ck_assert_str_eq(parse_error(buf),
		"t.conf:1:13: socket.path: longer than 107 bytes, the limit for a socket");
	ck_assert_str_eq(parse_error("{'socket': {'group': 'ibvd-no-such-group'}}"),
		"t.conf:1:13: socket.group: no such group \"ibvd-no-such-group\"");
}
END_TEST

START_TEST(bad_names)
{
	ck_assert_str_eq(parse_error("{'devices': [{'name': ''}]}"),
		"t.conf:1:15: devices[0].name: expected 1..63 characters of A-Z a-z 0-9 _ -, got \"\"");
	ck_assert_str_eq(parse_error("{'devices': [{'name': 'bad name'}]}"),
		"t.conf:1:15: devices[0].name: expected 1..63 characters of A-Z a-z 0-9 _ -, got \"bad name\"");
	ck_assert_str_eq(parse_error("{'devices': [{'name': 'ibvd.0'}]}"),
		"t.conf:1:15: devices[0].name: expected 1..63 characters of A-Z a-z 0-9 _ -, got \"ibvd.0\"");
	/* 64 characters; long values are shortened in the message */
	ck_assert_str_eq(parse_error("{'devices': [{'name': "
		"'nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn'}]}"),
		"t.conf:1:15: devices[0].name: expected 1..63 characters of A-Z a-z 0-9 _ -, "
		"got \"nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn...");
	ck_assert_str_eq(parse_error("{'devices': [{'name': 'x'}, {'name': 'x'}]}"),
		"t.conf:1:30: devices[1].name: name \"x\" is already used by devices[0]");
	/* a default name can collide too: then the element is pointed at */
	ck_assert_str_eq(parse_error("{'devices': [{'name': 'ibvd1'}, {}]}"),
		"t.conf:1:33: devices[1].name: name \"ibvd1\" is already used by devices[0]");
}
END_TEST

START_TEST(bad_guids)
{
	static const char *const guids[] = {
		"0000:0000:0000:0000", "zz", "AUTO", "0002:c903:0000:123",
		"0002:c903:0000:12345", "0002c90300001234", "0002-c903-0000-1234",
		"0002:c903:0000:123g",
	};
	char buf[256], expect[256];
	size_t i;

	for (i = 0; i < sizeof(guids) / sizeof(guids[0]); i++) {
		snprintf(buf, sizeof(buf), "{'devices': [{'guid': '%s'}]}", guids[i]);
		snprintf(expect, sizeof(expect),
			 "t.conf:1:15: devices[0].guid: expected \"auto\" or a non-zero "
			 "\"xxxx:xxxx:xxxx:xxxx\" in hex, got \"%s\"", guids[i]);
		ck_assert_str_eq(parse_error(buf), expect);
	}
	ck_assert_str_eq(parse_error("{'devices': [{'guid': '0000:0000:0000:0001'}, "
				     "{'name': 'b', 'guid': '0000:0000:0000:0001'}]}"),
		"t.conf:1:61: devices[1].guid: GUID is already used by devices[0] \"ibvd0\"");
	ck_assert_str_eq(load_error(input("bad-guid.conf")),
		at("bad-guid.conf", ":3:24: devices[0].guid: expected \"auto\" or a non-zero "
		   "\"xxxx:xxxx:xxxx:xxxx\" in hex, got \"0000:0000:0000:0000\""));
}
END_TEST

START_TEST(device_counts)
{
	char buf[256] = "{'devices': [{}";
	int i;

	ck_assert_str_eq(parse_error("{'devices': []}"),
		"t.conf:1:2: devices: expected at least one device");
	for (i = 1; i <= IBVD_MAX_DEVICES; i++)
		strcat(buf, ",{}");
	strcat(buf, "]}");
	ck_assert_str_eq(parse_error(buf),
		"t.conf:1:62: devices[16]: too many devices (at most 16)");
}
END_TEST

START_TEST(overlapping_lids)
{
	ck_assert_str_eq(parse_error("{'devices': [{'lid': 5}, {'name': 'b', 'lid': 5}]}"),
		"t.conf:1:40: devices[1].lid: LIDs 5..5 overlap LIDs 5..5 of devices[0] \"ibvd0\"");
	/* the second device's range reaches into the first one's */
	ck_assert_str_eq(parse_error("{'devices': [{'lid': 5}, {'name': 'b', 'ports': 2, 'lid': 4}]}"),
		"t.conf:1:52: devices[1].lid: LIDs 4..5 overlap LIDs 5..5 of devices[0] \"ibvd0\"");
	ck_assert_str_eq(load_error(input("bad-overlap.conf")),
		at("bad-overlap.conf", ":5:36: devices[2].lid: LIDs 4..5 overlap LIDs 1..4 of devices[0] \"ibvd0\""));
}
END_TEST

/* --- RoCE devices: "netdev" and "peers" (lo exists everywhere) --- */

START_TEST(roce_devices)
{
	struct ibvd_config *cfg = good("{'devices': [{}, {'name': 'roce0', 'netdev': 'lo', "
				       "'peers': ['10.0.0.0/8', 'fd00::/64', '192.168.1.7']}]}");
	char buf[64];

	ck_assert_uint_eq(cfg->ndevices, 2);
	ck_assert_str_eq(cfg->devices[0].netdev, "");
	ck_assert_uint_eq(cfg->devices[0].npeers, 0);
	ck_assert_str_eq(cfg->devices[1].netdev, "lo");
	ck_assert_uint_eq(cfg->devices[1].ports, 1);
	ck_assert_uint_eq(cfg->devices[1].npeers, 3);
	ck_assert_str_eq(ibvd_cidr_str(&cfg->devices[1].peers[0], buf, sizeof(buf)),
			 "10.0.0.0/8");
	ck_assert_str_eq(ibvd_cidr_str(&cfg->devices[1].peers[1], buf, sizeof(buf)),
			 "fd00::/64");
	ck_assert_str_eq(ibvd_cidr_str(&cfg->devices[1].peers[2], buf, sizeof(buf)),
			 "192.168.1.7/32");
	ibvd_config_free(cfg);
	/* without "peers": the interface's own subnets; "ports": 1 and "lid": 0 are fine */
	cfg = good("{'devices': [{'netdev': 'lo', 'ports': 1, 'lid': 0, 'guid': 'auto'}]}");
	ck_assert_uint_eq(cfg->devices[0].npeers, 0);
	ibvd_config_free(cfg);
}
END_TEST

START_TEST(bad_roce_devices)
{
	ck_assert_str_eq(parse_error("{'devices': [{}, {'netdev': 'nosuchif0'}]}"),
		"t.conf:1:19: devices[1].netdev: no such network interface \"nosuchif0\"");
	ck_assert_str_eq(parse_error("{'devices': [{'netdev': 'a/b'}]}"),
		"t.conf:1:15: devices[0].netdev: expected a network interface name of 1..15 characters, got \"a/b\"");
	ck_assert_str_eq(parse_error("{'devices': [{'netdev': 'abcdefghijklmnop'}]}"),
		"t.conf:1:15: devices[0].netdev: expected a network interface name of 1..15 characters, got \"abcdefghijklmnop\"");
	ck_assert_str_eq(parse_error("{'devices': [{'netdev': 7}]}"),
		"t.conf:1:15: devices[0].netdev: expected a network interface name of 1..15 characters, got 7");
	ck_assert_str_eq(parse_error("{'devices': [{'netdev': 'lo', 'peers': ['10.0.0.0/8', '10.0.0.0/33']}]}"),
		"t.conf:1:55: devices[0].peers[1]: prefix length of \"10.0.0.0/33\" is past the address (/32 for IPv4, /128 for IPv6)");
	ck_assert_str_eq(parse_error("{'devices': [{'netdev': 'lo', 'peers': ['10.1.2.3/8']}]}"),
		"t.conf:1:41: devices[0].peers[0]: \"10.1.2.3/8\" has host bits set: the block is \"10.0.0.0/8\"");
	ck_assert_str_eq(parse_error("{'devices': [{'netdev': 'lo', 'peers': ['lo']}]}"),
		"t.conf:1:41: devices[0].peers[0]: expected a CIDR such as \"10.0.0.0/8\" or \"fd00::/64\", got \"lo\"");
	ck_assert_str_eq(parse_error("{'devices': [{'netdev': 'lo', 'peers': []}]}"),
		"t.conf:1:31: devices[0].peers: expected at least one CIDR (leave \"peers\" out for the interface's own subnets)");
	ck_assert_str_eq(parse_error("{'devices': [{'netdev': 'lo', 'peers': '10.0.0.0/8'}]}"),
		"t.conf:1:31: devices[0].peers: expected an array of CIDRs, got \"10.0.0.0/8\"");
	ck_assert_str_eq(parse_error("{'devices': [{'peers': ['10.0.0.0/8']}]}"),
		"t.conf:1:15: devices[0].peers: only a RoCE device (one with \"netdev\") has peers");
	ck_assert_str_eq(parse_error("{'devices': [{'netdev': 'lo', 'ports': 2}]}"),
		"t.conf:1:31: devices[0].ports: a RoCE device has one port");
	ck_assert_str_eq(parse_error("{'devices': [{'lid': 3, 'netdev': 'lo'}]}"),
		"t.conf:1:15: devices[0].lid: a RoCE device has no LID (its port's LID is 0)");
	ck_assert_str_eq(parse_error("{'devices': [{'netdev': 'lo'}, {'name': 'b', 'netdev': 'lo'}]}"),
		"t.conf:1:46: devices[1].netdev: interface \"lo\" is already used by devices[0] \"ibvd0\"");
}
END_TEST

START_TEST(duplicate_rules)
{
	/* one uid, one group, spelled twice: one rule would be dead */
	ck_assert_str_eq(parse_error("{'limits': {'uid': {'1001': {'qp': 1}, '01001': {'qp': 2}}}}"),
		"t.conf:1:40: limits.uid.01001: the same uid as \"1001\"");
	ck_assert_str_eq(parse_error("{'limits': {'group': {'root': {'qp': 1}, '0': {'qp': 2}}}}"),
		"t.conf:1:42: limits.group.0: the same group as \"root\"");
}
END_TEST

/* --- reading the file --- */

START_TEST(unreadable_files)
{
	char dir[] = "/tmp/test_config.XXXXXX", path[64], expect[192];
	FILE *f;

	ck_assert_str_eq(load_error(input("no-such.conf")),
		at("no-such.conf", ": cannot open: No such file or directory"));
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(expect, sizeof(expect), "%s: not a regular file", dir);
	ck_assert_str_eq(load_error(dir), expect);

	/* a FIFO is refused, not waited on */
	snprintf(path, sizeof(path), "%s/fifo.conf", dir);
	ck_assert_int_eq(mkfifo(path, 0644), 0);
	snprintf(expect, sizeof(expect), "%s: not a regular file", path);
	ck_assert_str_eq(load_error(path), expect);
	unlink(path);

	/* whoever may write it sets every limit */
	snprintf(path, sizeof(path), "%s/open.conf", dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("{}\n", f);
	fclose(f);
	ck_assert_int_eq(chmod(path, 0646), 0);
	snprintf(expect, sizeof(expect), "%s: writable by others (mode 0646): anyone who may write it may lift every limit", path);
	ck_assert_str_eq(load_error(path), expect);
	ck_assert_int_eq(chmod(path, 0644), 0);
	if (geteuid() == 0) {
		ck_assert_int_eq(chown(path, 4242, (gid_t)-1), 0);
		snprintf(expect, sizeof(expect), "%s: owned by uid 4242, not by root or by the daemon's uid", path);
		ck_assert_str_eq(load_error(path), expect);
	}
	unlink(path);

	/* root reads a mode-000 file anyway */
	snprintf(path, sizeof(path), "%s/secret.conf", dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("{}\n", f);
	fclose(f);
	ck_assert_int_eq(chmod(path, 0), 0);
	if (geteuid() != 0) {
		snprintf(expect, sizeof(expect), "%s: cannot open: Permission denied", path);
		ck_assert_str_eq(load_error(path), expect);
	}
	unlink(path);
	rmdir(dir);
}
END_TEST

START_TEST(error_buffer)
{
	char small[8];

	/* no buffer: still a clean failure */
	ck_assert_ptr_null(ibvd_config_parse(q("{'x': 1}"), "t.conf", NULL, 0));
	ck_assert_ptr_null(ibvd_config_parse("nonsense", "t.conf", NULL, 0));
	ck_assert_ptr_null(ibvd_config_load("/nonexistent/ibverbsd.conf", NULL, 0));
	/* a short buffer gets a truncated, terminated message */
	ck_assert_ptr_null(ibvd_config_parse("{\"x\": 1}", "t.conf", small, sizeof(small)));
	ck_assert_str_eq(small, "t.conf:");
}
END_TEST

/* --- the position finder on its own, with text jansson never saw --- */

START_TEST(locator_survives_bad_text)
{
	static const char *const texts[] = {
		"{\"a\": [1, {\"b\": \"x\\\"y\"}, [[[[[[[[[[]]]]]]]]]]], \"c\": \"\\u00e9\\ud83d\\ude00\"}",
		"{\"a\\", "\"", "}}]]", "{{{{{{{{{{{{{{{{{{{{", "[[[[[[[[[[[[[[[[[[[[,,,,",
		"{\"a\" \"b\" \"c\": : :", "\\u12", "{\"\\ud800\": 1}",
	};
	const struct ibvd_json_step path[] = {
		{ .key = "a" }, { .index = 1 }, { .key = "b" },
	};
	struct ibvd_json_pos pos;
	char buf[64];
	size_t i, n;

	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		size_t len = strlen(texts[i]);

		/* every prefix, so that every way of ending early is seen */
		for (n = 0; n <= len; n++) {
			ibvd_json_locate(texts[i], n, path, 3, &pos);
			ibvd_json_path_at(texts[i], n, n, buf, sizeof(buf), &pos);
			ibvd_json_path_at(texts[i], n, n, buf, 3, &pos);
		}
	}
	ck_assert_uint_eq(ibvd_json_locate(texts[0], strlen(texts[0]), path, 3, &pos), 3);
	ck_assert_uint_eq(pos.line, 1);
	ck_assert_uint_eq(pos.column, 12);
	ck_assert_int_eq(ibvd_json_path_at(texts[0], strlen(texts[0]), 14, buf, sizeof(buf), &pos), 1);
	ck_assert_str_eq(buf, "a[1].b");
	ck_assert_int_eq(ibvd_json_path_at(texts[0], strlen(texts[0]), 0, buf, sizeof(buf), &pos), 0);
	ck_assert_str_eq(buf, "");
}
END_TEST

/* --- limits --- */

#define MAX	IBVD_LIMIT_UNLIMITED

/* The all-devices limits for a peer without supplementary groups. */
static const struct ibvd_quota *limits_for(const struct ibvd_config *cfg,
					   uid_t uid, gid_t gid,
					   const char *cgroup)
{
	static struct ibvd_quota q;
	struct ibvd_limit_who who = { .uid = uid, .gid = gid, .cgroup = cgroup };

	ibvd_config_limits_all(cfg, ibvd_config_limit_rule_for(cfg, &who), &q);
	return &q;
}

/*
 * Thousands of rules, as a site with a rule per user writes them: each
 * is told from all the others (a second spelling of the first uid, last,
 * is found), and each is found again for its uid.
 */
#define MANY_RULES	40000

static char *many_rules(const char *last)
{
	size_t size = 64 + MANY_RULES * 32 + strlen(last), used;
	char *t = malloc(size);
	unsigned int i;

	ck_assert_ptr_nonnull(t);
	used = (size_t)snprintf(t, size, "{\"limits\": {\"uid\": {");
	for (i = 0; i < MANY_RULES; i++)
		used += (size_t)snprintf(t + used, size - used, "%s\"%u\": {\"qp\": %u}",
					 i ? ", " : "", 100000 + i, i % 1000 + 1);
	snprintf(t + used, size - used, "%s}, \"cgroup\": {\"/a/\": {}, \"/a\": {}}}}", last);
	return t;
}

START_TEST(many_rules_told_apart)
{
	struct ibvd_config *cfg;
	char *t = many_rules("");
	unsigned int i;

	cfg = ibvd_config_parse(t, "t.conf", err, sizeof(err));
	ck_assert_msg(cfg != NULL, "rejected: %s", err);
	ck_assert_uint_eq(cfg->nlimit_rules, MANY_RULES + 2);
	for (i = 0; i < MANY_RULES; i += 997) {
		ck_assert_uint_eq(limits_for(cfg, 100000 + i, 100000 + i, NULL)->max[IBVD_LIMIT_QP],
				  i % 1000 + 1);
	}
	ibvd_config_free(cfg);
	free(t);
	t = many_rules(", \"0100000\": {}");
	cfg = ibvd_config_parse(t, "t.conf", err, sizeof(err));
	ck_assert_ptr_null(cfg);
	ck_assert_msg(strstr(err, "limits.uid.0100000: the same uid as \"100000\""),
		      "%s", err);
	free(t);
}
END_TEST

/* The rdma cgroup's kinds default to max, cm_id and the daemon's own to a number. */
START_TEST(limits_absent_mean_max)
{
	struct ibvd_config *cfg = good("{}");
	const struct ibvd_quota *l = limits_for(cfg, 1001, 1001, "/x");
	struct ibvd_quota dev;
	int k;

	for (k = 0; k < IBVD_LIMIT_CM_ID; k++)
		ck_assert(l->max[k] == MAX);
	ck_assert_uint_eq(l->max[IBVD_LIMIT_CM_ID], 65536);
	for (k = IBVD_LIMIT_SESSION; k < IBVD_LIMIT_NKINDS; k++) {
		ck_assert(l->max[k] != MAX);
		ck_assert_uint_eq(l->max[k], ibvd_limit_builtin(k));
		ck_assert_uint_ge(l->max[k], 1024);
	}
	ck_assert(l->bandwidth == MAX);
	/* on one device, what the sum over devices leaves */
	ibvd_config_limits_dev(cfg, NULL, "ibvd0", &dev);
	for (k = 0; k < IBVD_LIMIT_NKINDS; k++)
		ck_assert(dev.max[k] == MAX);
	ibvd_config_free(cfg);
}
END_TEST

/* "max" and a number replace the built-in default; a rule's beats both. */
START_TEST(limits_builtin_overridden)
{
	struct ibvd_config *cfg = good("{'limits': {'default': {'session': 'max',"
		"'comp_channel': 7}, 'uid': {'1001': {'comp_channel': 2,"
		"'mcast_join': 0}}}}");
	const struct ibvd_quota *l = limits_for(cfg, 1002, 1002, NULL);

	ck_assert(l->max[IBVD_LIMIT_SESSION] == MAX);
	ck_assert_uint_eq(l->max[IBVD_LIMIT_COMP_CHANNEL], 7);
	ck_assert_uint_eq(l->max[IBVD_LIMIT_MCAST_JOIN],
			  ibvd_limit_builtin(IBVD_LIMIT_MCAST_JOIN));
	l = limits_for(cfg, 1001, 1001, NULL);
	ck_assert(l->max[IBVD_LIMIT_SESSION] == MAX);
	ck_assert_uint_eq(l->max[IBVD_LIMIT_COMP_CHANNEL], 2);
	ck_assert_uint_eq(l->max[IBVD_LIMIT_MCAST_JOIN], 0);
	ibvd_config_free(cfg);
}
END_TEST

START_TEST(limits_most_specific_wins)
{
	struct ibvd_config *cfg;
	const struct ibvd_quota *l;
	char conf[1024];
	struct group *gr = getgrgid(getgid());

	ck_assert_ptr_nonnull(gr);
	snprintf(conf, sizeof(conf),
		 "{'limits': {"
		 "'uid': {'1001': {'qp': 1}},"
		 "'group': {'%s': {'qp': 2}, '4242': {'cq': 9}},"
		 "'cgroup': {'/user.slice/': {'qp': 3}, '/user.slice/user-7.slice/': {'qp': 4}},"
		 "'default': {'qp': 5, 'memlock': 65536, 'mr': 'max'}}}",
		 gr->gr_name);
	cfg = good(conf);
	l = limits_for(cfg, 1001, getgid(), "/user.slice/user-7.slice/a");
	ck_assert_uint_eq(l->max[IBVD_LIMIT_QP], 1);
	/* keys a rule omits come from the default, even one written after it */
	ck_assert_uint_eq(l->max[IBVD_LIMIT_MEMLOCK], 65536);
	ck_assert(l->max[IBVD_LIMIT_MR] == MAX);
	ck_assert(l->max[IBVD_LIMIT_CQ] == MAX);
	l = limits_for(cfg, 1002, getgid(), "/user.slice/user-7.slice/a");
	ck_assert_uint_eq(l->max[IBVD_LIMIT_QP], 2);
	l = limits_for(cfg, 1002, 4242, "/");
	ck_assert_uint_eq(l->max[IBVD_LIMIT_CQ], 9);
	ck_assert_uint_eq(l->max[IBVD_LIMIT_QP], 5);
	l = limits_for(cfg, 1002, 4243, "/user.slice/user-7.slice/a");
	ck_assert_uint_eq(l->max[IBVD_LIMIT_QP], 4);
	l = limits_for(cfg, 1002, 4243, "/user.slice/user-8.slice");
	ck_assert_uint_eq(l->max[IBVD_LIMIT_QP], 3);
	l = limits_for(cfg, 1002, 4243, "/system.slice");
	ck_assert_uint_eq(l->max[IBVD_LIMIT_QP], 5);
	l = limits_for(cfg, 1002, 4243, NULL);
	ck_assert_uint_eq(l->max[IBVD_LIMIT_QP], 5);
	ibvd_config_free(cfg);
}
END_TEST

START_TEST(limits_every_key)
{
	struct ibvd_config *cfg = good("{'limits': {'default': {'memlock': 1, "
		"'hca_handle': 2, 'hca_object': 3, 'qp': 4, 'cq': 5, 'mr': 6, "
		"'pd': 7, 'srq': 8, 'ah': 9, 'cm_id': 10, 'session': 11, "
		"'comp_channel': 12, 'mcast_attach': 13, 'mcast_join': 0}}}");
	int k;

	ck_assert_int_eq(IBVD_LIMIT_NKINDS, 14);
	for (k = 0; k < IBVD_LIMIT_NKINDS; k++)
		ck_assert_uint_eq(cfg->limit_default.all.q.max[k], (k + 1) % 14);
	ck_assert(cfg->limit_default.all.q.bandwidth == MAX);
	ibvd_config_free(cfg);
}
END_TEST

/* Byte counts as ibvctl limit set takes them: 1024-based k, m, g. */
START_TEST(limits_byte_suffixes)
{
	struct ibvd_config *cfg = good("{'limits': {'default': {'memlock': '64M', "
		"'bandwidth': '1g'}, 'uid': {'5': {'memlock': '12k', "
		"'bandwidth': '4096'}}}}");

	ck_assert_uint_eq(cfg->limit_default.all.q.max[IBVD_LIMIT_MEMLOCK], 64ull << 20);
	ck_assert_uint_eq(cfg->limit_default.all.q.bandwidth, 1ull << 30);
	ck_assert_uint_eq(cfg->limit_rules[0].limits.all.q.max[IBVD_LIMIT_MEMLOCK], 12ull << 10);
	ck_assert_uint_eq(cfg->limit_rules[0].limits.all.q.bandwidth, 4096);
	ibvd_config_free(cfg);
}
END_TEST

START_TEST(bad_limits)
{
	ck_assert_str_eq(parse_error("{'limits': 1}"),
		"t.conf:1:2: limits: expected an object, got 1");
	ck_assert_str_eq(parse_error("{'limits': {'users': {}}}"),
		"t.conf:1:13: limits.users: unknown key");
	ck_assert_str_eq(parse_error("{'limits': {'default': {'qps': 1}}}"),
		"t.conf:1:25: limits.default.qps: unknown limit");
	ck_assert_str_eq(parse_error("{'limits': {'default': {'qp': -1}}}"),
		"t.conf:1:25: limits.default.qp: expected a non-negative integer or \"max\", got -1");
	ck_assert_str_eq(parse_error("{'limits': {'default': {'qp': 'unlimited'}}}"),
		"t.conf:1:25: limits.default.qp: expected a non-negative integer or \"max\", got \"unlimited\"");
	ck_assert_str_eq(parse_error("{'limits': {'default': []}}"),
		"t.conf:1:13: limits.default: expected an object of limits, got an array");
	ck_assert_str_eq(parse_error("{'limits': {'uid': {'bob': {}}}}"),
		"t.conf:1:21: limits.uid.bob: expected a decimal uid");
	ck_assert_str_eq(parse_error("{'limits': {'uid': {'-1': {}}}}"),
		"t.conf:1:21: limits.uid.-1: expected a decimal uid");
	ck_assert_str_eq(parse_error("{'limits': {'uid': {'1001': {'mr': 1.5}}}}"),
		"t.conf:1:30: limits.uid.1001.mr: expected a non-negative integer or \"max\", got 1.5");
	ck_assert_str_eq(parse_error("{'limits': {'group': {'no-such-group-ibvd': {}}}}"),
		"t.conf:1:23: limits.group.no-such-group-ibvd: no such group \"no-such-group-ibvd\"");
	ck_assert_str_eq(parse_error("{'limits': {'cgroup': {'user.slice': {}}}}"),
		"t.conf:1:24: limits.cgroup.user.slice: expected a cgroup path starting with \"/\"");
	ck_assert_str_eq(parse_error("{'limits': {'cgroup': {'/a': {'x': 1}}}}"),
		"t.conf:1:31: limits.cgroup./a.x: unknown limit");
}
END_TEST

/* Two devices, limits on each and on their sum; omitted keys inherit. */
#define TWO_DEVICES \
	"'devices': [{'name': 'ibvd0'}, {'name': 'ibvd1', 'lid': 20}]"

START_TEST(limits_per_device)
{
	struct ibvd_config *cfg = good("{'limits': {"
		"'uid': {'1001': {'qp': 7, 'devices': {'ibvd0': {'qp': 3}}}},"
		"'default': {'qp': 5, 'bandwidth': 1048576,"
		"  'devices': {'ibvd0': {'qp': 1, 'cq': 2}, 'ibvd1': {'mr': 4}}}},"
		TWO_DEVICES "}");
	struct ibvd_limit_who who = { .uid = 1001, .gid = 1001 };
	const struct ibvd_config_limit_rule *r = ibvd_config_limit_rule_for(cfg, &who);
	struct ibvd_quota q;
	char name[64];

	ck_assert_ptr_nonnull(r);
	ibvd_config_rule_name(cfg, r, name, sizeof(name));
	ck_assert_str_eq(name, "uid 1001");
	ibvd_config_limits_all(cfg, r, &q);
	ck_assert_uint_eq(q.max[IBVD_LIMIT_QP], 7);
	ck_assert_uint_eq(q.bandwidth, 1048576);	/* from the default */
	ibvd_config_limits_dev(cfg, r, "ibvd0", &q);
	ck_assert_uint_eq(q.max[IBVD_LIMIT_QP], 3);	/* its own */
	ck_assert_uint_eq(q.max[IBVD_LIMIT_CQ], 2);	/* the default's ibvd0 */
	ck_assert(q.max[IBVD_LIMIT_MR] == MAX);	/* nobody's */
	ck_assert(q.bandwidth == MAX);
	ibvd_config_limits_dev(cfg, r, "ibvd1", &q);
	ck_assert_uint_eq(q.max[IBVD_LIMIT_MR], 4);
	ck_assert(q.max[IBVD_LIMIT_QP] == MAX);
	ibvd_config_limits_dev(cfg, r, "nosuch", &q);
	ck_assert(q.max[IBVD_LIMIT_MR] == MAX);
	who.uid = 1002;
	r = ibvd_config_limit_rule_for(cfg, &who);
	ck_assert_ptr_null(r);
	ibvd_config_rule_name(cfg, r, name, sizeof(name));
	ck_assert_str_eq(name, "default");
	ibvd_config_limits_dev(cfg, r, "ibvd0", &q);
	ck_assert_uint_eq(q.max[IBVD_LIMIT_QP], 1);
	ibvd_config_free(cfg);
}
END_TEST

START_TEST(bad_device_limits)
{
	ck_assert_str_eq(parse_error("{'limits': {'default': {'devices': "
		"{'ibvd9': {'qp': 1}}}}, " TWO_DEVICES "}"),
		"t.conf:1:37: limits.default.devices.ibvd9: unknown device \"ibvd9\"");
	/* the section may come before the devices it names */
	ck_assert_str_eq(parse_error("{'limits': {'uid': {'5': {'devices': "
		"{'ibvd1': {'qp': 1}}}}}, " TWO_DEVICES "}"),
		"(accepted)");
	/* without a "devices" section the one device is ibvd0 */
	ck_assert_str_eq(parse_error("{'limits': {'default': {'devices': "
		"{'ibvd1': {}}}}}"),
		"t.conf:1:37: limits.default.devices.ibvd1: unknown device \"ibvd1\"");
	ck_assert_str_eq(parse_error("{'limits': {'uid': {'5': {'devices': "
		"{'ibvd0': {'qps': 1}}}}}}"),
		"t.conf:1:49: limits.uid.5.devices.ibvd0.qps: unknown limit");
	ck_assert_str_eq(parse_error("{'limits': {'uid': {'5': {'devices': "
		"{'ibvd0': {'bandwidth': 1}}}}}}"),
		"t.conf:1:49: limits.uid.5.devices.ibvd0.bandwidth: bandwidth limits all devices together, not one");
	ck_assert_str_eq(parse_error("{'limits': {'uid': {'5': {'devices': "
		"{'ibvd0': {'cm_id': 1}}}}}}"),
		"t.conf:1:49: limits.uid.5.devices.ibvd0.cm_id: cm_id limits all devices together, not one");
	ck_assert_str_eq(parse_error("{'limits': {'uid': {'5': {'devices': "
		"{'ibvd0': {'session': 1}}}}}}"),
		"t.conf:1:49: limits.uid.5.devices.ibvd0.session: session limits all devices together, not one");
	ck_assert_str_eq(parse_error("{'limits': {'default': {'devices': "
		"{'ibvd0': {'mcast_join': 1}}}}}"),
		"t.conf:1:47: limits.default.devices.ibvd0.mcast_join: mcast_join limits all devices together, not one");
	ck_assert_str_eq(parse_error("{'limits': {'default': {'session': -1}}}"),
		"t.conf:1:25: limits.default.session: expected a non-negative integer or \"max\", got -1");
	ck_assert_str_eq(parse_error("{'limits': {'default': {'devices': []}}}"),
		"t.conf:1:25: limits.default.devices: expected an object of devices, got an array");
	ck_assert_str_eq(parse_error("{'limits': {'default': {'devices': {'ibvd0': 3}}}}"),
		"t.conf:1:37: limits.default.devices.ibvd0: expected an object of limits, got 3");
	ck_assert_str_eq(parse_error("{'limits': {'default': {'bandwidth': -5}}}"),
		"t.conf:1:25: limits.default.bandwidth: expected a positive byte count (\"64M\") or \"max\", got -5");
	ck_assert_str_eq(parse_error("{'limits': {'default': {'bandwidth': '1x'}}}"),
		"t.conf:1:25: limits.default.bandwidth: expected a positive byte count (\"64M\") or \"max\", got \"1x\"");
	ck_assert_str_eq(parse_error("{'limits': {'default': {'bandwidth': '0k'}}}"),
		"t.conf:1:25: limits.default.bandwidth: expected a positive byte count (\"64M\") or \"max\", got \"0k\"");
	ck_assert_str_eq(parse_error("{'limits': {'default': {'memlock': '-1M'}}}"),
		"t.conf:1:25: limits.default.memlock: expected a byte count (\"64M\") or \"max\", got \"-1M\"");
	/* suffixes are for bytes only */
	ck_assert_str_eq(parse_error("{'limits': {'default': {'qp': '1k'}}}"),
		"t.conf:1:25: limits.default.qp: expected a non-negative integer or \"max\", got \"1k\"");
	/* 0 bytes/s is no limit the engine can keep; 0 of a count is */
	ck_assert_str_eq(parse_error("{'limits': {'uid': {'5': {'qp': 0,\n"
		"  'bandwidth': 0}}}}"),
		"t.conf:2:3: limits.uid.5.bandwidth: expected a positive byte count (\"64M\") or \"max\", got 0");
	ck_assert_str_eq(parse_error("{'limits': {'default': {'bandwidth': 1}}}"),
		"(accepted)");
}
END_TEST

/*
 * The first group entry in file order that names any of the peer's
 * groups; which of them is primary does not matter (sg(1) picks it).
 */
START_TEST(limits_supplementary_groups)
{
	struct ibvd_config *cfg = good("{'limits': {'group': {"
		"'4001': {'qp': 1}, '4002': {'qp': 2}, '4003': {'qp': 3}},"
		"'cgroup': {'/': {'qp': 9}}}}");
	gid_t groups[] = { 4003, 4002, 100 };
	struct ibvd_limit_who who = {
		.uid = 1001, .gid = 100, .groups = groups, .ngroups = 3,
		.cgroup = "/user.slice",
	};
	struct ibvd_quota q;
	char name[64];

	ibvd_config_limits_all(cfg, ibvd_config_limit_rule_for(cfg, &who), &q);
	ck_assert_uint_eq(q.max[IBVD_LIMIT_QP], 2);	/* 4002 is first in file */
	who.gid = 4003;
	ibvd_config_limits_all(cfg, ibvd_config_limit_rule_for(cfg, &who), &q);
	ck_assert_uint_eq(q.max[IBVD_LIMIT_QP], 2);	/* not the primary's */
	ibvd_config_rule_name(cfg, ibvd_config_limit_rule_for(cfg, &who), name,
			      sizeof(name));
	ck_assert_str_eq(name, "group 4002");
	/* the primary gid counts as one of the groups, listed or not */
	who.gid = 4001;
	ibvd_config_limits_all(cfg, ibvd_config_limit_rule_for(cfg, &who), &q);
	ck_assert_uint_eq(q.max[IBVD_LIMIT_QP], 1);
	who.ngroups = 0;
	ibvd_config_limits_all(cfg, ibvd_config_limit_rule_for(cfg, &who), &q);
	ck_assert_uint_eq(q.max[IBVD_LIMIT_QP], 1);
	who.gid = 100;
	ibvd_config_limits_all(cfg, ibvd_config_limit_rule_for(cfg, &who), &q);
	ck_assert_uint_eq(q.max[IBVD_LIMIT_QP], 9);	/* then the cgroup */
	ibvd_config_free(cfg);
}
END_TEST

/* Runtime group entries come after the file's, in the order added. */
START_TEST(limits_runtime_group_order)
{
	struct ibvd_config *cfg = good("{'limits': {'group': {"
		"'4002': {'qp': 2}}}}");
	gid_t groups[] = { 4001, 4002, 4003 };
	struct ibvd_limit_who who = {
		.uid = 1001, .gid = 4003, .groups = groups, .ngroups = 3,
	};
	struct ibvd_limit_entry *e;
	char name[64];

	ck_assert_int_eq(ibvd_config_limit_rule_get(cfg, IBVD_LIMIT_MATCH_GROUP,
		"4003", &e, err, sizeof(err)), 0);
	ck_assert_int_eq(ibvd_config_limit_rule_get(cfg, IBVD_LIMIT_MATCH_GROUP,
		"4001", &e, err, sizeof(err)), 0);
	ibvd_config_rule_name(cfg, ibvd_config_limit_rule_for(cfg, &who), name,
			      sizeof(name));
	ck_assert_str_eq(name, "group 4002");	/* the file's */
	groups[1] = 4004;
	ibvd_config_rule_name(cfg, ibvd_config_limit_rule_for(cfg, &who), name,
			      sizeof(name));
	ck_assert_str_eq(name, "group 4003");	/* added first, primary or not */
	who.gid = 4004;
	ibvd_config_rule_name(cfg, ibvd_config_limit_rule_for(cfg, &who), name,
			      sizeof(name));
	ck_assert_str_eq(name, "group 4003");
	ibvd_config_free(cfg);
}
END_TEST

/* ibvctl limit set's entry: made on demand, default changes reach rules. */
START_TEST(limits_runtime_rules)
{
	struct ibvd_config *cfg = good("{'limits': {'default': {'qp': 5},"
		"'uid': {'1001': {'cq': 1}}}}");
	struct ibvd_limit_who who = { .uid = 1002, .gid = 1002 };
	struct ibvd_limit_entry *e;
	struct ibvd_quota q;
	char name[64];

	ck_assert_int_eq(ibvd_config_limit_rule_get(cfg, IBVD_LIMIT_MATCH_UID,
		"1002", &e, err, sizeof(err)), 0);
	ck_assert_uint_eq(cfg->nlimit_rules, 2);
	e->all.q.max[IBVD_LIMIT_MR] = 6;
	e->all.given |= 1u << IBVD_LIMIT_MR;
	e->runtime = 1;
	ibvd_config_rule_name(cfg, ibvd_config_limit_rule_for(cfg, &who), name,
			      sizeof(name));
	ck_assert_str_eq(name, "runtime uid 1002");
	cfg->limit_default.all.q.max[IBVD_LIMIT_QP] = 8;
	ibvd_config_limits_all(cfg, ibvd_config_limit_rule_for(cfg, &who), &q);
	ck_assert_uint_eq(q.max[IBVD_LIMIT_MR], 6);
	ck_assert_uint_eq(q.max[IBVD_LIMIT_QP], 8);
	/* the existing rule is found, not doubled */
	ck_assert_int_eq(ibvd_config_limit_rule_get(cfg, IBVD_LIMIT_MATCH_UID,
		"1001", &e, err, sizeof(err)), 0);
	ck_assert_uint_eq(cfg->nlimit_rules, 2);
	ck_assert_uint_eq(e->all.q.max[IBVD_LIMIT_CQ], 1);
	ck_assert_int_eq(ibvd_config_limit_rule_get(cfg, IBVD_LIMIT_MATCH_UID,
		"x1", &e, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "expected a decimal uid");
	ck_assert_int_eq(ibvd_config_limit_rule_get(cfg, IBVD_LIMIT_MATCH_GROUP,
		"no-such-group-ibvd", &e, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "no such group \"no-such-group-ibvd\"");
	ck_assert_int_eq(ibvd_config_limit_rule_get(cfg, IBVD_LIMIT_MATCH_CGROUP,
		"a/b", &e, err, sizeof(err)), -EINVAL);
	ck_assert_uint_eq(cfg->nlimit_rules, 2);
	ck_assert_int_eq(ibvd_limit_key("bandwidth"), IBVD_LIMIT_BANDWIDTH);
	ck_assert_int_eq(ibvd_limit_key("cm_id"), IBVD_LIMIT_CM_ID);
	ck_assert_int_eq(ibvd_limit_key("qps"), -1);
	ibvd_config_free(cfg);
}
END_TEST

START_TEST(identity_of_self)
{
	struct ibvd_peer_identity id = { .pid = getpid() }, dead = { .pid = 0 };

	ibvd_peer_identity_read(&id, "/proc");
	ck_assert(id.starttime > 0);
	ck_assert(ibvd_peer_identity_alive(&id, "/proc"));
	id.starttime++;	/* as if the pid had been recycled */
	ck_assert(!ibvd_peer_identity_alive(&id, "/proc"));
	ibvd_peer_identity_read(&dead, "/proc");
	ck_assert(dead.starttime == 0 && dead.cgroup[0] == '\0');
	ck_assert(!ibvd_peer_identity_alive(&dead, "/proc"));
}
END_TEST

/* A fake /proc: comm with spaces and ')' must not shift the fields. */
START_TEST(identity_from_fake_proc)
{
	char dir[] = "/tmp/test_ident.XXXXXX", path[128];
	struct ibvd_peer_identity id = { .pid = 77 };
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/77", dir);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/77/stat", dir);
	f = fopen(path, "w");
	fputs("77 (a) b (c) S 1 77 77 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 123456 "
	      "1000 100 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0\n", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/77/cgroup", dir);
	f = fopen(path, "w");
	fputs("12:memory:/v1/path\n0::/user.slice/user-1001.slice/session-3.scope\n", f);
	fclose(f);
	ibvd_peer_identity_read(&id, dir);
	ck_assert_uint_eq(id.starttime, 123456);
	ck_assert_str_eq(id.cgroup, "/user.slice/user-1001.slice/session-3.scope");
	snprintf(path, sizeof(path), "%s/77/stat", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/77/cgroup", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/77", dir);
	rmdir(path);
	rmdir(dir);
}
END_TEST

static int count_tenants(const struct ibvd_tenant *t, void *arg)
{
	(void)t;
	(*(int *)arg)++;
	return 0;
}

/* Accounting: exact limits, hca_object, refusals charge nothing, reload. */
START_TEST(tenant_accounting)
{
	struct ibvd_config *cfg = good("{'limits': {'default': {'qp': 2, "
		"'hca_object': 3, 'memlock': 8192}, 'uid': {'7': {'qp': 'max'}}}}");
	struct ibvd_peer_identity a = { .uid = 5 }, b = { .uid = 7 };
	struct ibvd_tenant *t = ibvd_tenant_get(cfg, &a), *t2, *u;
	struct ibvd_config *cfg2;
	int n = 0;

	ck_assert_ptr_nonnull(t);
	t2 = ibvd_tenant_get(cfg, &a);
	ck_assert_ptr_eq(t, t2);	/* one account per uid */
	u = ibvd_tenant_get(cfg, &b);
	ibvd_tenant_foreach(count_tenants, &n);
	ck_assert_int_eq(n, 2);
	ck_assert_int_eq(ibvd_tenant_charge(t, IBVD_LIMIT_QP, 1, "t"), 0);
	ck_assert_int_eq(ibvd_tenant_charge(t, IBVD_LIMIT_QP, 1, "t"), 0);
	ck_assert_int_eq(ibvd_tenant_charge(t, IBVD_LIMIT_QP, 1, "t"), -EAGAIN);
	ck_assert_int_eq(ibvd_tenant_charge(t, IBVD_LIMIT_PD, 1, "t"), 0);
	ck_assert_int_eq(ibvd_tenant_charge(t, IBVD_LIMIT_PD, 1, "t"), -EAGAIN);
	ck_assert_uint_eq(t->usage[IBVD_LIMIT_PD], 1);
	ck_assert_uint_eq(t->usage[IBVD_LIMIT_HCA_OBJECT], 3);
	/* cm_ids are not verbs objects: not in hca_object */
	ck_assert_int_eq(ibvd_tenant_charge(t, IBVD_LIMIT_CM_ID, 1, "t"), 0);
	ck_assert_int_eq(ibvd_tenant_charge(t, IBVD_LIMIT_MEMLOCK, 8192, "t"), 0);
	ck_assert_int_eq(ibvd_tenant_charge(t, IBVD_LIMIT_MEMLOCK, 1, "t"), -ENOMEM);
	ck_assert_int_eq(ibvd_tenant_charge(u, IBVD_LIMIT_MEMLOCK, 8193, "t"), -ENOMEM);
	/* its own qp is "max", the default's hca_object still applies */
	ck_assert_int_eq(ibvd_tenant_charge(u, IBVD_LIMIT_QP, 4, "t"), -EAGAIN);
	ck_assert_uint_eq(u->usage[IBVD_LIMIT_QP], 0);
	/* reload: usage stays, the new limits decide the next request */
	cfg2 = good("{'limits': {'default': {'qp': 1}}}");
	ibvd_tenants_apply(cfg2);
	ck_assert_int_eq(ibvd_tenant_charge(t, IBVD_LIMIT_PD, 5, "t"), 0);
	ck_assert_int_eq(ibvd_tenant_charge(u, IBVD_LIMIT_QP, 1, "t"), 0);
	ck_assert_int_eq(ibvd_tenant_charge(u, IBVD_LIMIT_QP, 1, "t"), -EAGAIN);
	ibvd_tenant_uncharge(u, IBVD_LIMIT_QP, 1);
	ibvd_tenant_uncharge(t, IBVD_LIMIT_QP, 2);
	ibvd_tenant_uncharge(t, IBVD_LIMIT_PD, 6);
	ibvd_tenant_uncharge(t, IBVD_LIMIT_CM_ID, 1);
	ibvd_tenant_uncharge(t, IBVD_LIMIT_MEMLOCK, 8192);
	for (n = 0; n < IBVD_LIMIT_NKINDS; n++)
		ck_assert_uint_eq(t->usage[n], 0);
	ibvd_tenant_put(t2);
	ibvd_tenant_put(t);
	ibvd_tenant_put(u);
	n = 0;
	ibvd_tenant_foreach(count_tenants, &n);
	ck_assert_int_eq(n, 0);
	ibvd_config_free(cfg2);
	ibvd_config_free(cfg);
}
END_TEST

/* A device's limit and the all-devices limit both hold on every charge. */
START_TEST(tenant_per_device)
{
	struct ibvd_config *cfg = good("{'limits': {'default': {'qp': 3,"
		"'memlock': 16384, 'devices': {'ibvd0': {'qp': 2}, "
		"'ibvd1': {'memlock': 4096}}}}, " TWO_DEVICES "}");
	struct ibvd_peer_identity a = { .uid = 5 };
	struct ibvd_tenant *t = ibvd_tenant_get(cfg, &a);
	struct ibvd_tenant_dev *d0, *d1;
	struct ibvd_config *cfg2;
	int n;

	d0 = ibvd_tenant_dev_get(t, cfg, "ibvd0");
	d1 = ibvd_tenant_dev_get(t, cfg, "ibvd1");
	ck_assert_ptr_nonnull(d0);
	ck_assert_ptr_eq(ibvd_tenant_dev_get(t, cfg, "ibvd1"), d1);
	ck_assert_ptr_eq(ibvd_tenant_dev_find(t, "ibvd0"), d0);
	ck_assert_ptr_null(ibvd_tenant_dev_find(t, "ibvd2"));
	ck_assert_int_eq(ibvd_tenant_dev_charge_obj(d0, IBVD_OBJ_QP, 1), 0);
	ck_assert_int_eq(ibvd_tenant_dev_charge_obj(d0, IBVD_OBJ_QP, 1), 0);
	ck_assert_int_eq(ibvd_tenant_dev_charge_obj(d0, IBVD_OBJ_QP, 1), -EAGAIN);
	ck_assert_int_eq(ibvd_tenant_dev_charge_obj(d1, IBVD_OBJ_QP, 1), 0);
	/* ibvd1 has no qp limit, but the sum over devices is 3 */
	ck_assert_int_eq(ibvd_tenant_dev_charge_obj(d1, IBVD_OBJ_QP, 1), -EAGAIN);
	ck_assert_uint_eq(d0->usage[IBVD_LIMIT_QP], 2);
	ck_assert_uint_eq(d1->usage[IBVD_LIMIT_QP], 1);
	ck_assert_uint_eq(d1->usage[IBVD_LIMIT_HCA_OBJECT], 1);
	ck_assert_uint_eq(t->usage[IBVD_LIMIT_QP], 3);
	ck_assert_uint_eq(t->usage[IBVD_LIMIT_HCA_OBJECT], 3);
	ck_assert_int_eq(ibvd_tenant_dev_charge(d1, IBVD_LIMIT_MEMLOCK, 8192, "t"), -ENOMEM);
	ck_assert_int_eq(ibvd_tenant_dev_charge(d1, IBVD_LIMIT_MEMLOCK, 4096, "t"), 0);
	ck_assert_int_eq(ibvd_tenant_dev_charge(d0, IBVD_LIMIT_MEMLOCK, 12288, "t"), 0);
	ck_assert_int_eq(ibvd_tenant_dev_charge(d0, IBVD_LIMIT_MEMLOCK, 1, "t"), -ENOMEM);
	/* cm_ids: all devices only */
	ck_assert_int_eq(ibvd_tenant_charge_obj(t, IBVD_OBJ_CM_ID, 1), 0);
	ck_assert_uint_eq(t->usage[IBVD_LIMIT_CM_ID], 1);
	ck_assert_uint_eq(d0->usage[IBVD_LIMIT_CM_ID], 0);
	/* limit set / reload reaches the device accounts too */
	cfg2 = good("{'limits': {'default': {'devices': {'ibvd1': {'qp': 1}}}}, "
		    TWO_DEVICES "}");
	ibvd_tenants_apply(cfg2);
	ck_assert(d0->limits.max[IBVD_LIMIT_QP] == MAX);
	ck_assert_uint_eq(d1->limits.max[IBVD_LIMIT_QP], 1);
	ck_assert_int_eq(ibvd_tenant_dev_charge_obj(d0, IBVD_OBJ_QP, 1), 0);
	ck_assert_int_eq(ibvd_tenant_dev_charge_obj(d1, IBVD_OBJ_QP, 1), -EAGAIN);
	ibvd_tenant_dev_charge_obj(d0, IBVD_OBJ_QP, -1);
	ibvd_tenant_dev_charge_obj(d0, IBVD_OBJ_QP, -1);
	ibvd_tenant_dev_charge_obj(d0, IBVD_OBJ_QP, -1);
	ibvd_tenant_dev_charge_obj(d1, IBVD_OBJ_QP, -1);
	ibvd_tenant_dev_uncharge(d0, IBVD_LIMIT_MEMLOCK, 12288);
	ibvd_tenant_dev_uncharge(d1, IBVD_LIMIT_MEMLOCK, 4096);
	ibvd_tenant_charge_obj(t, IBVD_OBJ_CM_ID, -1);
	for (n = 0; n < IBVD_LIMIT_NKINDS; n++) {
		ck_assert_uint_eq(t->usage[n], 0);
		ck_assert_uint_eq(d0->usage[n], 0);
		ck_assert_uint_eq(d1->usage[n], 0);
	}
	ibvd_tenant_put(t);
	ibvd_config_free(cfg2);
	ibvd_config_free(cfg);
}
END_TEST

/*
 * Refusals are counted in every account of the charge, by the kind that
 * refused; comp_channel is not a verbs object; root's sessions are
 * counted past the limit; lines over the per-uid log rate are counted.
 */
START_TEST(tenant_counters)
{
	struct ibvd_config *cfg = good("{'limits': {'default': {'hca_object': 1,"
		"'session': 1, 'devices': {'ibvd0': {'comp_channel': 1}}}}, "
		TWO_DEVICES "}");
	struct ibvd_peer_identity a = { .uid = 7 };
	struct ibvd_tenant *t = ibvd_tenant_get(cfg, &a);
	struct ibvd_tenant_dev *d0 = ibvd_tenant_dev_get(t, cfg, "ibvd0");
	struct ibvd_tenant_dev *d1 = ibvd_tenant_dev_get(t, cfg, "ibvd1");
	enum ibvd_log_level level;
	uint64_t suppressed;
	int i;

	ck_assert_int_eq(ibvd_tenant_dev_charge_obj(d0, IBVD_OBJ_COMP_CHANNEL, 1), 0);
	ck_assert_int_eq(ibvd_tenant_dev_charge_obj(d0, IBVD_OBJ_COMP_CHANNEL, 1),
			 -EAGAIN);
	ck_assert_int_eq(ibvd_tenant_dev_charge_obj(d1, IBVD_OBJ_COMP_CHANNEL, 1), 0);
	ck_assert_uint_eq(t->usage[IBVD_LIMIT_COMP_CHANNEL], 2);
	ck_assert_uint_eq(t->usage[IBVD_LIMIT_HCA_OBJECT], 0);
	ck_assert_uint_eq(d0->counters.refused[IBVD_LIMIT_COMP_CHANNEL], 1);
	ck_assert_uint_eq(d1->counters.refused[IBVD_LIMIT_COMP_CHANNEL], 0);
	ck_assert_uint_eq(t->counters.refused[IBVD_LIMIT_COMP_CHANNEL], 1);
	/* a qp over hca_object counts as hca_object's refusal */
	ck_assert_int_eq(ibvd_tenant_dev_charge_obj(d1, IBVD_OBJ_QP, 1), 0);
	ck_assert_int_eq(ibvd_tenant_dev_charge_obj(d1, IBVD_OBJ_QP, 1), -EAGAIN);
	ck_assert_uint_eq(t->counters.refused[IBVD_LIMIT_HCA_OBJECT], 1);
	ck_assert_uint_eq(d1->counters.refused[IBVD_LIMIT_HCA_OBJECT], 1);
	ck_assert_uint_eq(t->counters.refused[IBVD_LIMIT_QP], 0);
	/* mcast_attach: per device and all, not an object */
	ck_assert_int_eq(ibvd_tenant_dev_charge(d0, IBVD_LIMIT_MCAST_ATTACH, 1, "t"), 0);
	ck_assert_uint_eq(t->usage[IBVD_LIMIT_HCA_OBJECT], 1);
	ibvd_tenant_dev_uncharge(d0, IBVD_LIMIT_MCAST_ATTACH, 1);
	/* sessions: one, then refused; root's counted anyway */
	ck_assert_int_eq(ibvd_tenant_charge(t, IBVD_LIMIT_SESSION, 1, "t"), 0);
	ck_assert_int_eq(ibvd_tenant_charge(t, IBVD_LIMIT_SESSION, 1, "t"), -EAGAIN);
	ibvd_tenant_charge_always(t, IBVD_LIMIT_SESSION, 1);
	ck_assert_uint_eq(t->usage[IBVD_LIMIT_SESSION], 2);
	ck_assert_uint_eq(t->counters.refused[IBVD_LIMIT_SESSION], 1);
	ibvd_tenant_uncharge(t, IBVD_LIMIT_SESSION, 2);
	/* events dropped count on the device and over all */
	ibvd_tenant_dev_event_dropped(d1);
	ibvd_tenant_slow_reader(t);
	ck_assert_uint_eq(d1->counters.events_dropped, 1);
	ck_assert_uint_eq(d0->counters.events_dropped, 0);
	ck_assert_uint_eq(t->counters.events_dropped, 1);
	ck_assert_uint_eq(t->counters.slow_reader, 1);
	/* a burst of lines: at most IBVD_TENANT_LOG_BURST in one second */
	/* (the refusals above spent some of it: only the growth is exact) */
	level = ibvd_log_get_level();
	ibvd_log_set_level(IBVD_LOG_DEBUG);
	suppressed = t->counters.log_suppressed;
	for (i = 0; i < 3 * IBVD_TENANT_LOG_BURST; i++)
		ibvd_tenant_log(t, IBVD_LOG_DEBUG, "line %d", i);
	suppressed = t->counters.log_suppressed - suppressed;
	ibvd_log_set_level(level);
	/* two windows at most: 10 to 30 of the 30 suppressed */
	ck_assert_uint_ge(suppressed, IBVD_TENANT_LOG_BURST);
	ck_assert_uint_le(suppressed, 3 * IBVD_TENANT_LOG_BURST);
	ibvd_tenant_dev_charge_obj(d0, IBVD_OBJ_COMP_CHANNEL, -1);
	ibvd_tenant_dev_charge_obj(d1, IBVD_OBJ_COMP_CHANNEL, -1);
	ibvd_tenant_dev_charge_obj(d1, IBVD_OBJ_QP, -1);
	for (i = 0; i < IBVD_LIMIT_NKINDS; i++)
		ck_assert_uint_eq(t->usage[i], 0);
	ibvd_tenant_put(t);
	ibvd_config_free(cfg);
}
END_TEST

/* "Groups:" from status; a pid that changed hands leaves them unknown. */
START_TEST(identity_groups)
{
	struct ibvd_peer_identity id = { .pid = getpid() };
	gid_t mine[IBVD_PEER_GROUPS_MAX];
	int n = getgroups(IBVD_PEER_GROUPS_MAX, mine), i;

	ibvd_peer_identity_read(&id, "/proc");
	ck_assert_int_ge(n, 0);
	ck_assert_uint_eq(id.ngroups, (unsigned int)n);
	for (i = 0; i < n; i++)
		ck_assert_uint_eq(id.groups[i], mine[i]);
}
END_TEST

static Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *ok = tcase_create("accepted");
	TCase *syntax = tcase_create("syntax");
	TCase *bad = tcase_create("rejected");
	TCase *files = tcase_create("files");

	tcase_add_test(ok, shipped_config);
	tcase_add_test(ok, builtin_defaults);
	tcase_add_test(ok, omitted_keys_take_defaults);
	tcase_add_test(ok, device_defaults);
	tcase_add_test(ok, accepted_values);
	tcase_add_test(ok, existing_group);
	tcase_add_test(ok, empty_group_keeps_user);
	tcase_add_test(ok, admin_group_named_or_none);
	tcase_add_test(ok, good_files);
	tcase_add_test(ok, sixteen_devices);
	tcase_add_test(ok, limits_absent_mean_max);
	tcase_add_test(ok, limits_builtin_overridden);
	tcase_add_test(ok, limits_most_specific_wins);
	tcase_add_test(ok, limits_every_key);
	tcase_add_test(ok, limits_byte_suffixes);
	tcase_add_test(ok, identity_of_self);
	tcase_add_test(ok, identity_from_fake_proc);
	tcase_add_test(ok, tenant_accounting);
	tcase_add_test(ok, limits_per_device);
	tcase_add_test(ok, limits_supplementary_groups);
	tcase_add_test(ok, limits_runtime_group_order);
	tcase_add_test(ok, limits_runtime_rules);
	tcase_add_test(ok, tenant_per_device);
	tcase_add_test(ok, tenant_counters);
	tcase_add_test(ok, identity_groups);
	tcase_add_test(ok, roce_devices);
	suite_add_tcase(s, ok);

	tcase_add_test(syntax, syntax_errors);
	tcase_add_test(syntax, trailing_garbage);
	tcase_add_test(syntax, duplicate_keys);
	tcase_add_test(syntax, locator_survives_bad_text);
	suite_add_tcase(s, syntax);

	tcase_add_test(bad, top_level_not_object);
	tcase_add_test(bad, unknown_keys);
	tcase_add_test(bad, positions);
	tcase_add_test(bad, wrong_types);
	tcase_add_test(bad, out_of_range);
	tcase_add_test(bad, bad_socket_values);
	tcase_add_test(bad, bad_names);
	tcase_add_test(bad, bad_guids);
	tcase_add_test(bad, device_counts);
	tcase_add_test(bad, overlapping_lids);
	tcase_add_test(bad, bad_limits);
	tcase_add_test(bad, bad_device_limits);
	tcase_add_test(bad, bad_roce_devices);
	tcase_add_test(bad, duplicate_rules);
	tcase_add_test(bad, many_rules_told_apart);
	suite_add_tcase(s, bad);

	tcase_add_test(files, unreadable_files);
	tcase_add_test(files, error_buffer);
	suite_add_tcase(s, files);
	return s;
}

int main(void)
{
	return check_run(config_suite(), CK_NORMAL);
}
