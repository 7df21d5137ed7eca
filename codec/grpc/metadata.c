/*
 * Metadata: which header fields are the application's, "-bin" values through base64 both
 * ways, and the blocks they are copied into.
 */
#include "internal.h"

#include "codec/http2/layer.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* Fields the protocol owns, not the application's metadata. */
static const char *const RESERVED[] = {"content-type", "te", "user-agent", "host",
                                       "connection", "keep-alive", "proxy-connection",
                                       "transfer-encoding", "upgrade", "content-length"};

static bool reserved(const char *p, size_t n)
{
    if (n >= 5 && memcmp(p, "grpc-", 5) == 0) {
        return true;
    }
    for (size_t i = 0; i < sizeof(RESERVED) / sizeof(RESERVED[0]); i++) {
        if (strlen(RESERVED[i]) == n && memcmp(RESERVED[i], p, n) == 0) {
            return true;
        }
    }
    return false;
}

bool eddy__grpc_md_name_ok(const char *p, size_t n)
{
    if (n == 0 || reserved(p, n)) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
                  c == '.';
        if (!ok) {
            return false;
        }
    }
    return true;
}

bool eddy__grpc_md_is_bin(const char *p, size_t n)
{
    return n > 4 && memcmp(p + n - 4, "-bin", 4) == 0;
}

static bool value_ok(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if ((uint8_t)p[i] < 0x20 || (uint8_t)p[i] > 0x7e) {
            return false;
        }
    }
    return true;
}

/* Whether a received field is metadata for the application. */
static bool is_metadata(const eddy_http_header_t *f)
{
    return f->name.len > 0 && f->name.p[0] != ':' && !reserved(f->name.p, f->name.len);
}

/* Decode a "-bin" value (values joined by ',' decoded one by one) into out: its length, or
 * -1 when a part is not base64. */
static int64_t bin_decode(const char *p, size_t n, uint8_t *out)
{
    size_t k = 0, from = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != ',') {
            continue;
        }
        size_t a = from, b = i;
        while (a < b && p[a] == ' ') {
            a++;
        }
        int64_t got = eddy__grpc_unbase64(p + a, b - a, out + k);
        if (got < 0) {
            return -1;
        }
        k += (size_t)got;
        from = i + 1;
    }
    return (int64_t)k;
}

int eddy__grpc_md_take(const eddy_h2_headers_t *h, eddy_http_header_t **out, size_t *n,
                       eddy_buf_t **store)
{
    size_t count = 0, bytes = 0;
    for (size_t i = 0; i < h->count; i++) {
        if (is_metadata(&h->fields[i])) {
            count++;
            bytes += h->fields[i].name.len + h->fields[i].value.len + 2;
        }
    }
    *out = NULL;
    *n = 0;
    *store = NULL;
    if (count == 0) {
        return 0;
    }
    size_t room = count * sizeof(eddy_http_header_t) + bytes;
    eddy_buf_t *b = eddy_buf_new(room);
    if (b == NULL) {
        return EDDY_ENOMEM;
    }
    eddy_http_header_t *fields = (eddy_http_header_t *)eddy_buf_write_ptr(b);
    char *to = (char *)(fields + count);
    size_t k = 0;
    for (size_t i = 0; i < h->count; i++) {
        const eddy_http_header_t *f = &h->fields[i];
        if (!is_metadata(f)) {
            continue;
        }
        fields[k].name = (eddy_http_str_t){to, f->name.len};
        memcpy(to, f->name.p, f->name.len);
        to[f->name.len] = '\0';
        to += f->name.len + 1;
        int64_t vlen = (int64_t)f->value.len;
        if (eddy__grpc_md_is_bin(f->name.p, f->name.len)) {
            vlen = bin_decode(f->value.p, f->value.len, (uint8_t *)to);
        } else if (f->value.len > 0) {
            memcpy(to, f->value.p, f->value.len);
        }
        if (vlen < 0) {
            eddy_buf_release(b);
            return EDDY_EDECODE;
        }
        fields[k].value = (eddy_http_str_t){to, (size_t)vlen};
        to[vlen] = '\0';
        to += vlen + 1;
        k++;
    }
    assert(k == count && (size_t)(to - (char *)fields) <= room);
    eddy_buf_produce(b, (size_t)(to - (char *)fields));
    *out = fields;
    *n = count;
    *store = b;
    return 0;
}

int eddy__grpc_md_fields(const eddy_http_header_t *fixed, size_t nfixed,
                         const eddy_http_header_t *md, size_t n, eddy_http_header_t **fields,
                         eddy_buf_t **store)
{
    size_t bytes = 1;
    for (size_t i = 0; i < n; i++) {
        const eddy_http_header_t *f = &md[i];
        bool bin = eddy__grpc_md_is_bin(f->name.p, f->name.len);
        if (!eddy__grpc_md_name_ok(f->name.p, f->name.len) ||
            (!bin && !value_ok(f->value.p, f->value.len))) {
            return EDDY_EINVAL;
        }
        bytes += bin ? (f->value.len + 2) / 3 * 4 + 1 : 0;
    }
    *fields = malloc((nfixed + n + 1) * sizeof(eddy_http_header_t));
    *store = eddy_buf_new(bytes);
    if (*fields == NULL || *store == NULL) {
        free(*fields);
        eddy__grpc_buf_drop(*store);
        return EDDY_ENOMEM;
    }
    if (nfixed > 0) { /* fixed may be NULL then: memcpy's source may not */
        memcpy(*fields, fixed, nfixed * sizeof(eddy_http_header_t));
    }
    char *to = (char *)eddy_buf_write_ptr(*store);
    for (size_t i = 0; i < n; i++) {
        eddy_http_header_t g = md[i];
        if (eddy__grpc_md_is_bin(g.name.p, g.name.len)) {
            size_t len = eddy__grpc_base64((const uint8_t *)g.value.p, g.value.len, to);
            g.value = (eddy_http_str_t){to, len};
            to += len + 1;
        }
        (*fields)[nfixed + i] = g;
    }
    return 0;
}
