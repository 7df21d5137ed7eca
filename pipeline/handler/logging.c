/*
 * The logging handler (Netty's LoggingHandler): an entry per event, then the event passed on
 * unchanged. Buffers are dumped as Netty's ByteBufUtil.appendPrettyHexDump() does, so logs
 * read the same next to a Netty peer's.
 *
 * Beyond Netty: the outbound read is logged ("READ REQUEST"), writability says which way it
 * changed, a user event shows its name and an idle event whether it is the first, and dumps
 * stop at max_dump bytes. By default entries go to the library's log (common.h), which is
 * asked first, as Netty asks its logger: an entry below its threshold is not built. A sink of
 * the user's own gets every entry with its level and decides.
 */
#include "pipeline/internal.h"

#include <eddy/handler.h>

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Netty dumps whole messages; a 64 KiB default keeps one huge write from flooding a log with
 * megabytes (4096 rows of 77 characters for 64 KiB). */
#define DEFAULT_MAX_DUMP ((size_t)64 * 1024)

typedef struct logging_s {
    eddy_log_level_t level;
    eddy_log_format_t format;
    eddy_log_cb sink; /* NULL: the library's log */
    void *sink_arg;
    size_t max_dump;
} logging_t;

static const char *level_name(eddy_log_level_t level)
{
    switch (level) {
    case EDDY_LOG_TRACE:
        return "TRACE";
    case EDDY_LOG_DEBUG:
        return "DEBUG";
    case EDDY_LOG_INFO:
        return "INFO";
    case EDDY_LOG_WARN:
        return "WARN";
    case EDDY_LOG_ERROR:
        return "ERROR";
    }
    return "LOG";
}

void eddy_log_to_file(eddy_log_level_t level, const char *text, void *file)
{
    fprintf(file != NULL ? file : stderr, "eddy: %s %s\n", level_name(level), text);
}

void *eddy_logging_handler_new(const eddy_logging_options_t *opts)
{
    logging_t *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    eddy_logging_options_t o = {0};
    if (opts != NULL) {
        o = *opts;
    }
    s->level = o.level != 0 ? o.level : EDDY_LOG_DEBUG;
    s->format = o.format;
    s->sink = o.sink;
    s->sink_arg = o.sink_arg;
    s->max_dump = o.max_dump != 0 ? o.max_dump : DEFAULT_MAX_DUMP;
    return s;
}

/* ---------------------------------------------------------------------------------------
 * Building an entry: a growing string. Out of memory, the entry is dropped, never the event.
 */

typedef struct text_s {
    char *s;
    size_t len, cap;
    bool failed;
} text_t;

static bool text_reserve(text_t *t, size_t n)
{
    if (t->failed) {
        return false;
    }
    if (t->len + n + 1 <= t->cap) {
        return true;
    }
    size_t cap = t->cap ? t->cap : 128;
    while (cap < t->len + n + 1) {
        cap *= 2;
    }
    char *s = realloc(t->s, cap);
    if (s == NULL) {
        t->failed = true;
        return false;
    }
    t->s = s;
    t->cap = cap;
    return true;
}

static void text_add(text_t *t, const char *s, size_t n)
{
    if (text_reserve(t, n)) {
        memcpy(t->s + t->len, s, n);
        t->len += n;
        t->s[t->len] = '\0';
    }
}

static void text_str(text_t *t, const char *s)
{
    text_add(t, s, strlen(s));
}

__attribute__((format(printf, 2, 3))) static void text_printf(text_t *t, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0) {
        return;
    }
    if ((size_t)n < sizeof(small)) {
        text_add(t, small, (size_t)n);
        return;
    }
    if (text_reserve(t, (size_t)n)) {
        va_start(ap, fmt);
        vsnprintf(t->s + t->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
        t->len += (size_t)n;
    }
}

/* Netty's Channel.toString(): "[id: 0x..., L:local - R:remote]", " ! " once inactive. */
static void text_channel(text_t *t, eddy_ctx_t *ctx)
{
    eddy_channel_t *ch = eddy_ctx_channel(ctx);
    const eddy_addr_t *local = eddy_channel_local_addr(ch);
    const eddy_addr_t *remote = eddy_channel_remote_addr(ch);
    char a[128], b[128];
    text_printf(t, "[id: 0x%08llx", (unsigned long long)eddy_channel_id(ch));
    if (remote->len > 0) {
        text_printf(t, ", L:%s %s R:%s", eddy_addr_format(local, a, sizeof(a)),
                    eddy_channel_is_active(ch) ? "-" : "!", eddy_addr_format(remote, b, sizeof(b)));
    } else if (local->len > 0) {
        text_printf(t, ", L:%s", eddy_addr_format(local, a, sizeof(a)));
    }
    text_str(t, "]");
}

/* Begin an entry with its channel: false, nothing built, when the library's log would drop
 * it (the threshold is one relaxed load; a hex dump is many rows). */
static bool entry_start(const logging_t *s, text_t *t, eddy_ctx_t *ctx)
{
    if (s->sink == NULL && !eddy__log_enabled(s->level)) {
        return false;
    }
    text_channel(t, ctx);
    return true;
}

static void emit(const logging_t *s, text_t *t)
{
    if (!t->failed && t->s != NULL) {
        if (s->sink != NULL) {
            s->sink(s->level, t->s, s->sink_arg);
        } else {
            eddy__log_text(s->level, t->s);
        }
    }
    free(t->s);
}

/* An entry without detail: "[channel] EVENT". */
static void log_event(eddy_ctx_t *ctx, const char *event)
{
    const logging_t *s = eddy_ctx_state(ctx);
    text_t t = {0};
    if (!entry_start(s, &t, ctx)) {
        return;
    }
    text_printf(&t, " %s", event);
    emit(s, &t);
}

/* ---------------------------------------------------------------------------------------
 * Hex dumps
 */

static const char dump_head[] = "         +-------------------------------------------------+\n"
                                "         |  0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f |\n"
                                "+--------+-------------------------------------------------+"
                                "----------------+";
static const char dump_rule[] = "+--------+-------------------------------------------------+"
                                "----------------+";

/* Up to 16 bytes at offset off of the message's readable bytes. */
static void msg_bytes(eddy_msg_t *msg, size_t off, uint8_t *dst, size_t n)
{
    eddy_buf_t *b = eddy_buf_of(msg);
    if (b != NULL) {
        memcpy(dst, eddy_buf_read_ptr(b) + off, n);
    } else {
        eddy_composite_get_bytes(eddy_composite_of(msg), off, dst, n);
    }
}

/* One row: "|00000010| 7f ff 5a <padding> |..Z<padding>|", after a newline. */
static void dump_row(text_t *t, size_t off, const uint8_t *row, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    char line[80];
    char *p = line;
    p += snprintf(p, 12, "\n|%08zx|", off & 0xffffffffu);
    for (size_t i = 0; i < 16; i++) {
        *p++ = ' ';
        *p++ = i < n ? hex[row[i] >> 4] : ' ';
        *p++ = i < n ? hex[row[i] & 0xf] : ' ';
    }
    *p++ = ' ';
    *p++ = '|';
    for (size_t i = 0; i < 16; i++) {
        /* Netty's BYTE2CHAR: control characters and everything from DEL up are dots. */
        *p++ = i >= n ? ' ' : row[i] <= 0x1f || row[i] >= 0x7f ? '.' : (char)row[i];
    }
    *p++ = '|';
    text_add(t, line, (size_t)(p - line));
}

static void dump(const logging_t *s, text_t *t, eddy_msg_t *msg, size_t len)
{
    size_t shown = len < s->max_dump ? len : s->max_dump;
    text_reserve(t, sizeof(dump_head) + (shown / 16 + 2) * 78 + sizeof(dump_rule) + 40);
    text_str(t, "\n");
    text_str(t, dump_head);
    for (size_t off = 0; off < shown; off += 16) {
        uint8_t row[16];
        size_t n = shown - off < 16 ? shown - off : 16;
        msg_bytes(msg, off, row, n);
        dump_row(t, off, row, n);
    }
    text_str(t, "\n");
    text_str(t, dump_rule);
    if (shown < len) {
        text_printf(t, "\n(%zu more bytes not shown)", len - shown);
    }
}

/* "[channel] EVENT: 19B" and the dump for bytes; "[channel] EVENT: message of type N" else. */
static void log_msg(eddy_ctx_t *ctx, const char *event, eddy_msg_t *msg)
{
    const logging_t *s = eddy_ctx_state(ctx);
    text_t t = {0};
    if (!entry_start(s, &t, ctx)) {
        return;
    }
    if (msg->type != EDDY_MSG_BUF && msg->type != EDDY_MSG_COMPOSITE) {
        text_printf(&t, " %s: message of type %u", event, msg->type);
        emit(s, &t);
        return;
    }
    size_t len = eddy__msg_bytes(msg);
    text_printf(&t, " %s: %zuB", event, len);
    if (s->format == EDDY_LOG_HEX_DUMP && len > 0) {
        dump(s, &t, msg, len);
    }
    emit(s, &t);
}

/* ---------------------------------------------------------------------------------------
 * Events, in the order of the ops table
 */

/* An event with nothing to show but its name: logged, then passed on with fire. */
#define LOG_EVENT(fn, name, fire)                                                              \
    static void fn(eddy_ctx_t *ctx)                                                            \
    {                                                                                          \
        log_event(ctx, name);                                                                  \
        fire(ctx);                                                                             \
    }

LOG_EVENT(log_registered, "REGISTERED", eddy_ctx_fire_channel_registered)
LOG_EVENT(log_unregistered, "UNREGISTERED", eddy_ctx_fire_channel_unregistered)
LOG_EVENT(log_active, "ACTIVE", eddy_ctx_fire_channel_active)
LOG_EVENT(log_inactive, "INACTIVE", eddy_ctx_fire_channel_inactive)
LOG_EVENT(log_read_complete, "READ COMPLETE", eddy_ctx_fire_channel_read_complete)

static void log_read(eddy_ctx_t *ctx, eddy_msg_t *msg)
{
    log_msg(ctx, "READ", msg);
    eddy_ctx_fire_channel_read(ctx, msg);
}

static const char *event_name(int event)
{
    switch (event) {
    case EDDY_EVENT_INPUT_SHUTDOWN:
        return "INPUT_SHUTDOWN";
    case EDDY_EVENT_OUTPUT_SHUTDOWN:
        return "OUTPUT_SHUTDOWN";
    case EDDY_EVENT_READER_IDLE:
        return "READER_IDLE";
    case EDDY_EVENT_WRITER_IDLE:
        return "WRITER_IDLE";
    case EDDY_EVENT_ALL_IDLE:
        return "ALL_IDLE";
    }
    return NULL;
}

static void log_user_event(eddy_ctx_t *ctx, int event, void *data)
{
    const logging_t *s = eddy_ctx_state(ctx);
    text_t t = {0};
    if (entry_start(s, &t, ctx)) {
        const char *name = event_name(event);
        if (name != NULL) {
            text_printf(&t, " USER_EVENT: %s", name);
        } else {
            text_printf(&t, " USER_EVENT: %d", event);
        }
        bool idle = event == EDDY_EVENT_READER_IDLE || event == EDDY_EVENT_WRITER_IDLE ||
                    event == EDDY_EVENT_ALL_IDLE;
        if (idle && data != NULL && ((const eddy_idle_event_t *)data)->first) {
            text_str(&t, " (first)");
        }
        emit(s, &t);
    }
    eddy_ctx_fire_user_event(ctx, event, data);
}

static void log_writability(eddy_ctx_t *ctx)
{
    bool writable = eddy_channel_is_writable(eddy_ctx_channel(ctx));
    log_event(ctx, writable ? "WRITABILITY CHANGED: writable" : "WRITABILITY CHANGED: unwritable");
    eddy_ctx_fire_channel_writability_changed(ctx);
}

static void log_exception(eddy_ctx_t *ctx, int err)
{
    const logging_t *s = eddy_ctx_state(ctx);
    text_t t = {0};
    if (entry_start(s, &t, ctx)) {
        text_printf(&t, " EXCEPTION: %s (%s)", eddy_err_name(err), eddy_strerror(err));
        emit(s, &t);
    }
    eddy_ctx_fire_exception(ctx, err);
}

/* "[channel] EVENT: a" or "[channel] EVENT: a, b", addresses as eddy_addr_format() has them. */
static void log_addrs(eddy_ctx_t *ctx, const char *event, const eddy_addr_t *a,
                      const eddy_addr_t *b)
{
    const logging_t *s = eddy_ctx_state(ctx);
    char x[128], y[128];
    text_t t = {0};
    if (!entry_start(s, &t, ctx)) {
        return;
    }
    text_printf(&t, " %s: %s", event, a != NULL ? eddy_addr_format(a, x, sizeof(x)) : "none");
    if (b != NULL) {
        text_printf(&t, ", %s", eddy_addr_format(b, y, sizeof(y)));
    }
    emit(s, &t);
}

static void log_bind(eddy_ctx_t *ctx, const eddy_addr_t *local, eddy_promise_t *p)
{
    log_addrs(ctx, "BIND", local, NULL);
    eddy_ctx_bind(ctx, local, p);
}

static void log_connect(eddy_ctx_t *ctx, const eddy_addr_t *remote, const eddy_addr_t *local,
                        eddy_promise_t *p)
{
    log_addrs(ctx, "CONNECT", remote, local);
    eddy_ctx_connect(ctx, remote, local, p);
}

static void log_disconnect(eddy_ctx_t *ctx, eddy_promise_t *p)
{
    log_event(ctx, "DISCONNECT");
    eddy_ctx_disconnect(ctx, p);
}

static void log_close(eddy_ctx_t *ctx, eddy_promise_t *p)
{
    log_event(ctx, "CLOSE");
    eddy_ctx_close(ctx, p);
}

static void log_deregister(eddy_ctx_t *ctx, eddy_promise_t *p)
{
    log_event(ctx, "DEREGISTER");
    eddy_ctx_deregister(ctx, p);
}

static void log_read_request(eddy_ctx_t *ctx)
{
    log_event(ctx, "READ REQUEST");
    eddy_ctx_read(ctx);
}

static void log_write(eddy_ctx_t *ctx, eddy_msg_t *msg, eddy_promise_t *p)
{
    log_msg(ctx, "WRITE", msg);
    eddy_ctx_write(ctx, msg, p);
}

static void log_flush(eddy_ctx_t *ctx)
{
    log_event(ctx, "FLUSH");
    eddy_ctx_flush(ctx);
}

static const eddy_handler_ops_t logging_ops = {
    .name = "logging",
    .sharable = true,
    .channel_registered = log_registered,
    .channel_unregistered = log_unregistered,
    .channel_active = log_active,
    .channel_inactive = log_inactive,
    .channel_read = log_read,
    .channel_read_complete = log_read_complete,
    .user_event_triggered = log_user_event,
    .channel_writability_changed = log_writability,
    .exception_caught = log_exception,
    .bind = log_bind,
    .connect = log_connect,
    .disconnect = log_disconnect,
    .close = log_close,
    .deregister = log_deregister,
    .read = log_read_request,
    .write = log_write,
    .flush = log_flush,
};

const eddy_handler_ops_t *eddy_logging_handler_ops(void)
{
    return &logging_ops;
}

eddy_handler_t eddy_logging_handler(const eddy_logging_options_t *opts)
{
    return eddy_handler(NULL, eddy_logging_handler_ops(), eddy_logging_handler_new(opts),
                        eddy_free_state);
}
