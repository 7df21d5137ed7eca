/*
 * The RESP request decoder: multibulk and inline commands into eddy_resp_cmd_t, on the
 * byte-to-message decoder base (codec/decoder.c).
 *
 * A multibulk command is parsed in place: its arguments are offsets from the first unconsumed
 * byte, kept across calls while the command is incomplete (the base never moves that byte
 * while nothing is consumed, even when it merges a read into a new buffer), so no byte is
 * looked at twice and a command trickling in byte by byte costs O(its length). Once complete,
 * the command takes a reference to the cumulation's buffer and its arguments point into it.
 */
#include <eddy/resp.h>

#include "buffer/layer.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Commands emitted per decode call: the base keeps 8 in place before its list takes the heap
 * (OUT_INLINE in codec/decoder.c), and calls decode again while it makes progress. */
#define EMIT_PER_CALL 8

/* Argument slots kept between commands; more (a huge MSET) are given back once it is out. */
#define SPANS_KEEP 1024

typedef struct span_s {
    size_t off, len;
} span_t;

typedef struct resp_s {
    size_t max_bulk, max_array, max_inline, max_command;
    bool failed;    /* the stream is broken: everything after the error is dropped */
    int64_t argc;   /* the multibulk command being parsed: its *n, or -1 between commands */
    int64_t bulk;   /* the length of the bulk awaited, or -1 before its $n line */
    size_t pos;     /* the next byte to parse, from the first unconsumed one */
    size_t scanned; /* bytes from pos already searched for the end of a line */
    span_t *spans;  /* the arguments parsed so far */
    size_t nspans, spans_cap;
} resp_t;

/* ---------------------------------------------------------------------------------------
 * Commands
 */

static void cmd_free(eddy_msg_t *msg)
{
    eddy_resp_cmd_t *cmd = EDDY_CONTAINER_OF(msg, eddy_resp_cmd_t, _msg);
    if (cmd->_held != NULL) {
        eddy_buf_release(cmd->_held);
    }
    free(cmd);
}

/* A command with room for argc arguments and extra bytes after them (at cmd_extra()). */
static eddy_resp_cmd_t *cmd_new(size_t argc, size_t extra)
{
    if (argc > (SIZE_MAX - sizeof(eddy_resp_cmd_t) - extra) / sizeof(eddy_resp_arg_t)) {
        return NULL;
    }
    eddy_resp_cmd_t *cmd = malloc(sizeof(*cmd) + argc * sizeof(eddy_resp_arg_t) + extra);
    if (cmd == NULL) {
        return NULL;
    }
    eddy_msg_init(&cmd->_msg, EDDY_MSG_RESP_CMD, cmd_free);
    cmd->argc = argc;
    cmd->argv = (eddy_resp_arg_t *)(cmd + 1);
    cmd->error = NULL;
    cmd->is_inline = false;
    cmd->_held = NULL;
    return cmd;
}

static uint8_t *cmd_extra(eddy_resp_cmd_t *cmd)
{
    return (uint8_t *)(cmd->argv + cmd->argc);
}

eddy_resp_cmd_t *eddy_resp_cmd_of(eddy_msg_t *msg)
{
    if (msg == NULL || msg->type != EDDY_MSG_RESP_CMD) {
        return NULL;
    }
    return EDDY_CONTAINER_OF(msg, eddy_resp_cmd_t, _msg);
}

void eddy_resp_cmd_release(eddy_resp_cmd_t *cmd)
{
    if (cmd != NULL) {
        eddy_msg_release(&cmd->_msg);
    }
}

bool eddy_resp_arg_is(const eddy_resp_cmd_t *cmd, size_t i, const char *s)
{
    if (i >= cmd->argc) {
        return false;
    }
    const eddy_resp_arg_t *a = &cmd->argv[i];
    for (size_t k = 0; k < a->len; k++) {
        uint8_t c = a->ptr[k], d = (uint8_t)s[k];
        if (d == 0) {
            return false;
        }
        if (c >= 'A' && c <= 'Z') {
            c = (uint8_t)(c + ('a' - 'A'));
        }
        if (d >= 'A' && d <= 'Z') {
            d = (uint8_t)(d + ('a' - 'A'));
        }
        if (c != d) {
            return false;
        }
    }
    return s[a->len] == '\0';
}

/* Redis' string2ll: what it accepts as an integer, and nothing else. */
bool eddy_resp_parse_int(const uint8_t *p, size_t n, int64_t *out)
{
    if (n == 0 || n > 20) {
        return false;
    }
    if (n == 1 && p[0] == '0') {
        *out = 0;
        return true;
    }
    bool neg = p[0] == '-';
    size_t i = neg ? 1 : 0;
    if (i == n || p[i] < '1' || p[i] > '9') {
        return false;
    }
    uint64_t v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return false;
        }
        unsigned d = (unsigned)(p[i] - '0');
        if (v > (UINT64_MAX - d) / 10) {
            return false;
        }
        v = v * 10 + d;
    }
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1) {
            return false;
        }
        *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    } else {
        if (v > INT64_MAX) {
            return false;
        }
        *out = (int64_t)v;
    }
    return true;
}

/* ---------------------------------------------------------------------------------------
 * Errors: one last command carrying the text, then nothing
 */

static void reset(resp_t *r)
{
    assert(r->nspans <= r->spans_cap);
    r->argc = -1;
    r->bulk = -1;
    r->pos = 0;
    r->scanned = 0;
    r->nspans = 0;
    if (r->spans_cap > SPANS_KEEP) {
        free(r->spans);
        r->spans = NULL;
        r->spans_cap = 0;
    }
}

static int fail(resp_t *r, eddy_cumulation_t *in, eddy_decoder_out_t *out, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Emit the error command for fmt and drop the stream from here on. */
static int fail(resp_t *r, eddy_cumulation_t *in, eddy_decoder_out_t *out, const char *fmt, ...)
{
    char text[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof(text) ? (size_t)n : sizeof(text) - 1;
    r->failed = true;
    reset(r);
    eddy_cumulation_skip(in, eddy_cumulation_readable(in));
    eddy_resp_cmd_t *cmd = cmd_new(0, len + 1);
    if (cmd == NULL) {
        return EDDY_ENOMEM;
    }
    char *e = (char *)cmd_extra(cmd);
    memcpy(e, text, len);
    e[len] = '\0';
    cmd->error = e;
    return eddy_decoder_emit(out, &cmd->_msg);
}

/* ---------------------------------------------------------------------------------------
 * Inline commands
 */

static bool is_space(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int hex_digit(uint8_t c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/*
 * Split the n bytes of a line into arguments as Redis' sdssplitargs does: words between
 * blanks; "double quotes" with \n \r \t \b \a \xHH and \<any> escapes; 'single quotes' with
 * \' alone; a closing quote must be followed by a blank or the end. Counting pass when argv is
 * NULL; else the unquoted bytes go to dst and argv points at them. The number of arguments,
 * or -1 for unbalanced quotes.
 */
static int64_t split_args(const uint8_t *s, size_t n, uint8_t *dst, eddy_resp_arg_t *argv)
{
    int64_t argc = 0;
    size_t i = 0;
    for (;;) {
        while (i < n && is_space(s[i])) {
            i++;
        }
        if (i == n) {
            return argc;
        }
        uint8_t *start = dst;
        size_t len = 0;
        bool inq = false, insq = false, done = false;
#define PUT(c)                                                                                     \
    do {                                                                                           \
        if (dst != NULL) {                                                                         \
            *dst++ = (uint8_t)(c);                                                                 \
        }                                                                                          \
        len++;                                                                                     \
    } while (0)
        while (!done) {
            bool end = i == n;
            uint8_t c = end ? 0 : s[i];
            if (inq) {
                if (end) {
                    return -1;
                }
                if (c == '\\' && i + 3 < n && s[i + 1] == 'x' && hex_digit(s[i + 2]) >= 0 &&
                    hex_digit(s[i + 3]) >= 0) {
                    PUT(hex_digit(s[i + 2]) * 16 + hex_digit(s[i + 3]));
                    i += 3;
                } else if (c == '\\' && i + 1 < n) {
                    i++;
                    switch (s[i]) {
                    case 'n':
                        PUT('\n');
                        break;
                    case 'r':
                        PUT('\r');
                        break;
                    case 't':
                        PUT('\t');
                        break;
                    case 'b':
                        PUT('\b');
                        break;
                    case 'a':
                        PUT('\a');
                        break;
                    default:
                        PUT(s[i]);
                        break;
                    }
                } else if (c == '"') {
                    if (i + 1 < n && !is_space(s[i + 1])) {
                        return -1;
                    }
                    done = true;
                } else {
                    PUT(c);
                }
            } else if (insq) {
                if (end) {
                    return -1;
                }
                if (c == '\\' && i + 1 < n && s[i + 1] == '\'') {
                    i++;
                    PUT('\'');
                } else if (c == '\'') {
                    if (i + 1 < n && !is_space(s[i + 1])) {
                        return -1;
                    }
                    done = true;
                } else {
                    PUT(c);
                }
            } else if (end || is_space(c)) {
                done = true;
            } else if (c == '"') {
                inq = true;
            } else if (c == '\'') {
                insq = true;
            } else {
                PUT(c);
            }
            if (!end) {
                i++;
            }
        }
#undef PUT
        if (argv != NULL) {
            argv[argc] = (eddy_resp_arg_t){start, len};
        }
        argc++;
    }
}

/* An inline request at the front of p[0, n): emits it, or waits for its end of line. */
static int decode_inline(resp_t *r, eddy_cumulation_t *in, eddy_decoder_out_t *out,
                         const uint8_t *p, size_t n, bool *more)
{
    const uint8_t *nl = memchr(p + r->scanned, '\n', n - r->scanned);
    if (nl == NULL) {
        if (n > r->max_inline) {
            return fail(r, in, out, "Protocol error: too big inline request");
        }
        r->scanned = n;
        *more = true;
        return 0;
    }
    size_t line = (size_t)(nl - p);
    r->scanned = 0;
    if (line > r->max_inline) {
        return fail(r, in, out, "Protocol error: too big inline request");
    }
    size_t end = line > 0 && p[line - 1] == '\r' ? line - 1 : line;
    int64_t argc = split_args(p, end, NULL, NULL);
    if (argc < 0) {
        return fail(r, in, out, "Protocol error: unbalanced quotes in request");
    }
    if (argc == 0) {
        eddy_cumulation_skip(in, line + 1); /* an empty line: Redis ignores it too */
        return 0;
    }
    eddy_resp_cmd_t *cmd = cmd_new((size_t)argc, end);
    if (cmd == NULL) {
        return EDDY_ENOMEM;
    }
    split_args(p, end, cmd_extra(cmd), cmd->argv);
    cmd->is_inline = true;
    eddy_cumulation_skip(in, line + 1);
    return eddy_decoder_emit(out, &cmd->_msg);
}

/* ---------------------------------------------------------------------------------------
 * Multibulk commands
 */

/* The "*n" or "$n" line at r->pos: 1 and its number in *v with r->pos past it, 0 when it is
 * not all there yet, -1 when it is too long or malformed (the caller says which). */
static int header_line(resp_t *r, const uint8_t *p, size_t n, int64_t *v, bool *too_long)
{
    size_t from = r->pos + r->scanned;
    const uint8_t *cr = from < n ? memchr(p + from, '\r', n - from) : NULL;
    if (cr == NULL) {
        r->scanned = n - r->pos;
        *too_long = r->scanned > r->max_inline;
        return *too_long ? -1 : 0;
    }
    size_t at = (size_t)(cr - p);
    if (at - r->pos > r->max_inline) {
        *too_long = true;
        return -1;
    }
    *too_long = false;
    if (at + 1 == n) {
        r->scanned = at - r->pos; /* the '\r' again next time, with its '\n' */
        return 0;
    }
    if (p[at + 1] != '\n' || !eddy_resp_parse_int(p + r->pos + 1, at - r->pos - 1, v)) {
        return -1;
    }
    r->pos = at + 2;
    r->scanned = 0;
    return 1;
}

static int push_span(resp_t *r, size_t off, size_t len)
{
    assert(r->argc > 0 && (int64_t)r->nspans < r->argc); /* room left in the command */
    if (r->nspans == r->spans_cap) {
        span_t *s = eddy__array_grow(r->spans, &r->spans_cap, sizeof(*s), 16);
        if (s == NULL) {
            return EDDY_ENOMEM;
        }
        r->spans = s;
    }
    r->spans[r->nspans++] = (span_t){off, len};
    return 0;
}

static int decode_multibulk(resp_t *r, eddy_cumulation_t *in, eddy_decoder_out_t *out,
                            eddy_buf_t *b, bool *more)
{
    const uint8_t *p = eddy_buf_read_ptr(b);
    size_t n = eddy_buf_readable(b);
    int64_t v;
    bool too_long;
    if (r->argc < 0) {
        int h = header_line(r, p, n, &v, &too_long);
        if (h == 0) {
            *more = true;
            return 0;
        }
        if (h < 0) {
            return fail(r, in, out,
                        too_long ? "Protocol error: too big mbulk count string"
                                 : "Protocol error: invalid multibulk length");
        }
        if (v > 0 && (uint64_t)v > r->max_array) {
            return fail(r, in, out, "Protocol error: invalid multibulk length");
        }
        if (v <= 0) {
            /* *0 and *-1: Redis reads them as no command at all. */
            eddy_cumulation_skip(in, r->pos);
            reset(r);
            return 0;
        }
        r->argc = v;
    }
    while ((int64_t)r->nspans < r->argc) {
        if (r->bulk < 0) {
            if (r->pos >= n) {
                *more = true;
                return 0;
            }
            if (p[r->pos] != '$') {
                uint8_t c = p[r->pos];
                return fail(r, in, out, "Protocol error: expected '$', got '%c'",
                            c >= 0x20 && c < 0x7f ? c : '?');
            }
            int h = header_line(r, p, n, &v, &too_long);
            if (h == 0) {
                *more = true;
                return 0;
            }
            if (h < 0 || v < 0 || (uint64_t)v > r->max_bulk) {
                return fail(r, in, out,
                            too_long ? "Protocol error: too big bulk count string"
                                     : "Protocol error: invalid bulk length");
            }
            if ((uint64_t)v + 2 > r->max_command || r->pos > r->max_command - (size_t)v - 2) {
                return fail(r, in, out, "Protocol error: command too long");
            }
            r->bulk = v;
        }
        size_t len = (size_t)r->bulk;
        if (n - r->pos < len + 2) {
            *more = true;
            return 0;
        }
        if (p[r->pos + len] != '\r' || p[r->pos + len + 1] != '\n') {
            return fail(r, in, out, "Protocol error: expected CRLF after bulk string");
        }
        int err = push_span(r, r->pos, len);
        if (err != 0) {
            return err;
        }
        r->pos += len + 2;
        r->bulk = -1;
    }
    assert(r->argc > 0 && (int64_t)r->nspans == r->argc && r->bulk < 0 && r->pos <= n);
    eddy_resp_cmd_t *cmd = cmd_new(r->nspans, 0);
    if (cmd == NULL) {
        return EDDY_ENOMEM;
    }
    for (size_t i = 0; i < r->nspans; i++) {
        cmd->argv[i] = (eddy_resp_arg_t){p + r->spans[i].off, r->spans[i].len};
    }
    cmd->_held = eddy_buf_retain(b);
    eddy_cumulation_skip(in, r->pos);
    reset(r);
    return eddy_decoder_emit(out, &cmd->_msg);
}

/* ---------------------------------------------------------------------------------------
 * The decoder
 */

static int resp_decode(eddy_ctx_t *ctx, void *self, eddy_cumulation_t *in, eddy_decoder_out_t *out)
{
    (void)ctx;
    resp_t *r = self;
    if (r->failed) {
        return eddy_cumulation_skip(in, eddy_cumulation_readable(in));
    }
    for (int emitted = 0; emitted < EMIT_PER_CALL && !r->failed; emitted++) {
        size_t readable = eddy_cumulation_readable(in);
        if (readable == 0) {
            return 0;
        }
        if (r->bulk >= 0 && readable - r->pos < (size_t)r->bulk + 2) {
            return 0; /* a bulk still coming in: no need to look, or to merge components */
        }
        eddy_buf_t *b = eddy_cumulation_buf(in);
        assert(b == NULL || eddy_buf_readable(b) == readable); /* the whole input, flat */
        bool more = false;
        int err = EDDY_ENOMEM;
        if (b != NULL) {
            const uint8_t *p = eddy_buf_read_ptr(b);
            err = r->argc < 0 && p[0] != '*'
                      ? decode_inline(r, in, out, p, eddy_buf_readable(b), &more)
                      : decode_multibulk(r, in, out, b, &more);
        }
        if (err != 0) {
            /* Out of memory: the base discards what it holds and raises the error, so the
             * stream has a hole; nothing after it may be read as commands. */
            r->failed = true;
            reset(r);
            return err;
        }
        if (more) {
            return 0;
        }
    }
    return 0;
}

static void resp_destroy(void *self)
{
    resp_t *r = self;
    free(r->spans);
    r->spans = NULL;
}

static const eddy_decoder_ops_t resp_decoder = {
    .name = "resp_decoder",
    .decode = resp_decode,
    .destroy = resp_destroy,
};

static const eddy_handler_ops_t resp_handler = EDDY_DECODER_HANDLER_OPS("resp_decoder");

eddy_decoder_t *eddy_resp_decoder_new(const eddy_resp_decoder_options_t *o)
{
    eddy_decoder_t *d = eddy_decoder_new(&resp_decoder, sizeof(resp_t));
    if (d == NULL) {
        return NULL;
    }
    resp_t *r = eddy_decoder_self(d);
    eddy_resp_decoder_options_t none = {0};
    if (o == NULL) {
        o = &none;
    }
    r->max_bulk = o->max_bulk_len != 0 ? o->max_bulk_len : EDDY_RESP_DEFAULT_MAX_BULK_LEN;
    r->max_array = o->max_array_len != 0 ? o->max_array_len : EDDY_RESP_DEFAULT_MAX_ARRAY_LEN;
    r->max_inline = o->max_inline_len != 0 ? o->max_inline_len : EDDY_RESP_DEFAULT_MAX_INLINE_LEN;
    r->max_command =
        o->max_command_len != 0 ? o->max_command_len : EDDY_RESP_DEFAULT_MAX_COMMAND_LEN;
    if (r->max_command < 2) {
        r->max_command = 2;
    }
    r->argc = -1;
    r->bulk = -1;
    return d;
}

const eddy_handler_ops_t *eddy_resp_decoder_ops(void)
{
    return &resp_handler;
}

eddy_handler_t eddy_resp_decoder(const eddy_resp_decoder_options_t *opts)
{
    return eddy_handler(NULL, eddy_resp_decoder_ops(), eddy_resp_decoder_new(opts),
                        eddy_free_state);
}
