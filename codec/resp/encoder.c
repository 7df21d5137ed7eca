/*
 * The RESP reply writers (RESP2) and closing a connection after its last reply.
 *
 * Each writer makes room once (eddy_buf_ensure_writable) and then stores bytes, so a reply
 * costs one capacity check however many pieces it has: a server appends thousands of them per
 * read batch when a client pipelines.
 */
#include <eddy/channel.h>
#include <eddy/resp.h>

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Room for a type byte, a 64-bit decimal with its sign and CRLF. */
#define HEADER_MAX 24

/* v in decimal, ending at end (exclusive): returns the first digit's address. */
static char *format_int(char *end, int64_t v)
{
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    char *p = end;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0) {
        *--p = '-';
    }
    return p;
}

/* type, v, CRLF, with room for extra bytes after them made at the same time. */
static int write_header(eddy_buf_t *out, char type, int64_t v, size_t extra)
{
    if (extra > SIZE_MAX - HEADER_MAX) {
        return EDDY_ECAPACITY;
    }
    int err = eddy_buf_ensure_writable(out, HEADER_MAX + extra);
    if (err != 0) {
        return err;
    }
    char tmp[HEADER_MAX];
    char *end = tmp + sizeof(tmp);
    *--end = '\n';
    *--end = '\r';
    char *p = format_int(end, v);
    *--p = type;
    size_t n = (size_t)(tmp + sizeof(tmp) - p);
    assert(p >= tmp && n <= HEADER_MAX); /* INT64_MIN fits */
    memcpy(eddy_buf_write_ptr(out), p, n);
    eddy_buf_produce(out, n);
    return 0;
}

/* type, s with CR and LF turned into spaces, CRLF. */
static int write_line(eddy_buf_t *out, char type, const char *s, size_t n)
{
    if (n > SIZE_MAX - 3) {
        return EDDY_ECAPACITY;
    }
    int err = eddy_buf_ensure_writable(out, n + 3);
    if (err != 0) {
        return err;
    }
    uint8_t *w = eddy_buf_write_ptr(out);
    w[0] = (uint8_t)type;
    if (n > 0) {
        memcpy(w + 1, s, n);
    }
    for (size_t i = 0; i < n; i++) {
        if (w[1 + i] == '\r' || w[1 + i] == '\n') {
            w[1 + i] = ' ';
        }
    }
    w[n + 1] = '\r';
    w[n + 2] = '\n';
    eddy_buf_produce(out, n + 3);
    return 0;
}

int eddy_resp_write_simple(eddy_buf_t *out, const char *s, size_t n)
{
    return write_line(out, '+', s, n);
}

int eddy_resp_write_error(eddy_buf_t *out, const char *s, size_t n)
{
    return write_line(out, '-', s, n);
}

int eddy_resp_write_errorf(eddy_buf_t *out, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (n < 0) {
        return EDDY_EINVAL;
    }
    return write_line(out, '-', text, (size_t)n < sizeof(text) ? (size_t)n : sizeof(text) - 1);
}

int eddy_resp_write_integer(eddy_buf_t *out, int64_t v)
{
    return write_header(out, ':', v, 0);
}

int eddy_resp_write_bulk(eddy_buf_t *out, const void *p, size_t n)
{
    if (n > INT64_MAX || n > SIZE_MAX - 2) {
        return EDDY_ECAPACITY;
    }
    int err = write_header(out, '$', (int64_t)n, n + 2);
    if (err != 0) {
        return err;
    }
    uint8_t *w = eddy_buf_write_ptr(out);
    if (n > 0) {
        memcpy(w, p, n);
    }
    w[n] = '\r';
    w[n + 1] = '\n';
    eddy_buf_produce(out, n + 2);
    return 0;
}

int eddy_resp_write_bulk_str(eddy_buf_t *out, const char *s)
{
    return eddy_resp_write_bulk(out, s, strlen(s));
}

int eddy_resp_write_null_bulk(eddy_buf_t *out)
{
    return eddy_buf_write_bytes(out, "$-1\r\n", 5);
}

int eddy_resp_write_array(eddy_buf_t *out, size_t n)
{
    if (n > INT64_MAX) {
        return EDDY_ECAPACITY;
    }
    return write_header(out, '*', (int64_t)n, 0);
}

int eddy_resp_write_null_array(eddy_buf_t *out)
{
    return eddy_buf_write_bytes(out, "*-1\r\n", 5);
}

/* ---------------------------------------------------------------------------------------
 * Close after the last reply
 */

void eddy_resp_close_after_flush(eddy_ctx_t *ctx, eddy_msg_t *last)
{
    if (last != NULL) {
        eddy_ctx_write(ctx, last, NULL);
    }
    eddy_ctx_close_after_flush(ctx, NULL); /* the channel's lingering close */
}
