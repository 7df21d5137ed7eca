/*
 * SHA-1 (FIPS 180-4), for the WebSocket handshake's Sec-WebSocket-Accept alone (RFC 6455
 * 4.2.2), where it authenticates nothing: it only shows the server read the key. A server
 * without TLS then never starts OpenSSL, whose libcrypto pages were 3.4 MB of such a
 * server's 6.6 MB resident memory (bench/ws).
 */
#include "codec/ws/internal.h"

#include <assert.h>
#include <string.h>

static uint32_t rol(uint32_t x, unsigned n)
{
    return (x << n) | (x >> (32 - n));
}

static uint32_t load_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* One 64-byte block into the state. */
static void sha1_block(uint32_t h[5], const uint8_t *p)
{
    uint32_t w[80];
    for (int i = 0; i < 16; i++) {
        w[i] = load_be32(p + 4 * i);
    }
    for (int i = 16; i < 80; i++) {
        w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20) {
            f = (b & c) | (~b & d);
            k = 0x5a827999;
        } else if (i < 40) {
            f = b ^ c ^ d;
            k = 0x6ed9eba1;
        } else if (i < 60) {
            f = (b & c) | (b & d) | (c & d);
            k = 0x8f1bbcdc;
        } else {
            f = b ^ c ^ d;
            k = 0xca62c1d6;
        }
        uint32_t t = rol(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rol(b, 30);
        b = a;
        a = t;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

void eddy__ws_sha1(const void *a, size_t an, const void *b, size_t bn, uint8_t out[20])
{
    uint32_t h[5] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
    uint8_t block[64];
    size_t used = 0;
    uint64_t bits = (uint64_t)(an + bn) * 8;
    const uint8_t *parts[2] = {a, b};
    size_t lens[2] = {an, bn};
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < lens[k]; i++) {
            block[used++] = parts[k][i];
            if (used == 64) {
                sha1_block(h, block);
                used = 0;
            }
        }
    }
    /* The padding: 0x80, zeros, and the length in bits, big endian, ending a block. */
    assert(used < 64); /* a full block was hashed as it filled */
    block[used++] = 0x80;
    if (used > 56) {
        memset(block + used, 0, 64 - used);
        sha1_block(h, block);
        used = 0;
    }
    assert(used <= 56);
    memset(block + used, 0, 56 - used);
    for (int i = 0; i < 8; i++) {
        block[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
    }
    sha1_block(h, block);
    for (int i = 0; i < 5; i++) {
        out[4 * i] = (uint8_t)(h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(h[i] >> 8);
        out[4 * i + 3] = (uint8_t)h[i];
    }
}
