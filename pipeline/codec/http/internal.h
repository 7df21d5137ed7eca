/*
 * What the HTTP codec's files share (not API).
 */
#ifndef EDDY_PIPELINE_CODEC_HTTP_INTERNAL_H
#define EDDY_PIPELINE_CODEC_HTTP_INTERNAL_H

#include <eddy/http.h>

/* A request (type EDDY_MSG_HTTP_REQUEST, count 1) with room for count headers, none used:
 * no error, version 11, no body, content_length -1. NULL when out of memory. */
eddy_http_request_t *eddy__http_request_alloc(size_t count);

/* s without leading and trailing spaces and tabs. */
eddy_http_str_t eddy__http_trim(eddy_http_str_t s);

/* t (seconds since the epoch) as an IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT", into out
 * (EDDY_HTTP_DATE_LEN bytes and a NUL). */
void eddy__http_date_format(int64_t t, char *out);

#endif /* EDDY_PIPELINE_CODEC_HTTP_INTERNAL_H */
