/*
 * buffer.buf: the buffer operations of include/eddy/buffer.h (allocation, reference counts,
 * indexes, reads, writes, gets, sets, search, views, copies, messages).
 *
 * Most tests run three times: with the default allocator, with the unpooled one and with a
 * private pooled allocator made for the test (freed, and checked to free, in the teardown).
 * Every test ends with every buffer it made released and the live count back where it was.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>

#include <eddy/buffer.h>

#include "buffer/layer.h"
#include "support/abort_util.h"

#define KIB ((size_t)1024)
#define MIB (1024 * KIB)

/* The allocator a test runs with: NULL (the default), unpooled, or a private pool. */
static eddy_allocator_t *test_allocator(void **state)
{
    return *state;
}

static int use_unpooled(void **state)
{
    *state = eddy_allocator_unpooled();
    return *state == NULL ? -1 : 0;
}

static int use_private_pool(void **state)
{
    *state = eddy_pooled_allocator_new(NULL);
    return *state == NULL ? -1 : 0;
}

static int free_private_pool(void **state)
{
    int rc = eddy_allocator_free(*state);
    if (rc != 0) {
        print_error("eddy_allocator_free() returned %s\n", eddy_err_name(rc));
        return -1;
    }
    return 0;
}

static uint8_t pattern_byte(size_t i)
{
    return (uint8_t)(i * 31u + (i >> 9) + 7u);
}

static void fill_pattern(uint8_t *dst, size_t n, size_t start)
{
    for (size_t i = 0; i < n; i++) {
        dst[i] = pattern_byte(start + i);
    }
}

/* A buffer from a of capacity cap and max capacity max, holding the bytes of s. */
static eddy_buf_t *buf_holding(eddy_allocator_t *a, size_t cap, size_t max, const char *s)
{
    eddy_buf_t *b = eddy_buf_alloc(a, cap, max);
    assert_non_null(b);
    assert_int_equal(eddy_buf_write_bytes(b, s, strlen(s)), 0);
    return b;
}

static void assert_readable_bytes(const eddy_buf_t *b, const char *s)
{
    assert_int_equal(eddy_buf_readable(b), strlen(s));
    assert_memory_equal(eddy_buf_read_ptr(b), s, strlen(s));
}

/* The capacity bytes of b, read with absolute gets (indexes untouched). */
static void assert_all_bytes(const eddy_buf_t *b, const uint8_t *expect, size_t n)
{
    uint8_t got[64];
    assert_true(n <= sizeof(got));
    assert_int_equal(eddy_buf_capacity(b), n);
    assert_int_equal(eddy_buf_get_bytes(b, 0, got, n), 0);
    assert_memory_equal(got, expect, n);
}

/* ---------------------------------------------------------------------------------------
 * Allocation and growth
 */

static void test_alloc_with_zero_initial_capacity_grows_on_write(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = eddy_buf_alloc(a, 0, 1024);
    assert_non_null(b);
    assert_int_equal(eddy_buf_live_count(), live + 1);
    assert_int_equal(eddy_buf_refcnt(b), 1);
    assert_int_equal(eddy_buf_capacity(b), 0);
    assert_int_equal(eddy_buf_max_capacity(b), 1024);
    assert_int_equal(eddy_buf_reader_index(b), 0);
    assert_int_equal(eddy_buf_writer_index(b), 0);
    assert_int_equal(eddy_buf_readable(b), 0);
    assert_int_equal(eddy_buf_writable(b), 0);
    assert_int_equal(eddy_buf_max_writable(b), 1024);
    assert_false(eddy_buf_is_readable(b));

    assert_int_equal(eddy_buf_write_u8(b, 0xab), 0);
    assert_true(eddy_buf_capacity(b) >= 1);
    assert_true(eddy_buf_capacity(b) <= 1024);
    assert_int_equal(eddy_buf_writer_index(b), 1);
    assert_int_equal(eddy_buf_writable(b), eddy_buf_capacity(b) - 1);
    assert_int_equal(eddy_buf_max_writable(b), 1023);
    assert_true(eddy_buf_is_readable(b));
    assert_int_equal(eddy_buf_read_ptr(b)[0], 0xab);

    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_alloc_with_initial_above_max_returns_null(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    assert_null(eddy_buf_alloc(a, 11, 10));
    assert_null(eddy_buf_alloc(a, SIZE_MAX, 10));
    assert_int_equal(eddy_buf_live_count(), live);

    eddy_buf_t *b = eddy_buf_alloc(a, 10, 10);
    assert_non_null(b);
    assert_int_equal(eddy_buf_capacity(b), 10);
    assert_int_equal(eddy_buf_max_capacity(b), 10);
    assert_int_equal(eddy_buf_release(b), 1);

    eddy_buf_t *n = eddy_buf_new(0);
    assert_non_null(n);
    assert_int_equal(eddy_buf_capacity(n), 0);
    assert_int_equal(eddy_buf_max_capacity(n), EDDY_BUF_DEFAULT_MAX_CAPACITY);
    assert_int_equal(eddy_buf_release(n), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_write_grows_across_powers_of_two(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();
    size_t top = MIB + 1;
    uint8_t *expect = malloc(top);
    assert_non_null(expect);
    fill_pattern(expect, top, 0);

    eddy_buf_t *b = eddy_buf_alloc(a, 0, EDDY_BUF_DEFAULT_MAX_CAPACITY);
    assert_non_null(b);
    size_t grew = 0;
    for (size_t k = 0; k <= 20; k++) {
        size_t targets[3] = {((size_t)1 << k) - 1, (size_t)1 << k, ((size_t)1 << k) + 1};
        for (size_t t = 0; t < 3; t++) {
            size_t want = targets[t];
            size_t have = eddy_buf_writer_index(b);
            if (want <= have) {
                continue;
            }
            size_t cap_before = eddy_buf_capacity(b);
            assert_int_equal(eddy_buf_write_bytes(b, expect + have, want - have), 0);
            size_t cap = eddy_buf_capacity(b);
            assert_int_equal(eddy_buf_writer_index(b), want);
            assert_true(cap >= want);
            /* Doubling from 64 bytes never more than doubles what is needed. */
            assert_true(cap <= (want < 64 ? 64 : 2 * want));
            if (cap != cap_before) {
                grew++;
            }
            /* Everything written so far survived the moves. */
            assert_memory_equal(eddy_buf_read_ptr(b), expect, want);
        }
    }
    assert_true(grew >= 10);
    assert_int_equal(eddy_buf_readable(b), top);

    uint8_t last;
    assert_int_equal(eddy_buf_get_u8(b, top - 1, &last), 0);
    assert_int_equal(last, expect[top - 1]);

    assert_int_equal(eddy_buf_release(b), 1);
    free(expect);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_growth_past_four_mib_steps_by_four_mib(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = eddy_buf_alloc(a, 0, EDDY_BUF_DEFAULT_MAX_CAPACITY);
    assert_non_null(b);
    assert_int_equal(eddy_buf_write_u32(b, 0xfeedface), 0);
    assert_int_equal(eddy_buf_write_zero(b, 4 * MIB - 3), 0);
    assert_int_equal(eddy_buf_writer_index(b), 4 * MIB + 1);
    assert_true(eddy_buf_capacity(b) >= 4 * MIB + 1);
    assert_true(eddy_buf_capacity(b) <= 8 * MIB);
    assert_int_equal(eddy_buf_set_u8(b, 4 * MIB, 0x77), 0);

    assert_int_equal(eddy_buf_ensure_writable(b, 4 * MIB), 0);
    assert_true(eddy_buf_writable(b) >= 4 * MIB);
    assert_true(eddy_buf_capacity(b) <= 12 * MIB + 1);

    uint32_t head;
    uint8_t tail;
    assert_int_equal(eddy_buf_get_u32(b, 0, &head), 0);
    assert_int_equal(head, 0xfeedface);
    assert_int_equal(eddy_buf_get_u8(b, 4 * MIB, &tail), 0);
    assert_int_equal(tail, 0x77);

    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_growth_keeps_the_bytes_already_read(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    /* Read bytes stay in the buffer until discarded: the reader index may go back to them. */
    eddy_buf_t *b = buf_holding(a, 16, EDDY_BUF_DEFAULT_MAX_CAPACITY, "0123456789");
    assert_int_equal(eddy_buf_skip(b, 4), 0);
    assert_int_equal(eddy_buf_write_zero(b, 1000), 0);
    assert_true(eddy_buf_capacity(b) >= 1010);
    assert_int_equal(eddy_buf_reader_index(b), 4);
    assert_memory_equal(eddy_buf_read_ptr(b), "456789", 6);

    char out[10];
    assert_int_equal(eddy_buf_get_bytes(b, 0, out, 10), 0);
    assert_memory_equal(out, "0123456789", 10);
    assert_int_equal(eddy_buf_set_reader_index(b, 0), 0);
    assert_int_equal(eddy_buf_read_bytes(b, out, 10), 0);
    assert_memory_equal(out, "0123456789", 10);

    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_write_beyond_max_capacity_fails_and_changes_nothing(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = buf_holding(a, 8, 10, "abcdef");
    assert_int_equal(eddy_buf_capacity(b), 8);
    assert_int_equal(eddy_buf_set_u16(b, 6, 0xeeee), 0);
    assert_int_equal(eddy_buf_skip(b, 1), 0);
    const uint8_t expect[8] = {'a', 'b', 'c', 'd', 'e', 'f', 0xee, 0xee};
    eddy_buf_t *src = buf_holding(a, 16, 16, "0123456789");

    assert_int_equal(eddy_buf_write_u64(b, 1), EDDY_ECAPACITY);
    assert_int_equal(eddy_buf_write_u64_le(b, 1), EDDY_ECAPACITY);
    assert_int_equal(eddy_buf_write_bytes(b, "12345", 5), EDDY_ECAPACITY);
    assert_int_equal(eddy_buf_write_zero(b, 5), EDDY_ECAPACITY);
    /* 6 + (SIZE_MAX - 2) wraps to 3: must still be refused. */
    assert_int_equal(eddy_buf_write_zero(b, SIZE_MAX - 2), EDDY_ECAPACITY);
    assert_int_equal(eddy_buf_write_buf(b, src, 5), EDDY_ECAPACITY);
    assert_int_equal(eddy_buf_ensure_writable(b, 5), EDDY_ECAPACITY);
    assert_int_equal(eddy_buf_ensure_writable(b, SIZE_MAX), EDDY_ECAPACITY);

    assert_int_equal(eddy_buf_reader_index(b), 1);
    assert_int_equal(eddy_buf_writer_index(b), 6);
    assert_int_equal(eddy_buf_capacity(b), 8);
    assert_all_bytes(b, expect, 8);
    assert_readable_bytes(src, "0123456789");

    /* Exactly up to the max capacity works; one byte more does not. */
    assert_int_equal(eddy_buf_ensure_writable(b, 0), 0);
    assert_int_equal(eddy_buf_write_u32(b, 0x31323334), 0);
    assert_int_equal(eddy_buf_capacity(b), 10);
    assert_int_equal(eddy_buf_max_writable(b), 0);
    assert_int_equal(eddy_buf_write_u8(b, 'x'), EDDY_ECAPACITY);
    assert_int_equal(eddy_buf_write_u16(b, 1), EDDY_ECAPACITY);
    assert_int_equal(eddy_buf_write_u32_le(b, 1), EDDY_ECAPACITY);
    assert_int_equal(eddy_buf_write_buf(b, src, 1), EDDY_ECAPACITY);
    assert_int_equal(eddy_buf_writer_index(b), 10);
    assert_readable_bytes(b, "bcdef1234");
    assert_readable_bytes(src, "0123456789");

    assert_int_equal(eddy_buf_release(src), 1);
    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_ensure_writable_grows_only_when_needed(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = buf_holding(a, 16, 1000, "0123456789");
    assert_int_equal(eddy_buf_ensure_writable(b, 6), 0);
    assert_int_equal(eddy_buf_capacity(b), 16);

    assert_int_equal(eddy_buf_ensure_writable(b, 7), 0);
    assert_true(eddy_buf_writable(b) >= 7);
    assert_true(eddy_buf_capacity(b) <= 1000);
    assert_readable_bytes(b, "0123456789");

    assert_int_equal(eddy_buf_ensure_writable(b, 990), 0);
    assert_int_equal(eddy_buf_capacity(b), 1000);
    size_t cap = eddy_buf_capacity(b);
    assert_int_equal(eddy_buf_ensure_writable(b, 991), EDDY_ECAPACITY);
    assert_int_equal(eddy_buf_capacity(b), cap);
    assert_readable_bytes(b, "0123456789");

    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

/* ---------------------------------------------------------------------------------------
 * Integers and byte ranges
 */

static void test_write_integers_big_endian_lays_out_network_order(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = eddy_buf_alloc(a, 0, 64);
    assert_non_null(b);
    assert_int_equal(eddy_buf_write_u32(b, 0x01020304), 0);
    assert_memory_equal(eddy_buf_read_ptr(b), "\x01\x02\x03\x04", 4);

    assert_int_equal(eddy_buf_write_u8(b, 0x05), 0);
    assert_int_equal(eddy_buf_write_u16(b, 0x0607), 0);
    assert_int_equal(eddy_buf_write_u64(b, 0x08090a0b0c0d0e0fu), 0);
    assert_int_equal(eddy_buf_readable(b), 15);
    assert_memory_equal(eddy_buf_read_ptr(b),
                        "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f", 15);

    uint32_t v32;
    uint8_t v8;
    uint16_t v16;
    uint64_t v64;
    assert_int_equal(eddy_buf_read_u32(b, &v32), 0);
    assert_int_equal(v32, 0x01020304);
    assert_int_equal(eddy_buf_reader_index(b), 4);
    assert_int_equal(eddy_buf_read_u8(b, &v8), 0);
    assert_int_equal(v8, 0x05);
    assert_int_equal(eddy_buf_read_u16(b, &v16), 0);
    assert_int_equal(v16, 0x0607);
    assert_int_equal(eddy_buf_read_u64(b, &v64), 0);
    assert_int_equal(v64, 0x08090a0b0c0d0e0fu);
    assert_int_equal(eddy_buf_reader_index(b), 15);
    assert_false(eddy_buf_is_readable(b));

    /* Values with the top bit set survive (no sign extension). */
    assert_int_equal(eddy_buf_write_u64(b, 0xfedcba9876543210u), 0);
    assert_int_equal(eddy_buf_write_u16(b, 0x8001), 0);
    assert_int_equal(eddy_buf_read_u64(b, &v64), 0);
    assert_int_equal(v64, 0xfedcba9876543210u);
    assert_int_equal(eddy_buf_read_u16(b, &v16), 0);
    assert_int_equal(v16, 0x8001);

    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_write_integers_little_endian_reverses_bytes(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = eddy_buf_alloc(a, 0, 64);
    assert_non_null(b);
    assert_int_equal(eddy_buf_write_u32_le(b, 0x01020304), 0);
    assert_memory_equal(eddy_buf_read_ptr(b), "\x04\x03\x02\x01", 4);
    assert_int_equal(eddy_buf_write_u16_le(b, 0x0506), 0);
    assert_int_equal(eddy_buf_write_u64_le(b, 0x0708090a0b0c0d0eu), 0);
    assert_memory_equal(eddy_buf_read_ptr(b),
                        "\x04\x03\x02\x01\x06\x05\x0e\x0d\x0c\x0b\x0a\x09\x08\x07", 14);

    uint32_t v32;
    uint16_t v16;
    uint64_t v64;
    assert_int_equal(eddy_buf_read_u32_le(b, &v32), 0);
    assert_int_equal(v32, 0x01020304);
    assert_int_equal(eddy_buf_read_u16_le(b, &v16), 0);
    assert_int_equal(v16, 0x0506);
    assert_int_equal(eddy_buf_read_u64_le(b, &v64), 0);
    assert_int_equal(v64, 0x0708090a0b0c0d0eu);

    /* The same bytes read in the other order. */
    assert_int_equal(eddy_buf_write_u32_le(b, 0x01020304), 0);
    assert_int_equal(eddy_buf_write_u16(b, 0x0102), 0);
    assert_int_equal(eddy_buf_write_u64(b, 0x0102030405060708u), 0);
    assert_int_equal(eddy_buf_read_u32(b, &v32), 0);
    assert_int_equal(v32, 0x04030201);
    assert_int_equal(eddy_buf_read_u16_le(b, &v16), 0);
    assert_int_equal(v16, 0x0201);
    assert_int_equal(eddy_buf_read_u64_le(b, &v64), 0);
    assert_int_equal(v64, 0x0807060504030201u);
    assert_false(eddy_buf_is_readable(b));

    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_get_and_set_integers_leave_the_indexes_alone(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = eddy_buf_alloc(a, 32, 32);
    assert_non_null(b);
    assert_int_equal(eddy_buf_write_zero(b, 2), 0);
    assert_int_equal(eddy_buf_skip(b, 1), 0);

    /* Sets reach past the writer index: the range is [0, capacity). */
    assert_int_equal(eddy_buf_set_u8(b, 0, 0x01), 0);
    assert_int_equal(eddy_buf_set_u16(b, 1, 0x0203), 0);
    assert_int_equal(eddy_buf_set_u32(b, 3, 0x04050607), 0);
    assert_int_equal(eddy_buf_set_u64(b, 7, 0x08090a0b0c0d0e0fu), 0);
    assert_int_equal(eddy_buf_set_u16_le(b, 15, 0x1110), 0);
    assert_int_equal(eddy_buf_set_u32_le(b, 17, 0x15141312), 0);
    assert_int_equal(eddy_buf_set_u64_le(b, 21, 0x1d1c1b1a19181716u), 0);
    assert_int_equal(eddy_buf_reader_index(b), 1);
    assert_int_equal(eddy_buf_writer_index(b), 2);

    uint8_t raw[29];
    assert_int_equal(eddy_buf_get_bytes(b, 0, raw, sizeof(raw)), 0);
    for (size_t i = 0; i < sizeof(raw); i++) {
        assert_int_equal(raw[i], i + 1);
    }

    uint8_t v8;
    uint16_t v16;
    uint32_t v32;
    uint64_t v64;
    assert_int_equal(eddy_buf_get_u8(b, 0, &v8), 0);
    assert_int_equal(v8, 0x01);
    assert_int_equal(eddy_buf_get_u16(b, 1, &v16), 0);
    assert_int_equal(v16, 0x0203);
    assert_int_equal(eddy_buf_get_u32(b, 3, &v32), 0);
    assert_int_equal(v32, 0x04050607);
    assert_int_equal(eddy_buf_get_u64(b, 7, &v64), 0);
    assert_int_equal(v64, 0x08090a0b0c0d0e0fu);
    assert_int_equal(eddy_buf_get_u16_le(b, 15, &v16), 0);
    assert_int_equal(v16, 0x1110);
    assert_int_equal(eddy_buf_get_u32_le(b, 17, &v32), 0);
    assert_int_equal(v32, 0x15141312);
    assert_int_equal(eddy_buf_get_u64_le(b, 21, &v64), 0);
    assert_int_equal(v64, 0x1d1c1b1a19181716u);
    assert_int_equal(eddy_buf_get_u16(b, 15, &v16), 0);
    assert_int_equal(v16, 0x1011);
    assert_int_equal(eddy_buf_get_u32(b, 17, &v32), 0);
    assert_int_equal(v32, 0x12131415);
    assert_int_equal(eddy_buf_get_u64(b, 21, &v64), 0);
    assert_int_equal(v64, 0x161718191a1b1c1du);
    assert_int_equal(eddy_buf_get_u16_le(b, 1, &v16), 0);
    assert_int_equal(v16, 0x0302);
    assert_int_equal(eddy_buf_get_u32_le(b, 3, &v32), 0);
    assert_int_equal(v32, 0x07060504);
    assert_int_equal(eddy_buf_get_u64_le(b, 7, &v64), 0);
    assert_int_equal(v64, 0x0f0e0d0c0b0a0908u);

    assert_int_equal(eddy_buf_set_bytes(b, 29, "xyz", 3), 0);
    char tail[3];
    assert_int_equal(eddy_buf_get_bytes(b, 29, tail, 3), 0);
    assert_memory_equal(tail, "xyz", 3);

    assert_int_equal(eddy_buf_reader_index(b), 1);
    assert_int_equal(eddy_buf_writer_index(b), 2);
    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_write_and_read_byte_ranges(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = eddy_buf_alloc(a, 4, 256);
    assert_non_null(b);
    assert_int_equal(eddy_buf_write_bytes(b, "hello", 5), 0);
    assert_int_equal(eddy_buf_write_bytes(b, "", 0), 0);
    assert_int_equal(eddy_buf_write_bytes(b, ", world", 7), 0);
    assert_readable_bytes(b, "hello, world");

    char out[16] = {0};
    assert_int_equal(eddy_buf_read_bytes(b, out, 5), 0);
    assert_memory_equal(out, "hello", 5);
    assert_int_equal(eddy_buf_read_bytes(b, out, 0), 0);
    assert_int_equal(eddy_buf_reader_index(b), 5);
    assert_int_equal(eddy_buf_read_bytes(b, out, 7), 0);
    assert_memory_equal(out, ", world", 7);
    assert_false(eddy_buf_is_readable(b));

    assert_int_equal(eddy_buf_set_bytes(b, 0, "J", 1), 0);
    assert_int_equal(eddy_buf_get_bytes(b, 0, out, 12), 0);
    assert_memory_equal(out, "Jello, world", 12);
    assert_int_equal(eddy_buf_reader_index(b), 12);

    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_write_zero_appends_zero_bytes(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = eddy_buf_alloc(a, 16, 64);
    assert_non_null(b);
    uint8_t ones[16];
    memset(ones, 0xff, sizeof(ones));
    assert_int_equal(eddy_buf_set_bytes(b, 0, ones, sizeof(ones)), 0);
    assert_int_equal(eddy_buf_write_u8(b, 0x11), 0);
    assert_int_equal(eddy_buf_write_zero(b, 10), 0);
    assert_int_equal(eddy_buf_write_u8(b, 0x22), 0);
    assert_int_equal(eddy_buf_write_zero(b, 0), 0);
    assert_int_equal(eddy_buf_readable(b), 12);
    assert_memory_equal(eddy_buf_read_ptr(b), "\x11\0\0\0\0\0\0\0\0\0\0\x22", 12);
    /* It grows like any write. */
    assert_int_equal(eddy_buf_write_zero(b, 40), 0);
    assert_int_equal(eddy_buf_readable(b), 52);
    for (size_t i = 12; i < 52; i++) {
        assert_int_equal(eddy_buf_read_ptr(b)[i], 0);
    }

    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_reads_past_the_writer_index_fail_without_moving_the_reader(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = buf_holding(a, 32, 32, "abc");
    eddy_buf_t *dst = eddy_buf_alloc(a, 0, 64);
    assert_non_null(dst);
    uint16_t v16 = 0x5a5a;
    uint32_t v32 = 0x5a5a5a5a;
    uint64_t v64 = 0x5a5a5a5a5a5a5a5au;
    char out[8] = "ZZZZZZZ";

    /* The capacity has room; the readable bytes do not. */
    assert_int_equal(eddy_buf_read_u32(b, &v32), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_read_u32_le(b, &v32), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_read_u64(b, &v64), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_read_u64_le(b, &v64), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_read_bytes(b, out, 4), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_read_bytes(b, out, SIZE_MAX), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_read_buf(b, dst, 4), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_skip(b, 4), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_skip(b, SIZE_MAX), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_reader_index(b), 0);
    assert_int_equal(v32, 0x5a5a5a5a);
    assert_int_equal(v64, 0x5a5a5a5a5a5a5a5au);
    assert_memory_equal(out, "ZZZZZZZ", 8);
    assert_int_equal(eddy_buf_readable(dst), 0);

    assert_int_equal(eddy_buf_skip(b, 2), 0);
    assert_int_equal(eddy_buf_read_u16(b, &v16), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_read_u16_le(b, &v16), EDDY_EBOUNDS);
    assert_int_equal(v16, 0x5a5a);
    uint8_t v8 = 0;
    assert_int_equal(eddy_buf_read_u8(b, &v8), 0);
    assert_int_equal(v8, 'c');
    assert_int_equal(eddy_buf_read_u8(b, &v8), EDDY_EBOUNDS);
    assert_int_equal(v8, 'c');
    assert_int_equal(eddy_buf_reader_index(b), 3);
    assert_int_equal(eddy_buf_writer_index(b), 3);

    assert_int_equal(eddy_buf_release(dst), 1);
    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_get_and_set_near_capacity_check_the_width(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = eddy_buf_alloc(a, 16, 16);
    assert_non_null(b);
    assert_int_equal(eddy_buf_capacity(b), 16);
    uint8_t expect[16];
    memset(expect, 0x5a, sizeof(expect));
    assert_int_equal(eddy_buf_set_bytes(b, 0, expect, 16), 0);

    /* i + width > capacity fails and writes nothing. */
    assert_int_equal(eddy_buf_set_u8(b, 16, 1), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_set_u16(b, 15, 1), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_set_u16_le(b, 15, 1), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_set_u32(b, 13, 1), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_set_u32_le(b, 13, 1), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_set_u64(b, 9, 1), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_set_u64_le(b, 9, 1), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_set_bytes(b, 13, "1234", 4), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_set_bytes(b, 17, "", 0), EDDY_EBOUNDS);
    assert_all_bytes(b, expect, 16);

    uint8_t v8 = 7;
    uint16_t v16 = 7;
    uint32_t v32 = 7;
    uint64_t v64 = 7;
    uint8_t out[4] = {7, 7, 7, 7};
    assert_int_equal(eddy_buf_get_u8(b, 16, &v8), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_get_u16(b, 15, &v16), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_get_u16_le(b, 15, &v16), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_get_u32(b, 13, &v32), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_get_u32_le(b, 13, &v32), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_get_u64(b, 9, &v64), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_get_u64_le(b, 9, &v64), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_get_bytes(b, 13, out, 4), EDDY_EBOUNDS);
    assert_int_equal(v8 + v16 + v32 + v64, 28);
    assert_memory_equal(out, "\x07\x07\x07\x07", 4);

    /* i == capacity - width works. */
    assert_int_equal(eddy_buf_set_u8(b, 15, 0xa1), 0);
    assert_int_equal(eddy_buf_get_u8(b, 15, &v8), 0);
    assert_int_equal(v8, 0xa1);
    assert_int_equal(eddy_buf_set_u16(b, 14, 0xa1a2), 0);
    assert_int_equal(eddy_buf_get_u16(b, 14, &v16), 0);
    assert_int_equal(v16, 0xa1a2);
    assert_int_equal(eddy_buf_set_u16_le(b, 14, 0xa1a2), 0);
    assert_int_equal(eddy_buf_get_u16_le(b, 14, &v16), 0);
    assert_int_equal(v16, 0xa1a2);
    assert_int_equal(eddy_buf_set_u32(b, 12, 0xb1b2b3b4), 0);
    assert_int_equal(eddy_buf_get_u32(b, 12, &v32), 0);
    assert_int_equal(v32, 0xb1b2b3b4);
    assert_int_equal(eddy_buf_set_u32_le(b, 12, 0xb1b2b3b4), 0);
    assert_int_equal(eddy_buf_get_u32_le(b, 12, &v32), 0);
    assert_int_equal(v32, 0xb1b2b3b4);
    assert_int_equal(eddy_buf_set_u64(b, 8, 0xc1c2c3c4c5c6c7c8u), 0);
    assert_int_equal(eddy_buf_get_u64(b, 8, &v64), 0);
    assert_int_equal(v64, 0xc1c2c3c4c5c6c7c8u);
    assert_int_equal(eddy_buf_set_u64_le(b, 8, 0xc1c2c3c4c5c6c7c8u), 0);
    assert_int_equal(eddy_buf_get_u64_le(b, 8, &v64), 0);
    assert_int_equal(v64, 0xc1c2c3c4c5c6c7c8u);
    assert_int_equal(eddy_buf_set_bytes(b, 12, "wxyz", 4), 0);
    assert_int_equal(eddy_buf_get_bytes(b, 12, out, 4), 0);
    assert_memory_equal(out, "wxyz", 4);

    assert_int_equal(eddy_buf_reader_index(b), 0);
    assert_int_equal(eddy_buf_writer_index(b), 0);
    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_get_and_set_at_huge_indexes_do_not_overflow(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = eddy_buf_alloc(a, 16, 16);
    assert_non_null(b);
    uint8_t expect[16];
    memset(expect, 0x3c, sizeof(expect));
    assert_int_equal(eddy_buf_set_bytes(b, 0, expect, 16), 0);
    eddy_buf_t *other = buf_holding(a, 16, 16, "0123456789");

    /* i + width wraps around to a small number for these. */
    assert_int_equal(eddy_buf_set_u32(b, SIZE_MAX - 1, 1), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_set_u32(b, SIZE_MAX - 3, 1), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_set_u32_le(b, SIZE_MAX - 2, 1), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_set_u64(b, SIZE_MAX - 7, 1), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_set_u64_le(b, SIZE_MAX - 4, 1), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_set_u16(b, SIZE_MAX, 1), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_set_u16_le(b, SIZE_MAX, 1), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_set_u8(b, SIZE_MAX, 1), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_set_bytes(b, SIZE_MAX, "ab", 2), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_set_bytes(b, 4, "ab", SIZE_MAX - 3), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_set_buf(b, SIZE_MAX - 1, other, 2), EDDY_EBOUNDS);
    assert_all_bytes(b, expect, 16);

    uint8_t v8;
    uint16_t v16;
    uint32_t v32;
    uint64_t v64;
    uint8_t out[4];
    assert_int_equal(eddy_buf_get_u32(b, SIZE_MAX - 1, &v32), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_get_u32(b, SIZE_MAX - 3, &v32), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_get_u32_le(b, SIZE_MAX - 2, &v32), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_get_u64(b, SIZE_MAX - 7, &v64), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_get_u64_le(b, SIZE_MAX - 4, &v64), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_get_u16(b, SIZE_MAX, &v16), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_get_u16_le(b, SIZE_MAX, &v16), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_get_u8(b, SIZE_MAX, &v8), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_get_bytes(b, SIZE_MAX, out, 2), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_get_bytes(b, 4, out, SIZE_MAX - 3), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_get_buf(b, SIZE_MAX - 1, other, 2), EDDY_EBOUNDS);
    int rc = eddy_buf_get_buf(b, 2, other, SIZE_MAX - 1);
    assert_true(rc == EDDY_EBOUNDS || rc == EDDY_ECAPACITY);
    assert_readable_bytes(other, "0123456789");

    assert_int_equal(eddy_buf_release(other), 1);
    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_write_buf_and_read_buf_move_bytes_between_buffers(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *src = buf_holding(a, 8, 8, "abcdefgh");
    eddy_buf_t *dst = eddy_buf_alloc(a, 0, 64);
    assert_non_null(dst);

    assert_int_equal(eddy_buf_write_buf(dst, src, 3), 0);
    assert_readable_bytes(dst, "abc");
    assert_readable_bytes(src, "defgh");

    assert_int_equal(eddy_buf_write_buf(dst, src, 6), EDDY_EBOUNDS);
    assert_readable_bytes(dst, "abc");
    assert_readable_bytes(src, "defgh");

    assert_int_equal(eddy_buf_read_buf(src, dst, 5), 0);
    assert_readable_bytes(dst, "abcdefgh");
    assert_int_equal(eddy_buf_readable(src), 0);
    assert_int_equal(eddy_buf_read_buf(src, dst, 1), EDDY_EBOUNDS);
    assert_readable_bytes(dst, "abcdefgh");

    /* A destination that cannot grow refuses, and neither buffer changes. */
    eddy_buf_t *small = buf_holding(a, 4, 4, "xy");
    assert_int_equal(eddy_buf_write_buf(small, dst, 3), EDDY_ECAPACITY);
    assert_true(eddy_buf_read_buf(dst, small, 3) < 0);
    assert_readable_bytes(small, "xy");
    assert_readable_bytes(dst, "abcdefgh");
    assert_int_equal(eddy_buf_read_buf(dst, small, 2), 0);
    assert_readable_bytes(small, "xyab");
    assert_readable_bytes(dst, "cdefgh");
    assert_int_equal(eddy_buf_release(small), 1);

    assert_int_equal(eddy_buf_release(dst), 1);
    assert_int_equal(eddy_buf_release(src), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_get_buf_and_set_buf_leave_the_source_indexes_alone(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = buf_holding(a, 8, 8, "abcdefgh");
    assert_int_equal(eddy_buf_skip(b, 8), 0);
    eddy_buf_t *dst = eddy_buf_alloc(a, 0, 64);
    assert_non_null(dst);

    /* get_buf copies absolute bytes (even already read ones) to dst's writer index. */
    assert_int_equal(eddy_buf_get_buf(b, 1, dst, 4), 0);
    assert_readable_bytes(dst, "bcde");
    assert_int_equal(eddy_buf_get_buf(b, 4, dst, 4), 0);
    assert_readable_bytes(dst, "bcdeefgh");
    assert_int_equal(eddy_buf_get_buf(b, 5, dst, 4), EDDY_EBOUNDS);
    assert_readable_bytes(dst, "bcdeefgh");
    assert_int_equal(eddy_buf_reader_index(b), 8);
    assert_int_equal(eddy_buf_writer_index(b), 8);

    eddy_buf_t *small = buf_holding(a, 4, 4, "xyz");
    assert_int_equal(eddy_buf_get_buf(b, 0, small, 2), EDDY_ECAPACITY);
    assert_readable_bytes(small, "xyz");

    /* set_buf copies src's readable bytes, from its reader index, and leaves it there. */
    assert_int_equal(eddy_buf_set_buf(b, 1, small, 3), 0);
    assert_int_equal(eddy_buf_set_reader_index(b, 0), 0);
    assert_readable_bytes(b, "axyzefgh");
    assert_readable_bytes(small, "xyz");
    assert_int_equal(eddy_buf_skip(small, 1), 0);
    assert_int_equal(eddy_buf_set_buf(b, 6, small, 2), 0);
    assert_readable_bytes(b, "axyzefyz");
    assert_int_equal(eddy_buf_set_buf(b, 0, small, 3), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_set_buf(b, 7, small, 2), EDDY_EBOUNDS);
    assert_readable_bytes(b, "axyzefyz");
    assert_readable_bytes(small, "yz");

    assert_int_equal(eddy_buf_release(small), 1);
    assert_int_equal(eddy_buf_release(dst), 1);
    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

/* ---------------------------------------------------------------------------------------
 * Indexes
 */

static void test_set_reader_and_writer_index_check_bounds(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = buf_holding(a, 16, 16, "01234567");
    assert_int_equal(eddy_buf_set_reader_index(b, 9), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_set_reader_index(b, SIZE_MAX), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_reader_index(b), 0);
    assert_int_equal(eddy_buf_set_reader_index(b, 8), 0);
    assert_int_equal(eddy_buf_readable(b), 0);
    assert_int_equal(eddy_buf_set_reader_index(b, 0), 0);
    assert_readable_bytes(b, "01234567");

    assert_int_equal(eddy_buf_set_writer_index(b, 17), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_set_writer_index(b, SIZE_MAX), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_writer_index(b), 8);
    assert_int_equal(eddy_buf_set_writer_index(b, 16), 0);
    assert_int_equal(eddy_buf_writable(b), 0);

    assert_int_equal(eddy_buf_set_reader_index(b, 4), 0);
    assert_int_equal(eddy_buf_set_writer_index(b, 3), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_writer_index(b), 16);
    assert_int_equal(eddy_buf_set_writer_index(b, 6), 0);
    assert_readable_bytes(b, "45");
    assert_int_equal(eddy_buf_set_writer_index(b, 4), 0);
    assert_false(eddy_buf_is_readable(b));
    assert_int_equal(eddy_buf_set_reader_index(b, 5), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_reader_index(b), 4);

    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_skip_advances_the_reader_over_readable_bytes(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = buf_holding(a, 16, 16, "0123456789");
    assert_int_equal(eddy_buf_skip(b, 0), 0);
    assert_int_equal(eddy_buf_skip(b, 3), 0);
    assert_readable_bytes(b, "3456789");
    assert_int_equal(eddy_buf_skip(b, 8), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_reader_index(b), 3);
    assert_int_equal(eddy_buf_skip(b, 7), 0);
    assert_int_equal(eddy_buf_reader_index(b), 10);
    assert_int_equal(eddy_buf_skip(b, 1), EDDY_EBOUNDS);

    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_write_ptr_and_produce_append_in_place(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = eddy_buf_alloc(a, 0, 256);
    assert_non_null(b);
    assert_int_equal(eddy_buf_ensure_writable(b, 10), 0);
    assert_true(eddy_buf_writable(b) >= 10);
    uint8_t *w = eddy_buf_write_ptr(b);
    assert_ptr_equal(w, eddy_buf_read_ptr(b));
    memcpy(w, "hello", 5);
    assert_int_equal(eddy_buf_produce(b, 5), 0);
    assert_int_equal(eddy_buf_writer_index(b), 5);
    assert_ptr_equal(eddy_buf_write_ptr(b), w + 5);
    assert_readable_bytes(b, "hello");

    size_t writable = eddy_buf_writable(b);
    assert_int_equal(eddy_buf_produce(b, writable + 1), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_produce(b, SIZE_MAX), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_writer_index(b), 5);
    assert_int_equal(eddy_buf_produce(b, 0), 0);
    assert_int_equal(eddy_buf_writer_index(b), 5);

    memcpy(eddy_buf_write_ptr(b), "!", 1);
    assert_int_equal(eddy_buf_produce(b, 1), 0);
    assert_readable_bytes(b, "hello!");
    assert_int_equal(eddy_buf_produce(b, eddy_buf_writable(b)), 0);
    assert_int_equal(eddy_buf_writable(b), 0);
    assert_int_equal(eddy_buf_writer_index(b), eddy_buf_capacity(b));

    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_clear_resets_the_indexes_and_keeps_the_memory(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = buf_holding(a, 32, 64, "0123456789");
    assert_int_equal(eddy_buf_skip(b, 4), 0);
    const uint8_t *base = eddy_buf_read_ptr(b) - 4;
    size_t cap = eddy_buf_capacity(b);

    eddy_buf_clear(b);
    assert_int_equal(eddy_buf_reader_index(b), 0);
    assert_int_equal(eddy_buf_writer_index(b), 0);
    assert_int_equal(eddy_buf_capacity(b), cap);
    assert_int_equal(eddy_buf_max_capacity(b), 64);
    assert_ptr_equal(eddy_buf_read_ptr(b), base);
    assert_int_equal(eddy_buf_write_bytes(b, "xy", 2), 0);
    assert_readable_bytes(b, "xy");

    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_discard_read_bytes_moves_readable_bytes_to_zero(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = buf_holding(a, 16, 16, "0123456789");
    const uint8_t *base = eddy_buf_read_ptr(b);

    /* Nothing read: nothing moves. */
    eddy_buf_discard_read_bytes(b);
    assert_int_equal(eddy_buf_reader_index(b), 0);
    assert_readable_bytes(b, "0123456789");

    assert_int_equal(eddy_buf_skip(b, 4), 0);
    eddy_buf_discard_read_bytes(b);
    assert_int_equal(eddy_buf_reader_index(b), 0);
    assert_int_equal(eddy_buf_writer_index(b), 6);
    assert_int_equal(eddy_buf_capacity(b), 16);
    assert_ptr_equal(eddy_buf_read_ptr(b), base);
    assert_readable_bytes(b, "456789");
    assert_int_equal(eddy_buf_writable(b), 10);
    assert_int_equal(eddy_buf_write_bytes(b, "abcdefghij", 10), 0);
    assert_readable_bytes(b, "456789abcdefghij");

    /* Everything read: both indexes go to 0. */
    assert_int_equal(eddy_buf_skip(b, 16), 0);
    eddy_buf_discard_read_bytes(b);
    assert_int_equal(eddy_buf_reader_index(b), 0);
    assert_int_equal(eddy_buf_writer_index(b), 0);
    assert_int_equal(eddy_buf_writable(b), 16);

    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

/* ---------------------------------------------------------------------------------------
 * Search
 */

static void test_find_returns_the_first_match_in_a_range(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    /* h0 e1 l2 l3 o4 ,5 _6 w7 o8 r9 l10 d11 \n12 */
    eddy_buf_t *b = buf_holding(a, 32, 32, "hello, world\n");
    size_t wr = eddy_buf_writer_index(b);
    assert_int_equal(eddy_buf_set_u8(b, 20, 'Q'), 0);

    assert_int_equal(eddy_buf_find(b, 0, wr, 'h'), 0);
    assert_int_equal(eddy_buf_find(b, 0, wr, 'o'), 4);
    assert_int_equal(eddy_buf_find(b, 5, wr, 'o'), 8);
    assert_int_equal(eddy_buf_find(b, 0, wr, '\n'), 12);
    assert_int_equal(eddy_buf_find(b, 12, wr, '\n'), 12);
    assert_int_equal(eddy_buf_find(b, 5, 8, 'o'), EDDY_ENOENT);
    assert_int_equal(eddy_buf_find(b, 5, 9, 'o'), 8);
    assert_int_equal(eddy_buf_find(b, 0, wr, 'z'), EDDY_ENOENT);
    assert_int_equal(eddy_buf_find(b, wr, wr, 'h'), EDDY_ENOENT);
    /* Bytes past the writer index are not searched, even within the capacity. */
    assert_int_equal(eddy_buf_find(b, 0, wr, 'Q'), EDDY_ENOENT);

    assert_int_equal(eddy_buf_find(b, 0, wr + 1, 'h'), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_find(b, 0, 21, 'Q'), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_find(b, wr + 1, wr + 1, 'h'), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_find(b, 0, SIZE_MAX, 'h'), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_find(b, SIZE_MAX, SIZE_MAX, 'h'), EDDY_EBOUNDS);
    assert_true(eddy_buf_find(b, 6, 3, 'l') < 0);

    /* Indexes are absolute: bytes before the reader index are found too. */
    assert_int_equal(eddy_buf_skip(b, 5), 0);
    assert_int_equal(eddy_buf_find(b, 0, wr, 'h'), 0);
    assert_int_equal(eddy_buf_reader_index(b), 5);

    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_find_bytes_returns_the_first_occurrence_of_a_needle(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = buf_holding(a, 32, 32, "abcabcabd");
    size_t wr = eddy_buf_writer_index(b);
    assert_int_equal(eddy_buf_set_bytes(b, 9, "XYZ", 3), 0);

    assert_int_equal(eddy_buf_find_bytes(b, 0, wr, "abc", 3), 0);
    assert_int_equal(eddy_buf_find_bytes(b, 1, wr, "abc", 3), 3);
    assert_int_equal(eddy_buf_find_bytes(b, 0, wr, "abd", 3), 6);
    assert_int_equal(eddy_buf_find_bytes(b, 0, wr, "d", 1), 8);
    assert_int_equal(eddy_buf_find_bytes(b, 0, wr, "abcabcabd", 9), 0);
    assert_int_equal(eddy_buf_find_bytes(b, 0, wr, "abx", 3), EDDY_ENOENT);
    assert_int_equal(eddy_buf_find_bytes(b, 0, wr, "abcabcabdX", 10), EDDY_ENOENT);
    /* A match must end within the range, and the range ends at the writer index. */
    assert_int_equal(eddy_buf_find_bytes(b, 0, 8, "abd", 3), EDDY_ENOENT);
    assert_int_equal(eddy_buf_find_bytes(b, 0, wr, "dX", 2), EDDY_ENOENT);
    assert_int_equal(eddy_buf_find_bytes(b, 4, 7, "cab", 3), EDDY_ENOENT);
    assert_int_equal(eddy_buf_find_bytes(b, 5, 8, "cab", 3), 5);

    assert_int_equal(eddy_buf_find_bytes(b, 0, wr + 1, "abc", 3), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_find_bytes(b, wr + 1, wr + 2, "a", 1), EDDY_EBOUNDS);
    assert_int_equal(eddy_buf_find_bytes(b, 2, SIZE_MAX, "a", 1), EDDY_EBOUNDS);
    assert_true(eddy_buf_find_bytes(b, 6, 2, "ab", 2) < 0);

    /* The header leaves the empty needle open: the start of the range or an error. */
    int64_t r = eddy_buf_find_bytes(b, 2, wr, "", 0);
    assert_true(r == 2 || r < 0);

    eddy_buf_t *c = buf_holding(a, 16, 16, "aaab");
    assert_int_equal(eddy_buf_find_bytes(c, 0, 4, "aab", 3), 1);
    assert_int_equal(eddy_buf_find_bytes(c, 0, 4, "ab", 2), 2);
    assert_int_equal(eddy_buf_find_bytes(c, 0, 4, "aaaa", 4), EDDY_ENOENT);

    assert_int_equal(eddy_buf_release(c), 1);
    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

/* ---------------------------------------------------------------------------------------
 * Views
 */

static void test_slice_views_a_range_of_the_parent_memory(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = buf_holding(a, 16, 16, "0123456789");
    assert_int_equal(eddy_buf_skip(b, 1), 0);
    const uint8_t *base = eddy_buf_read_ptr(b) - 1;

    eddy_buf_t *s = eddy_buf_slice(b, 2, 5);
    assert_non_null(s);
    assert_int_equal(eddy_buf_live_count(), live + 1);
    assert_int_equal(eddy_buf_reader_index(s), 0);
    assert_int_equal(eddy_buf_writer_index(s), 5);
    assert_int_equal(eddy_buf_capacity(s), 5);
    assert_ptr_equal(eddy_buf_read_ptr(s), base + 2);
    assert_readable_bytes(s, "23456");
    assert_ptr_equal(eddy_buf_allocator(s), eddy_buf_allocator(b));
    assert_int_equal(eddy_buf_refcnt(s), eddy_buf_refcnt(b));

    /* Writes show through both ways; indexes stay separate. */
    assert_int_equal(eddy_buf_set_u8(s, 0, 'X'), 0);
    assert_int_equal(eddy_buf_set_u8(b, 6, 'Y'), 0);
    assert_readable_bytes(s, "X345Y");
    assert_readable_bytes(b, "1X345Y789");
    uint8_t v;
    assert_int_equal(eddy_buf_read_u8(s, &v), 0);
    assert_int_equal(v, 'X');
    assert_int_equal(eddy_buf_reader_index(b), 1);

    /* A slice may reach past the parent's writer index, not past its capacity. */
    eddy_buf_t *end = eddy_buf_slice(b, 12, 4);
    assert_non_null(end);
    assert_int_equal(eddy_buf_readable(end), 4);
    eddy_buf_t *empty = eddy_buf_slice(b, 16, 0);
    assert_non_null(empty);
    assert_int_equal(eddy_buf_readable(empty), 0);
    assert_null(eddy_buf_slice(b, 14, 3));
    assert_null(eddy_buf_slice(b, 17, 0));
    assert_null(eddy_buf_slice(b, SIZE_MAX, 2));
    assert_null(eddy_buf_slice(b, 2, SIZE_MAX));
    assert_null(eddy_buf_retained_slice(b, 14, 3));
    assert_null(eddy_buf_retained_slice(b, 2, SIZE_MAX));
    assert_int_equal(eddy_buf_refcnt(b), 1);

    /* Plain views go with their parent. */
    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_slice_of_a_slice_views_the_root_memory(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = buf_holding(a, 16, 16, "0123456789abcdef");
    eddy_buf_t *s1 = eddy_buf_slice(b, 2, 8);
    assert_non_null(s1);
    eddy_buf_t *s2 = eddy_buf_slice(s1, 3, 4);
    assert_non_null(s2);
    assert_readable_bytes(s2, "5678");
    assert_ptr_equal(eddy_buf_read_ptr(s2), eddy_buf_read_ptr(b) + 5);
    assert_null(eddy_buf_slice(s1, 5, 4));
    assert_null(eddy_buf_slice(s2, 1, 4));

    assert_int_equal(eddy_buf_set_bytes(s2, 1, "XY", 2), 0);
    assert_readable_bytes(b, "012345XY89abcdef");
    assert_readable_bytes(s1, "2345XY89");

    /* Their count is the root's. */
    assert_int_equal(eddy_buf_refcnt(s2), 1);
    assert_ptr_equal(eddy_buf_retain(s2), s2);
    assert_int_equal(eddy_buf_refcnt(b), 2);
    assert_int_equal(eddy_buf_refcnt(s1), 2);
    assert_int_equal(eddy_buf_release(s1), 0);
    assert_int_equal(eddy_buf_refcnt(b), 1);

    /* A retained slice of a slice keeps the root alive. */
    eddy_buf_t *r = eddy_buf_retained_slice(s2, 0, 2);
    assert_non_null(r);
    assert_int_equal(eddy_buf_refcnt(b), 2);
    assert_int_equal(eddy_buf_refcnt(r), 1);
    assert_int_equal(eddy_buf_release(b), 0);
    assert_readable_bytes(r, "5X");
    assert_int_equal(eddy_buf_release(r), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_plain_views_share_the_parent_reference_count(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = buf_holding(a, 16, 16, "0123456789");
    eddy_buf_t *s = eddy_buf_slice(b, 0, 4);
    eddy_buf_t *d = eddy_buf_duplicate(b);
    assert_non_null(s);
    assert_non_null(d);
    assert_int_equal(eddy_buf_live_count(), live + 1);
    assert_int_equal(eddy_buf_refcnt(s), 1);
    assert_int_equal(eddy_buf_refcnt(d), 1);

    assert_ptr_equal(eddy_buf_retain(s), s);
    assert_int_equal(eddy_buf_refcnt(b), 2);
    assert_int_equal(eddy_buf_refcnt(d), 2);
    assert_int_equal(eddy_buf_refcnt(s), 2);
    assert_ptr_equal(eddy_buf_retain(d), d);
    assert_int_equal(eddy_buf_refcnt(b), 3);

    assert_int_equal(eddy_buf_release(b), 0);
    assert_int_equal(eddy_buf_release(d), 0);
    assert_int_equal(eddy_buf_refcnt(s), 1);
    assert_int_equal(eddy_buf_live_count(), live + 1);
    /* Releasing a plain view to zero frees the parent, and every view with it. */
    assert_int_equal(eddy_buf_release(s), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_retained_views_keep_the_parent_alive(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = buf_holding(a, 16, 16, "0123456789");
    eddy_buf_t *r = eddy_buf_retained_slice(b, 1, 4);
    assert_non_null(r);
    assert_int_equal(eddy_buf_live_count(), live + 1);
    assert_int_equal(eddy_buf_refcnt(b), 2);
    assert_int_equal(eddy_buf_refcnt(r), 1);
    assert_ptr_equal(eddy_buf_allocator(r), eddy_buf_allocator(b));
    assert_readable_bytes(r, "1234");

    /* The view's own count moves without touching the parent's. */
    assert_ptr_equal(eddy_buf_retain(r), r);
    assert_int_equal(eddy_buf_refcnt(r), 2);
    assert_int_equal(eddy_buf_refcnt(b), 2);
    assert_int_equal(eddy_buf_release(r), 0);
    assert_int_equal(eddy_buf_refcnt(b), 2);

    eddy_buf_t *rd = eddy_buf_retained_duplicate(b);
    assert_non_null(rd);
    assert_int_equal(eddy_buf_refcnt(b), 3);
    assert_int_equal(eddy_buf_refcnt(rd), 1);

    /* The parent's own reference goes; the views keep its memory. */
    assert_int_equal(eddy_buf_release(b), 0);
    assert_int_equal(eddy_buf_live_count(), live + 1);
    assert_readable_bytes(r, "1234");
    assert_readable_bytes(rd, "0123456789");
    assert_int_equal(eddy_buf_release(rd), 1);
    assert_int_equal(eddy_buf_live_count(), live + 1);
    assert_readable_bytes(r, "1234");
    assert_int_equal(eddy_buf_release(r), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_duplicates_keep_the_parent_indexes(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = buf_holding(a, 16, 64, "0123456789");
    assert_int_equal(eddy_buf_skip(b, 3), 0);

    eddy_buf_t *d = eddy_buf_duplicate(b);
    eddy_buf_t *rd = eddy_buf_retained_duplicate(b);
    assert_non_null(d);
    assert_non_null(rd);
    eddy_buf_t *views[2] = {d, rd};
    for (size_t i = 0; i < 2; i++) {
        eddy_buf_t *v = views[i];
        assert_int_equal(eddy_buf_reader_index(v), 3);
        assert_int_equal(eddy_buf_writer_index(v), 10);
        assert_int_equal(eddy_buf_capacity(v), eddy_buf_capacity(b));
        assert_ptr_equal(eddy_buf_read_ptr(v), eddy_buf_read_ptr(b));
        assert_readable_bytes(v, "3456789");
    }
    assert_int_equal(eddy_buf_refcnt(d), 2);
    assert_int_equal(eddy_buf_refcnt(rd), 1);

    /* Own indexes, shared bytes. */
    assert_int_equal(eddy_buf_skip(d, 7), 0);
    assert_int_equal(eddy_buf_reader_index(b), 3);
    assert_int_equal(eddy_buf_reader_index(rd), 3);
    assert_int_equal(eddy_buf_set_u8(b, 3, 'Z'), 0);
    assert_readable_bytes(rd, "Z456789");
    assert_int_equal(eddy_buf_write_u8(d, '!'), 0);
    assert_int_equal(eddy_buf_writer_index(b), 10);
    uint8_t v;
    assert_int_equal(eddy_buf_get_u8(b, 10, &v), 0);
    assert_int_equal(v, '!');

    /* A retained view freed by its own last release returns 1; the parent lives on. */
    assert_int_equal(eddy_buf_release(rd), 1);
    assert_int_equal(eddy_buf_refcnt(b), 1);
    assert_int_equal(eddy_buf_live_count(), live + 1);
    assert_readable_bytes(b, "Z456789");

    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_read_slice_advances_the_reader_without_copying(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = buf_holding(a, 16, 16, "headerbody");
    const uint8_t *p0 = eddy_buf_read_ptr(b);

    eddy_buf_t *s = eddy_buf_read_slice(b, 6);
    assert_non_null(s);
    assert_ptr_equal(eddy_buf_read_ptr(s), p0);
    assert_readable_bytes(s, "header");
    assert_int_equal(eddy_buf_reader_index(b), 6);
    assert_int_equal(eddy_buf_refcnt(s), 1);

    assert_null(eddy_buf_read_slice(b, 5));
    assert_null(eddy_buf_read_retained_slice(b, 5));
    assert_null(eddy_buf_read_slice(b, SIZE_MAX));
    assert_int_equal(eddy_buf_reader_index(b), 6);

    eddy_buf_t *r = eddy_buf_read_retained_slice(b, 4);
    assert_non_null(r);
    assert_ptr_equal(eddy_buf_read_ptr(r), p0 + 6);
    assert_readable_bytes(r, "body");
    assert_int_equal(eddy_buf_reader_index(b), 10);
    assert_false(eddy_buf_is_readable(b));
    assert_int_equal(eddy_buf_refcnt(b), 2);
    assert_int_equal(eddy_buf_refcnt(r), 1);

    assert_int_equal(eddy_buf_release(b), 0);
    assert_readable_bytes(r, "body");
    assert_int_equal(eddy_buf_release(r), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_views_cannot_grow(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = buf_holding(a, 16, 1024, "abcd");
    eddy_buf_t *s = eddy_buf_slice(b, 0, 8);
    assert_non_null(s);
    assert_int_equal(eddy_buf_write_u8(s, 'x'), EDDY_ECAPACITY);
    assert_int_equal(eddy_buf_ensure_writable(s, 1), EDDY_ECAPACITY);
    assert_int_equal(eddy_buf_writer_index(s), 8);
    assert_int_equal(eddy_buf_capacity(s), 8);
    eddy_buf_clear(s);
    assert_int_equal(eddy_buf_write_u64(s, 0x3031323334353637u), 0);
    assert_int_equal(eddy_buf_write_u8(s, 'x'), EDDY_ECAPACITY);
    assert_readable_bytes(b, "0123");

    /* A duplicate may fill the parent's capacity but not grow it, though the parent could. */
    eddy_buf_t *d = eddy_buf_duplicate(b);
    assert_non_null(d);
    assert_int_equal(eddy_buf_write_zero(d, 12), 0);
    assert_int_equal(eddy_buf_write_u8(d, 'x'), EDDY_ECAPACITY);
    assert_int_equal(eddy_buf_ensure_writable(d, 1), EDDY_ECAPACITY);
    assert_int_equal(eddy_buf_writer_index(d), 16);
    assert_int_equal(eddy_buf_capacity(b), 16);

    eddy_buf_t *r = eddy_buf_retained_slice(b, 4, 4);
    assert_non_null(r);
    assert_int_equal(eddy_buf_write_bytes(r, "x", 1), EDDY_ECAPACITY);
    assert_int_equal(eddy_buf_ensure_writable(r, 1), EDDY_ECAPACITY);
    assert_int_equal(eddy_buf_release(r), 1);

    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_parent_growth_keeps_views_readable(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = buf_holding(a, 16, EDDY_BUF_DEFAULT_MAX_CAPACITY, "abcdefghijklmnop");
    eddy_buf_t *s = eddy_buf_slice(b, 0, 16);
    eddy_buf_t *d = eddy_buf_duplicate(b);
    eddy_buf_t *r = eddy_buf_retained_slice(b, 4, 4);
    assert_non_null(s);
    assert_non_null(d);
    assert_non_null(r);

    /* Grow the parent several times over: it moves to new memory. */
    assert_int_equal(eddy_buf_write_zero(b, 100000), 0);
    assert_true(eddy_buf_capacity(b) >= 100016);
    assert_int_equal(eddy_buf_readable(b), 100016);
    assert_memory_equal(eddy_buf_read_ptr(b), "abcdefghijklmnop", 16);

    assert_readable_bytes(s, "abcdefghijklmnop");
    assert_readable_bytes(d, "abcdefghijklmnop");
    assert_readable_bytes(r, "efgh");
    uint8_t v;
    assert_int_equal(eddy_buf_get_u8(s, 15, &v), 0);
    assert_int_equal(v, 'p');

    /* A second growth retires another block; the views still read the first. */
    assert_int_equal(eddy_buf_ensure_writable(b, 500000), 0);
    assert_readable_bytes(s, "abcdefghijklmnop");

    assert_int_equal(eddy_buf_release(b), 0);
    assert_readable_bytes(r, "efgh");
    assert_int_equal(eddy_buf_release(r), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

/* ---------------------------------------------------------------------------------------
 * Copies, constructors, messages, reference counts
 */

static void test_copy_makes_an_independent_buffer(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = buf_holding(a, 16, 16, "0123456789");
    eddy_buf_t *c = eddy_buf_copy(b, 2, 5);
    assert_non_null(c);
    assert_int_equal(eddy_buf_live_count(), live + 2);
    assert_readable_bytes(c, "23456");
    assert_int_equal(eddy_buf_refcnt(c), 1);
    assert_int_equal(eddy_buf_refcnt(b), 1);
    assert_ptr_equal(eddy_buf_allocator(c), eddy_buf_allocator(b));
    assert_ptr_not_equal(eddy_buf_read_ptr(c), eddy_buf_read_ptr(b) + 2);

    assert_int_equal(eddy_buf_set_u8(c, 0, 'X'), 0);
    assert_readable_bytes(b, "0123456789");
    assert_int_equal(eddy_buf_set_u8(b, 3, 'Y'), 0);
    assert_readable_bytes(c, "X3456");

    /* A copy is a root: it outlives the buffer it came from. */
    assert_int_equal(eddy_buf_release(b), 1);
    assert_readable_bytes(c, "X3456");

    assert_null(eddy_buf_copy(c, eddy_buf_capacity(c) - 1, 2));
    assert_null(eddy_buf_copy(c, SIZE_MAX, 2));
    assert_null(eddy_buf_copy(c, 2, SIZE_MAX));
    assert_int_equal(eddy_buf_live_count(), live + 1);

    assert_int_equal(eddy_buf_release(c), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_from_and_from_str_copy_their_source(void **state)
{
    int64_t live = eddy_buf_live_count();

    char data[5] = {'a', 0, 'b', 'c', 'd'};
    eddy_buf_t *b = eddy_buf_from(data, sizeof(data));
    assert_non_null(b);
    data[0] = 'z';
    assert_int_equal(eddy_buf_readable(b), 5);
    assert_memory_equal(eddy_buf_read_ptr(b), "a\0bcd", 5);
    assert_int_equal(eddy_buf_refcnt(b), 1);
    assert_ptr_equal(eddy_buf_allocator(b), eddy_allocator_default());
    assert_int_equal(eddy_buf_write_u8(b, 'e'), 0);
    assert_memory_equal(eddy_buf_read_ptr(b), "a\0bcde", 6);

    eddy_buf_t *s = eddy_buf_from_str("hello");
    assert_non_null(s);
    assert_readable_bytes(s, "hello");

    eddy_buf_t *e = eddy_buf_from_str("");
    assert_non_null(e);
    assert_int_equal(eddy_buf_readable(e), 0);
    assert_int_equal(eddy_buf_live_count(), live + 3);

    assert_int_equal(eddy_buf_release(e), 1);
    assert_int_equal(eddy_buf_release(s), 1);
    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static int user_msg_freed;

static void count_user_free(eddy_msg_t *msg)
{
    (void)msg;
    user_msg_freed++;
}

static void test_msg_header_round_trips_to_the_buffer(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = buf_holding(a, 16, 16, "0123456789");
    eddy_msg_t *m = eddy_buf_msg(b);
    assert_non_null(m);
    assert_int_equal(m->type, EDDY_MSG_BUF);
    assert_ptr_equal(eddy_buf_of(m), b);
    assert_int_equal(eddy_msg_refcnt(m), 1);
    assert_ptr_equal(eddy_msg_retain(m), m);
    assert_int_equal(eddy_buf_refcnt(b), 2);
    assert_int_equal(eddy_buf_release(b), 0);
    assert_int_equal(eddy_msg_refcnt(m), 1);

    /* A retained view is a message of its own. */
    eddy_buf_t *r = eddy_buf_retained_slice(b, 0, 4);
    assert_non_null(r);
    eddy_msg_t *rm = eddy_buf_msg(r);
    assert_int_equal(rm->type, EDDY_MSG_BUF);
    assert_ptr_equal(eddy_buf_of(rm), r);
    assert_int_equal(eddy_msg_release(rm), 1);
    assert_int_equal(eddy_buf_refcnt(b), 1);

    /* Releasing the message frees the buffer. */
    assert_int_equal(eddy_msg_release(m), 1);
    assert_int_equal(eddy_buf_live_count(), live);

    /* Any other message is not a buffer. */
    eddy_msg_t user;
    user_msg_freed = 0;
    eddy_msg_init(&user, EDDY_MSG_USER, count_user_free);
    assert_int_equal(eddy_msg_refcnt(&user), 1);
    assert_null(eddy_buf_of(&user));
    assert_ptr_equal(eddy_msg_retain(&user), &user);
    assert_int_equal(eddy_msg_release(&user), 0);
    assert_int_equal(user_msg_freed, 0);
    assert_int_equal(eddy_msg_release(&user), 1);
    assert_int_equal(user_msg_freed, 1);
    assert_int_equal(eddy_msg_release(&user), EDDY_EREFCNT);
    assert_int_equal(user_msg_freed, 1);
    assert_int_equal(eddy_msg_refcnt(&user), 0);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_release_returns_one_only_when_it_frees(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = eddy_buf_alloc(a, 8, 8);
    assert_non_null(b);
    assert_ptr_equal(eddy_buf_retain(b), b);
    assert_ptr_equal(eddy_buf_retain(b), b);
    assert_int_equal(eddy_buf_refcnt(b), 3);
    assert_int_equal(eddy_buf_release(b), 0);
    assert_int_equal(eddy_buf_refcnt(b), 2);
    assert_int_equal(eddy_buf_release(b), 0);
    assert_int_equal(eddy_buf_refcnt(b), 1);
    assert_int_equal(eddy_buf_live_count(), live + 1);
    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_buf_allocator_names_where_the_memory_came_from(void **state)
{
    eddy_allocator_t *a = test_allocator(state);
    eddy_allocator_t *expect = a != NULL ? a : eddy_allocator_default();
    int64_t live = eddy_buf_live_count();

    eddy_buf_t *b = eddy_buf_alloc(a, 8, 64);
    assert_non_null(b);
    assert_ptr_equal(eddy_buf_allocator(b), expect);
    eddy_buf_t *s = eddy_buf_slice(b, 0, 4);
    assert_non_null(s);
    assert_ptr_equal(eddy_buf_allocator(s), expect);
    eddy_buf_t *c = eddy_buf_copy(b, 0, 4);
    assert_non_null(c);
    assert_ptr_equal(eddy_buf_allocator(c), expect);
    /* Growth stays with the same allocator. */
    assert_int_equal(eddy_buf_write_zero(b, 60), 0);
    assert_ptr_equal(eddy_buf_allocator(b), expect);

    eddy_buf_t *n = eddy_buf_new(4);
    assert_non_null(n);
    assert_ptr_equal(eddy_buf_allocator(n), eddy_allocator_default());

    assert_int_equal(eddy_buf_release(n), 1);
    assert_int_equal(eddy_buf_release(c), 1);
    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

/* The test under the default allocator, the unpooled one, and a private pool. */
#define ON_UNPOOLED(f)                                                                             \
    {                                                                                              \
        .name = #f "[unpooled]", .test_func = f, .setup_func = use_unpooled                        \
    }
#define ON_PRIVATE_POOL(f)                                                                         \
    {                                                                                              \
        .name = #f "[pooled]", .test_func = f, .setup_func = use_private_pool,                     \
        .teardown_func = free_private_pool                                                         \
    }
#define WITH_EACH_ALLOCATOR(f) cmocka_unit_test(f), ON_UNPOOLED(f), ON_PRIVATE_POOL(f)

static void retain_buf_once(void *arg)
{
    eddy_buf_retain(arg);
}

static void retain_msg_once(void *arg)
{
    eddy_msg_retain(arg);
}

static void test_retain_at_the_maximum_count_is_refused(void **state)
{
    int64_t live = eddy_buf_live_count();
    eddy_buf_t *b = eddy_buf_alloc(test_allocator(state), 16, 64);
    assert_non_null(b);
    /* Four billion retains take a while: start next to the top. One more would wrap the
     * count to 0, and the next release would free a buffer still in use. */
    atomic_store(&b->_msg._refcnt, UINT32_MAX - 1);
    assert_ptr_equal(eddy_buf_retain(b), b);
    assert_int_equal(eddy_buf_refcnt(b), UINT32_MAX);
    expect_abort_in_debug(retain_buf_once, b, "retain of buffer");

    bool fatal = eddy__refcnt_set_fatal(false);
    assert_null(eddy_buf_retain(b));
    assert_null(eddy_msg_retain(eddy_buf_msg(b)));
    eddy_buf_t *slice = eddy_buf_slice(b, 0, 4); /* shares b's count */
    assert_non_null(slice);
    assert_null(eddy_buf_retain(slice));
    assert_null(eddy_buf_retained_slice(b, 0, 4)); /* would hold a reference on b */
    assert_int_equal(eddy_buf_refcnt(b), UINT32_MAX);
    eddy__refcnt_set_fatal(fatal);

    atomic_store(&b->_msg._refcnt, 1);
    assert_int_equal(eddy_buf_release(b), 1);
    assert_int_equal(eddy_buf_live_count(), live);
}

static void test_retain_of_a_message_refuses_zero_and_the_maximum(void **state)
{
    (void)state;
    /* A message of one's own that outlives its count (its free does nothing), so that a
     * retain at zero is safe to make. */
    eddy_msg_t m;
    eddy_msg_init(&m, EDDY_MSG_USER, NULL);
    assert_int_equal(eddy_msg_release(&m), 1);
    expect_abort_in_debug(retain_msg_once, &m, "retain of message");
    atomic_store(&m._refcnt, UINT32_MAX);
    expect_abort_in_debug(retain_msg_once, &m, "retain of message");

    bool fatal = eddy__refcnt_set_fatal(false);
    assert_null(eddy_msg_retain(&m));
    assert_int_equal(eddy_msg_refcnt(&m), UINT32_MAX);
    atomic_store(&m._refcnt, 0);
    assert_null(eddy_msg_retain(&m));
    assert_int_equal(eddy_msg_refcnt(&m), 0);
    eddy__refcnt_set_fatal(fatal);

    atomic_store(&m._refcnt, UINT32_MAX - 1);
    assert_ptr_equal(eddy_msg_retain(&m), &m);
    assert_int_equal(eddy_msg_refcnt(&m), UINT32_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        WITH_EACH_ALLOCATOR(test_alloc_with_zero_initial_capacity_grows_on_write),
        WITH_EACH_ALLOCATOR(test_alloc_with_initial_above_max_returns_null),
        WITH_EACH_ALLOCATOR(test_write_grows_across_powers_of_two),
        WITH_EACH_ALLOCATOR(test_growth_past_four_mib_steps_by_four_mib),
        WITH_EACH_ALLOCATOR(test_growth_keeps_the_bytes_already_read),
        WITH_EACH_ALLOCATOR(test_write_beyond_max_capacity_fails_and_changes_nothing),
        WITH_EACH_ALLOCATOR(test_ensure_writable_grows_only_when_needed),
        cmocka_unit_test(test_write_integers_big_endian_lays_out_network_order),
        cmocka_unit_test(test_write_integers_little_endian_reverses_bytes),
        cmocka_unit_test(test_get_and_set_integers_leave_the_indexes_alone),
        cmocka_unit_test(test_write_and_read_byte_ranges),
        cmocka_unit_test(test_write_zero_appends_zero_bytes),
        cmocka_unit_test(test_reads_past_the_writer_index_fail_without_moving_the_reader),
        WITH_EACH_ALLOCATOR(test_get_and_set_near_capacity_check_the_width),
        cmocka_unit_test(test_get_and_set_at_huge_indexes_do_not_overflow),
        WITH_EACH_ALLOCATOR(test_write_buf_and_read_buf_move_bytes_between_buffers),
        cmocka_unit_test(test_get_buf_and_set_buf_leave_the_source_indexes_alone),
        cmocka_unit_test(test_set_reader_and_writer_index_check_bounds),
        cmocka_unit_test(test_skip_advances_the_reader_over_readable_bytes),
        WITH_EACH_ALLOCATOR(test_write_ptr_and_produce_append_in_place),
        cmocka_unit_test(test_clear_resets_the_indexes_and_keeps_the_memory),
        WITH_EACH_ALLOCATOR(test_discard_read_bytes_moves_readable_bytes_to_zero),
        cmocka_unit_test(test_find_returns_the_first_match_in_a_range),
        cmocka_unit_test(test_find_bytes_returns_the_first_occurrence_of_a_needle),
        WITH_EACH_ALLOCATOR(test_slice_views_a_range_of_the_parent_memory),
        cmocka_unit_test(test_slice_of_a_slice_views_the_root_memory),
        WITH_EACH_ALLOCATOR(test_plain_views_share_the_parent_reference_count),
        WITH_EACH_ALLOCATOR(test_retained_views_keep_the_parent_alive),
        cmocka_unit_test(test_duplicates_keep_the_parent_indexes),
        WITH_EACH_ALLOCATOR(test_read_slice_advances_the_reader_without_copying),
        WITH_EACH_ALLOCATOR(test_views_cannot_grow),
        WITH_EACH_ALLOCATOR(test_parent_growth_keeps_views_readable),
        WITH_EACH_ALLOCATOR(test_copy_makes_an_independent_buffer),
        cmocka_unit_test(test_from_and_from_str_copy_their_source),
        cmocka_unit_test_setup_teardown(test_retain_at_the_maximum_count_is_refused,
                                        use_private_pool, free_private_pool),
        cmocka_unit_test(test_retain_of_a_message_refuses_zero_and_the_maximum),
        WITH_EACH_ALLOCATOR(test_msg_header_round_trips_to_the_buffer),
        WITH_EACH_ALLOCATOR(test_release_returns_one_only_when_it_frees),
        WITH_EACH_ALLOCATOR(test_buf_allocator_names_where_the_memory_came_from),
    };
    return cmocka_run_group_tests_name("buffer.buf", tests, NULL, NULL);
}
