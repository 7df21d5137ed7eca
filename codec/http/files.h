/*
 * The static file handler's parts (files.c, files_meta.c). Not API.
 */
#ifndef EDDY_CODEC_HTTP_FILES_H
#define EDDY_CODEC_HTTP_FILES_H

#include "codec/http/internal.h"

#include <stdint.h>
#include <sys/stat.h>

/* A byte range of a file, clipped to its size. */
typedef struct eddy__files_range_s {
    uint64_t first, len;
} eddy__files_range_t;

/* The Content-Type of a file called name, from its extension (application/octet-stream
 * when unknown). A static string. */
const char *eddy__files_type(const char *name);
/* The strong ETag of a file (quotes included) into out (cap bytes, 40 are enough). */
void eddy__files_etag(const struct stat *st, char *out, size_t cap);
/* An IMF-fixdate into seconds since the epoch: 0 and *out, or EDDY_EDECODE. */
int eddy__files_parse_date(eddy_http_str_t v, int64_t *out);
/* Whether If-None-Match's list names etag (weak comparison) or is "*". */
bool eddy__files_none_match(eddy_http_str_t list, const char *etag);
/* Whether If-Range's value still holds: etag (strong comparison) or the exact mtime. */
bool eddy__files_if_range(eddy_http_str_t v, const char *etag, int64_t mtime);
/* The satisfiable ranges of a Range header for a file of size bytes, into out (room for max):
 * their count (0: none satisfiable, 416), or -1 when the header is to be ignored (another
 * unit, malformed, more than max ranges): the whole file then. */
int eddy__files_ranges(eddy_http_str_t v, uint64_t size, eddy__files_range_t *out, size_t max);
/* Whether the Accept-Encoding list accepts coding (named, without a q of 0). */
bool eddy__files_accepts(eddy_http_str_t list, const char *coding);
/* Tests: resolve paths by the openat walk even where openat2 exists (true), or try openat2
 * again (false). Any thread. */
void eddy__files_force_walk(bool walk);

#endif /* EDDY_CODEC_HTTP_FILES_H */
