/*
 * A minimal JSON token walker that knows, at every step, which member or
 * array element it is inside of and where that began.  It serves error
 * messages only: the text has normally been accepted by jansson already,
 * and on text that has not, it must merely stay in bounds and terminate.
 */
#include <config.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "config_pos.h"

/* Valid configs nest six deep (limits.uid.N.devices.DEV.key); deeper
 * containers are skipped whole. */
#define WALK_MAX_DEPTH	8

struct frame {
	bool is_array;
	bool started;		/* the current member/element has begun */
	const char *key;	/* current member name as spelled (escaped) */
	size_t keylen;
	size_t index;		/* current array element */
	struct ibvd_json_pos pos; /* where the current member/element begins */
};

enum walk_state { EXPECT_VALUE, EXPECT_KEY, AFTER_TOKEN };

struct walker {
	const char *text;
	size_t len;
	size_t off;
	struct ibvd_json_pos pos;	/* of text[off] */
	enum walk_state state;
	size_t depth;
	struct frame frames[WALK_MAX_DEPTH];
	/* Called whenever a member or element begins; nonzero stops. */
	int (*visit)(const struct walker *w, void *arg);
	void *arg;
};

static void walker_init(struct walker *w, const char *text, size_t len)
{
	memset(w, 0, sizeof(*w));
	w->text = text;
	w->len = len;
	w->pos.line = 1;
	w->pos.column = 1;
	w->state = EXPECT_VALUE;
}

static void advance(struct walker *w)
{
	unsigned char b;

	if (w->off >= w->len)
		return;
	b = (unsigned char)w->text[w->off++];
	if (b == '\n') {
		w->pos.line++;
		w->pos.column = 1;
	} else if ((b & 0xC0) != 0x80) {
		/* UTF-8 continuation bytes do not start a new column */
		w->pos.column++;
	}
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool ends_scalar(char c)
{
	return is_space(c) || c == ',' || c == ':' || c == '"' ||
	       c == '[' || c == ']' || c == '{' || c == '}';
}

static void skip_space(struct walker *w)
{
	while (w->off < w->len && is_space(w->text[w->off]))
		advance(w);
}

/* From the opening quote to past the closing one; false if unclosed. */
static bool skip_string(struct walker *w)
{
	char c;

	advance(w);
	while (w->off < w->len) {
		c = w->text[w->off];
		advance(w);
		if (c == '\\')
			advance(w);
		else if (c == '"')
			return true;
	}
	return false;
}

/* At least one byte, so that the walk always makes progress. */
static void skip_scalar(struct walker *w)
{
	do
		advance(w);
	while (w->off < w->len && !ends_scalar(w->text[w->off]));
}

static void skip_container(struct walker *w)
{
	size_t nest = 0;
	char c;

	while (w->off < w->len) {
		c = w->text[w->off];
		if (c == '"') {
			skip_string(w);
			continue;
		}
		advance(w);
		if (c == '{' || c == '[')
			nest++;
		else if ((c == '}' || c == ']') && --nest == 0)
			return;
	}
}

static int visit(struct walker *w)
{
	return w->visit ? w->visit(w, w->arg) : 0;
}

static int begin_key(struct walker *w, struct frame *top)
{
	size_t start = w->off + 1;
	bool closed;

	top->pos = w->pos;
	closed = skip_string(w);
	top->key = w->text + start;
	top->keylen = w->off - start - (closed ? 1 : 0);
	top->started = true;
	w->state = AFTER_TOKEN;
	return visit(w);
}

static int begin_value(struct walker *w, struct frame *top)
{
	char c = w->text[w->off];
	int stop;

	if (top && top->is_array && !top->started) {
		top->started = true;
		top->pos = w->pos;
		stop = visit(w);
		if (stop)
			return stop;
	}
	if ((c == '{' || c == '[') && w->depth < WALK_MAX_DEPTH) {
		top = &w->frames[w->depth++];
		memset(top, 0, sizeof(*top));
		top->is_array = c == '[';
		w->state = top->is_array ? EXPECT_VALUE : EXPECT_KEY;
		advance(w);
		return 0;
	}
	if (c == '{' || c == '[')
		skip_container(w);
	else if (c == '"')
		skip_string(w);
	else
		skip_scalar(w);
	w->state = AFTER_TOKEN;
	return 0;
}

/* One token.  Returns nonzero when the visitor asked to stop. */
static int step(struct walker *w)
{
	struct frame *top = w->depth ? &w->frames[w->depth - 1] : NULL;

	switch (w->text[w->off]) {
	case ' ': case '\t': case '\r': case '\n':
		advance(w);
		return 0;
	case ':':
		advance(w);
		w->state = EXPECT_VALUE;
		return 0;
	case ',':
		advance(w);
		if (top && top->is_array) {
			top->index++;
			top->started = false;
			w->state = EXPECT_VALUE;
		} else {
			w->state = EXPECT_KEY;
		}
		return 0;
	case '}': case ']':
		advance(w);
		if (w->depth)
			w->depth--;
		w->state = AFTER_TOKEN;
		return 0;
	case '"':
		if (top && !top->is_array && w->state == EXPECT_KEY)
			return begin_key(w, top);
		break;
	}
	return begin_value(w, top);
}

/* Tokens that begin before stop. */
static void walk(struct walker *w, size_t stop)
{
	while (w->off < w->len && w->off < stop)
		if (step(w))
			return;
}

static int hex4(const char *s, size_t avail)
{
	int v = 0, i, d;

	if (avail < 4)
		return -1;
	for (i = 0; i < 4; i++) {
		char c = s[i];

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return -1;
		v = v * 16 + d;
	}
	return v;
}

static size_t utf8_encode(unsigned long cp, char *out)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xC0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xE0 | cp >> 12);
		out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | cp >> 18);
	out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
	out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
	out[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

/* \uXXXX at s[*i] (past the "\u"), with a following low surrogate if any. */
static size_t decode_u(const char *s, size_t len, size_t *i, char *out)
{
	int hi = hex4(s + *i, len - *i), lo;

	if (hi < 0)
		return 0;
	*i += 4;
	if (hi >= 0xD800 && hi <= 0xDBFF && len - *i >= 6 &&
	    s[*i] == '\\' && s[*i + 1] == 'u') {
		lo = hex4(s + *i + 2, len - *i - 2);
		if (lo >= 0xDC00 && lo <= 0xDFFF) {
			*i += 6;
			return utf8_encode(0x10000 + ((unsigned long)(hi - 0xD800) << 10) +
					   (unsigned long)(lo - 0xDC00), out);
		}
	}
	return utf8_encode((unsigned long)hi, out);
}

/* One character of a string body at s[*i] as UTF-8 bytes; 0 if malformed. */
static size_t decode_char(const char *s, size_t len, size_t *i, char *out)
{
	char e;

	if (s[*i] != '\\') {
		out[0] = s[(*i)++];
		return 1;
	}
	if (*i + 1 >= len)
		return 0;
	e = s[*i + 1];
	*i += 2;
	switch (e) {
	case 'b': out[0] = '\b'; return 1;
	case 'f': out[0] = '\f'; return 1;
	case 'n': out[0] = '\n'; return 1;
	case 'r': out[0] = '\r'; return 1;
	case 't': out[0] = '\t'; return 1;
	case 'u': return decode_u(s, len, i, out);
	default:  out[0] = e;    return 1;	/* \" \\ \/ */
	}
}

/* Does the member name as spelled in the text decode to want? */
static bool key_equals(const char *raw, size_t len, const char *want)
{
	size_t i = 0, j = 0, n, wlen = strlen(want);
	char ch[4];

	while (i < len) {
		n = decode_char(raw, len, &i, ch);
		if (n == 0 || n > wlen - j || memcmp(want + j, ch, n) != 0)
			return false;
		j += n;
	}
	return j == wlen;
}

static bool frame_matches(const struct frame *f, const struct ibvd_json_step *s)
{
	if (!f->started)
		return false;
	if (f->is_array)
		return !s->key && f->index == s->index;
	return s->key && key_equals(f->key, f->keylen, s->key);
}

struct locate {
	const struct ibvd_json_step *path;
	size_t depth;
	size_t found;
	struct ibvd_json_pos pos;
};

static int locate_visit(const struct walker *w, void *arg)
{
	struct locate *l = arg;
	size_t i;

	if (w->depth > l->depth || w->depth <= l->found)
		return 0;
	for (i = 0; i < w->depth; i++)
		if (!frame_matches(&w->frames[i], &l->path[i]))
			return 0;
	l->found = w->depth;
	l->pos = w->frames[w->depth - 1].pos;
	return l->found == l->depth;
}

size_t ibvd_json_locate(const char *text, size_t len,
			const struct ibvd_json_step *path, size_t depth,
			struct ibvd_json_pos *pos)
{
	struct locate l = { .path = path, .depth = depth };
	struct walker w;

	walker_init(&w, text, len);
	skip_space(&w);
	l.pos = w.pos;
	if (depth > 0) {
		w.visit = locate_visit;
		w.arg = &l;
		walk(&w, len);
	}
	*pos = l.pos;
	return l.found;
}

int ibvd_json_path_at(const char *text, size_t len, size_t offset,
		      char *buf, size_t buflen, struct ibvd_json_pos *pos)
{
	struct walker w;
	size_t i, used = 0;
	const struct frame *f;
	int n;

	walker_init(&w, text, len);
	walk(&w, offset);
	if (buflen)
		buf[0] = '\0';
	for (i = 0; i < w.depth && w.frames[i].started; i++) {
		f = &w.frames[i];
		if (f->is_array)
			n = snprintf(buf + used, buflen - used, "[%zu]", f->index);
		else
			n = snprintf(buf + used, buflen - used, "%s%.*s",
				     i ? "." : "", (int)f->keylen, f->key);
		if (n < 0 || (size_t)n >= buflen - used)
			break;	/* truncated: what fits is still useful */
		used += (size_t)n;
		*pos = f->pos;
	}
	return i > 0;
}
