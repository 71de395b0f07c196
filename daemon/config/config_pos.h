/*
 * Positions in JSON text, for error messages.  jansson keeps no positions
 * for the values it decodes, so when the config checker rejects a value it
 * asks this scanner where that value's key (or array element) stands in
 * the file.  The scanner is deliberately forgiving: it never fails on bad
 * input, it only finds less.
 */
#ifndef IBVD_CONFIG_POS_H
#define IBVD_CONFIG_POS_H

#include <stddef.h>

/* 1-based; columns count Unicode characters, as jansson's do. */
struct ibvd_json_pos {
	unsigned int line;
	unsigned int column;
};

/* One step of a path: a member name (key != NULL) or an array index. */
struct ibvd_json_step {
	const char *key;	/* decoded UTF-8, as jansson returns it */
	size_t index;
};

/*
 * Where the value at path (depth steps from the top-level value) is named:
 * the opening quote of its member name, or the first character of its
 * array element.  If only the first n steps exist, *pos is where step n
 * is named (the top-level value for n = 0).  Returns n.
 */
size_t ibvd_json_locate(const char *text, size_t len,
			const struct ibvd_json_step *path, size_t depth,
			struct ibvd_json_pos *pos);

/*
 * The member or array element the text is inside of at byte offset (say,
 * where jansson stopped with an error): its path written to buf as
 * "a.b[2].c" (keys as spelled in the text; "" at the top level) and its
 * position in *pos.  Returns 0 when not inside any member, else 1.
 */
int ibvd_json_path_at(const char *text, size_t len, size_t offset,
		      char *buf, size_t buflen, struct ibvd_json_pos *pos);

#endif /* IBVD_CONFIG_POS_H */
