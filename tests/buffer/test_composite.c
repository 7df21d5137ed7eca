/*
 * Tests for buffer/composite.c: reads, searches and views across component boundaries, and
 * that every component is released exactly once.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <eddy/buffer.h>

#include "buffer/layer.h"
#include "support/abort_util.h"

#include <stdatomic.h>
#include <string.h>

/* Every test must give back every buffer it made; setup records the count, teardown checks. */
static int64_t live_at_start;

static int record_live(void **state)
{
    live_at_start = eddy_buf_live_count();
    return 0;
}

static int check_live(void **state)
{
    assert_int_equal(eddy_buf_live_count(), live_at_start);
    return 0;
}

/* A composite holding one component per string, in order. */
static eddy_composite_t *composite_of_strs(const char *const *parts, size_t n)
{
    eddy_composite_t *c = eddy_composite_new(0);
    assert_non_null(c);
    for (size_t i = 0; i < n; i++) {
        eddy_buf_t *b = eddy_buf_from_str(parts[i]);
        assert_non_null(b);
        assert_int_equal(eddy_composite_add(c, b), 0);
    }
    return c;
}

static eddy_buf_t *buf_of_bytes(const uint8_t *p, size_t n)
{
    eddy_buf_t *b = eddy_buf_from(p, n);
    assert_non_null(b);
    return b;
}

static void test_composite_new_is_empty(void **state)
{
    eddy_composite_t *c = eddy_composite_new(0);
    assert_non_null(c);
    assert_int_equal(eddy_composite_readable(c), 0);
    assert_int_equal(eddy_composite_components(c), 0);

    uint8_t v;
    assert_int_equal(eddy_composite_read_u8(c, &v), EDDY_EBOUNDS);
    assert_int_equal(eddy_composite_get_u8(c, 0, &v), EDDY_EBOUNDS);
    assert_int_equal(eddy_composite_skip(c, 1), EDDY_EBOUNDS);
    assert_int_equal(eddy_composite_skip(c, 0), 0);
    assert_int_equal(eddy_composite_find(c, 'a'), EDDY_ENOENT);
    assert_int_equal(eddy_composite_find_bytes(c, "ab", 2), EDDY_ENOENT);
    assert_null(eddy_composite_read_buf(c, 1));
    eddy_buf_t *none = eddy_composite_read_buf(c, 0);
    assert_non_null(none);
    assert_int_equal(eddy_buf_readable(none), 0);
    eddy_buf_release(none);

    struct iovec iov[4];
    assert_int_equal(eddy_composite_iovec(c, iov, 4), 0);

    eddy_buf_t *all = eddy_composite_consolidate(c);
    assert_non_null(all);
    assert_int_equal(eddy_buf_readable(all), 0);
    eddy_buf_release(all);

    assert_int_equal(eddy_composite_release(c), 1);
}

static void test_composite_add_empty_buffer_releases_it_without_adding(void **state)
{
    eddy_composite_t *c = eddy_composite_new(0);
    eddy_buf_t *b = eddy_buf_new(16);
    assert_non_null(b);
    eddy_buf_retain(b);

    assert_int_equal(eddy_composite_add(c, b), 0);
    assert_int_equal(eddy_composite_components(c), 0);
    assert_int_equal(eddy_composite_readable(c), 0);
    assert_int_equal(eddy_buf_refcnt(b), 1);
    assert_int_equal(eddy_composite_add(c, NULL), EDDY_EINVAL);

    eddy_buf_release(b);
    eddy_composite_release(c);
}

static void test_composite_add_takes_only_the_readable_bytes(void **state)
{
    eddy_composite_t *c = eddy_composite_new(0);
    eddy_buf_t *b = eddy_buf_from_str("xxhello");
    assert_int_equal(eddy_buf_skip(b, 2), 0);
    assert_int_equal(eddy_composite_add(c, b), 0);
    assert_int_equal(eddy_composite_readable(c), 5);

    char out[5];
    assert_int_equal(eddy_composite_read_bytes(c, out, 5), 0);
    assert_memory_equal(out, "hello", 5);
    eddy_composite_release(c);
}

static void test_composite_read_u8_walks_through_components(void **state)
{
    static const char *const parts[] = {"a", "bc", "d"};
    eddy_composite_t *c = composite_of_strs(parts, 3);

    const char *want = "abcd";
    for (size_t i = 0; i < 4; i++) {
        uint8_t v;
        assert_int_equal(eddy_composite_read_u8(c, &v), 0);
        assert_int_equal(v, (uint8_t)want[i]);
    }
    uint8_t v = 0x5a;
    assert_int_equal(eddy_composite_read_u8(c, &v), EDDY_EBOUNDS);
    assert_int_equal(v, 0x5a);
    assert_int_equal(eddy_composite_components(c), 0);
    eddy_composite_release(c);
}

static void test_composite_read_u16_spans_two_components(void **state)
{
    static const uint8_t a[] = {0x00, 0x12};
    static const uint8_t b[] = {0x34, 0x56};
    eddy_composite_t *c = eddy_composite_new(0);
    eddy_composite_add(c, buf_of_bytes(a, sizeof(a)));
    eddy_composite_add(c, buf_of_bytes(b, sizeof(b)));

    uint8_t first;
    assert_int_equal(eddy_composite_read_u8(c, &first), 0);
    uint16_t v;
    assert_int_equal(eddy_composite_read_u16(c, &v), 0);
    assert_int_equal(v, 0x1234);
    assert_int_equal(eddy_composite_components(c), 1);
    assert_int_equal(eddy_composite_readable(c), 1);
    eddy_composite_release(c);
}

static void test_composite_read_u32_spans_two_components(void **state)
{
    static const uint8_t a[] = {0xde, 0xad, 0xbe};
    static const uint8_t b[] = {0xef, 0x01};
    eddy_composite_t *c = eddy_composite_new(0);
    eddy_composite_add(c, buf_of_bytes(a, sizeof(a)));
    eddy_composite_add(c, buf_of_bytes(b, sizeof(b)));

    uint32_t v;
    assert_int_equal(eddy_composite_read_u32(c, &v), 0);
    assert_int_equal(v, 0xdeadbeefu);
    assert_int_equal(eddy_composite_readable(c), 1);
    assert_int_equal(eddy_composite_components(c), 1);
    eddy_composite_release(c);
}

static void test_composite_read_u32_spans_three_components(void **state)
{
    static const uint8_t a[] = {0x01};
    static const uint8_t b[] = {0x02, 0x03};
    static const uint8_t d[] = {0x04};
    eddy_composite_t *c = eddy_composite_new(0);
    eddy_composite_add(c, buf_of_bytes(a, sizeof(a)));
    eddy_composite_add(c, buf_of_bytes(b, sizeof(b)));
    eddy_composite_add(c, buf_of_bytes(d, sizeof(d)));

    uint32_t v;
    assert_int_equal(eddy_composite_read_u32(c, &v), 0);
    assert_int_equal(v, 0x01020304u);
    assert_int_equal(eddy_composite_readable(c), 0);
    assert_int_equal(eddy_composite_components(c), 0);
    eddy_composite_release(c);
}

static void test_composite_read_u64_spans_three_components(void **state)
{
    static const uint8_t a[] = {0x01, 0x02, 0x03};
    static const uint8_t b[] = {0x04, 0x05};
    static const uint8_t d[] = {0x06, 0x07, 0x08, 0x09};
    eddy_composite_t *c = eddy_composite_new(0);
    eddy_composite_add(c, buf_of_bytes(a, sizeof(a)));
    eddy_composite_add(c, buf_of_bytes(b, sizeof(b)));
    eddy_composite_add(c, buf_of_bytes(d, sizeof(d)));

    uint64_t v;
    assert_int_equal(eddy_composite_read_u64(c, &v), 0);
    assert_true(v == 0x0102030405060708u);
    uint8_t last;
    assert_int_equal(eddy_composite_read_u8(c, &last), 0);
    assert_int_equal(last, 0x09);
    eddy_composite_release(c);
}

static void test_composite_read_u64_within_one_component(void **state)
{
    static const uint8_t a[] = {0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88, 0x77};
    eddy_composite_t *c = eddy_composite_new(0);
    eddy_composite_add(c, buf_of_bytes(a, sizeof(a)));

    uint64_t v;
    assert_int_equal(eddy_composite_read_u64(c, &v), 0);
    assert_true(v == 0xffeeddccbbaa9988u);
    assert_int_equal(eddy_composite_readable(c), 1);
    eddy_composite_release(c);
}

static void test_composite_get_u8_and_get_bytes_read_at_offsets_without_advancing(void **state)
{
    static const char *const parts[] = {"abc", "de", "fghij"};
    eddy_composite_t *c = composite_of_strs(parts, 3);

    uint8_t v;
    assert_int_equal(eddy_composite_get_u8(c, 0, &v), 0);
    assert_int_equal(v, 'a');
    assert_int_equal(eddy_composite_get_u8(c, 3, &v), 0);
    assert_int_equal(v, 'd');
    assert_int_equal(eddy_composite_get_u8(c, 9, &v), 0);
    assert_int_equal(v, 'j');
    assert_int_equal(eddy_composite_get_u8(c, 10, &v), EDDY_EBOUNDS);

    char out[10];
    assert_int_equal(eddy_composite_get_bytes(c, 2, out, 5), 0);
    assert_memory_equal(out, "cdefg", 5);
    assert_int_equal(eddy_composite_get_bytes(c, 0, out, 10), 0);
    assert_memory_equal(out, "abcdefghij", 10);
    assert_int_equal(eddy_composite_get_bytes(c, 6, out, 5), EDDY_EBOUNDS);
    assert_int_equal(eddy_composite_get_bytes(c, SIZE_MAX, out, 2), EDDY_EBOUNDS);
    assert_int_equal(eddy_composite_get_bytes(c, 10, out, 0), 0);

    /* Offsets count from the reader index, which has moved into the second component. */
    assert_int_equal(eddy_composite_skip(c, 4), 0);
    assert_int_equal(eddy_composite_get_u8(c, 0, &v), 0);
    assert_int_equal(v, 'e');
    assert_int_equal(eddy_composite_get_bytes(c, 1, out, 3), 0);
    assert_memory_equal(out, "fgh", 3);

    assert_int_equal(eddy_composite_readable(c), 6);
    eddy_composite_release(c);
}

static void test_composite_skip_across_components_releases_fully_read_ones(void **state)
{
    eddy_buf_t *b1 = eddy_buf_from_str("aaaa");
    eddy_buf_t *b2 = eddy_buf_from_str("bbbb");
    eddy_buf_t *b3 = eddy_buf_from_str("cccc");
    eddy_buf_retain(b1);
    eddy_buf_retain(b2);
    eddy_buf_retain(b3);

    eddy_composite_t *c = eddy_composite_new(0);
    eddy_composite_add(c, b1);
    eddy_composite_add(c, b2);
    eddy_composite_add(c, b3);
    assert_int_equal(eddy_buf_refcnt(b1), 2);

    assert_int_equal(eddy_composite_skip(c, 6), 0);
    assert_int_equal(eddy_buf_refcnt(b1), 1);
    assert_int_equal(eddy_buf_refcnt(b2), 2);
    assert_int_equal(eddy_buf_refcnt(b3), 2);
    assert_int_equal(eddy_composite_components(c), 2);
    assert_int_equal(eddy_composite_readable(c), 6);

    /* Ending exactly on a boundary releases that component too. */
    assert_int_equal(eddy_composite_skip(c, 2), 0);
    assert_int_equal(eddy_buf_refcnt(b2), 1);
    assert_int_equal(eddy_composite_components(c), 1);

    uint8_t v;
    assert_int_equal(eddy_composite_read_u8(c, &v), 0);
    assert_int_equal(v, 'c');

    /* The composite keeps its own place: the component buffers' indexes are untouched. */
    assert_int_equal(eddy_buf_reader_index(b1), 0);
    assert_int_equal(eddy_buf_reader_index(b3), 0);

    assert_int_equal(eddy_composite_release(c), 1);
    assert_int_equal(eddy_buf_refcnt(b3), 1);
    eddy_buf_release(b1);
    eddy_buf_release(b2);
    eddy_buf_release(b3);
}

static void test_composite_read_buf_within_one_component_is_zero_copy(void **state)
{
    eddy_buf_t *b1 = eddy_buf_from_str("header");
    eddy_buf_t *b2 = eddy_buf_from_str("body");
    const uint8_t *mem = eddy_buf_read_ptr(b1);
    eddy_composite_t *c = eddy_composite_new(0);
    eddy_composite_add(c, b1);
    eddy_composite_add(c, b2);
    eddy_composite_skip(c, 1);

    eddy_buf_t *s = eddy_composite_read_buf(c, 3);
    assert_non_null(s);
    assert_int_equal(eddy_buf_readable(s), 3);
    assert_ptr_equal(eddy_buf_read_ptr(s), mem + 1);
    assert_memory_equal(eddy_buf_read_ptr(s), "ead", 3);

    /* Taking the rest of the component releases it from the composite, but the slice keeps
     * the memory alive. */
    eddy_buf_t *t = eddy_composite_read_buf(c, 2);
    assert_non_null(t);
    assert_ptr_equal(eddy_buf_read_ptr(t), mem + 4);
    assert_int_equal(eddy_composite_components(c), 1);
    eddy_composite_release(c);
    assert_memory_equal(eddy_buf_read_ptr(s), "ead", 3);
    assert_memory_equal(eddy_buf_read_ptr(t), "er", 2);

    eddy_buf_release(s);
    eddy_buf_release(t);
}

static void test_composite_read_buf_across_components_copies(void **state)
{
    static const char *const parts[] = {"ab", "cd", "ef"};
    eddy_composite_t *c = composite_of_strs(parts, 3);
    eddy_composite_skip(c, 1);

    eddy_buf_t *b = eddy_composite_read_buf(c, 4);
    assert_non_null(b);
    assert_int_equal(eddy_buf_readable(b), 4);
    assert_memory_equal(eddy_buf_read_ptr(b), "bcde", 4);
    assert_int_equal(eddy_buf_refcnt(b), 1);
    assert_int_equal(eddy_composite_readable(c), 1);
    assert_int_equal(eddy_composite_components(c), 1);

    assert_null(eddy_composite_read_buf(c, 2));
    assert_int_equal(eddy_composite_readable(c), 1);

    eddy_buf_release(b);
    eddy_composite_release(c);
}

static void test_composite_find_locates_a_byte_in_any_component(void **state)
{
    static const char *const parts[] = {"GET ", "/index", "\r\n"};
    eddy_composite_t *c = composite_of_strs(parts, 3);

    assert_int_equal(eddy_composite_find(c, 'G'), 0);
    assert_int_equal(eddy_composite_find(c, '/'), 4);
    assert_int_equal(eddy_composite_find(c, 'x'), 9);
    assert_int_equal(eddy_composite_find(c, '\n'), 11);
    assert_int_equal(eddy_composite_find(c, 'Z'), EDDY_ENOENT);

    /* Offsets are relative to the reader index, and bytes already read are not found. */
    eddy_composite_skip(c, 5);
    assert_int_equal(eddy_composite_find(c, 'G'), EDDY_ENOENT);
    assert_int_equal(eddy_composite_find(c, '\r'), 5);
    eddy_composite_release(c);
}

static void test_composite_find_bytes_finds_needles_spanning_components(void **state)
{
    static const char *const parts[] = {"abc\r", "\n", "\r", "\n\r\nxyz"};
    eddy_composite_t *c = composite_of_strs(parts, 4);

    assert_int_equal(eddy_composite_find_bytes(c, "\r\n", 2), 3);
    assert_int_equal(eddy_composite_find_bytes(c, "\r\n\r\n", 4), 3);
    assert_int_equal(eddy_composite_find_bytes(c, "\n\r\n\r", 4), 4);
    assert_int_equal(eddy_composite_find_bytes(c, "c\r\n\r\n\r\nx", 8), 2);
    assert_int_equal(eddy_composite_find_bytes(c, "abc\r\n\r\n\r\nxyz", 12), 0);
    assert_int_equal(eddy_composite_find_bytes(c, "xyz", 3), 9);
    assert_int_equal(eddy_composite_find_bytes(c, "", 0), 0);
    eddy_composite_release(c);
}

static void test_composite_find_bytes_reports_absent_needles(void **state)
{
    static const char *const parts[] = {"abc", "abd", "ab"};
    eddy_composite_t *c = composite_of_strs(parts, 3);

    /* Partial matches at a boundary, and one cut off by the end of the readable bytes. */
    assert_int_equal(eddy_composite_find_bytes(c, "abe", 3), EDDY_ENOENT);
    assert_int_equal(eddy_composite_find_bytes(c, "cab", 3), 2);
    assert_int_equal(eddy_composite_find_bytes(c, "abc", 3), 0);
    assert_int_equal(eddy_composite_find_bytes(c, "abx", 3), EDDY_ENOENT);
    assert_int_equal(eddy_composite_find_bytes(c, "dabc", 4), EDDY_ENOENT);
    assert_int_equal(eddy_composite_find_bytes(c, "dab", 3), 5);
    assert_int_equal(eddy_composite_find_bytes(c, "abcabdabX", 9), EDDY_ENOENT);
    assert_int_equal(eddy_composite_find_bytes(c, "abcabdab!!", 10), EDDY_ENOENT);

    eddy_composite_skip(c, 1);
    assert_int_equal(eddy_composite_find_bytes(c, "abc", 3), EDDY_ENOENT);
    assert_int_equal(eddy_composite_find_bytes(c, "ab", 2), 2);
    eddy_composite_release(c);
}

static void test_composite_iovec_lists_each_component_readable_range(void **state)
{
    eddy_buf_t *b1 = eddy_buf_from_str("one");
    eddy_buf_t *b2 = eddy_buf_from_str("three");
    eddy_buf_t *b3 = eddy_buf_from_str("fifteen");
    const uint8_t *m1 = eddy_buf_read_ptr(b1);
    const uint8_t *m2 = eddy_buf_read_ptr(b2);
    const uint8_t *m3 = eddy_buf_read_ptr(b3);
    eddy_composite_t *c = eddy_composite_new(0);
    eddy_composite_add(c, b1);
    eddy_composite_add(c, b2);
    eddy_composite_add(c, b3);

    struct iovec iov[8];
    assert_int_equal(eddy_composite_iovec(c, iov, 8), 3);
    assert_ptr_equal(iov[0].iov_base, m1);
    assert_int_equal(iov[0].iov_len, 3);
    assert_ptr_equal(iov[1].iov_base, m2);
    assert_int_equal(iov[1].iov_len, 5);
    assert_ptr_equal(iov[2].iov_base, m3);
    assert_int_equal(iov[2].iov_len, 7);

    /* Fewer entries than components: the first max, in order. */
    memset(iov, 0, sizeof(iov));
    assert_int_equal(eddy_composite_iovec(c, iov, 2), 2);
    assert_ptr_equal(iov[1].iov_base, m2);
    assert_null(iov[2].iov_base);
    assert_int_equal(eddy_composite_iovec(c, iov, 0), 0);

    /* A partly read component starts at its first unread byte. */
    eddy_composite_skip(c, 5);
    assert_int_equal(eddy_composite_iovec(c, iov, 8), 2);
    assert_ptr_equal(iov[0].iov_base, m2 + 2);
    assert_int_equal(iov[0].iov_len, 3);
    assert_ptr_equal(iov[1].iov_base, m3);
    assert_int_equal(iov[1].iov_len, 7);
    eddy_composite_release(c);
}

static void test_composite_consolidate_copies_everything_and_empties_it(void **state)
{
    static const char *const parts[] = {"con", "sol", "idate"};
    eddy_composite_t *c = composite_of_strs(parts, 3);
    eddy_composite_skip(c, 1);

    eddy_buf_t *b = eddy_composite_consolidate(c);
    assert_non_null(b);
    assert_int_equal(eddy_buf_readable(b), 10);
    assert_memory_equal(eddy_buf_read_ptr(b), "onsolidate", 10);
    assert_int_equal(eddy_composite_readable(c), 0);
    assert_int_equal(eddy_composite_components(c), 0);

    /* The emptied composite takes new components as before. */
    assert_int_equal(eddy_composite_add(c, eddy_buf_from_str("more")), 0);
    assert_int_equal(eddy_composite_readable(c), 4);

    eddy_buf_release(b);
    eddy_composite_release(c);
}

static void test_composite_add_beyond_max_components_gives_enobufs(void **state)
{
    eddy_composite_t *c = eddy_composite_new(2);
    assert_int_equal(eddy_composite_add(c, eddy_buf_from_str("a")), 0);
    assert_int_equal(eddy_composite_add(c, eddy_buf_from_str("b")), 0);

    eddy_buf_t *b = eddy_buf_from_str("c");
    eddy_buf_retain(b);
    assert_int_equal(eddy_composite_add(c, b), EDDY_ENOBUFS);
    assert_int_equal(eddy_buf_refcnt(b), 1);
    assert_int_equal(eddy_composite_components(c), 2);
    assert_int_equal(eddy_composite_readable(c), 2);

    /* Reading a component to its end frees its place. */
    eddy_composite_skip(c, 1);
    assert_int_equal(eddy_composite_add(c, b), 0);
    assert_int_equal(eddy_composite_components(c), 2);
    eddy_composite_release(c);
}

static void test_composite_read_past_the_end_gives_ebounds_and_consumes_nothing(void **state)
{
    static const char *const parts[] = {"ab", "c"};
    eddy_composite_t *c = composite_of_strs(parts, 2);

    uint16_t v16;
    uint32_t v32 = 7;
    uint64_t v64;
    char out[4] = "zzz";
    assert_int_equal(eddy_composite_read_u32(c, &v32), EDDY_EBOUNDS);
    assert_int_equal(v32, 7);
    assert_int_equal(eddy_composite_read_u64(c, &v64), EDDY_EBOUNDS);
    assert_int_equal(eddy_composite_read_bytes(c, out, 4), EDDY_EBOUNDS);
    assert_memory_equal(out, "zzz", 3);
    assert_int_equal(eddy_composite_skip(c, 4), EDDY_EBOUNDS);
    assert_null(eddy_composite_read_buf(c, 4));
    assert_int_equal(eddy_composite_readable(c), 3);
    assert_int_equal(eddy_composite_components(c), 2);

    assert_int_equal(eddy_composite_read_u16(c, &v16), 0);
    assert_int_equal(v16, 0x6162);
    assert_int_equal(eddy_composite_read_u16(c, &v16), EDDY_EBOUNDS);
    assert_int_equal(eddy_composite_readable(c), 1);
    assert_int_equal(eddy_composite_read_bytes(c, out, 1), 0);
    assert_int_equal(out[0], 'c');
    eddy_composite_release(c);
}

static void test_composite_retain_and_release_count_references(void **state)
{
    eddy_buf_t *b = eddy_buf_from_str("payload");
    eddy_buf_retain(b);
    eddy_composite_t *c = eddy_composite_new(0);
    eddy_composite_add(c, b);

    assert_int_equal(eddy_msg_refcnt(eddy_composite_msg(c)), 1);
    assert_ptr_equal(eddy_composite_retain(c), c);
    assert_int_equal(eddy_msg_refcnt(eddy_composite_msg(c)), 2);

    assert_int_equal(eddy_composite_release(c), 0);
    assert_int_equal(eddy_buf_refcnt(b), 2);
    assert_int_equal(eddy_composite_release(c), 1);
    assert_int_equal(eddy_buf_refcnt(b), 1);
    eddy_buf_release(b);
}

static void retain_composite_once(void *arg)
{
    eddy_composite_retain(arg);
}

static void test_composite_retain_at_the_maximum_count_is_refused(void **state)
{
    (void)state;
    eddy_composite_t *c = eddy_composite_new(0);
    assert_non_null(c);
    atomic_store(&eddy_composite_msg(c)->_refcnt, UINT32_MAX);
    expect_abort_in_debug(retain_composite_once, c, "retain of message");
    bool fatal = eddy__refcnt_set_fatal(false);
    assert_null(eddy_composite_retain(c));
    assert_int_equal(eddy_msg_refcnt(eddy_composite_msg(c)), UINT32_MAX);
    eddy__refcnt_set_fatal(fatal);
    atomic_store(&eddy_composite_msg(c)->_refcnt, 1);
    assert_int_equal(eddy_composite_release(c), 1);
}

static void test_composite_of_accepts_only_composite_messages(void **state)
{
    eddy_composite_t *c = eddy_composite_new(0);
    eddy_msg_t *msg = eddy_composite_msg(c);
    assert_int_equal(msg->type, EDDY_MSG_COMPOSITE);
    assert_ptr_equal(eddy_composite_of(msg), c);
    assert_null(eddy_buf_of(msg));

    eddy_buf_t *b = eddy_buf_new(8);
    assert_null(eddy_composite_of(eddy_buf_msg(b)));
    eddy_buf_release(b);

    /* Releasing through the message header frees the composite like any message. */
    assert_int_equal(eddy_msg_release(msg), 1);
}

static void test_composite_same_buffer_added_twice_is_read_twice(void **state)
{
    eddy_buf_t *b = eddy_buf_from_str("ab");
    eddy_composite_t *c = eddy_composite_new(0);
    eddy_composite_add(c, eddy_buf_retain(b));
    eddy_composite_add(c, b);
    assert_int_equal(eddy_buf_refcnt(b), 2);

    char out[4];
    assert_int_equal(eddy_composite_read_bytes(c, out, 3), 0);
    assert_memory_equal(out, "aba", 3);
    assert_int_equal(eddy_buf_refcnt(b), 1);
    eddy_composite_release(c);
}

static void test_composite_streams_many_components_in_order(void **state)
{
    /* Interleaved adds and reads cycle the component array through growth and compaction;
     * every byte must come out in order and every component be released once. */
    eddy_composite_t *c = eddy_composite_new(0);
    uint32_t next_in = 0, next_out = 0;
    for (int round = 0; round < 200; round++) {
        for (int k = 0; k < 7; k++) {
            uint8_t bytes[3];
            for (size_t j = 0; j < sizeof(bytes); j++)
                bytes[j] = (uint8_t)(next_in++ & 0xff);
            assert_int_equal(eddy_composite_add(c, buf_of_bytes(bytes, sizeof(bytes))), 0);
        }
        size_t keep = (size_t)(round % 5);
        while (eddy_composite_readable(c) > keep) {
            uint8_t v;
            assert_int_equal(eddy_composite_read_u8(c, &v), 0);
            assert_int_equal(v, (uint8_t)(next_out++ & 0xff));
        }
        assert_true(eddy_composite_components(c) <= 2);
    }
    uint32_t v;
    while (eddy_composite_read_u32(c, &v) == 0)
        next_out += 4;
    assert_int_equal(eddy_composite_readable(c), next_in - next_out);
    eddy_composite_release(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, record_live, check_live)
        T(test_composite_new_is_empty),
        T(test_composite_add_empty_buffer_releases_it_without_adding),
        T(test_composite_add_takes_only_the_readable_bytes),
        T(test_composite_read_u8_walks_through_components),
        T(test_composite_read_u16_spans_two_components),
        T(test_composite_read_u32_spans_two_components),
        T(test_composite_read_u32_spans_three_components),
        T(test_composite_read_u64_spans_three_components),
        T(test_composite_read_u64_within_one_component),
        T(test_composite_get_u8_and_get_bytes_read_at_offsets_without_advancing),
        T(test_composite_skip_across_components_releases_fully_read_ones),
        T(test_composite_read_buf_within_one_component_is_zero_copy),
        T(test_composite_read_buf_across_components_copies),
        T(test_composite_find_locates_a_byte_in_any_component),
        T(test_composite_find_bytes_finds_needles_spanning_components),
        T(test_composite_find_bytes_reports_absent_needles),
        T(test_composite_iovec_lists_each_component_readable_range),
        T(test_composite_consolidate_copies_everything_and_empties_it),
        T(test_composite_add_beyond_max_components_gives_enobufs),
        T(test_composite_read_past_the_end_gives_ebounds_and_consumes_nothing),
        T(test_composite_retain_and_release_count_references),
        T(test_composite_retain_at_the_maximum_count_is_refused),
        T(test_composite_of_accepts_only_composite_messages),
        T(test_composite_same_buffer_added_twice_is_read_twice),
        T(test_composite_streams_many_components_in_order),
#undef T
    };
    return cmocka_run_group_tests_name("buffer.composite", tests, NULL, NULL);
}
