/* SPDX-License-Identifier: MIT */
/*
 * Runs a libFuzzer target over files without libFuzzer, so the seed
 * corpus is exercised by every build (with the sanitizers in the asan
 * build): replay FILE-OR-DIR... Prints how many inputs it ran; exits
 * non-zero when it could read none.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
        FILE *f = fopen(path, "rb");
        uint8_t *buf;
        long n;

        if (!f)
                return -1;
        if (fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0) {
                fclose(f);
                return -1;
        }
        buf = malloc((size_t)n + 1);
        if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
                free(buf);
                fclose(f);
                return -1;
        }
        fclose(f);
        LLVMFuzzerTestOneInput(buf, (size_t)n);
        free(buf);
        return 0;
}

int main(int argc, char **argv)
{
        unsigned ran = 0;

        for (int i = 1; i < argc; i++) {
                struct stat st;
                DIR *d;
                struct dirent *e;

                if (stat(argv[i], &st) < 0) {
                        fprintf(stderr, "replay: cannot read '%s'\n", argv[i]);
                        return 1;
                }
                if (!S_ISDIR(st.st_mode)) {
                        ran += run_file(argv[i]) == 0;
                        continue;
                }
                d = opendir(argv[i]);
                while (d && (e = readdir(d))) {
                        char path[4096];
                        if (e->d_name[0] == '.')
                                continue;
                        snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
                        ran += run_file(path) == 0;
                }
                if (d)
                        closedir(d);
        }
        printf("replay: ran %u inputs\n", ran);
        return ran ? 0 : 1;
}
