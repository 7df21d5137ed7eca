/*
 * examples/example_util.h: what the example programs share (not part of the library).
 */
#ifndef EDDY_EXAMPLES_EXAMPLE_UTIL_H
#define EDDY_EXAMPLES_EXAMPLE_UTIL_H

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

/* A whole decimal number in [0, max] from a command-line argument: true and *out, or false. */
static inline bool example_parse_uint(const char *s, unsigned long max, unsigned long *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v > max) {
        return false;
    }
    *out = v;
    return true;
}

#endif /* EDDY_EXAMPLES_EXAMPLE_UTIL_H */
