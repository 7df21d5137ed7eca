/*
 * The static file handler (http.h, "Static files"): a request's path, resolved beneath the
 * root one segment at a time, answered with the file as a region (file.h).
 *
 * Traversal: the path is percent-decoded once; a NUL, a backslash, or a "." or ".." segment
 * is refused (403), so nothing a request says can name a parent. What is left is opened
 * beneath the root's descriptor with no symbolic link followed: a link anywhere on the way
 * fails with ELOOP (404), whether it points in or out, and a directory renamed meanwhile
 * cannot lead out either. Where the kernel has openat2 (Linux 5.6), one call resolves the
 * whole path so (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), as nginx opens a file in one call;
 * elsewhere each segment is opened with openat(O_NOFOLLOW) relative to the directory before
 * it, nothing resolved by name from the root twice. (realpath() and a prefix check would
 * race with such renames.)
 */
#include "codec/http/files.h"

#include "buffer/layer.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/openat2.h>
#include <sys/syscall.h>
#endif

/* Ranges served in one multipart answer; a request for more gets the whole file (nginx's
 * max_ranges is unlimited by default, but a request for thousands of tiny ranges is an
 * amplification: Apache caps them at 200, we at 16). */
#define MAX_RANGES 16

struct eddy_http_files_s {
    _Atomic uint32_t refcnt;
    int root; /* the directory, O_DIRECTORY */
    bool precompressed;
    char index[NAME_MAX + 1];
};

int eddy_http_files_new(const char *root, const eddy_http_files_options_t *o,
                        eddy_http_files_t **out)
{
    *out = NULL;
    const char *index = o != NULL && o->index != NULL ? o->index : "index.html";
    if (strlen(index) == 0 || strlen(index) > NAME_MAX || strchr(index, '/') != NULL) {
        return EDDY_EINVAL;
    }
    int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    eddy_http_files_t *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        eddy__fd_close(fd);
        return EDDY_ENOMEM;
    }
    atomic_init(&f->refcnt, 1);
    f->root = fd;
    f->precompressed = o == NULL || !o->no_precompressed;
    strcpy(f->index, index); /* length checked above */
    *out = f;
    return 0;
}

eddy_http_files_t *eddy_http_files_retain(eddy_http_files_t *f)
{
    eddy__refcnt_add(&f->refcnt);
    return f;
}

void eddy_http_files_release(eddy_http_files_t *f)
{
    if (f != NULL && eddy__refcnt_sub(&f->refcnt, 1)) {
        eddy__fd_close(f->root);
        free(f);
    }
}

/* ---------------------------------------------------------------------------------------
 * The path
 */

static int hex(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The path of target (up to '?' or '#'), percent-decoded into out (cap bytes, NUL-terminated):
 * 0, or the status to answer (400 malformed, 403 a NUL or backslash, 404 too long). */
static int decode_path(eddy_http_str_t target, char *out, size_t cap)
{
    if (target.len == 0 || target.p[0] != '/') {
        return 400; /* "*" or an absolute form: not a file */
    }
    size_t n = 0;
    for (size_t i = 0; i < target.len && target.p[i] != '?' && target.p[i] != '#'; i++) {
        int c = (unsigned char)target.p[i];
        if (c == '%') {
            int hi = i + 2 < target.len ? hex(target.p[i + 1]) : -1;
            int lo = hi >= 0 ? hex(target.p[i + 2]) : -1;
            if (lo < 0) {
                return 400;
            }
            c = hi << 4 | lo;
            i += 2;
        }
        if (c == '\0' || c == '\\') {
            return 403;
        }
        if (n + 1 >= cap) {
            return 404;
        }
        out[n++] = (char)c;
    }
    out[n] = '\0';
    return 0;
}

/* The next segment of *path (slashes skipped) into seg, or false at the end. A "." or ".."
 * segment sets *bad. */
static bool next_segment(const char **path, char *seg, bool *bad)
{
    const char *p = *path;
    while (*p == '/') {
        p++;
    }
    size_t n = strcspn(p, "/");
    if (n == 0) {
        return false;
    }
    *bad = n > NAME_MAX || (p[0] == '.' && (n == 1 || (n == 2 && p[1] == '.')));
    if (n <= NAME_MAX) {
        memcpy(seg, p, n);
        seg[n] = '\0';
    }
    *path = p + n;
    return true;
}

/* A status for an errno from openat or fstat: 403 for a permission, 503 for a server out of
 * descriptors or memory (the file may well be there: a 404 would be a lie a cache keeps),
 * 404 for what names nothing servable (ENOENT, ENOTDIR, ELOOP for a link, ENAMETOOLONG). */
static int open_status(int err)
{
    switch (err) {
    case EACCES:
    case EPERM:
        return 403;
    case EMFILE:
    case ENFILE:
    case ENOMEM:
        return 503;
    default:
        return 404;
    }
}

/* What a path resolved to: the file (or directory) open, its path beneath the root and where
 * its last segment starts (for the type, the index and the siblings), and, when it was found
 * by the walk, the directory holding it open (-1 when openat2 found it). */
typedef struct found_s {
    int fd, dir, root;
    struct stat st;
    size_t last; /* rel + last: the last segment ("" for the root) */
    char rel[PATH_MAX];
} found_t;

static void found_close(found_t *f)
{
    if (f->fd >= 0) {
        eddy__fd_close(f->fd);
    }
    if (f->dir >= 0) {
        eddy__fd_close(f->dir);
    }
    f->fd = f->dir = -1;
}

static const char *found_name(const found_t *f)
{
    return f->rel + f->last;
}

/* Open name beneath dir without following a link; O_NONBLOCK so that a FIFO cannot block. */
static int open_beneath(int dir, const char *name)
{
    int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    eddy__fd_made(); /* TSan does not see openat */
    return fd;
}

/* Set once openat2 is known missing (ENOSYS): every later path takes the walk. */
static atomic_bool no_openat2;

void eddy__files_force_walk(bool walk)
{
    atomic_store_explicit(&no_openat2, walk, memory_order_relaxed);
}

/* Open the relative path rel beneath dir in one call, no link followed on the way, nothing
 * outside dir reachable; -1 with ENOSYS where the kernel (or libc's headers) lack openat2. */
static int open_path_beneath(int dir, const char *rel)
{
#if defined(SYS_openat2) && defined(RESOLVE_BENEATH)
    struct open_how how = {
        .flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    int fd = (int)syscall(SYS_openat2, dir, rel, &how, sizeof(how));
    eddy__fd_made();
    return fd;
#else
    (void)dir;
    (void)rel;
    errno = ENOSYS;
    return -1;
#endif
}

/* fd (>= 0) into f with its stat: 0, or the status for errno (fd is left in f to close). */
static int found_open(found_t *f, int fd)
{
    f->fd = fd;
    return fd < 0 || fstat(fd, &f->st) != 0 ? open_status(errno) : 0;
}

/* Open f's path extended by tail (a suffix, or "/" and a name) beneath the root. */
static int open_extended(const found_t *f, const char *tail)
{
    char rel[sizeof(f->rel) + NAME_MAX + 2];
    int n = snprintf(rel, sizeof(rel), "%s%s", f->rel, tail);
    if (n < 0 || (size_t)n >= sizeof(rel)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return open_path_beneath(f->root, rel);
}

/* One step of the walk down: what f names becomes the directory, seg the name. 0 or a status. */
static int step(found_t *f, const char *seg)
{
    if (f->fd >= 0 && !S_ISDIR(f->st.st_mode)) {
        return 404; /* a file is not a directory */
    }
    if (f->fd >= 0) {
        if (f->dir >= 0) {
            eddy__fd_close(f->dir);
        }
        f->dir = f->fd;
        f->fd = -1;
    }
    return found_open(f, open_beneath(f->dir, seg));
}

/* Another descriptor of directory dir: openat rather than dup, which TSan takes for a write
 * to the descriptor another thread may have closed under that number (eddy__fd_made()). */
static int reopen_dir(int dir)
{
    int fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    eddy__fd_made();
    return fd;
}

/* The decoded path's segments joined into f->rel ("." for the root), f->last at the last:
 * 0, 403 for a "." or ".." segment, 404 for one too long. */
static int relative_path(const char *path, found_t *f)
{
    char seg[NAME_MAX + 1];
    bool bad = false;
    size_t n = 0;
    f->last = 0;
    while (next_segment(&path, seg, &bad)) {
        if (bad) {
            return 403;
        }
        size_t len = strlen(seg);
        assert(n + (n > 0) + len < sizeof(f->rel)); /* no longer than the decoded path */
        if (n > 0) {
            f->rel[n++] = '/';
        }
        f->last = n;
        memcpy(f->rel + n, seg, len + 1);
        n += len;
    }
    if (n == 0) {
        strcpy(f->rel, ".");
        f->last = 1; /* the root's name is "" */
    }
    return 0;
}

/* The walk: each segment of f->rel opened beneath the one before it, from the root. */
static int walk(found_t *f)
{
    f->dir = reopen_dir(f->root);
    if (f->dir < 0) {
        return open_status(errno);
    }
    const char *path = f->rel;
    char seg[NAME_MAX + 1];
    bool bad = false;
    int status = 0;
    while (status == 0 && strcmp(path, ".") != 0 && next_segment(&path, seg, &bad)) {
        status = bad ? 403 : step(f, seg);
    }
    if (status == 0 && f->fd < 0) { /* the root itself */
        status = found_open(f, reopen_dir(f->dir));
    }
    return status;
}

/* Resolve the decoded path beneath root into f: 0 or the status to answer. */
static int resolve(int root, const char *path, found_t *f)
{
    *f = (found_t){.fd = -1, .dir = -1, .root = root};
    int status = relative_path(path, f);
    if (status == 0 && !atomic_load_explicit(&no_openat2, memory_order_relaxed)) {
        int fd = open_path_beneath(root, f->rel);
        if (fd >= 0 || errno != ENOSYS) {
            status = found_open(f, fd);
            goto out;
        }
        atomic_store_explicit(&no_openat2, true, memory_order_relaxed);
    }
    status = status != 0 ? status : walk(f);
out:
    if (status != 0) {
        found_close(f);
    }
    return status;
}

/* The index file of the directory f names, in its place. 0 or a status. */
static int open_index(found_t *f, const char *index)
{
    size_t n = strlen(f->rel);
    if (n + 1 + strlen(index) >= sizeof(f->rel)) {
        return 404; /* ENAMETOOLONG */
    }
    int status;
    if (f->dir >= 0) {
        status = step(f, index); /* the walk's: the directory beside */
    } else {
        char tail[NAME_MAX + 2];
        snprintf(tail, sizeof(tail), "/%s", index);
        int fd = open_extended(f, tail);
        eddy__fd_close(f->fd);
        status = found_open(f, fd);
    }
    f->rel[n] = '/';
    f->last = n + 1;
    strcpy(f->rel + f->last, index); /* the name the type and the siblings come from */
    return status == 0 && !S_ISREG(f->st.st_mode) ? 404 : status;
}

/* ---------------------------------------------------------------------------------------
 * Answers
 */

/* Per channel. */
typedef struct conn_s {
    eddy_http_files_t *files; /* a reference */
    bool wrote;               /* answers written since the last flush */
} conn_t;

/* A response to req with status, its version, keep-alive, stream and Date set. */
static eddy_http_response_t *response_for(eddy_ctx_t *ctx, const eddy_http_request_t *req,
                                          int status)
{
    eddy_http_response_t *r = eddy_http_response_new(status);
    if (r == NULL) {
        return NULL;
    }
    r->version = req->version == 10 ? 10 : 11;
    r->keep_alive = req->keep_alive && req->error == 0;
    r->head_only = req->method == EDDY_HTTP_HEAD;
    r->stream_id = req->stream_id;
    eddy_http_response_add_header(r, "Date", eddy_http_date(eddy_ctx_loop(ctx)));
    return r;
}

static void send_response(eddy_ctx_t *ctx, eddy_http_response_t *r)
{
    conn_t *c = eddy_ctx_state(ctx);
    eddy_ctx_write(ctx, eddy_http_response_msg(r), NULL);
    c->wrote = true;
}

/* A short text answer: the reason phrase as the body. */
static void reply_status(eddy_ctx_t *ctx, const eddy_http_request_t *req, int status)
{
    eddy_http_response_t *r = response_for(ctx, req, status);
    if (r == NULL) {
        eddy_ctx_close(ctx, NULL);
        return;
    }
    char text[64];
    snprintf(text, sizeof(text), "%s\n", eddy_http_reason(status));
    eddy_http_response_add_header(r, "Content-Type", "text/plain; charset=utf-8");
    if (status == 405) {
        eddy_http_response_add_header(r, "Allow", "GET, HEAD");
    }
    eddy_http_response_set_body(r, eddy_buf_from_str(text));
    send_response(ctx, r);
}

/* 301 to the path with a slash added (and the query kept): "/dir" names a directory. */
static void redirect_slash(eddy_ctx_t *ctx, const eddy_http_request_t *req)
{
    eddy_http_str_t t = req->target;
    size_t path = 0;
    while (path < t.len && t.p[path] != '?' && t.p[path] != '#') {
        path++;
    }
    char *loc = malloc(t.len + 2);
    eddy_http_response_t *r = loc != NULL ? response_for(ctx, req, 301) : NULL;
    if (r == NULL) {
        free(loc);
        eddy_ctx_close(ctx, NULL);
        return;
    }
    memcpy(loc, t.p, path);
    loc[path] = '/';
    memcpy(loc + path + 1, t.p + path, t.len - path);
    loc[t.len + 1] = '\0';
    eddy_http_response_add_header(r, "Location", loc);
    free(loc);
    send_response(ctx, r);
}

/* What an answer with a file says about it. */
typedef struct meta_s {
    const char *type;
    const char *encoding; /* "br", "gzip", or NULL */
    bool vary;            /* chosen by Accept-Encoding (siblings looked for) */
    char etag[48];
    char modified[EDDY_HTTP_DATE_LEN + 1];
} meta_t;

static void add_meta(eddy_http_response_t *r, const meta_t *m)
{
    eddy_http_response_add_header(r, "Last-Modified", m->modified);
    eddy_http_response_add_header(r, "ETag", m->etag);
    if (m->vary) {
        eddy_http_response_add_header(r, "Vary", "Accept-Encoding");
    }
}

/* Whether the request's conditionals make this a 304 (RFC 9110 section 13.2.2: If-None-Match
 * decides when present, If-Modified-Since only without it). */
static bool not_modified(const eddy_http_request_t *req, const meta_t *m, int64_t mtime)
{
    const eddy_http_header_t *inm = eddy_http_request_header(req, "If-None-Match");
    if (inm != NULL) {
        return eddy__files_none_match(inm->value, m->etag);
    }
    const eddy_http_header_t *ims = eddy_http_request_header(req, "If-Modified-Since");
    int64_t since;
    return ims != NULL && eddy__files_parse_date(ims->value, &since) == 0 && mtime <= since;
}

/* A part of a body up to this many bytes is read when the answer is made, not sent from the
 * file: the answer then holds no descriptor while it waits behind others (a client that
 * pipelines requests for small files and does not read held one per answer: the per-byte
 * backpressure lets hundreds of small answers queue, and their descriptors ran the process
 * out), and it goes in the same write as its head. */
#define READ_PART_MAX 16384

/* The region fr read whole into a buffer, or NULL (no memory; the file shorter than the
 * region now, which the region itself, sent, ends cleanly). */
static eddy_buf_t *read_part(eddy_ctx_t *ctx, const eddy_file_region_t *fr, size_t len)
{
    eddy_buf_t *b = eddy_buf_alloc(eddy_ctx_alloc(ctx), len, EDDY_BUF_DEFAULT_MAX_CAPACITY);
    if (b == NULL || len == 0) {
        return b;
    }
    ssize_t n = eddy_file_region_read(fr, eddy_buf_write_ptr(b), len);
    if (n != (ssize_t)len || eddy_buf_produce(b, len) != 0) {
        eddy_buf_release(b);
        return NULL;
    }
    return b;
}

/* A region of file as a body part of r (read now when small, see READ_PART_MAX): 0, or
 * EDDY_ENOMEM. */
static int add_region(eddy_ctx_t *ctx, eddy_http_response_t *r, eddy_file_t *file, uint64_t first,
                      uint64_t len)
{
    eddy_file_region_t *fr = eddy_file_region_new(file, first, len);
    if (fr == NULL) {
        return EDDY_ENOMEM;
    }
    eddy_buf_t *b = len <= READ_PART_MAX && !r->head_only ? read_part(ctx, fr, len) : NULL;
    if (b != NULL) {
        eddy_msg_release(eddy_file_region_msg(fr));
        return eddy_http_response_add_body(r, eddy_buf_msg(b));
    }
    return eddy_http_response_add_body(r, eddy_file_region_msg(fr));
}

/* Text as a body part of r. */
static int add_text(eddy_http_response_t *r, const char *text)
{
    eddy_buf_t *b = eddy_buf_from(text, strlen(text));
    return b != NULL ? eddy_http_response_add_body(r, eddy_buf_msg(b)) : EDDY_ENOMEM;
}

/* "bytes FIRST-LAST/SIZE" into out. */
static void content_range(char *out, size_t cap, const eddy__files_range_t *g, uint64_t size)
{
    snprintf(out, cap, "bytes %llu-%llu/%llu", (unsigned long long)g->first,
             (unsigned long long)(g->first + g->len - 1), (unsigned long long)size);
}

/* The parts of a multipart/byteranges body (RFC 9110 section 14.6), boundary b. */
static int add_multipart(eddy_ctx_t *ctx, eddy_http_response_t *r, eddy_file_t *file,
                         const meta_t *m, const eddy__files_range_t *g, int n, uint64_t size,
                         const char *b)
{
    int err = 0;
    for (int i = 0; i < n && err == 0; i++) {
        char head[256], range[80];
        content_range(range, sizeof(range), &g[i], size);
        snprintf(head, sizeof(head), "\r\n--%s\r\nContent-Type: %s\r\nContent-Range: %s\r\n\r\n", b,
                 m->type, range);
        err = add_text(r, head);
        err = err != 0 ? err : add_region(ctx, r, file, g[i].first, g[i].len);
    }
    char tail[64];
    snprintf(tail, sizeof(tail), "\r\n--%s--\r\n", b);
    return err != 0 ? err : add_text(r, tail);
}

/* The body and the framing headers of a 200 or 206: 0 or EDDY_ENOMEM. */
static int fill_body(eddy_ctx_t *ctx, eddy_http_response_t *r, eddy_file_t *file, const meta_t *m,
                     const eddy__files_range_t *g, int n, uint64_t size)
{
    if (n < 0) {
        eddy_http_response_add_header(r, "Content-Type", m->type);
        return add_region(ctx, r, file, 0, size);
    }
    if (n == 1) {
        char range[80];
        content_range(range, sizeof(range), &g[0], size);
        eddy_http_response_add_header(r, "Content-Type", m->type);
        eddy_http_response_add_header(r, "Content-Range", range);
        return add_region(ctx, r, file, g[0].first, g[0].len);
    }
    uint8_t rnd[8];
    char boundary[24], type[64];
    eddy__random_bytes(rnd, sizeof(rnd)); /* a failure leaves zeros: still a boundary */
    for (size_t i = 0; i < sizeof(rnd); i++) {
        snprintf(boundary + 2 * i, 3, "%02x", rnd[i]);
    }
    snprintf(type, sizeof(type), "multipart/byteranges; boundary=%s", boundary);
    eddy_http_response_add_header(r, "Content-Type", type);
    return add_multipart(ctx, r, file, m, g, n, size, boundary);
}

/* The Range header's ranges when it applies (GET, If-Range holding): their count, 0 for
 * none satisfiable, -1 for the whole file. */
static int wanted_ranges(const eddy_http_request_t *req, const meta_t *m, int64_t mtime,
                         uint64_t size, eddy__files_range_t *g)
{
    const eddy_http_header_t *range = eddy_http_request_header(req, "Range");
    if (range == NULL || req->method != EDDY_HTTP_GET) {
        return -1;
    }
    const eddy_http_header_t *ifr = eddy_http_request_header(req, "If-Range");
    if (ifr != NULL && !eddy__files_if_range(ifr->value, m->etag, mtime)) {
        return -1;
    }
    return eddy__files_ranges(range->value, size, g, MAX_RANGES);
}

/* 416 for a file of size bytes. */
static void reply_unsatisfiable(eddy_ctx_t *ctx, const eddy_http_request_t *req, const meta_t *m,
                                uint64_t size)
{
    eddy_http_response_t *r = response_for(ctx, req, 416);
    if (r == NULL) {
        eddy_ctx_close(ctx, NULL);
        return;
    }
    char range[48];
    snprintf(range, sizeof(range), "bytes */%llu", (unsigned long long)size);
    eddy_http_response_add_header(r, "Content-Range", range);
    add_meta(r, m);
    send_response(ctx, r);
}

/* What an answer with a file is: its status, and the ranges of its body (n < 0: all of it;
 * 0: none satisfiable; fresh: a 304 without one). */
typedef struct plan_s {
    bool fresh;
    int n;
    uint64_t size;
    eddy__files_range_t g[MAX_RANGES];
} plan_t;

static int plan_status(const plan_t *pl)
{
    return pl->fresh ? 304 : pl->n > 0 ? 206 : 200;
}

/* The answer for file as pl says (the regions take references of their own), or NULL when out
 * of memory. */
static eddy_http_response_t *file_response(eddy_ctx_t *ctx, const eddy_http_request_t *req,
                                           eddy_file_t *file, const meta_t *m, const plan_t *pl)
{
    eddy_http_response_t *r = response_for(ctx, req, plan_status(pl));
    if (r == NULL) {
        return NULL;
    }
    add_meta(r, m);
    eddy_http_response_add_header(r, "Accept-Ranges", "bytes");
    if (m->encoding != NULL) {
        eddy_http_response_add_header(r, "Content-Encoding", m->encoding);
    }
    if (!pl->fresh && fill_body(ctx, r, file, m, pl->g, pl->n, pl->size) != 0) {
        eddy_msg_release(eddy_http_response_msg(r));
        return NULL;
    }
    return r;
}

/* Answer req with the open regular file fd (taken over). */
static void send_file(eddy_ctx_t *ctx, const eddy_http_request_t *req, int fd,
                      const struct stat *st, const meta_t *m)
{
    int64_t mtime = (int64_t)st->st_mtim.tv_sec;
    plan_t pl = {.size = (uint64_t)st->st_size};
    pl.fresh = not_modified(req, m, mtime);
    pl.n = pl.fresh ? -1 : wanted_ranges(req, m, mtime, pl.size, pl.g);
    if (pl.n == 0) {
        eddy__fd_close(fd);
        reply_unsatisfiable(ctx, req, m, pl.size);
        return;
    }
    eddy_file_t *file = eddy_file_adopt(fd);
    eddy_http_response_t *r = file != NULL ? file_response(ctx, req, file, m, &pl) : NULL;
    if (file != NULL) {
        eddy_file_release(file); /* the regions hold their own references */
    }
    if (r == NULL) {
        eddy_ctx_close(ctx, NULL); /* out of memory: nothing better to say */
        return;
    }
    send_response(ctx, r);
}

/* A precompressed sibling of f (its name + suffix, a regular file in the same directory), or
 * -1 (st: its stat). */
static int sibling(const found_t *f, const char *suffix, struct stat *st)
{
    int fd = -1;
    size_t n = strlen(found_name(f));
    if (n + strlen(suffix) > NAME_MAX) {
        return -1;
    }
    if (f->dir >= 0) { /* the walk's: the directory beside */
        char name[NAME_MAX + 1];
        memcpy(name, found_name(f), n);
        strcpy(name + n, suffix); /* the length checked above */
        fd = open_beneath(f->dir, name);
    } else {
        fd = open_extended(f, suffix);
    }
    if (fd >= 0 && (fstat(fd, st) != 0 || !S_ISREG(st->st_mode))) {
        eddy__fd_close(fd);
        fd = -1;
    }
    return fd;
}

/* The codings of precompressed siblings, the preferred first. */
static const struct {
    const char *suffix, *coding;
} sibling_codings[] = {{".br", "br"}, {".gz", "gzip"}};

#define NCODINGS (sizeof(sibling_codings) / sizeof(sibling_codings[0]))

/* Whether req's Accept-Encoding accepts sibling coding i. */
static bool accepts_coding(const eddy_http_request_t *req, size_t i)
{
    const eddy_http_header_t *ae = eddy_http_request_header(req, "Accept-Encoding");
    return ae != NULL && eddy__files_accepts(ae->value, sibling_codings[i].coding);
}

/* The best precompressed sibling of f that req accepts, open (st: its stat, m: its coding),
 * or -1. Only the codings req accepts are looked for (as nginx's gzip_static), and m says
 * Vary: Accept-Encoding whether one is found or not, since the answer is chosen by it. */
static int best_sibling(const eddy_http_request_t *req, const found_t *f, meta_t *m,
                        struct stat *st)
{
    m->vary = true;
    for (size_t i = 0; i < NCODINGS; i++) {
        int fd = accepts_coding(req, i) ? sibling(f, sibling_codings[i].suffix, st) : -1;
        if (fd >= 0) {
            m->encoding = sibling_codings[i].coding;
            return fd;
        }
    }
    return -1;
}

/* Swap f's file for its best precompressed sibling that req accepts, if any. */
static void pick_encoding(const eddy_http_request_t *req, found_t *f, meta_t *m)
{
    struct stat st;
    int fd = best_sibling(req, f, m, &st);
    if (fd >= 0) {
        eddy__fd_close(f->fd);
        f->fd = fd;
        f->st = st;
    }
}

/*
 * Where openat2 resolves paths: the best accepted sibling of the decoded path, looked for
 * before the path itself, as nginx's gzip_static does (one open, not two, for a request that
 * gets one). 1: found, f open on it and m's coding set (a sibling is served so even where the
 * name beside it is missing); 0: looked for, none (f holds nothing open); -1: not looked for
 * (the walk is in use, or the path names a directory).
 */
static int sibling_first(int root, const eddy_http_request_t *req, const char *path, found_t *f,
                         meta_t *m)
{
    *f = (found_t){.fd = -1, .dir = -1, .root = root};
    if (atomic_load_explicit(&no_openat2, memory_order_relaxed) || path[strlen(path) - 1] == '/' ||
        relative_path(path, f) != 0 || strcmp(f->rel, ".") == 0) {
        return -1;
    }
    f->fd = best_sibling(req, f, m, &f->st);
    return f->fd >= 0;
}

/* The file f found, answered (m: its coding, when chosen already). */
static void serve_found(eddy_ctx_t *ctx, const eddy_http_request_t *req, found_t *f, meta_t *m)
{
    m->type = eddy__files_type(found_name(f));
    eddy__files_etag(&f->st, m->etag, sizeof(m->etag));
    eddy__http_date_format((int64_t)f->st.st_mtim.tv_sec, m->modified);
    int fd = f->fd;
    f->fd = -1;
    found_close(f);
    send_file(ctx, req, fd, &f->st, m);
}

/* Answer req from the root. */
static void serve(eddy_ctx_t *ctx, eddy_http_files_t *files, const eddy_http_request_t *req)
{
    if (req->error != 0) {
        reply_status(ctx, req, req->error);
        return;
    }
    if (req->method != EDDY_HTTP_GET && req->method != EDDY_HTTP_HEAD) {
        reply_status(ctx, req, 405);
        return;
    }
    char path[PATH_MAX];
    found_t f = {.fd = -1, .dir = -1};
    meta_t m = {0};
    int status = decode_path(req->target, path, sizeof(path));
    int first =
        status == 0 && files->precompressed ? sibling_first(files->root, req, path, &f, &m) : -1;
    if (first == 1) {
        serve_found(ctx, req, &f, &m);
        return;
    }
    status = status != 0 ? status : resolve(files->root, path, &f);
    bool dir = status == 0 && S_ISDIR(f.st.st_mode);
    bool slash = status == 0 && path[strlen(path) - 1] == '/';
    if (dir && !slash) {
        found_close(&f);
        redirect_slash(ctx, req);
        return;
    }
    /* "/file/" names a directory that is not there (ENOTDIR, as open(2) and nginx say). */
    status = status != 0 ? status : dir ? open_index(&f, files->index) : slash ? 404 : 0;
    status = status != 0 || S_ISREG(f.st.st_mode) ? status : 404;
    if (status != 0) {
        found_close(&f);
        reply_status(ctx, req, status);
        return;
    }
    if (files->precompressed && first == -1) {
        pick_encoding(req, &f, &m); /* the walk's, or an index's */
    }
    serve_found(ctx, req, &f, &m);
}

/* ---------------------------------------------------------------------------------------
 * The handler
 */

static void files_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    conn_t *c = eddy_ctx_state(ctx);
    eddy_http_request_t *req = eddy_http_request_of(msg);
    if (req == NULL || msg->type != EDDY_MSG_HTTP_FULL_REQUEST) {
        eddy_ctx_fire_channel_read(ctx, msg); /* not ours */
        return;
    }
    /* A closed connection's decoder still passes on what it held (a client that pipelined
     * thousands of requests, then reset): no answer could go, so no file is opened. */
    if (eddy_channel_is_open(eddy_ctx_channel(ctx))) {
        serve(ctx, c->files, req);
    }
    eddy_msg_release(msg);
}

/* One flush per read batch: the answers to pipelined requests go out together. */
static void files_read_complete(eddy_ctx_t *ctx)
{
    conn_t *c = eddy_ctx_state(ctx);
    if (c->wrote) {
        c->wrote = false;
        eddy_ctx_flush(ctx);
    }
    eddy_ctx_fire_channel_read_complete(ctx);
}

/* An error no handler before took (a file region's file ended mid-send, EDDY_ETRUNCATED, and
 * the transport closed already; a reset): the connection is over. */
static void files_exception(eddy_ctx_t *ctx, int err)
{
    (void)err;
    eddy_ctx_close(ctx, NULL);
}

static void conn_free(void *state)
{
    conn_t *c = state;
    if (c != NULL) {
        eddy_http_files_release(c->files);
        free(c);
    }
}

static const eddy_handler_ops_t files_ops = {
    .name = "http_files",
    .channel_read = files_read,
    .channel_read_complete = files_read_complete,
    .exception_caught = files_exception,
};

eddy_handler_t eddy_http_files_handler(eddy_http_files_t *f)
{
    conn_t *c = calloc(1, sizeof(*c));
    if (c != NULL) {
        c->files = eddy_http_files_retain(f);
    }
    return eddy_handler(NULL, &files_ops, c, conn_free);
}
