/*
 * The zone loader: master-file text (RFC 1035 5, the subset dns.h lists) into the zone the
 * answerer reads (internal.h).
 *
 * Loading is two steps. Parsing turns each entry (a line, or lines joined by parentheses)
 * into a record appended to a growing arena of names and rdata. Building then checks the
 * zone as a whole (one SOA, everything under it, CNAMEs alone), sorts the records by owner
 * and type so that an RRset is a run, drops duplicates, and indexes the owners by hash,
 * adding the empty non-terminals (names with no records but names below them) so that the
 * answerer tells NODATA from NXDOMAIN with one lookup.
 */
#include "codec/dns/internal.h"
#include "buffer/layer.h"

#include <arpa/inet.h>
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fields of one entry. A TXT record of many strings is the widest entry; 512 fields is far
 * beyond any real one (a 65535-byte rdata would need 256 strings of 255 bytes). */
#define MAX_FIELDS 512

/* Zone files larger than this are refused by eddy_dns_zone_load(), before reading them. */
#define MAX_FILE_SIZE ((long)256 << 20)

/* The largest TTL (RFC 2181 8). */
#define TTL_MAX 0x7FFFFFFFu

typedef struct field_s {
    const char *s;
    size_t len;
    unsigned line;
    bool quoted; /* s is what was between the quotes, escapes still in it */
} field_t;

/* A record as parsed, before the zone is laid out. */
typedef struct rec_s {
    uint32_t owner; /* its owner's wire name in the arena */
    uint32_t rdata; /* its rdata in the arena */
    uint32_t ttl;
    unsigned line;
    uint32_t seq; /* its place in the file */
    uint16_t type;
    uint16_t rdlen;
    uint8_t owner_len;
    const uint8_t *arena; /* the arena, once it stops moving: for the sort */
} rec_t;

typedef struct loader_s {
    const char *text;
    size_t len, pos;
    unsigned line;
    const char *file; /* names the lines in errors, or NULL */
    char *err;
    size_t errlen;
    uint8_t origin[EDDY_DNS_NAME_MAX];
    size_t origin_len; /* 0: none yet */
    uint8_t owner[EDDY_DNS_NAME_MAX];
    size_t owner_len; /* the previous owner; 0: none yet */
    uint32_t default_ttl, last_ttl;
    bool has_default_ttl, has_last_ttl;
    field_t fields[MAX_FIELDS];
    size_t nfields;
    bool owner_omitted; /* the entry's first line starts with a blank */
    uint8_t *arena;
    size_t narena, arena_cap;
    rec_t *recs;
    size_t nrecs, recs_cap;
    uint8_t rdata[UINT16_MAX]; /* the entry's rdata, before it joins the arena */
} loader_t;

/* ---------------------------------------------------------------------------------------
 * Errors
 */

/* Write "line N: <message>" (or "file:N: ") to the caller's err; returns EDDY_EDECODE. Line
 * 0: a message about the whole text. */
static int fail(loader_t *L, unsigned line, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int fail(loader_t *L, unsigned line, const char *fmt, ...)
{
    if (L->err == NULL || L->errlen == 0) {
        return EDDY_EDECODE;
    }
    int n;
    if (line == 0) {
        n = snprintf(L->err, L->errlen, "%s%s", L->file ? L->file : "", L->file ? ": " : "");
    } else if (L->file != NULL) {
        n = snprintf(L->err, L->errlen, "%s:%u: ", L->file, line);
    } else {
        n = snprintf(L->err, L->errlen, "line %u: ", line);
    }
    if (n >= 0 && (size_t)n < L->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(L->err + n, L->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return EDDY_EDECODE;
}

/* How much of a field an error message quotes. */
static int shown(const field_t *f)
{
    return f->len > 64 ? 64 : (int)f->len;
}

/* ---------------------------------------------------------------------------------------
 * Entries: the text cut into fields
 */

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* Whether c ends a bare field. */
static bool ends_word(char c)
{
    return is_blank(c) || c == '\n' || c == ';' || c == '(' || c == ')' || c == '"';
}

static int add_field(loader_t *L, const char *s, size_t len, bool quoted)
{
    if (L->nfields == MAX_FIELDS) {
        return fail(L, L->line, "more than %d fields in one entry", MAX_FIELDS);
    }
    L->fields[L->nfields++] = (field_t){s, len, L->line, quoted};
    return 0;
}

/* The next entry's fields into L->fields: 1, or 0 at the end of the text, or an error. */
static int next_entry(loader_t *L)
{
    L->nfields = 0;
    int depth = 0;
    unsigned open_line = 0;
    bool line_blank = L->pos < L->len && is_blank(L->text[L->pos]);
    while (L->pos < L->len) {
        char c = L->text[L->pos];
        if (c == '\n') {
            L->pos++;
            L->line++;
            if (depth == 0 && L->nfields > 0) {
                return 1;
            }
            line_blank = L->pos < L->len && is_blank(L->text[L->pos]);
        } else if (is_blank(c)) {
            L->pos++;
        } else if (c == ';') {
            while (L->pos < L->len && L->text[L->pos] != '\n') {
                L->pos++;
            }
        } else if (c == '(') {
            if (depth++ == 0) {
                open_line = L->line;
            }
            L->pos++;
        } else if (c == ')') {
            if (--depth < 0) {
                return fail(L, L->line, "')' without '('");
            }
            L->pos++;
        } else {
            if (L->nfields == 0) {
                L->owner_omitted = line_blank;
            }
            int err;
            if (c == '"') {
                size_t start = ++L->pos;
                while (L->pos < L->len && L->text[L->pos] != '"' && L->text[L->pos] != '\n') {
                    /* A backslash keeps the next character in the string; a newline ends
                     * it anyway (strings do not span lines). */
                    L->pos += L->text[L->pos] == '\\' && L->pos + 1 < L->len &&
                                      L->text[L->pos + 1] != '\n'
                                  ? 2
                                  : 1;
                }
                if (L->pos >= L->len || L->text[L->pos] != '"') {
                    return fail(L, L->line, "unterminated quoted string");
                }
                err = add_field(L, L->text + start, L->pos - start, true);
                L->pos++;
            } else {
                size_t start = L->pos;
                while (L->pos < L->len && !ends_word(L->text[L->pos])) {
                    /* A backslash takes the next character into the word, blank or not. */
                    L->pos += L->text[L->pos] == '\\' && L->pos + 1 < L->len &&
                                      L->text[L->pos + 1] != '\n'
                                  ? 2
                                  : 1;
                }
                err = add_field(L, L->text + start, L->pos - start, false);
            }
            if (err != 0) {
                return err;
            }
        }
    }
    if (depth > 0) {
        return fail(L, open_line, "'(' without ')'");
    }
    return L->nfields > 0 ? 1 : 0;
}

/* ---------------------------------------------------------------------------------------
 * Fields into values
 */

static bool field_is(const field_t *f, const char *s)
{
    size_t n = strlen(s);
    if (f->quoted || f->len != n) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (eddy__dns_lower((uint8_t)f->s[i]) != (uint8_t)s[i]) {
            return false;
        }
    }
    return true;
}

/* A name field (relative to the origin unless it ends with a dot; "@" the origin) into its
 * lowercased wire form. */
static int parse_name(loader_t *L, const field_t *f, uint8_t *out, size_t *n)
{
    if (f->len == 1 && f->s[0] == '@' && !f->quoted) {
        if (L->origin_len == 0) {
            return fail(L, f->line, "'@' with no origin ($ORIGIN)");
        }
        memcpy(out, L->origin, L->origin_len);
        *n = L->origin_len;
        return 0;
    }
    char text[EDDY_DNS_NAME_MAX * 4 + 1];
    if (f->quoted || f->len == 0 || f->len >= sizeof(text)) {
        return fail(L, f->line, "bad name \"%.*s\"", shown(f), f->s);
    }
    memcpy(text, f->s, f->len);
    text[f->len] = '\0';
    /* Absolute when it ends with a dot that no backslash escapes. */
    size_t slashes = 0;
    for (size_t i = f->len - 1; i > 0 && text[i - 1] == '\\'; i--) {
        slashes++;
    }
    bool absolute = text[f->len - 1] == '.' && slashes % 2 == 0;
    if (eddy_dns_name_from_text(text, out, n) != 0) {
        return fail(L, f->line, "bad name \"%.*s\"", shown(f), f->s);
    }
    if (!absolute) {
        if (L->origin_len == 0) {
            return fail(L, f->line, "relative name \"%.*s\" with no origin ($ORIGIN)", shown(f),
                        f->s);
        }
        if (*n - 1 + L->origin_len > EDDY_DNS_NAME_MAX) {
            return fail(L, f->line, "name \"%.*s\" longer than 255 bytes with the origin", shown(f),
                        f->s);
        }
        memcpy(out + *n - 1, L->origin, L->origin_len);
        *n += L->origin_len - 1;
    }
    for (size_t i = 0; i < *n; i++) {
        out[i] = eddy__dns_lower(out[i]);
    }
    return 0;
}

/* A decimal number up to max. */
static bool parse_uint(const field_t *f, uint32_t max, uint32_t *out)
{
    if (f->quoted || f->len == 0 || f->len > 10) {
        return false;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < f->len; i++) {
        if (f->s[i] < '0' || f->s[i] > '9') {
            return false;
        }
        v = v * 10 + (uint64_t)(f->s[i] - '0');
    }
    if (v > max) {
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

/* A TTL: seconds, or numbers with units as BIND writes them (1h30m, 2d, 1w). */
static bool parse_ttl(const field_t *f, uint32_t *out)
{
    if (f->quoted || f->len == 0 || f->s[0] < '0' || f->s[0] > '9') {
        return false;
    }
    uint64_t total = 0, v = 0;
    bool digits = false, units = false;
    for (size_t i = 0; i < f->len; i++) {
        char c = f->s[i];
        if (c >= '0' && c <= '9') {
            v = v * 10 + (uint64_t)(c - '0');
            digits = true;
            if (v > TTL_MAX) {
                return false;
            }
            continue;
        }
        uint64_t unit;
        switch (eddy__dns_lower((uint8_t)c)) {
        case 's':
            unit = 1;
            break;
        case 'm':
            unit = 60;
            break;
        case 'h':
            unit = 3600;
            break;
        case 'd':
            unit = 86400;
            break;
        case 'w':
            unit = 604800;
            break;
        default:
            return false;
        }
        if (!digits) {
            return false;
        }
        total += v * unit;
        v = 0;
        digits = false;
        units = true;
        if (total > TTL_MAX) {
            return false;
        }
    }
    if (digits) {
        if (units) {
            return false; /* "1h30": a number after units needs its own */
        }
        total = v;
    }
    *out = (uint32_t)total;
    return true;
}

/* A character-string (RFC 1035 5.1): escapes \X and \DDD undone, at most 255 bytes, into
 * out after its length byte. Returns its wire length, or -1. */
static int parse_string(const field_t *f, uint8_t *out)
{
    size_t n = 0;
    for (size_t i = 0; i < f->len;) {
        uint8_t c = (uint8_t)f->s[i++];
        if (c == '\\') {
            if (i >= f->len) {
                return -1;
            }
            if (f->s[i] >= '0' && f->s[i] <= '9') {
                unsigned v = 0;
                for (int k = 0; k < 3; k++, i++) {
                    if (i >= f->len || f->s[i] < '0' || f->s[i] > '9') {
                        return -1;
                    }
                    v = v * 10 + (unsigned)(f->s[i] - '0');
                }
                if (v > 255) {
                    return -1;
                }
                c = (uint8_t)v;
            } else {
                c = (uint8_t)f->s[i++];
            }
        }
        if (n == 255) {
            return -1;
        }
        out[1 + n++] = c;
    }
    out[0] = (uint8_t)n;
    return (int)n + 1;
}

/* ---------------------------------------------------------------------------------------
 * Records
 */

/* Append n bytes to the arena; their offset, or -1 when out of memory (or past 4 GiB). */
static int64_t arena_add(loader_t *L, const void *p, size_t n)
{
    if (L->arena_cap - L->narena < n) {
        size_t cap = L->arena_cap ? L->arena_cap * 2 : 4096;
        while (cap - L->narena < n) {
            cap *= 2;
        }
        if (cap > UINT32_MAX) {
            return -1;
        }
        uint8_t *a = realloc(L->arena, cap);
        if (a == NULL) {
            return -1;
        }
        L->arena = a;
        L->arena_cap = cap;
    }
    memcpy(L->arena + L->narena, p, n);
    L->narena += n;
    return (int64_t)(L->narena - n);
}

static int add_record(loader_t *L, unsigned line, uint16_t type, uint32_t ttl, const uint8_t *rdata,
                      size_t rdlen)
{
    assert(L->owner_len > 0 && rdlen <= UINT16_MAX);
    if (L->nrecs == L->recs_cap) {
        rec_t *r = eddy__array_grow(L->recs, &L->recs_cap, sizeof(*r), 64);
        if (r == NULL) {
            return EDDY_ENOMEM;
        }
        L->recs = r;
    }
    int64_t owner = arena_add(L, L->owner, L->owner_len);
    int64_t rd = owner < 0 ? -1 : arena_add(L, rdata, rdlen);
    if (rd < 0) {
        return EDDY_ENOMEM;
    }
    L->recs[L->nrecs] =
        (rec_t){(uint32_t)owner, (uint32_t)rd,          ttl, line, (uint32_t)L->nrecs, type,
                (uint16_t)rdlen, (uint8_t)L->owner_len, NULL};
    L->nrecs++;
    return 0;
}

/* The SOA's numbers, after its two names. */
static const char *const soa_fields[] = {"serial", "refresh", "retry", "expire", "minimum"};

/* The rdata of a record of type in fields [i, nfields) into rd; its length in *n. */
static int parse_rdata(loader_t *L, uint16_t type, const char *tname, size_t i, uint8_t *rd,
                       size_t *n)
{
    const field_t *f = &L->fields[i];
    size_t count = L->nfields - i;
    unsigned line = i > 0 ? L->fields[i - 1].line : 0;
    size_t want = type == EDDY_DNS_TYPE_SOA   ? 7
                  : type == EDDY_DNS_TYPE_MX  ? 2
                  : type == EDDY_DNS_TYPE_TXT ? 0
                                              : 1;
    if (want != 0 && count != want) {
        return fail(L, line, "%s takes %zu field%s, not %zu", tname, want, want > 1 ? "s" : "",
                    count);
    }
    switch (type) {
    case EDDY_DNS_TYPE_A:
    case EDDY_DNS_TYPE_AAAA: {
        char text[64];
        int af = type == EDDY_DNS_TYPE_A ? AF_INET : AF_INET6;
        if (f->quoted || f->len >= sizeof(text)) {
            return fail(L, f->line, "bad %s address \"%.*s\"", tname, shown(f), f->s);
        }
        memcpy(text, f->s, f->len);
        text[f->len] = '\0';
        if (inet_pton(af, text, rd) != 1) {
            return fail(L, f->line, "bad %s address \"%.*s\"", tname, shown(f), f->s);
        }
        *n = af == AF_INET ? 4 : 16;
        return 0;
    }
    case EDDY_DNS_TYPE_NS:
    case EDDY_DNS_TYPE_CNAME:
        return parse_name(L, f, rd, n);
    case EDDY_DNS_TYPE_MX: {
        uint32_t pref;
        if (!parse_uint(f, UINT16_MAX, &pref)) {
            return fail(L, f->line, "bad MX preference \"%.*s\"", shown(f), f->s);
        }
        eddy__dns_put16(rd, (uint16_t)pref);
        int err = parse_name(L, f + 1, rd + 2, n);
        *n += 2;
        return err;
    }
    case EDDY_DNS_TYPE_SOA: {
        size_t a, b;
        int err = parse_name(L, f, rd, &a);
        if (err == 0) {
            err = parse_name(L, f + 1, rd + a, &b);
        }
        if (err != 0) {
            return err;
        }
        uint8_t *p = rd + a + b;
        for (int k = 0; k < 5; k++) {
            uint32_t v;
            const field_t *g = f + 2 + k;
            /* The serial is a plain number; the four times may carry units. */
            if (!(k == 0 ? parse_uint(g, UINT32_MAX, &v) : parse_ttl(g, &v))) {
                return fail(L, g->line, "bad SOA %s \"%.*s\"", soa_fields[k], shown(g), g->s);
            }
            eddy__dns_put32(p + 4 * k, v);
        }
        *n = a + b + 20;
        return 0;
    }
    case EDDY_DNS_TYPE_TXT: {
        if (count == 0) {
            return fail(L, line, "TXT takes at least one string");
        }
        size_t off = 0;
        for (; f < L->fields + L->nfields; f++) {
            if (off + 256 > UINT16_MAX) {
                return fail(L, f->line, "TXT rdata longer than 65535 bytes");
            }
            int k = parse_string(f, rd + off);
            if (k < 0) {
                return fail(L, f->line, "bad TXT string \"%.*s\" (escapes, or over 255 bytes)",
                            shown(f), f->s);
            }
            off += (size_t)k;
        }
        *n = off;
        return 0;
    }
    default:
        assert(!"a type without a parser");
        return EDDY_EDECODE;
    }
}

/* The types we load, by name. */
static const struct {
    const char *name;
    uint16_t type;
} types[] = {
    {"a", EDDY_DNS_TYPE_A},       {"ns", EDDY_DNS_TYPE_NS}, {"cname", EDDY_DNS_TYPE_CNAME},
    {"soa", EDDY_DNS_TYPE_SOA},   {"mx", EDDY_DNS_TYPE_MX}, {"txt", EDDY_DNS_TYPE_TXT},
    {"aaaa", EDDY_DNS_TYPE_AAAA},
};

static int parse_record(loader_t *L)
{
    size_t i = 0;
    if (L->owner_omitted) {
        if (L->owner_len == 0) {
            return fail(L, L->fields[0].line, "no owner name, and none before");
        }
    } else {
        int err = parse_name(L, &L->fields[0], L->owner, &L->owner_len);
        if (err != 0) {
            return err;
        }
        i = 1;
    }
    /* [TTL] [class] or [class] [TTL], both optional (RFC 1035 5.1). */
    bool has_ttl = false, has_class = false;
    uint32_t ttl = 0;
    while (i < L->nfields) {
        const field_t *f = &L->fields[i];
        if (!has_ttl && !f->quoted && f->len > 0 && f->s[0] >= '0' && f->s[0] <= '9') {
            if (!parse_ttl(f, &ttl)) {
                return fail(L, f->line, "bad TTL \"%.*s\"", shown(f), f->s);
            }
            has_ttl = true;
        } else if (!has_class && field_is(f, "in")) {
            has_class = true;
        } else if (!has_class && (field_is(f, "ch") || field_is(f, "hs") || field_is(f, "cs") ||
                                  field_is(f, "any") || field_is(f, "none"))) {
            return fail(L, f->line, "class %.*s not supported (only IN)", shown(f), f->s);
        } else {
            break;
        }
        i++;
    }
    unsigned line = L->fields[i < L->nfields ? i : L->nfields - 1].line;
    if (i >= L->nfields) {
        return fail(L, line, "no record type");
    }
    const field_t *tf = &L->fields[i];
    uint16_t type = 0;
    const char *tname = NULL;
    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
        if (field_is(tf, types[k].name)) {
            type = types[k].type;
            tname = eddy_dns_type_name(type);
        }
    }
    if (type == 0) {
        return fail(L, line, "unknown or unsupported record type \"%.*s\"", shown(tf), tf->s);
    }
    if (has_ttl) {
        L->last_ttl = ttl;
        L->has_last_ttl = true;
    } else if (L->has_default_ttl) {
        ttl = L->default_ttl;
    } else if (L->has_last_ttl) {
        ttl = L->last_ttl;
    } else {
        return fail(L, line, "no TTL, and no $TTL before");
    }
    size_t n = 0;
    int err = parse_rdata(L, type, tname, i + 1, L->rdata, &n);
    if (err != 0) {
        return err;
    }
    return add_record(L, line, type, ttl, L->rdata, n);
}

static int parse_directive(loader_t *L)
{
    const field_t *d = &L->fields[0];
    if (field_is(d, "$origin") || field_is(d, "$ttl")) {
        if (L->nfields != 2) {
            return fail(L, d->line, "%.*s takes one field", shown(d), d->s);
        }
        const field_t *f = &L->fields[1];
        if (field_is(d, "$ttl")) {
            if (!parse_ttl(f, &L->default_ttl)) {
                return fail(L, f->line, "bad TTL \"%.*s\"", shown(f), f->s);
            }
            L->has_default_ttl = true;
            return 0;
        }
        /* parse_name() reads a relative $ORIGIN against the current one, as RFC 1035 says. */
        uint8_t name[EDDY_DNS_NAME_MAX];
        size_t n;
        int err = parse_name(L, f, name, &n);
        if (err == 0) {
            memcpy(L->origin, name, n);
            L->origin_len = n;
        }
        return err;
    }
    return fail(L, d->line, "directive %.*s not supported", shown(d), d->s);
}

/* ---------------------------------------------------------------------------------------
 * Building the zone
 */

/* By owner, then type, then place in the file: an RRset is a run, in the order written. */
static int rec_cmp(const void *a, const void *b)
{
    const rec_t *x = a, *y = b;
    int c = memcmp(x->arena + x->owner, y->arena + y->owner,
                   x->owner_len < y->owner_len ? x->owner_len : y->owner_len);
    if (c != 0 || x->owner_len != y->owner_len) {
        return c != 0 ? c : x->owner_len < y->owner_len ? -1 : 1;
    }
    if (x->type != y->type) {
        return x->type < y->type ? -1 : 1;
    }
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static bool same_owner(const rec_t *x, const rec_t *y)
{
    return x->owner_len == y->owner_len &&
           memcmp(x->arena + x->owner, y->arena + y->owner, x->owner_len) == 0;
}

/* Whether the wire name n (len bytes) is apex (apex_len bytes) or below it. */
static bool in_zone(const uint8_t *n, size_t len, const uint8_t *apex, size_t apex_len)
{
    for (size_t i = 0; len - i >= apex_len; i += 1 + (size_t)n[i]) {
        if (len - i == apex_len && memcmp(n + i, apex, apex_len) == 0) {
            return true;
        }
        if (n[i] == 0) {
            break;
        }
    }
    return false;
}

const eddy__dns_node_t *eddy__dns_zone_find(const eddy_dns_zone_t *z, const uint8_t *name, size_t n)
{
    assert(((z->mask + 1) & z->mask) == 0); /* a power of two slots, never full */
    for (size_t i = eddy__dns_hash(name, n) & z->mask;; i = (i + 1) & z->mask) {
        uint32_t s = z->slots[i];
        if (s == 0) {
            return NULL;
        }
        const eddy__dns_node_t *node = &z->nodes[s - 1];
        if (node->name_len == n && memcmp(z->bytes + node->name, name, n) == 0) {
            return node;
        }
    }
}

/* Index node k of z in its (large enough) table. */
static void slot_put(eddy_dns_zone_t *z, uint32_t k)
{
    const eddy__dns_node_t *node = &z->nodes[k];
    assert(node->name_len > 0 && node->name_len <= EDDY_DNS_NAME_MAX);
    size_t i = eddy__dns_hash(z->bytes + node->name, node->name_len) & z->mask;
    while (z->slots[i] != 0) {
        i = (i + 1) & z->mask;
    }
    z->slots[i] = k + 1;
}

/* Add the empty non-terminal named by the nl bytes at offset name of z's bytes. */
static int add_empty_node(eddy_dns_zone_t *z, size_t *nodes_cap, uint32_t name, size_t nl)
{
    if (z->nnodes == *nodes_cap) {
        size_t cap = *nodes_cap * 2;
        eddy__dns_node_t *nodes = realloc(z->nodes, cap * sizeof(*nodes));
        if (nodes == NULL) {
            return EDDY_ENOMEM;
        }
        z->nodes = nodes;
        *nodes_cap = cap;
    }
    /* The table stays at most half full: grow it before this node would pass that. */
    if ((z->nnodes + 1) * 2 > z->mask + 1) {
        size_t size = (z->mask + 1) * 2;
        uint32_t *slots = calloc(size, sizeof(*slots));
        if (slots == NULL) {
            return EDDY_ENOMEM;
        }
        free(z->slots);
        z->slots = slots;
        z->mask = size - 1;
        for (uint32_t k = 0; k < z->nnodes; k++) {
            slot_put(z, k);
        }
    }
    z->nodes[z->nnodes] = (eddy__dns_node_t){name, 0, 0, (uint8_t)nl};
    slot_put(z, (uint32_t)z->nnodes);
    z->nnodes++;
    return 0;
}

/* The records of L, checked as a zone, laid out into z (whose arrays the caller frees). */
static int build(loader_t *L, eddy_dns_zone_t *z)
{
    const rec_t *soa = NULL;
    for (size_t i = 0; i < L->nrecs; i++) {
        L->recs[i].arena = L->arena;
        if (L->recs[i].type == EDDY_DNS_TYPE_SOA) {
            if (soa != NULL) {
                return fail(L, L->recs[i].line, "a second SOA record (the first is on line %u)",
                            soa->line);
            }
            soa = &L->recs[i];
        }
    }
    if (soa == NULL) {
        return fail(L, 0, "no SOA record");
    }
    const uint8_t *apex = L->arena + soa->owner;
    size_t apex_len = soa->owner_len;
    for (size_t i = 0; i < L->nrecs; i++) {
        const rec_t *r = &L->recs[i];
        char text[EDDY_DNS_NAME_MAX * 4 + 2], at[EDDY_DNS_NAME_MAX * 4 + 2];
        eddy_dns_name_to_text(L->arena + r->owner, r->owner_len, text, sizeof(text));
        if (!in_zone(L->arena + r->owner, r->owner_len, apex, apex_len)) {
            eddy_dns_name_to_text(apex, apex_len, at, sizeof(at));
            return fail(L, r->line, "%s is outside the zone %s (its SOA's owner)", text, at);
        }
        if (r->type == EDDY_DNS_TYPE_NS && r->owner_len != apex_len) {
            return fail(L, r->line, "NS at %s, below the apex: delegations are not supported",
                        text);
        }
    }

    qsort(L->recs, L->nrecs, sizeof(rec_t), rec_cmp);
    /* RFC 2181 5: an RRset holds no duplicates. A record is compared with those kept before
     * it in its RRset: quadratic in an RRset's size, which is small in any real zone. */
    size_t kept = 0, run = 0;
    for (size_t i = 0; i < L->nrecs; i++) {
        const rec_t *r = &L->recs[i];
        if (kept == 0 || !same_owner(&L->recs[kept - 1], r) || L->recs[kept - 1].type != r->type) {
            run = kept; /* a new RRset starts */
        }
        bool dup = false;
        for (size_t k = run; k < kept && !dup; k++) {
            dup = L->recs[k].rdlen == r->rdlen &&
                  memcmp(L->arena + L->recs[k].rdata, L->arena + r->rdata, r->rdlen) == 0;
        }
        if (!dup) {
            L->recs[kept++] = *r;
        }
    }
    L->nrecs = kept;

    /* Nodes: one per owner, each a run of records. RFC 1034 3.6.2: a CNAME stands alone. */
    size_t nodes_cap = 16;
    z->nodes = malloc(nodes_cap * sizeof(*z->nodes));
    z->rrs = malloc((L->nrecs ? L->nrecs : 1) * sizeof(*z->rrs));
    if (z->nodes == NULL || z->rrs == NULL) {
        return EDDY_ENOMEM;
    }
    for (size_t i = 0; i < L->nrecs; i++) {
        const rec_t *r = &L->recs[i];
        z->rrs[i] = (eddy__dns_rr_t){r->rdata, r->ttl, r->type, r->rdlen};
        if (r->type == EDDY_DNS_TYPE_SOA) {
            z->soa = (uint32_t)i;
        }
        if (i > 0 && same_owner(&L->recs[i - 1], r)) {
            const rec_t *q = &L->recs[i - 1];
            if (q->type == EDDY_DNS_TYPE_CNAME || r->type == EDDY_DNS_TYPE_CNAME) {
                char text[EDDY_DNS_NAME_MAX * 4 + 2];
                eddy_dns_name_to_text(L->arena + r->owner, r->owner_len, text, sizeof(text));
                const rec_t *later = q->line > r->line ? q : r;
                return fail(L, later->line, "CNAME and other data at %s (RFC 1034 3.6.2)", text);
            }
            z->nodes[z->nnodes - 1].count++;
            continue;
        }
        if (z->nnodes == nodes_cap) {
            nodes_cap *= 2;
            eddy__dns_node_t *nodes = realloc(z->nodes, nodes_cap * sizeof(*nodes));
            if (nodes == NULL) {
                return EDDY_ENOMEM;
            }
            z->nodes = nodes;
        }
        z->nodes[z->nnodes++] = (eddy__dns_node_t){r->owner, (uint32_t)i, 1, r->owner_len};
    }
    z->nrrs = L->nrecs;
    z->bytes = L->arena;
    L->arena = NULL;

    size_t size = 16;
    while (size < z->nnodes * 2) {
        size *= 2;
    }
    z->slots = calloc(size, sizeof(*z->slots));
    if (z->slots == NULL) {
        return EDDY_ENOMEM;
    }
    z->mask = size - 1;
    for (uint32_t k = 0; k < z->nnodes; k++) {
        slot_put(z, k);
    }
    /* Every name between an owner and the apex exists, as an empty non-terminal if it has
     * no records: each is a suffix of the owner's name, already in the bytes. */
    size_t owners = z->nnodes;
    for (size_t k = 0; k < owners; k++) {
        uint32_t name = z->nodes[k].name;
        size_t nl = z->nodes[k].name_len;
        while (nl > apex_len) {
            size_t skip = 1 + (size_t)z->bytes[name];
            name += (uint32_t)skip;
            nl -= skip;
            if (eddy__dns_zone_find(z, z->bytes + name, nl) != NULL) {
                break; /* and so are its parents */
            }
            int err = add_empty_node(z, &nodes_cap, name, nl);
            if (err != 0) {
                return err;
            }
        }
    }
    const eddy__dns_node_t *a = eddy__dns_zone_find(z, apex, apex_len);
    assert(a != NULL && a->count > 0);
    z->apex = (uint32_t)(a - z->nodes);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * The API
 */

static int zone_parse(eddy_dns_zone_t **out, const char *text, size_t len, const char *origin,
                      const char *file, char *err, size_t errlen)
{
    if (out == NULL || text == NULL) {
        return EDDY_EINVAL;
    }
    *out = NULL;
    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    loader_t *L = calloc(1, sizeof(*L));
    eddy_dns_zone_t *z = calloc(1, sizeof(*z));
    if (L == NULL || z == NULL) {
        free(L);
        free(z);
        return EDDY_ENOMEM;
    }
    L->text = text;
    L->len = len;
    L->line = 1;
    L->file = file;
    L->err = err;
    L->errlen = errlen;
    int rc = 0;
    if (origin != NULL) {
        if (eddy_dns_name_from_text(origin, L->origin, &L->origin_len) != 0) {
            rc = fail(L, 0, "bad origin \"%s\"", origin);
        }
        for (size_t i = 0; i < L->origin_len; i++) {
            L->origin[i] = eddy__dns_lower(L->origin[i]);
        }
    }
    /* Fields become C strings for inet_pton() and the name parser: a NUL would cut them. */
    const char *nul = rc == 0 ? memchr(text, '\0', len) : NULL;
    if (nul != NULL) {
        unsigned line = 1;
        for (const char *p = text; p < nul; p++) {
            line += *p == '\n';
        }
        rc = fail(L, line, "a NUL byte");
    }
    while (rc == 0) {
        rc = next_entry(L);
        if (rc <= 0) {
            break;
        }
        const field_t *f = &L->fields[0];
        rc = !L->owner_omitted && !f->quoted && f->len > 0 && f->s[0] == '$' ? parse_directive(L)
                                                                             : parse_record(L);
    }
    if (rc == 0) {
        rc = build(L, z);
    }
    if (rc == EDDY_ENOMEM) {
        fail(L, 0, "out of memory");
    }
    free(L->arena);
    free(L->recs);
    free(L);
    if (rc != 0) {
        eddy_dns_zone_free(z);
        return rc;
    }
    *out = z;
    return 0;
}

int eddy_dns_zone_parse(eddy_dns_zone_t **out, const char *text, size_t len, const char *origin,
                        char *err, size_t errlen)
{
    return zone_parse(out, text, len, origin, NULL, err, errlen);
}

int eddy_dns_zone_load(eddy_dns_zone_t **out, const char *path, char *err, size_t errlen)
{
    if (out == NULL || path == NULL) {
        return EDDY_EINVAL;
    }
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        int rc = -errno;
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen, "%s: %s", path, eddy_strerror(rc));
        }
        return rc;
    }
    char *text = NULL;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) {
        size = ftell(f);
    }
    int rc = 0;
    if (size < 0 || size > MAX_FILE_SIZE || fseek(f, 0, SEEK_SET) != 0) {
        rc = size > MAX_FILE_SIZE ? EDDY_ERANGE : EDDY_EIO;
    } else if ((text = malloc((size_t)size + 1)) == NULL) {
        rc = EDDY_ENOMEM;
    } else if (fread(text, 1, (size_t)size, f) != (size_t)size) {
        rc = EDDY_EIO;
    }
    fclose(f);
    if (rc == 0) {
        rc = zone_parse(out, text, (size_t)size, NULL, path, err, errlen);
    } else if (err != NULL && errlen > 0) {
        snprintf(err, errlen, "%s: %s", path, eddy_strerror(rc));
    }
    free(text);
    return rc;
}

void eddy_dns_zone_free(eddy_dns_zone_t *z)
{
    if (z == NULL) {
        return;
    }
    free(z->bytes);
    free(z->rrs);
    free(z->nodes);
    free(z->slots);
    free(z);
}

const uint8_t *eddy_dns_zone_origin(const eddy_dns_zone_t *z, size_t *len)
{
    const eddy__dns_node_t *apex = &z->nodes[z->apex];
    *len = apex->name_len;
    return z->bytes + apex->name;
}

size_t eddy_dns_zone_record_count(const eddy_dns_zone_t *z)
{
    return z->nrrs;
}
