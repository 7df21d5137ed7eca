/*
 * eddy-demo: what `make run` shows. Until the event loops and channels land (#4, #6, #7),
 * it walks through eddy's buffers: a framed message written and parsed with zero-copy
 * slices, a composite gathering pieces for writev, and the pooled allocator's metrics.
 */
#include <eddy/eddy.h>

#include <stdio.h>
#include <string.h>

/* Append one frame: a 4-byte big-endian length, then the payload. */
static int write_frame(eddy_buf_t *out, const char *payload)
{
    size_t n = strlen(payload);
    int err = eddy_buf_write_u32(out, (uint32_t)n);
    return err != 0 ? err : eddy_buf_write_bytes(out, payload, n);
}

/* Take one whole frame off in, as a zero-copy slice, or NULL when more bytes are needed. */
static eddy_buf_t *read_frame(eddy_buf_t *in)
{
    uint32_t len;
    if (eddy_buf_get_u32(in, eddy_buf_reader_index(in), &len) != 0 ||
        eddy_buf_readable(in) < 4 + (size_t)len) {
        return NULL;
    }
    eddy_buf_skip(in, 4);
    return eddy_buf_read_retained_slice(in, len);
}

int main(void)
{
    eddy_allocator_t *alloc = eddy_allocator_default();
    printf("eddy %s: buffers demo (allocator: %s)\n\n", eddy_version(),
           eddy_allocator_name(alloc));

    eddy_buf_t *wire = eddy_buf_new(0); /* grows as frames are written */
    const char *words[] = {"hello", "from", "eddy's", "pooled", "buffers"};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (write_frame(wire, words[i]) != 0) {
            fprintf(stderr, "demo: write failed\n");
            return 1;
        }
    }
    printf("wrote %zu bytes of frames; capacity grew to %zu\n", eddy_buf_readable(wire),
           eddy_buf_capacity(wire));

    /* Decode: each frame is a slice of the wire buffer, gathered into a composite. */
    eddy_composite_t *gathered = eddy_composite_new(0);
    eddy_buf_t *frame;
    while ((frame = read_frame(wire)) != NULL) {
        printf("  frame: \"%.*s\" (%zu bytes, refcount of the wire buffer now %u)\n",
               (int)eddy_buf_readable(frame), (const char *)eddy_buf_read_ptr(frame),
               eddy_buf_readable(frame), eddy_buf_refcnt(wire));
        eddy_composite_add(gathered, frame); /* takes ownership */
    }
    eddy_buf_release(wire); /* the slices keep the memory alive */

    struct iovec iov[16];
    int n = eddy_composite_iovec(gathered, iov, 16);
    printf("composite: %zu bytes in %d iovecs, ready for writev\n",
           eddy_composite_readable(gathered), n);
    eddy_buf_t *joined = eddy_composite_consolidate(gathered);
    printf("consolidated: \"%.*s\"\n", (int)eddy_buf_readable(joined),
           (const char *)eddy_buf_read_ptr(joined));
    eddy_buf_release(joined);
    eddy_composite_release(gathered);

    /* A burst of buffers of network-like sizes, then the allocator's view of memory. */
    eddy_buf_t *burst[256];
    for (int i = 0; i < 256; i++) {
        burst[i] = eddy_buf_new((size_t)64 << (i % 11)); /* 64 B .. 64 KiB */
    }
    eddy_allocator_metrics_t m;
    eddy_allocator_metrics(alloc, &m);
    printf("\n256 live buffers: %zu KiB in use, %zu KiB held, %zu arenas\n", m.used >> 10,
           m.held >> 10, m.arenas);
    for (int i = 0; i < 256; i++) {
        eddy_buf_release(burst[i]);
    }
    size_t returned = eddy_allocator_trim(alloc);
    eddy_allocator_metrics(alloc, &m);
    printf("all released, trim returned %zu KiB: %zu KiB in use, %zu KiB held\n",
           returned >> 10, m.used >> 10, m.held >> 10);
    printf("live buffers at exit: %lld\n", (long long)eddy_buf_live_count());
    return eddy_buf_live_count() == 0 ? 0 : 1;
}
