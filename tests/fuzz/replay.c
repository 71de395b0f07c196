/*
 * A fuzz target without libFuzzer: runs LLVMFuzzerTestOneInput over files
 * and directories of inputs, so that make check holds a target to its
 * seed corpus with the ordinary compiler, and so that a crash libFuzzer
 * found can be replayed in a debugger.
 *
 * usage: tests/fuzz/TARGET.fuzz [FILE|DIR]...
 * Without arguments: $top_srcdir/tests/fuzz/corpus/TARGET and, if it
 * exists, tests/fuzz/regressions/TARGET, TARGET being FUZZ_TARGET, set at
 * build time.  Exits 1 if an input cannot be read (a failing check
 * aborts).
 */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* A harness that sets something up once defines it, as libFuzzer expects */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* One input, exactly its size on the heap so ASan sees overreads */
static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	uint8_t *buf;
	size_t n;

	if (!f || fstat(fileno(f), &st) != 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	n = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
	fclose(f);
	if (!buf || n != (size_t)st.st_size) {
		fprintf(stderr, "%s: short read\n", path);
		free(buf);
		return -1;
	}
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	return 0;
}

/* Every regular file of a directory; the number run, or -1 */
static int run_dir(const char *dir)
{
	char path[4096];
	struct dirent *e;
	struct stat st;
	int n = 0;
	DIR *d = opendir(dir);

	if (!d) {
		fprintf(stderr, "%s: %s\n", dir, strerror(errno));
		return -1;
	}
	while ((e = readdir(d))) {
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
			continue;
		if (run_file(path) != 0) {
			n = -1;
			break;
		}
		n++;
	}
	closedir(d);
	return n;
}

static int run(const char *path)
{
	struct stat st;

	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return run_dir(path);
	return run_file(path) == 0 ? 1 : -1;
}

/* The seed corpus (which must hold inputs) and the regression inputs */
static int run_default(void)
{
	const char *top = getenv("top_srcdir");
	char dir[4096];
	struct stat st;
	int n, more;

	top = top && *top ? top : FUZZ_SRCDIR;
	snprintf(dir, sizeof(dir), "%s/tests/fuzz/corpus/%s", top, FUZZ_TARGET);
	n = run(dir);
	if (n <= 0) {
		fprintf(stderr, "%s: no inputs\n", dir);
		return 1;
	}
	snprintf(dir, sizeof(dir), "%s/tests/fuzz/regressions/%s", top,
		 FUZZ_TARGET);
	if (stat(dir, &st) == 0) {
		more = run(dir);
		if (more < 0)
			return 1;
		n += more;
	}
	printf("%s: %d inputs\n", FUZZ_TARGET, n);
	return 0;
}

int main(int argc, char **argv)
{
	int i, n, total = 0;

	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	if (argc < 2)
		return run_default();
	for (i = 1; i < argc; i++) {
		n = run(argv[i]);
		if (n < 0)
			return 1;
		total += n;
	}
	printf("%s: %d inputs\n", FUZZ_TARGET, total);
	return 0;
}
