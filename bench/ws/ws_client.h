/*
 * What the clients of bench/ws share (bench_ws_loadgen, ws_broadcast): the opening handshake
 * on a blocking socket, checked (101, Upgrade, Sec-WebSocket-Accept from OpenSSL's SHA-1,
 * independent of the servers'), masked client frames, a parser of the servers' unmasked
 * frames; the rest (options, the measured window, /proc) is bench/support's. No eddy code: the
 * same client measures eddy and Netty.
 */
#ifndef EDDY_BENCH_WS_CLIENT_H
#define EDDY_BENCH_WS_CLIENT_H

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "support/loadgen.h"
#include "support/proc_util.h"

/* The value of header name in the response head (NUL-terminated), trimmed, into out. */
static inline bool wsc_header(const char *head, const char *name, char *out, size_t cap)
{
    size_t nlen = strlen(name);
    for (const char *l = strstr(head, "\r\n"); l != NULL; l = strstr(l, "\r\n")) {
        l += 2;
        if (strncasecmp(l, name, nlen) == 0 && l[nlen] == ':') {
            const char *v = l + nlen + 1, *end = strstr(v, "\r\n");
            while (*v == ' ' || *v == '\t')
                v++;
            size_t len = end != NULL ? (size_t)(end - v) : strlen(v);
            while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
                len--;
            if (len >= cap)
                return false;
            memcpy(out, v, len);
            out[len] = '\0';
            return true;
        }
    }
    return false;
}

/*
 * Connects a blocking TCP socket to addr (TCP_NODELAY; with rst, close() resets it and leaves
 * no TIME_WAIT) and upgrades it on /ws with a key made from seed; fails the program unless
 * the answer is a 101 with Upgrade: websocket and the right Sec-WebSocket-Accept. Reads the
 * answer head and not a byte more (the server sends nothing else before the client does).
 */
static inline int wsc_open(const struct sockaddr_in *addr, uint64_t seed, bool rst)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        bench_die("socket (raise ulimit -n)");
    if (rst) {
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    if (connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) != 0)
        bench_die("connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    uint8_t raw[16];
    for (int i = 0; i < 16; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        raw[i] = (uint8_t)(seed >> 24);
    }
    char key[32], req[512];
    EVP_EncodeBlock((unsigned char *)key, raw, 16);
    int n = snprintf(req, sizeof(req),
                     "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                     "Sec-WebSocket-Version: 13\r\n\r\n",
                     ntohs(addr->sin_port), key);
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
        bench_die("send (upgrade)");
    char head[2048];
    size_t got = 0;
    for (;;) {
        if (got == sizeof(head) - 1)
            bench_fail("the upgrade answer is too long");
        ssize_t r = recv(fd, head + got, sizeof(head) - 1 - got, MSG_PEEK);
        if (r <= 0)
            bench_fail("the server closed the connection during the upgrade");
        head[got + (size_t)r] = '\0';
        char *end = strstr(head, "\r\n\r\n");
        size_t take = end != NULL ? (size_t)(end + 4 - head) - got : (size_t)r;
        if (recv(fd, head + got, take, 0) != (ssize_t)take)
            bench_die("recv (upgrade)");
        got += take;
        head[got] = '\0';
        if (end != NULL)
            break;
    }
    if (strncmp(head, "HTTP/1.1 101", 12) != 0) {
        fprintf(stderr, "%s: the upgrade was answered with: %.*s\n", bench_lg_name,
                (int)strcspn(head, "\r"), head);
        exit(1);
    }
    char want[64], val[128];
    unsigned char digest[SHA_DIGEST_LENGTH], cat[128];
    int clen = snprintf((char *)cat, sizeof(cat), "%s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", key);
    SHA1(cat, (size_t)clen, digest);
    EVP_EncodeBlock((unsigned char *)want, digest, SHA_DIGEST_LENGTH);
    if (!wsc_header(head, "Sec-WebSocket-Accept", val, sizeof(val)) || strcmp(val, want) != 0)
        bench_fail("the 101 has a wrong or no Sec-WebSocket-Accept");
    if (!wsc_header(head, "Upgrade", val, sizeof(val)) || strcasecmp(val, "websocket") != 0)
        bench_fail("the 101 has no Upgrade: websocket");
    return fd;
}

/* Writes a final masked binary frame of the n bytes at payload with the masking key into out
 * (room for n + 14); returns its length. */
static inline size_t wsc_frame(uint8_t *out, const uint8_t *payload, size_t n, uint32_t key)
{
    size_t h = 0;
    out[h++] = 0x82;
    if (n < 126) {
        out[h++] = (uint8_t)(0x80 | n);
    } else if (n <= 0xffff) {
        out[h++] = 0x80 | 126;
        out[h++] = (uint8_t)(n >> 8);
        out[h++] = (uint8_t)n;
    } else {
        out[h++] = 0x80 | 127;
        for (int i = 7; i >= 0; i--)
            out[h++] = (uint8_t)((uint64_t)n >> (8 * i));
    }
    uint8_t k[4] = {(uint8_t)(key >> 24), (uint8_t)(key >> 16), (uint8_t)(key >> 8), (uint8_t)key};
    memcpy(out + h, k, 4);
    h += 4;
    for (size_t i = 0; i < n; i++)
        out[h + i] = payload[i] ^ k[i & 3];
    return h + n;
}

/* The parser of the server's frames on one connection, fed the bytes as they come. */
typedef struct wsc_parser_s {
    uint8_t hdr[10];
    uint32_t hlen;  /* header bytes held */
    uint64_t left;  /* payload bytes of the current frame still to come */
    uint64_t off;   /* payload bytes of the current frame seen */
    bool in_frame;  /* the header is whole, the payload is coming */
    uint8_t opcode; /* of the current frame */
} wsc_parser_t;

/*
 * Feeds n bytes at p. For each run of payload bytes calls on_bytes(arg, frame offset, bytes,
 * len), and on_frame(arg, opcode, payload length) at each frame's end (empty frames too).
 * Fails the program on a masked frame or a fragment (the servers echo whole messages).
 */
static inline void wsc_feed(wsc_parser_t *ps, const uint8_t *p, size_t n,
                            void (*on_bytes)(void *, uint64_t, const uint8_t *, size_t),
                            void (*on_frame)(void *, uint8_t, uint64_t), void *arg)
{
    while (n > 0) {
        if (!ps->in_frame) {
            ps->hdr[ps->hlen++] = *p++;
            n--;
            if (ps->hlen < 2)
                continue;
            uint8_t len7 = ps->hdr[1] & 0x7f;
            uint32_t need = len7 < 126 ? 2 : len7 == 126 ? 4 : 10;
            if (ps->hlen < need)
                continue;
            if ((ps->hdr[0] & 0x80) == 0 || (ps->hdr[1] & 0x80) != 0)
                bench_fail("the server sent a fragment or a masked frame");
            uint64_t len = len7;
            if (len7 == 126)
                len = (uint64_t)ps->hdr[2] << 8 | ps->hdr[3];
            else if (len7 == 127)
                for (int i = 2; i < 10; i++)
                    len = len << 8 | ps->hdr[i];
            ps->opcode = ps->hdr[0] & 0x0f;
            ps->left = len;
            ps->off = 0;
            ps->hlen = 0;
            ps->in_frame = true;
        }
        size_t take = ps->left < n ? (size_t)ps->left : n;
        if (take > 0) {
            on_bytes(arg, ps->off, p, take);
            p += take;
            n -= take;
            ps->off += take;
            ps->left -= take;
        }
        if (ps->left == 0) {
            ps->in_frame = false;
            on_frame(arg, ps->opcode, ps->off);
        }
    }
}

#endif /* EDDY_BENCH_WS_CLIENT_H */
