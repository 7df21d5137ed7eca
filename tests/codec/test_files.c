/*
 * The static file handler's decisions (codec/http/files_meta.c), as functions: content types,
 * IMF-fixdates, If-None-Match lists, If-Range, Range lists (clipping, suffixes, several,
 * unsatisfiable, malformed, too many, numbers too long), Accept-Encoding with q-values. Then
 * the handler on the embedded channel: a file answered as a head and a region, a 304, a 416,
 * a 405 and a traversal refused. The end-to-end tests are tests/examples/files.sh.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "codec/http/files.h"

#include <eddy/channel.h>
#include <eddy/file.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static eddy_http_str_t str(const char *s)
{
    return (eddy_http_str_t){s, strlen(s)};
}

static void test_files_types_come_from_the_extension(void **state)
{
    (void)state;
    assert_string_equal(eddy__files_type("a.html"), "text/html; charset=utf-8");
    assert_string_equal(eddy__files_type("A.PNG"), "image/png");
    assert_string_equal(eddy__files_type("x.tar.gz"), "application/gzip");
    assert_string_equal(eddy__files_type("noext"), "application/octet-stream");
    assert_string_equal(eddy__files_type(".hidden"), "application/octet-stream");
}

static void test_files_dates_parse_imf_fixdate_only(void **state)
{
    (void)state;
    int64_t t;
    assert_int_equal(eddy__files_parse_date(str("Sun, 06 Nov 1994 08:49:37 GMT"), &t), 0);
    assert_int_equal(t, 784111777);
    char out[EDDY_HTTP_DATE_LEN + 1];
    eddy__http_date_format(t, out);
    assert_string_equal(out, "Sun, 06 Nov 1994 08:49:37 GMT");
    assert_int_not_equal(eddy__files_parse_date(str("Sunday, 06-Nov-94 08:49:37 GMT"), &t), 0);
    assert_int_not_equal(eddy__files_parse_date(str("Sun Nov  6 08:49:37 1994"), &t), 0);
    assert_int_not_equal(eddy__files_parse_date(str("Sun, 06 Foo 1994 08:49:37 GMT"), &t), 0);
    assert_int_not_equal(eddy__files_parse_date(str("Sun, 06 Nov 1994 25:49:37 GMT"), &t), 0);
}

static void test_files_if_none_match_compares_weakly(void **state)
{
    (void)state;
    const char *tag = "\"abc-1\"";
    assert_true(eddy__files_none_match(str("\"abc-1\""), tag));
    assert_true(eddy__files_none_match(str("W/\"abc-1\""), tag));
    assert_true(eddy__files_none_match(str("\"x\", \"abc-1\""), tag));
    assert_true(eddy__files_none_match(str("*"), tag));
    assert_false(eddy__files_none_match(str("\"abc-2\""), tag));
    assert_false(eddy__files_none_match(str(""), tag));
}

static void test_files_if_range_compares_strongly(void **state)
{
    (void)state;
    const char *tag = "\"abc-1\"";
    assert_true(eddy__files_if_range(str("\"abc-1\""), tag, 0));
    assert_false(eddy__files_if_range(str("W/\"abc-1\""), tag, 0));
    assert_true(eddy__files_if_range(str("Sun, 06 Nov 1994 08:49:37 GMT"), tag, 784111777));
    assert_false(eddy__files_if_range(str("Sun, 06 Nov 1994 08:49:38 GMT"), tag, 784111777));
}

static void test_files_ranges_clip_and_refuse(void **state)
{
    (void)state;
    eddy__files_range_t g[4];
    assert_int_equal(eddy__files_ranges(str("bytes=0-9"), 100, g, 4), 1);
    assert_int_equal(g[0].first, 0);
    assert_int_equal(g[0].len, 10);
    assert_int_equal(eddy__files_ranges(str("bytes=90-200"), 100, g, 4), 1); /* clipped */
    assert_int_equal(g[0].len, 10);
    assert_int_equal(eddy__files_ranges(str("bytes=-30"), 100, g, 4), 1); /* a suffix */
    assert_int_equal(g[0].first, 70);
    assert_int_equal(eddy__files_ranges(str("bytes=-300"), 100, g, 4), 1); /* all of it */
    assert_int_equal(g[0].first, 0);
    assert_int_equal(g[0].len, 100);
    assert_int_equal(eddy__files_ranges(str("bytes=0-0, 5-, -1"), 100, g, 4), 3);
    assert_int_equal(eddy__files_ranges(str("bytes=100-"), 100, g, 4), 0);      /* 416 */
    assert_int_equal(eddy__files_ranges(str("bytes=-0"), 100, g, 4), 0);        /* 416 */
    assert_int_equal(eddy__files_ranges(str("bytes=0-"), 0, g, 4), 0);          /* empty file */
    assert_int_equal(eddy__files_ranges(str("bytes=200-, 0-1"), 100, g, 4), 1); /* the rest */
    assert_int_equal(eddy__files_ranges(str("bytes=5-2"), 100, g, 4), -1);
    assert_int_equal(eddy__files_ranges(str("bytes=a-b"), 100, g, 4), -1);
    assert_int_equal(eddy__files_ranges(str("bytes="), 100, g, 4), -1);
    assert_int_equal(eddy__files_ranges(str("items=0-1"), 100, g, 4), -1);
    assert_int_equal(eddy__files_ranges(str("bytes=1-1,2-2,3-3,4-4,5-5"), 100, g, 4), -1);
    assert_int_equal(eddy__files_ranges(str("bytes=0-99999999999999999999"), 100, g, 4), -1);
    assert_int_equal(eddy__files_ranges(str("bytes=18446744073709551615-"), 100, g, 4), -1);
}

static void test_files_accept_encoding_honours_q_zero(void **state)
{
    (void)state;
    assert_true(eddy__files_accepts(str("gzip, br"), "br"));
    assert_true(eddy__files_accepts(str("GZIP;q=0.5"), "gzip"));
    assert_false(eddy__files_accepts(str("gzip;q=0, br"), "gzip"));
    assert_false(eddy__files_accepts(str("gzip; q=0.000"), "gzip"));
    assert_true(eddy__files_accepts(str("gzip; q=0.001"), "gzip"));
    assert_false(eddy__files_accepts(str("identity"), "gzip"));
    assert_false(eddy__files_accepts(str("xgzip"), "gzip"));
}

/* ---------------------------------------------------------------------------------------
 * The handler on the embedded channel
 */

static char root[64];

/* The tree beneath root: files, a directory with an index and a precompressed page, and
 * links that point in and out (none of them may be followed). */
static const char *const tree_files[][2] = {
    {"a.txt", "abcdefghijklmnopqrstuvwxyz"},
    {"sub/index.html", "<p>index</p>"},
    {"sub/page.html", "<p>a page, plain</p>"},
    {"sub/page.html.gz", "not really gzip"},
};
static const char *const tree_links[][2] = {
    {"link-in", "a.txt"}, {"link-out", "/etc/hostname"}, {"dirlink", "sub"}, {"sub/up", ".."}};

static void root_path(char *out, size_t cap, const char *rel)
{
    snprintf(out, cap, "%s/%s", root, rel);
}

static int setup_root(void **state)
{
    (void)state;
    snprintf(root, sizeof(root), "/tmp/eddy-files-%d", (int)getpid());
    mkdir(root, 0700);
    char path[128];
    root_path(path, sizeof(path), "sub");
    mkdir(path, 0700);
    for (size_t i = 0; i < sizeof(tree_files) / sizeof(tree_files[0]); i++) {
        root_path(path, sizeof(path), tree_files[i][0]);
        FILE *f = fopen(path, "w");
        fputs(tree_files[i][1], f);
        fclose(f);
    }
    for (size_t i = 0; i < sizeof(tree_links) / sizeof(tree_links[0]); i++) {
        root_path(path, sizeof(path), tree_links[i][0]);
        assert_int_equal(symlink(tree_links[i][1], path), 0);
    }
    return 0;
}

static int teardown_root(void **state)
{
    (void)state;
    char path[128];
    for (size_t i = 0; i < sizeof(tree_links) / sizeof(tree_links[0]); i++) {
        root_path(path, sizeof(path), tree_links[i][0]);
        unlink(path);
    }
    for (size_t i = 0; i < sizeof(tree_files) / sizeof(tree_files[0]); i++) {
        root_path(path, sizeof(path), tree_files[i][0]);
        unlink(path);
    }
    root_path(path, sizeof(path), "sub");
    rmdir(path);
    rmdir(root);
    return 0;
}

/* A pipeline of the decoder, aggregator, encoder and file handler on root. */
static eddy_channel_t *files_channel(void)
{
    eddy_http_files_t *files;
    assert_int_equal(eddy_http_files_new(root, NULL, &files), 0);
    eddy_channel_t *ch = eddy_embedded_channel_new();
    assert_int_equal(EDDY_PIPELINE_ADD_LAST(eddy_channel_pipeline(ch),
                                            eddy_http_request_decoder(NULL),
                                            eddy_http_aggregator(0), eddy_http_response_encoder(),
                                            eddy_http_files_handler(files)),
                     0);
    eddy_http_files_release(files); /* the handler holds its own */
    return ch;
}

/* What the handler wrote for one request: the bytes of its buffers (head, and a body read
 * into memory), and the file region that followed, if any. */
typedef struct answer_s {
    char *text; /* NUL-terminated, malloc'd */
    size_t len, body;
    eddy_file_region_t *region; /* the caller's */
} answer_t;

static answer_t ask(eddy_channel_t *ch, const char *request)
{
    eddy_embedded_write_inbound(ch, eddy_buf_msg(eddy_buf_from(request, strlen(request))));
    answer_t a = {.text = calloc(1, 1)};
    assert_non_null(a.text);
    for (eddy_msg_t *m; (m = eddy_embedded_read_outbound(ch)) != NULL;) {
        eddy_buf_t *b = eddy_buf_of(m);
        if (b == NULL) {
            assert_null(a.region); /* one region an answer, last */
            a.region = eddy_file_region_of(m);
            assert_non_null(a.region);
            continue;
        }
        size_t n = eddy_buf_readable(b);
        a.text = realloc(a.text, a.len + n + 1);
        assert_non_null(a.text);
        memcpy(a.text + a.len, eddy_buf_read_ptr(b), n);
        a.len += n;
        a.text[a.len] = '\0';
        eddy_msg_release(m);
    }
    const char *end = strstr(a.text, "\r\n\r\n");
    assert_non_null(end);
    a.body = a.len - (size_t)(end + 4 - a.text);
    return a;
}

/* The answer's head has status; its body is len bytes from off of the file (0: no file's
 * bytes, only a text of the handler's or nothing): a region when the body is larger than the
 * handler reads at once, else in memory. */
static void expect(eddy_channel_t *ch, const char *request, const char *status, uint64_t off,
                   uint64_t len)
{
    answer_t a = ask(ch, request);
    if (strstr(a.text, status) == NULL) {
        print_error("asked:\n%s\nwanted \"%s\" in:\n%s\n", request, status, a.text);
    }
    assert_non_null(strstr(a.text, status));
    if (a.region != NULL) {
        assert_true(len > 16384);
        assert_int_equal(a.body, 0);
        assert_int_equal(eddy_file_region_offset(a.region), off);
        assert_int_equal(eddy_file_region_remaining(a.region), len);
        eddy_msg_release(eddy_file_region_msg(a.region));
    } else if (len > 0) {
        assert_int_equal(a.body, len);
    }
    free(a.text);
}

/* As expect, and the body in memory is body. */
static void expect_body(eddy_channel_t *ch, const char *request, const char *status,
                        const char *body)
{
    answer_t a = ask(ch, request);
    assert_non_null(strstr(a.text, status));
    assert_null(a.region);
    assert_int_equal(a.body, strlen(body));
    assert_memory_equal(a.text + a.len - a.body, body, a.body);
    free(a.text);
}

/* A file of n bytes at rel beneath the root (removed by the caller). */
static void make_file(const char *rel, size_t n)
{
    char path[128];
    root_path(path, sizeof(path), rel);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (size_t i = 0; i < n; i++) {
        fputc('a' + (int)(i % 26), f);
    }
    assert_int_equal(fclose(f), 0);
}

static void test_files_handler_answers_on_the_embedded_channel(void **state)
{
    (void)state;
    eddy_channel_t *ch = files_channel();
    expect_body(ch, "GET /a.txt HTTP/1.1\r\nHost: a\r\n\r\n", "HTTP/1.1 200 OK",
                "abcdefghijklmnopqrstuvwxyz");
    expect_body(ch, "GET /a.txt HTTP/1.1\r\nHost: a\r\nRange: bytes=3-4\r\n\r\n",
                "Content-Range: bytes 3-4/26", "de");
    /* A body of up to 16 KiB is read at once, so a queued answer holds no descriptor; a
     * larger one goes as the file's region (sendfile). */
    make_file("big.txt", 16385);
    expect(ch, "GET /big.txt HTTP/1.1\r\nHost: a\r\n\r\n", "200 OK", 0, 16385);
    expect(ch, "GET /big.txt HTTP/1.1\r\nHost: a\r\nRange: bytes=1-16384\r\n\r\n", "206", 1,
           16384);
    expect(ch, "GET /big.txt HTTP/1.1\r\nHost: a\r\nRange: bytes=0-\r\n\r\n", "206", 0, 16385);
    char path[128];
    root_path(path, sizeof(path), "big.txt");
    unlink(path);
    expect(ch, "HEAD /a.txt HTTP/1.1\r\nHost: a\r\n\r\n", "Content-Length: 26", 0, 0);
    expect(ch, "GET /a.txt HTTP/1.1\r\nHost: a\r\nIf-None-Match: *\r\n\r\n", "304", 0, 0);
    expect(ch, "GET /a.txt HTTP/1.1\r\nHost: a\r\nRange: bytes=26-\r\n\r\n", "bytes */26", 0, 0);
    expect(ch, "DELETE /a.txt HTTP/1.1\r\nHost: a\r\n\r\n", "405", 0, 0);
    expect(ch, "GET /%2e%2e/a.txt HTTP/1.1\r\nHost: a\r\n\r\n", "403", 0, 0);
    expect(ch, "GET /a.txt%00 HTTP/1.1\r\nHost: a\r\n\r\n", "403", 0, 0);
    expect(ch, "GET /nope HTTP/1.1\r\nHost: a\r\n\r\n", "404", 0, 0);
    expect(ch, "GET /a.txt HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", "200", 0, 26);
    assert_false(eddy_channel_is_active(ch)); /* closed after the answer */
    eddy_embedded_finish(ch);
}

/* What a path may name, by either way of resolving it: links are never followed, in or out;
 * directories give their index; a page's precompressed sibling is found and named. */
static void paths_resolve_beneath_the_root(void)
{
    eddy_channel_t *ch = files_channel();
    expect(ch, "GET //sub//index.html HTTP/1.1\r\nHost: a\r\n\r\n", "200 OK", 0, 12);
    expect(ch, "GET /sub/ HTTP/1.1\r\nHost: a\r\n\r\n", "text/html", 0, 12);
    expect(ch, "GET /sub HTTP/1.1\r\nHost: a\r\n\r\n", "Location: /sub/", 0, 0);
    expect(ch, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", "404", 0, 0); /* no index */
    expect(ch, "GET /sub/page.html HTTP/1.1\r\nHost: a\r\n\r\n", "Vary: Accept-Encoding", 0,
           20);
    expect(ch, "GET /sub/page.html HTTP/1.1\r\nHost: a\r\nAccept-Encoding: gzip\r\n\r\n",
           "Content-Encoding: gzip", 0, 15);
    expect(ch, "GET /link-in HTTP/1.1\r\nHost: a\r\n\r\n", "404", 0, 0);
    expect(ch, "GET /link-out HTTP/1.1\r\nHost: a\r\n\r\n", "404", 0, 0);
    expect(ch, "GET /dirlink/index.html HTTP/1.1\r\nHost: a\r\n\r\n", "404", 0, 0);
    expect(ch, "GET /sub/up/a.txt HTTP/1.1\r\nHost: a\r\n\r\n", "404", 0, 0);
    expect(ch, "GET /a.txt/ HTTP/1.1\r\nHost: a\r\n\r\n", "404", 0, 0);
    expect(ch, "GET /a.txt/x HTTP/1.1\r\nHost: a\r\n\r\n", "404", 0, 0);
    expect(ch, "GET /sub/%2e%2e/a.txt HTTP/1.1\r\nHost: a\r\n\r\n", "403", 0, 0);
    expect(ch, "GET /sub/. HTTP/1.1\r\nHost: a\r\n\r\n", "403", 0, 0);
    eddy_embedded_finish(ch);
}

static void test_files_paths_resolve_beneath_the_root_by_openat2(void **state)
{
    (void)state;
    eddy__files_force_walk(false); /* the walk all the same where the kernel lacks openat2 */
    paths_resolve_beneath_the_root();
}

static void test_files_paths_resolve_beneath_the_root_by_the_walk(void **state)
{
    (void)state;
    eddy__files_force_walk(true);
    paths_resolve_beneath_the_root();
    eddy__files_force_walk(false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_files_types_come_from_the_extension),
        cmocka_unit_test(test_files_dates_parse_imf_fixdate_only),
        cmocka_unit_test(test_files_if_none_match_compares_weakly),
        cmocka_unit_test(test_files_if_range_compares_strongly),
        cmocka_unit_test(test_files_ranges_clip_and_refuse),
        cmocka_unit_test(test_files_accept_encoding_honours_q_zero),
        cmocka_unit_test_setup_teardown(test_files_paths_resolve_beneath_the_root_by_openat2,
                                        setup_root, teardown_root),
        cmocka_unit_test_setup_teardown(test_files_paths_resolve_beneath_the_root_by_the_walk,
                                        setup_root, teardown_root),
        cmocka_unit_test_setup_teardown(test_files_handler_answers_on_the_embedded_channel,
                                        setup_root, teardown_root),
    };
    return cmocka_run_group_tests_name("codec.files", tests, NULL, NULL);
}
