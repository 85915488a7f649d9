// SPDX-License-Identifier: GPL-2.0
/*
 * Run the fuzz target's inputs without libFuzzer: each file named on the
 * command line (or each file of each directory named) through
 * LLVMFuzzerTestOneInput() once, as libFuzzer would replay a corpus.  For
 * a build without clang, such as the coverage build (make coverage).
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned int nrun;

static int replay_file(const char *path)
{
	static uint8_t buf[1 << 20];
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f) {
		fprintf(stderr, "fuzz_replay: open %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	LLVMFuzzerTestOneInput(buf, n);
	nrun++;
	return 0;
}

static int replay(const char *path)
{
	char child[4096];
	struct dirent *d;
	struct stat st;
	DIR *dir;
	int ret = 0;

	if (stat(path, &st)) {
		fprintf(stderr, "fuzz_replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return replay_file(path);
	dir = opendir(path);
	if (!dir) {
		fprintf(stderr, "fuzz_replay: opendir %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	while ((d = readdir(dir))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(child, sizeof(child), "%s/%s", path, d->d_name);
		ret |= replay_file(child);
	}
	closedir(dir);
	return ret;
}

int main(int argc, char **argv)
{
	int i, ret = 0;

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		printf("Usage: %s FILE|DIR...\n\nRun each input of the bridge's fuzz target once, without libFuzzer.\n",
		       argv[0]);
		return argc < 2;
	}
	LLVMFuzzerInitialize(&argc, &argv);
	for (i = 1; i < argc; i++)
		ret |= replay(argv[i]);
	printf("fuzz_replay: %u inputs\n", nrun);
	return ret ? 1 : 0;
}
