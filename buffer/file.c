/*
 * Files held by reference and file regions (include/eddy/file.h). A region is a message whose
 * bytes stay in the file: the transports send it with sendfile(2) or read it in pieces
 * (pipeline/transport/), and what they sent moves its offset on (eddy_file_region_skip()).
 */
#include "buffer/layer.h"

#include <eddy/file.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

struct eddy_file_s {
    _Atomic uint32_t refcnt;
    int fd;
};

struct eddy_file_region_s {
    eddy_msg_t _msg; /* EDDY_MSG_FILE_REGION */
    eddy_file_t *file;
    uint64_t offset; /* of the unsent part */
    uint64_t left;   /* its length */
};

eddy_file_t *eddy_file_adopt(int fd)
{
    assert(fd >= 0);
    eddy_file_t *f = malloc(sizeof(*f));
    if (f == NULL) {
        eddy__fd_close(fd);
        return NULL;
    }
    atomic_init(&f->refcnt, 1);
    f->fd = fd;
    return f;
}

int eddy_file_open(const char *path, eddy_file_t **out)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    *out = eddy_file_adopt(fd);
    return *out != NULL ? 0 : EDDY_ENOMEM;
}

eddy_file_t *eddy_file_retain(eddy_file_t *f)
{
    eddy__refcnt_add(&f->refcnt);
    return f;
}

bool eddy_file_release(eddy_file_t *f)
{
    if (!eddy__refcnt_sub(&f->refcnt, 1)) {
        return false;
    }
    eddy__fd_close(f->fd);
    free(f);
    return true;
}

int eddy_file_fd(const eddy_file_t *f)
{
    return f->fd;
}

static void region_free(eddy_msg_t *msg)
{
    eddy_file_region_t *r = eddy_file_region_of(msg);
    eddy_file_release(r->file);
    free(r);
}

eddy_file_region_t *eddy_file_region_new(eddy_file_t *f, uint64_t offset, uint64_t length)
{
    eddy_file_region_t *r = malloc(sizeof(*r));
    if (r == NULL) {
        return NULL;
    }
    eddy_msg_init(&r->_msg, EDDY_MSG_FILE_REGION, region_free);
    r->file = eddy_file_retain(f);
    r->offset = offset;
    r->left = length;
    return r;
}

eddy_file_region_t *eddy_file_region_of(eddy_msg_t *msg)
{
    return msg != NULL && msg->type == EDDY_MSG_FILE_REGION
               ? EDDY_CONTAINER_OF(msg, eddy_file_region_t, _msg)
               : NULL;
}

eddy_msg_t *eddy_file_region_msg(eddy_file_region_t *r)
{
    return &r->_msg;
}

eddy_file_t *eddy_file_region_file(const eddy_file_region_t *r)
{
    return r->file;
}

uint64_t eddy_file_region_offset(const eddy_file_region_t *r)
{
    return r->offset;
}

uint64_t eddy_file_region_remaining(const eddy_file_region_t *r)
{
    return r->left;
}

void eddy_file_region_skip(eddy_file_region_t *r, uint64_t n)
{
    assert(n <= r->left);
    r->offset += n;
    r->left -= n;
}

ssize_t eddy_file_region_read(const eddy_file_region_t *r, void *dst, size_t cap)
{
    size_t want = r->left < cap ? (size_t)r->left : cap;
    if (want == 0) {
        return 0;
    }
    ssize_t n;
    do {
        n = pread(r->file->fd, dst, want, (off_t)r->offset);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        return -errno;
    }
    return n == 0 ? EDDY_ETRUNCATED : n; /* the file ends before the region does */
}
