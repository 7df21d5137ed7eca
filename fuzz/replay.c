/*
 * A main() for a fuzz target built without libFuzzer: runs every input of the corpus files
 * given (one input per line, in hex; lines starting with # are comments). make test runs
 * the committed corpora this way under ASan and UBSan (the fuzz.* tests), so what fuzzing
 * found stays found. Exit status 0 when every input passed (a failing check aborts).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int hex_value(int c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* Decode the hex line in place; its byte count, or -1 when it is not hex. */
static long unhex(char *line)
{
    size_t n = strcspn(line, "\r\n");
    if (n % 2 != 0) {
        return -1;
    }
    uint8_t *out = (uint8_t *)line;
    for (size_t i = 0; i < n; i += 2) {
        int hi = hex_value((unsigned char)line[i]), lo = hex_value((unsigned char)line[i + 1]);
        if (hi < 0 || lo < 0) {
            return -1;
        }
        out[i / 2] = (uint8_t)(hi << 4 | lo);
    }
    return (long)(n / 2);
}

int main(int argc, char **argv)
{
    LLVMFuzzerInitialize(&argc, &argv);
    size_t cap = 1 << 16;
    char *line = malloc(cap);
    if (line == NULL) {
        return 1;
    }
    long inputs = 0;
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "r");
        if (f == NULL) {
            fprintf(stderr, "replay: cannot open %s\n", argv[i]);
            free(line);
            return 1;
        }
        long lineno = 0;
        ssize_t len;
        while ((len = getline(&line, &cap, f)) >= 0) {
            lineno++;
            if (len == 0 || line[0] == '#' || line[0] == '\n') {
                continue;
            }
            long n = unhex(line);
            if (n < 0) {
                fprintf(stderr, "replay: %s:%ld is not hex\n", argv[i], lineno);
                fclose(f);
                free(line);
                return 1;
            }
            LLVMFuzzerTestOneInput((const uint8_t *)line, (size_t)n);
            inputs++;
        }
        fclose(f);
    }
    free(line);
    printf("replay: %ld inputs passed\n", inputs);
    return 0;
}
