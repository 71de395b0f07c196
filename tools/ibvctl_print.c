/*
 * ibvctl's output: the daemon's JSON array, as JSON or as rdma-style text.
 *
 * Text is one line per object: an optional header built from the identity
 * keys (as rdma prints "0: rxe0: ..." for devices and "link rxe0/1 ..." for
 * ports), then every other key as "key value" in the daemon's order.  Which
 * header an object gets is a table keyed by OBJECT and, for resources, the
 * kind being listed; new objects need at most a line there.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "ibvctl.h"
#include "util.h"

enum header {
	HDR_NONE,
	HDR_INDEX_NAME,	/* "IDX: NAME: "  (dev, resource summary) */
	HDR_LINK,	/* "link NAME/PORT " (link, statistic, qp, cm_id) */
	HDR_DEV,	/* "dev NAME "    (per-device resources, limits) */
};

struct header_rule {
	const char *object;
	const char *kind;	/* first argument after COMMAND; NULL: any */
	enum header header;
};

/* First match wins. */
static const struct header_rule header_rules[] = {
	{ "dev", NULL, HDR_INDEX_NAME },
	{ "link", NULL, HDR_LINK },
	{ "resource", "qp", HDR_LINK },
	{ "resource", "cm_id", HDR_LINK },
	{ "resource", "cq", HDR_DEV },
	{ "resource", "mr", HDR_DEV },
	{ "resource", "pd", HDR_DEV },
	{ "resource", "ctx", HDR_DEV },
	{ "resource", "srq", HDR_DEV },
	{ "resource", NULL, HDR_INDEX_NAME },
	{ "statistic", NULL, HDR_LINK },
	{ "limit", NULL, HDR_DEV },
};

/* Keys that are hex strings in JSON (without 0x) but 0x... in text. */
static const char *const hex_keys[] = {
	"rkey", "lkey", "iova", "local_dma_lkey", "unsafe_global_rkey",
};

static bool is_hex_key(const char *key)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(hex_keys); i++)
		if (!strcmp(key, hex_keys[i]))
			return true;
	return false;
}

static bool rule_matches(const struct header_rule *r, const struct ibvctl_cmd *cmd)
{
	size_t len;

	if (strcmp(r->object, ibvctl_object_name(cmd->obj)))
		return false;
	if (!r->kind)
		return true;
	if (cmd->nargs < 1)
		return false;
	/* the daemon accepts abbreviated kinds ("res show q") too */
	len = strlen(cmd->args[0]);
	return len && !strncmp(cmd->args[0], r->kind, len);
}

static enum header header_for(const struct ibvctl_cmd *cmd)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(header_rules); i++)
		if (rule_matches(&header_rules[i], cmd))
			return header_rules[i].header;
	return HDR_NONE;
}

/* ---- values ------------------------------------------------------- */

static void print_json_compact(const json_t *v)
{
	json_dumpf(v, stdout, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
}

/*
 * A string as text.  Some come from tenants (a cgroup's name is theirs to
 * choose): a control character is printed as \xHH, never sent to the
 * terminal; C1 ones too (U+0080-U+009F, C2 80-9F in UTF-8: U+009B starts
 * an escape sequence where 8-bit controls are honoured).  A string that
 * is empty or holds a space, '"' or '\\' is quoted, with its '"' and '\\'
 * escaped, so that a line still splits into its key-value pairs: a
 * process named "x uid 0" must not read as a second uid, nor an empty
 * name shift the pairs after it.
 */
static void print_string(const char *s)
{
	bool quoted = !*s || strpbrk(s, " \"\\") != NULL;

	if (quoted)
		putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == 0xc2 && (unsigned char)s[1] >= 0x80 &&
		    (unsigned char)s[1] <= 0x9f) {
			printf("\\xc2\\x%02x", (unsigned char)s[1]);
			s++;
		} else if (c < 0x20 || c == 0x7f ||
			   (quoted && (c == '"' || c == '\\'))) {
			printf("\\x%02x", c);
		} else {
			putchar(c);
		}
	}
	if (quoted)
		putchar('"');
}

static void print_scalar(const json_t *v, bool hex)
{
	switch (json_typeof(v)) {
	case JSON_STRING:
		if (hex)
			fputs("0x", stdout);
		print_string(json_string_value(v));
		break;
	case JSON_INTEGER:
		printf("%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL:
		printf("%g", json_real_value(v));
		break;
	case JSON_TRUE:
		fputs("true", stdout);
		break;
	case JSON_FALSE:
		fputs("false", stdout);
		break;
	default:	/* null, nested arrays and objects */
		print_json_compact(v);
		break;
	}
}

/* Arrays of scalars print as a comma-separated list, like rdma's "lqpn". */
static void print_value(const char *key, const json_t *v)
{
	bool hex = is_hex_key(key);
	size_t i;
	json_t *e;

	if (!json_is_array(v)) {
		print_scalar(v, hex);
		return;
	}
	json_array_foreach(v, i, e) {
		if (i)
			putchar(',');
		print_scalar(e, hex);
	}
}

/* ---- one object per line --------------------------------------------- */

/* Print the header; returns whether it consumed the identity keys. */
static bool print_header(enum header hdr, json_t *o)
{
	json_t *idx = json_object_get(o, "ifindex");
	json_t *name = json_object_get(o, "ifname");
	json_t *port = json_object_get(o, "port");

	if (hdr == HDR_NONE || !json_is_string(name))
		return false;
	switch (hdr) {
	case HDR_INDEX_NAME:
		if (!json_is_integer(idx))
			return false;
		printf("%" JSON_INTEGER_FORMAT ": %s:", json_integer_value(idx),
		       json_string_value(name));
		break;
	case HDR_LINK:
		/* a QP not bound to a port yet prints as DEV/- */
		printf("link %s/", json_string_value(name));
		if (json_is_integer(port))
			printf("%" JSON_INTEGER_FORMAT, json_integer_value(port));
		else
			putchar('-');
		break;
	default:
		printf("dev %s", json_string_value(name));
		break;
	}
	return true;
}

static bool is_identity_key(enum header hdr, const char *key)
{
	return !strcmp(key, "ifindex") || !strcmp(key, "ifname") ||
	       (hdr == HDR_LINK && !strcmp(key, "port"));
}

static void print_object_line(enum header hdr, json_t *o)
{
	bool skip_ids = print_header(hdr, o);
	bool first = !skip_ids;
	const char *key;
	json_t *v;

	json_object_foreach(o, key, v) {
		/* absent and null mean the same: rdma omits such keys */
		if (json_is_null(v) || (skip_ids && is_identity_key(hdr, key)))
			continue;
		printf("%s%s ", first ? "" : " ", key);
		print_value(key, v);
		first = false;
	}
	putchar('\n');
}

static void print_text(const struct ibvctl_cmd *cmd, json_t *array)
{
	enum header hdr = header_for(cmd);
	size_t i;
	json_t *o;

	json_array_foreach(array, i, o) {
		if (json_is_object(o)) {
			print_object_line(hdr, o);
		} else {
			print_json_compact(o);
			putchar('\n');
		}
	}
}

int ibvctl_print(const struct ibvctl_cmd *cmd, const char *json,
		 const struct ibvctl_output *out)
{
	json_error_t err;
	json_t *root;
	size_t flags;

	root = json_loads(json, JSON_REJECT_DUPLICATES, &err);
	if (!root || !json_is_array(root)) {
		fprintf(stderr, "ibvctl: malformed reply from the daemon: %s\n",
			root ? "not a JSON array" : err.text);
		json_decref(root);
		return -EPROTO;
	}
	if (out->json) {
		flags = JSON_PRESERVE_ORDER |
			(out->pretty ? JSON_INDENT(2) : JSON_COMPACT);
		json_dumpf(root, stdout, flags);
		putchar('\n');
	} else {
		print_text(cmd, root);
	}
	json_decref(root);
	return 0;
}
