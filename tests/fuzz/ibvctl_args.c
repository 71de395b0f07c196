/*
 * Fuzz harness: ibvctl's command line (tools/ibvctl_grammar.c), argv
 * split from the input at NULs (the words after ibvctl's options, OBJECT
 * first).  Besides what the sanitizers catch, it aborts where a promise
 * is broken:
 * - a parse gives 0 or -EINVAL;
 * - on 0, help or an object and one of its commands, the arguments being
 *   exactly the words after the first two, untouched;
 * - a canonical command line parses to itself.
 * Its usage messages go to stderr, which tests/fuzz/run and short-run
 * silence (-close_fd_mask=3).
 */
#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ibvctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)	do { if (!(cond)) abort(); } while (0)
#define MAX_WORDS	16

/* Split a NUL-terminated copy of data at NULs into at most MAX_WORDS words */
static int split(char *text, size_t size, char **argv)
{
	size_t i, start = 0;
	int argc = 0;

	for (i = 0; i <= size && argc < MAX_WORDS; i++) {
		if (text[i] != '\0')
			continue;
		argv[argc++] = text + start;
		start = i + 1;
	}
	argv[argc] = NULL;
	return size ? argc : 0;
}

static void canonical_again(const struct ibvctl_cmd *cmd)
{
	char *argv[3] = {
		(char *)ibvctl_object_name(cmd->obj), (char *)cmd->command, NULL
	};
	struct ibvctl_cmd again;

	CHECK(ibvctl_parse(2, argv, &again) == 0);
	CHECK(again.obj == cmd->obj && !strcmp(again.command, cmd->command));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *argv[MAX_WORDS + 1], *copy[MAX_WORDS + 1];
	struct ibvctl_cmd cmd;
	char *text;
	int argc, ret, i;

	text = malloc(size + 1);
	CHECK(text);
	memcpy(text, data, size);
	text[size] = '\0';
	argc = split(text, size, argv);
	memcpy(copy, argv, sizeof(argv));
	ret = ibvctl_parse(argc, argv, &cmd);
	CHECK(ret == 0 || ret == -EINVAL);
	if (ret == 0 && cmd.obj && !cmd.help) {
		CHECK(cmd.command);
		CHECK(cmd.nargs == (argc > 2 ? argc - 2 : 0));
		for (i = 0; i < cmd.nargs; i++)
			CHECK(cmd.args[i] == copy[i + 2]);
		canonical_again(&cmd);
	}
	free(text);
	return 0;
}
