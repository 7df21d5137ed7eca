/*
 * gRPC's wire (grpc/grpc doc/PROTOCOL-HTTP2.md): length-prefixed messages across DATA frames,
 * gzip message compression, grpc-timeout, the percent-encoded grpc-message, base64 "-bin"
 * metadata, and the tables from HTTP/2 and HTTP statuses to gRPC's.
 */
#include "internal.h"

#include "buffer/layer.h"
#include "codec/http/coding.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * Messages
 */

void eddy__grpc_prefix(uint8_t out[5], bool compressed, uint32_t len)
{
    out[0] = compressed ? 1 : 0;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
}

bool eddy__grpc_deframer_partial(const eddy__grpc_deframer_t *d)
{
    return d->nhdr > 0;
}

void eddy__grpc_deframer_free(eddy__grpc_deframer_t *d)
{
    if (d->msg != NULL) {
        eddy_buf_release(d->msg);
        d->msg = NULL;
    }
    d->nhdr = 0;
}

/* Read the prefix from data: 1 once whole, 0 for more, or a status negated. */
static int prefix_read(eddy__grpc_deframer_t *d, eddy_buf_t *data, size_t max, const char **why)
{
    size_t k = 5 - d->nhdr;
    size_t avail = eddy_buf_readable(data);
    k = k < avail ? k : avail;
    eddy_buf_read_bytes(data, d->hdr + d->nhdr, k);
    d->nhdr = (uint8_t)(d->nhdr + k);
    if (d->nhdr < 5) {
        return 0;
    }
    if (d->hdr[0] > 1) {
        *why = "bad compressed flag";
        return -EDDY_GRPC_INTERNAL;
    }
    d->compressed = d->hdr[0] == 1;
    d->len = (uint32_t)d->hdr[1] << 24 | (uint32_t)d->hdr[2] << 16 | (uint32_t)d->hdr[3] << 8 |
             d->hdr[4];
    if (d->len > max) {
        *why = "message larger than the limit";
        return -EDDY_GRPC_RESOURCE_EXHAUSTED;
    }
    return 1;
}

/* The message whose prefix was read, from data: whole (a slice, or the gathered buffer), or
 * NULL while more is to come. *status on failure. */
static eddy_buf_t *body_read(eddy__grpc_deframer_t *d, eddy_buf_t *data, int *status)
{
    size_t avail = eddy_buf_readable(data);
    if (d->msg == NULL && avail >= d->len) {
        eddy_buf_t *m = eddy_buf_read_retained_slice(data, d->len);
        *status = m == NULL ? EDDY_GRPC_RESOURCE_EXHAUSTED : 0;
        return m;
    }
    if (d->msg == NULL) {
        d->msg = eddy_buf_new(d->len);
        if (d->msg == NULL) {
            *status = EDDY_GRPC_RESOURCE_EXHAUSTED;
            return NULL;
        }
    }
    size_t want = d->len - eddy_buf_readable(d->msg);
    size_t k = want < avail ? want : avail;
    eddy_buf_write_bytes(d->msg, eddy_buf_read_ptr(data), k);
    eddy_buf_skip(data, k);
    if (eddy_buf_readable(d->msg) < d->len) {
        return NULL;
    }
    eddy_buf_t *m = d->msg;
    d->msg = NULL;
    return m;
}

int eddy__grpc_deframe(eddy__grpc_deframer_t *d, eddy_buf_t *data, size_t max,
                       eddy__grpc_msg_cb cb, void *arg, const char **why)
{
    while (eddy_buf_readable(data) > 0 || (d->nhdr == 5 && d->len == 0)) {
        if (d->nhdr < 5) {
            int rc = prefix_read(d, data, max, why);
            if (rc <= 0) {
                return -rc;
            }
        }
        int status = 0;
        eddy_buf_t *m = body_read(d, data, &status);
        if (status != 0) {
            *why = "out of memory";
            return status;
        }
        if (m == NULL) {
            return 0;
        }
        d->nhdr = 0;
        status = cb(arg, m, d->compressed);
        if (status != 0) {
            *why = *why != NULL ? *why : "the message was refused";
            return status;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * gzip, through the HTTP codings (codec/http/coding.h)
 */

static const eddy__coding_ops_t *gzip_ops(void)
{
    return eddy__coding_find("gzip", 4);
}

bool eddy__grpc_has_gzip(void)
{
    return gzip_ops() != NULL;
}

eddy_buf_t *eddy__grpc_gzip(eddy_buf_t *msg)
{
    const eddy__coding_ops_t *ops = gzip_ops();
    size_t n = eddy_buf_readable(msg);
    void *s = ops != NULL ? ops->enc_new(ops->default_level, n) : NULL;
    eddy_buf_t *out = s != NULL ? eddy_buf_new(n / 2 + 64) : NULL;
    int rc = out != NULL ? eddy__coding_encode(ops, s, eddy_buf_read_ptr(msg), n,
                                               EDDY__CODING_FINISH, out)
                         : EDDY_ENOMEM;
    if (s != NULL) {
        ops->enc_free(s);
    }
    if (rc != 0 && out != NULL) {
        eddy_buf_release(out);
        out = NULL;
    }
    return out;
}

eddy_buf_t *eddy__grpc_gunzip(eddy_buf_t *msg, size_t max, int *status, const char **why)
{
    const eddy__coding_ops_t *ops = gzip_ops();
    void *s = ops != NULL ? ops->dec_new() : NULL;
    size_t n = eddy_buf_readable(msg);
    size_t first = n * 4 < max ? n * 4 : max;
    eddy_buf_t *out = s != NULL ? eddy_buf_new(first > 64 ? first : 64) : NULL;
    bool done = false;
    int rc = out != NULL ? eddy__coding_decode(ops, s, eddy_buf_read_ptr(msg), n, out, max, &done)
                         : EDDY_ENOMEM;
    if (s != NULL) {
        ops->dec_free(s);
    }
    eddy_buf_release(msg);
    if (rc == 0 && done) {
        return out;
    }
    eddy__grpc_buf_drop(out);
    *status = rc == EDDY_ETOOLONGFRAME || rc == EDDY_ENOMEM ? EDDY_GRPC_RESOURCE_EXHAUSTED
                                                            : EDDY_GRPC_INTERNAL;
    *why = rc == EDDY_ETOOLONGFRAME ? "inflated message larger than the limit"
           : rc == EDDY_ENOMEM      ? "out of memory"
                                    : "corrupt compressed message";
    return NULL;
}

/* ---------------------------------------------------------------------------------------
 * grpc-timeout
 */

static int64_t unit_ns(char u)
{
    switch (u) {
    case 'H':
        return 3600LL * 1000000000;
    case 'M':
        return 60LL * 1000000000;
    case 'S':
        return 1000000000;
    case 'm':
        return 1000000;
    case 'u':
        return 1000;
    case 'n':
        return 1;
    default:
        return 0;
    }
}

int64_t eddy__grpc_timeout_parse(const char *p, size_t n)
{
    if (n < 2 || n > 9 || unit_ns(p[n - 1]) == 0) {
        return -1;
    }
    int64_t v = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return -1;
        }
        v = v * 10 + (p[i] - '0');
    }
    int64_t u = unit_ns(p[n - 1]);
    return v > INT64_MAX / u ? INT64_MAX : v * u; /* 99999999H does not overflow, but guard */
}

size_t eddy__grpc_timeout_format(int64_t ns, char out[16])
{
    static const char units[] = {'n', 'u', 'm', 'S', 'M', 'H'};
    static const int64_t per[] = {1, 1000, 1000000, 1000000000, 60000000000LL, 3600000000000LL};
    ns = ns > 0 ? ns : 1;
    size_t i = 0;
    /* Round up into the finest unit whose count fits 8 digits: a deadline never shrinks. */
    while (i + 1 < sizeof(units) && (ns + per[i] - 1) / per[i] > 99999999) {
        i++;
    }
    int64_t v = (ns + per[i] - 1) / per[i];
    v = v <= 99999999 ? v : 99999999;
    char digits[12];
    size_t k = 0;
    do {
        digits[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    size_t len = 0;
    while (k > 0) {
        out[len++] = digits[--k];
    }
    out[len++] = units[i];
    out[len] = '\0';
    return len;
}

/* ---------------------------------------------------------------------------------------
 * grpc-message
 */

static const char HEX[] = "0123456789ABCDEF";

size_t eddy__grpc_percent_encode(const char *p, size_t n, char *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)p[i];
        if (c >= 0x20 && c <= 0x7e && c != '%') {
            out[k++] = (char)c;
        } else {
            out[k++] = '%';
            out[k++] = HEX[c >> 4];
            out[k++] = HEX[c & 15];
        }
    }
    out[k] = '\0';
    return k;
}

static int hex_value(char c)
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

size_t eddy__grpc_percent_decode(const char *p, size_t n, char *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int hi = p[i] == '%' && i + 2 < n ? hex_value(p[i + 1]) : -1;
        int lo = hi >= 0 ? hex_value(p[i + 2]) : -1;
        if (lo >= 0) {
            out[k++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            out[k++] = p[i];
        }
    }
    out[k] = '\0';
    return k;
}

/* ---------------------------------------------------------------------------------------
 * base64 ("-bin" metadata)
 */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t eddy__grpc_base64(const uint8_t *p, size_t n, char *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        v |= i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0;
        v |= i + 2 < n ? p[i + 2] : 0;
        size_t chars = i + 2 < n ? 4 : i + 1 < n ? 3 : 2; /* unpadded */
        for (size_t j = 0; j < chars; j++) {
            out[k++] = B64[(v >> (18 - 6 * j)) & 63];
        }
    }
    out[k] = '\0';
    return k;
}

static int b64_value(char c)
{
    const char *at = c != '\0' ? strchr(B64, c) : NULL;
    return at != NULL ? (int)(at - B64) : -1;
}

int64_t eddy__grpc_unbase64(const char *p, size_t n, uint8_t *out)
{
    while (n > 0 && p[n - 1] == '=') {
        n--; /* padding, or none: both are accepted */
    }
    if (n % 4 == 1) {
        return -1;
    }
    size_t k = 0;
    uint32_t v = 0;
    for (size_t i = 0; i < n; i++) {
        int d = b64_value(p[i]);
        if (d < 0) {
            return -1;
        }
        v = v << 6 | (uint32_t)d;
        if (i % 4 == 3) {
            out[k++] = (uint8_t)(v >> 16);
            out[k++] = (uint8_t)(v >> 8);
            out[k++] = (uint8_t)v;
            v = 0;
        }
    }
    if (n % 4 == 2) {
        out[k++] = (uint8_t)(v >> 4);
    } else if (n % 4 == 3) {
        out[k++] = (uint8_t)(v >> 10);
        out[k++] = (uint8_t)(v >> 2);
    }
    return (int64_t)k;
}

/* ---------------------------------------------------------------------------------------
 * Statuses
 */

static const char *const STATUS_NAMES[] = {
    "OK",        "CANCELLED",          "UNKNOWN",           "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED", "NOT_FOUND",   "ALREADY_EXISTS",    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",  "OUT_OF_RANGE",
    "UNIMPLEMENTED", "INTERNAL",       "UNAVAILABLE",       "DATA_LOSS",
    "UNAUTHENTICATED"};

const char *eddy_grpc_status_name(int status)
{
    return status >= 0 && status <= 16 ? STATUS_NAMES[status] : "UNKNOWN";
}

eddy_grpc_status_t eddy__grpc_status_of_reset(uint32_t h2_code)
{
    switch (h2_code) {
    case EDDY_H2_REFUSED_STREAM:
        return EDDY_GRPC_UNAVAILABLE;
    case EDDY_H2_CANCEL:
        return EDDY_GRPC_CANCELLED;
    case EDDY_H2_ENHANCE_YOUR_CALM:
        return EDDY_GRPC_RESOURCE_EXHAUSTED;
    case EDDY_H2_INADEQUATE_SECURITY:
        return EDDY_GRPC_PERMISSION_DENIED;
    default:
        return EDDY_GRPC_INTERNAL;
    }
}

eddy_grpc_status_t eddy__grpc_status_of_http(int http_status)
{
    switch (http_status) {
    case 400:
        return EDDY_GRPC_INTERNAL;
    case 401:
        return EDDY_GRPC_UNAUTHENTICATED;
    case 403:
        return EDDY_GRPC_PERMISSION_DENIED;
    case 404:
        return EDDY_GRPC_UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
        return EDDY_GRPC_UNAVAILABLE;
    default:
        return EDDY_GRPC_UNKNOWN;
    }
}

eddy_grpc_status_t eddy__grpc_status_parse(const char *p, size_t n)
{
    if (n == 0 || n > 2 || (n == 2 && p[0] == '0')) {
        return EDDY_GRPC_UNKNOWN;
    }
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return EDDY_GRPC_UNKNOWN;
        }
        v = v * 10 + (p[i] - '0');
    }
    return v <= 16 ? (eddy_grpc_status_t)v : EDDY_GRPC_UNKNOWN;
}
