/*
 * What the static file handler (files.c) decides from a file's metadata and the request's
 * headers: the content type of a name, the validators (ETag, Last-Modified), the
 * conditionals (RFC 9110 section 13), the ranges (section 14) and the encodings a request
 * accepts (section 12.5.3). Pure functions of their arguments: no I/O.
 */
#include "codec/http/files.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ---------------------------------------------------------------------------------------
 * Content types: a small table, by extension (nginx's mime.types, the common part).
 */

static const struct {
    const char *ext;
    const char *type;
} types[] = {
    {"html", "text/html; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"css", "text/css; charset=utf-8"},
    {"js", "text/javascript; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"json", "application/json"},
    {"map", "application/json"},
    {"txt", "text/plain; charset=utf-8"},
    {"md", "text/markdown; charset=utf-8"},
    {"csv", "text/csv; charset=utf-8"},
    {"xml", "application/xml"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"avif", "image/avif"},
    {"ico", "image/x-icon"},
    {"wasm", "application/wasm"},
    {"pdf", "application/pdf"},
    {"zip", "application/zip"},
    {"gz", "application/gzip"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"mp4", "video/mp4"},
    {"webm", "video/webm"},
    {"mp3", "audio/mpeg"},
};

const char *eddy__files_type(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (dot != NULL && strchr(dot, '/') == NULL) {
        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
            if (strcasecmp(dot + 1, types[i].ext) == 0) {
                return types[i].type;
            }
        }
    }
    return "application/octet-stream";
}

/* ---------------------------------------------------------------------------------------
 * Validators
 */

void eddy__files_etag(const struct stat *st, char *out, size_t cap)
{
    /* The modification time to the nanosecond and the size, as nginx's "mtime-size": a file
     * replaced in place within the same second still changes its tag. */
    unsigned long long ns = (unsigned long long)st->st_mtim.tv_sec * 1000000000ull +
                            (unsigned long long)st->st_mtim.tv_nsec;
    snprintf(out, cap, "\"%llx-%llx\"", ns, (unsigned long long)st->st_size);
}

/* The value of digits at p (n of them), or -1. */
static int digits(const char *p, size_t n)
{
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return -1;
        }
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

/* The index of the three letters at p in list (of three-letter names), or -1. */
static int name_index(const char *p, const char *list)
{
    for (int i = 0; list[3 * i] != '\0'; i++) {
        if (memcmp(p, list + 3 * i, 3) == 0) {
            return i;
        }
    }
    return -1;
}

int eddy__files_parse_date(eddy_http_str_t v, int64_t *out)
{
    /* IMF-fixdate only, "Sun, 06 Nov 1994 08:49:37 GMT": what every client sends back, since
     * it sends back what it was given. The obsolete forms count as no date (RFC 9110 section
     * 13.1.3 lets a server ignore an invalid date). */
    const char *p = v.p;
    if (v.len != EDDY_HTTP_DATE_LEN || memcmp(p + 3, ", ", 2) != 0 || p[7] != ' ' ||
        p[11] != ' ' || p[16] != ' ' || p[19] != ':' || p[22] != ':' ||
        memcmp(p + 25, " GMT", 4) != 0) {
        return EDDY_EDECODE;
    }
    struct tm tm = {0};
    tm.tm_mday = digits(p + 5, 2);
    tm.tm_mon = name_index(p + 8, "JanFebMarAprMayJunJulAugSepOctNovDec");
    tm.tm_year = digits(p + 12, 4) - 1900;
    tm.tm_hour = digits(p + 17, 2);
    tm.tm_min = digits(p + 20, 2);
    tm.tm_sec = digits(p + 23, 2);
    if (tm.tm_mday < 1 || tm.tm_mon < 0 || tm.tm_year < 70 || tm.tm_hour < 0 || tm.tm_min < 0 ||
        tm.tm_sec < 0 || tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60) {
        return EDDY_EDECODE;
    }
    *out = (int64_t)timegm(&tm);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Lists: comma-separated elements with optional blanks (RFC 9110 section 5.6.1).
 */

/* The next element of *list (trimmed; empty ones skipped), or false at the end. */
static bool next_element(eddy_http_str_t *list, eddy_http_str_t *el)
{
    while (list->len > 0) {
        const char *comma = memchr(list->p, ',', list->len);
        size_t n = comma != NULL ? (size_t)(comma - list->p) : list->len;
        *el = eddy__http_trim((eddy_http_str_t){list->p, n});
        list->p += comma != NULL ? n + 1 : n;
        list->len -= comma != NULL ? n + 1 : n;
        if (el->len > 0) {
            return true;
        }
    }
    return false;
}

/* An entity tag without its weakness mark. */
static eddy_http_str_t opaque_tag(eddy_http_str_t t)
{
    if (t.len >= 2 && t.p[0] == 'W' && t.p[1] == '/') {
        t.p += 2;
        t.len -= 2;
    }
    return t;
}

bool eddy__files_none_match(eddy_http_str_t list, const char *etag)
{
    /* Weak comparison (RFC 9110 section 13.1.2): the tags match whatever their weakness. */
    eddy_http_str_t el;
    while (next_element(&list, &el)) {
        if (eddy_http_str_eq(el, "*") || eddy_http_str_eq(opaque_tag(el), etag)) {
            return true;
        }
    }
    return false;
}

bool eddy__files_if_range(eddy_http_str_t v, const char *etag, int64_t mtime)
{
    /* A strong comparison for a tag (a weak one never matches), an exact match for a date
     * (section 13.1.5). */
    v = eddy__http_trim(v);
    if (v.len > 0 && (v.p[0] == '"' || v.p[0] == 'W')) {
        return eddy_http_str_eq(v, etag);
    }
    int64_t t;
    return eddy__files_parse_date(v, &t) == 0 && t == mtime;
}

/* ---------------------------------------------------------------------------------------
 * Ranges
 */

/* A decimal number at s (all of it, at most 18 digits: no overflow), into *out. */
static bool number(eddy_http_str_t s, uint64_t *out)
{
    if (s.len == 0 || s.len > 18) {
        return false;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < s.len; i++) {
        if (s.p[i] < '0' || s.p[i] > '9') {
            return false;
        }
        v = v * 10 + (uint64_t)(s.p[i] - '0');
    }
    *out = v;
    return true;
}

/* One range-spec into r, clipped to size: 1 satisfiable, 0 not, -1 malformed. */
static int range_spec(eddy_http_str_t el, uint64_t size, eddy__files_range_t *r)
{
    const char *dash = memchr(el.p, '-', el.len);
    if (dash == NULL) {
        return -1;
    }
    eddy_http_str_t a = eddy__http_trim((eddy_http_str_t){el.p, (size_t)(dash - el.p)});
    eddy_http_str_t b = eddy__http_trim((eddy_http_str_t){dash + 1, (size_t)(el.p + el.len - dash - 1)});
    uint64_t first, last;
    if (a.len == 0) { /* a suffix: the last n bytes */
        if (!number(b, &last)) {
            return -1;
        }
        if (last == 0 || size == 0) {
            return 0;
        }
        r->first = last < size ? size - last : 0;
        r->len = size - r->first;
        return 1;
    }
    if (!number(a, &first) || (b.len > 0 && (!number(b, &last) || last < first))) {
        return -1;
    }
    if (first >= size) {
        return 0;
    }
    last = b.len == 0 || last >= size ? size - 1 : last;
    r->first = first;
    r->len = last - first + 1;
    return 1;
}

int eddy__files_ranges(eddy_http_str_t v, uint64_t size, eddy__files_range_t *out, size_t max)
{
    v = eddy__http_trim(v);
    if (v.len < 6 || strncasecmp(v.p, "bytes=", 6) != 0) {
        return -1; /* another unit: ignored (section 14.2) */
    }
    eddy_http_str_t list = {v.p + 6, v.len - 6}, el;
    int n = 0, specs = 0;
    while (next_element(&list, &el)) {
        if (++specs > (int)max) {
            return -1; /* more than we serve in one answer: the whole file instead */
        }
        int rc = range_spec(el, size, &out[n]);
        if (rc < 0) {
            return -1;
        }
        n += rc;
    }
    return specs == 0 ? -1 : n;
}

/* ---------------------------------------------------------------------------------------
 * Accept-Encoding
 */

/* Whether an element's parameters ("; q=0", "; q=0.000") refuse the coding. */
static bool q_zero(eddy_http_str_t params)
{
    const char *q = NULL;
    for (size_t i = 0; i + 1 < params.len; i++) {
        if ((params.p[i] == 'q' || params.p[i] == 'Q') && params.p[i + 1] == '=') {
            q = params.p + i + 2;
            break;
        }
    }
    if (q == NULL) {
        return false;
    }
    const char *end = params.p + params.len;
    while (q < end && (*q == '0' || *q == '.')) {
        q++;
    }
    return q == end || *q == ' ' || *q == ';';
}

bool eddy__files_accepts(eddy_http_str_t list, const char *coding)
{
    eddy_http_str_t el;
    while (next_element(&list, &el)) {
        const char *semi = memchr(el.p, ';', el.len);
        size_t n = semi != NULL ? (size_t)(semi - el.p) : el.len;
        eddy_http_str_t name = eddy__http_trim((eddy_http_str_t){el.p, n});
        if (eddy_http_str_eq_nocase(name, coding)) {
            return !q_zero((eddy_http_str_t){el.p + n, el.len - n});
        }
    }
    return false;
}
