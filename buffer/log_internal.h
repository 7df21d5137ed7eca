/*
 * buffer/log_internal.h: the library's log (log.c, the API in common.h), for every module:
 * buffer/ is the lowest layer, so reactor/, pipeline/ and bootstrap/ include it from here.
 * Not installed.
 */
#ifndef EDDY_BUFFER_LOG_INTERNAL_H
#define EDDY_BUFFER_LOG_INTERNAL_H

#include <eddy/common.h>

/* The longest message eddy__log() formats, its NUL included; longer ones are cut to end in
 * "...". The library's one-line messages stay well below. */
#define EDDY__LOG_MAX 1024

/* Whether a message at level passes the threshold: test before costly formatting. */
bool eddy__log_enabled(eddy_log_level_t level);

/* Log one message at level: formatted (no "eddy: " prefix, no final newline) into a bounded
 * buffer on the stack and handed to the hook once, when the level passes the threshold. No
 * allocation. Any thread. */
void eddy__log(eddy_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Log text, already formatted, of any length and possibly several lines, as one message. */
void eddy__log_text(eddy_log_level_t level, const char *text);

#endif /* EDDY_BUFFER_LOG_INTERNAL_H */
