/*
 * echo_server_uv: libuv's echo server, as libuv's own benchmarks write it (test/echo-server.c):
 * uv_read_start with a 64 KiB buffer (libuv's suggested size), and each read handed over to
 * uv_write, given back when the write completes. One loop, one thread. Unlike libuv's test,
 * buffers come back through a small free list rather than malloc and free: a 64 KiB malloc
 * and free per read makes glibc trim its heap on many frees (bench/RESULTS.md, buffer), and
 * the comparison would measure glibc rather than libuv.
 *
 *   echo_server_uv [--port N] [--cpu N]
 */
#include "server_common.h"

#include <uv.h>

#define BUF_SIZE 65536
#define CACHE_MAX 64 /* more buffers than ever in flight at once here (64 connections) */

static char *cache[CACHE_MAX];
static int ncached;

static char *buf_get(void)
{
    return ncached > 0 ? cache[--ncached] : malloc(BUF_SIZE);
}

static void buf_put(char *p)
{
    if (p == NULL)
        return;
    if (ncached < CACHE_MAX)
        cache[ncached++] = p;
    else
        free(p);
}

typedef struct write_req_s {
    uv_write_t req;
    uv_buf_t buf;
} write_req_t;

static void on_close(uv_handle_t *h)
{
    free(h);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested; /* 64 KiB, as BUF_SIZE */
    buf->base = buf_get();
    buf->len = buf->base != NULL ? BUF_SIZE : 0;
}

static void on_write(uv_write_t *req, int status)
{
    write_req_t *w = (write_req_t *)req;
    uv_handle_t *h = (uv_handle_t *)req->handle;
    buf_put(w->buf.base);
    free(w);
    if (status < 0 && !uv_is_closing(h))
        uv_close(h, on_close);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    if (nread <= 0) {
        buf_put(buf->base);
        if (nread < 0 && !uv_is_closing((uv_handle_t *)s))
            uv_close((uv_handle_t *)s, on_close);
        return;
    }
    write_req_t *w = malloc(sizeof(*w));
    if (w == NULL) {
        buf_put(buf->base);
        uv_close((uv_handle_t *)s, on_close);
        return;
    }
    w->buf = uv_buf_init(buf->base, (unsigned)nread);
    if (uv_write(&w->req, s, &w->buf, 1, on_write) != 0) {
        buf_put(buf->base);
        free(w);
        uv_close((uv_handle_t *)s, on_close);
    }
}

static void on_connection(uv_stream_t *server, int status)
{
    if (status != 0)
        return;
    uv_tcp_t *c = malloc(sizeof(*c));
    if (c == NULL)
        return;
    uv_tcp_init(server->loop, c);
    if (uv_accept(server, (uv_stream_t *)c) != 0) {
        uv_close((uv_handle_t *)c, on_close);
        return;
    }
    uv_tcp_nodelay(c, 1);
    uv_read_start((uv_stream_t *)c, on_alloc, on_read);
}

int main(int argc, char **argv)
{
    server_args_t a;
    server_args_parse(&a, argc, argv, "echo_server_uv");
    server_pin(a.cpu, "echo_server_uv");
    uv_loop_t *loop = uv_default_loop();
    uv_tcp_t server;
    struct sockaddr_in sa;
    uv_ip4_addr("127.0.0.1", a.port, &sa);
    uv_tcp_init(loop, &server);
    int r = uv_tcp_bind(&server, (const struct sockaddr *)&sa, 0);
    if (r == 0)
        r = uv_listen((uv_stream_t *)&server, 1024, on_connection);
    if (r != 0) {
        fprintf(stderr, "echo_server_uv: listen: %s\n", uv_strerror(r));
        return 1;
    }
    server_ready(a.port, "echo_server_uv");
    return uv_run(loop, UV_RUN_DEFAULT);
}
