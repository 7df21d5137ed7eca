/*
 * eddy RESP: the Redis serialization protocol (RESP2), requests in and replies out (Netty's
 * codec-redis, server side).
 *
 * The decoder is a byte-to-message decoder (codec.h) turning the two request forms Redis
 * accepts into command messages (eddy_resp_cmd_t):
 *
 *     *3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n      multibulk: an array of bulk strings
 *     SET k "two words"\r\n                           inline: words, quotes as redis-cli reads
 *
 * A multibulk command's arguments point into the bytes as they were read (the command holds a
 * reference to that buffer: no copy); an inline command's are unquoted into a copy. Parsing
 * resumes where it stopped, so a command arriving byte by byte costs O(its length).
 *
 * Limits (eddy_resp_decoder_options_t): a bulk longer than max_bulk_len, an array longer than
 * max_array_len, an inline request or header line longer than max_inline_len, a command larger
 * than max_command_len, and malformed input all end the stream: the decoder emits one last
 * command whose error is set ("Protocol error: invalid bulk length", Redis' texts) and
 * discards everything after it. The handler answers it with eddy_resp_write_error() and
 * closes after the flush (eddy_resp_close_after_flush()), as Redis does. Commands before it
 * in the stream are emitted first, in order.
 *
 * The encoder is a set of writers appending RESP2 replies to a buffer: a server appends the
 * replies of one read batch to one buffer and writes and flushes it in channel_read_complete,
 * one system call per batch however deep the client pipelines.
 *
 * Threads: the decoder runs on its channel's loop like every handler; the writers touch only
 * the buffer they are given.
 */
#ifndef EDDY_RESP_H
#define EDDY_RESP_H

#include <eddy/buffer.h>
#include <eddy/codec.h>
#include <eddy/common.h>
#include <eddy/pipeline.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The message type of eddy_resp_cmd_t. Below EDDY_MSG_USER: a library codec's. */
#define EDDY_MSG_RESP_CMD 82u

/* The defaults of eddy_resp_decoder_options_t (Redis: 512 MiB bulks, 1M-element arrays,
 * 64 KiB inline requests, 1 GiB query buffers). */
#define EDDY_RESP_DEFAULT_MAX_BULK_LEN ((size_t)64 << 20)
#define EDDY_RESP_DEFAULT_MAX_ARRAY_LEN ((size_t)1 << 20)
#define EDDY_RESP_DEFAULT_MAX_INLINE_LEN ((size_t)64 << 10)
#define EDDY_RESP_DEFAULT_MAX_COMMAND_LEN ((size_t)256 << 20)

typedef struct eddy_resp_decoder_options_s {
    size_t max_bulk_len;    /* longest bulk string ($n); 0: the default */
    size_t max_array_len;   /* most arguments of a multibulk command (*n); 0: the default */
    size_t max_inline_len;  /* longest inline request, or *n / $n header line; 0: default */
    size_t max_command_len; /* most bytes of one command on the wire; 0: the default */
} eddy_resp_decoder_options_t;

/* One argument: len bytes at ptr (not NUL-terminated; may hold any byte). */
typedef struct eddy_resp_arg_s {
    const uint8_t *ptr;
    size_t len;
} eddy_resp_arg_t;

/* A command, as the decoder emits it: a message of type EDDY_MSG_RESP_CMD. The receiver owns
 * one reference and releases it with eddy_msg_release(&cmd->_msg) or eddy_resp_cmd_release().
 * argc >= 1, except for the last command of a broken stream: argc 0 and error set. */
typedef struct eddy_resp_cmd_s {
    eddy_msg_t _msg;
    size_t argc;
    eddy_resp_arg_t *argv; /* valid as long as the command is */
    const char *error;     /* NULL, or the protocol error ending the stream ("Protocol error:
                              ...", NUL-terminated, held by the command) */
    bool is_inline;        /* it came as an inline request */
    eddy_buf_t *_held;     /* the bytes argv points into (multibulk), or NULL */
} eddy_resp_cmd_t;

/* ---------------------------------------------------------------------------------------
 * The decoder
 */

/**
 * A RESP request decoder (o borrowed; NULL: the defaults), for eddy_pipeline_add_*() with
 * eddy_resp_decoder_ops() and eddy_free_state. NULL when out of memory. MERGE cumulation:
 * COMPOSITE works too, but argv needs the bytes in one piece, so it merges them anyway.
 */
EDDY_EXTERN eddy_decoder_t *eddy_resp_decoder_new(const eddy_resp_decoder_options_t *o);

/** The handler table for RESP decoders. */
EDDY_EXTERN const eddy_handler_ops_t *eddy_resp_decoder_ops(void);
/** The decoder as one value (pipeline.h, eddy_handler_t): ops and state. */
EDDY_EXTERN eddy_handler_t eddy_resp_decoder(const eddy_resp_decoder_options_t *o);

/** The command behind msg, or NULL when msg is not one. Borrows. */
EDDY_EXTERN eddy_resp_cmd_t *eddy_resp_cmd_of(eddy_msg_t *msg);

/** Release the caller's reference to cmd (NULL is ignored). Any thread. */
EDDY_EXTERN void eddy_resp_cmd_release(eddy_resp_cmd_t *cmd);

/** Parse the n bytes at p as Redis does integers (string2ll): an optional '-', digits, no
 * leading zeros or signs or spaces, within int64_t. true and *out, or false. */
EDDY_EXTERN bool eddy_resp_parse_int(const uint8_t *p, size_t n, int64_t *out);

/** Whether argument i of cmd equals the NUL-terminated s, ignoring ASCII case: how commands
 * and options are matched ("get", "EX"). False when i >= argc. */
EDDY_EXTERN bool eddy_resp_arg_is(const eddy_resp_cmd_t *cmd, size_t i, const char *s);

/* ---------------------------------------------------------------------------------------
 * The encoder: RESP2 replies appended to out. Each returns 0, EDDY_ECAPACITY or EDDY_ENOMEM
 * (out is then unchanged or holds a partial reply: a server closes the channel).
 */

/** "+s\r\n". CR and LF in s become spaces (they would end the reply). */
EDDY_EXTERN int eddy_resp_write_simple(eddy_buf_t *out, const char *s, size_t n);
/** "-s\r\n", s starting with its code ("ERR ...", "WRONGTYPE ..."); CR, LF become spaces. */
EDDY_EXTERN int eddy_resp_write_error(eddy_buf_t *out, const char *s, size_t n);
/** eddy_resp_write_error() of a printf format; the text is cut at 1023 bytes. */
EDDY_EXTERN int eddy_resp_write_errorf(eddy_buf_t *out, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/** ":v\r\n". */
EDDY_EXTERN int eddy_resp_write_integer(eddy_buf_t *out, int64_t v);
/** "$n\r\n" then n bytes at p (NULL when n is 0) then "\r\n". */
EDDY_EXTERN int eddy_resp_write_bulk(eddy_buf_t *out, const void *p, size_t n);
/** The bulk string of a NUL-terminated s. */
EDDY_EXTERN int eddy_resp_write_bulk_str(eddy_buf_t *out, const char *s);
/** "$-1\r\n": the null bulk string (GET of a missing key). */
EDDY_EXTERN int eddy_resp_write_null_bulk(eddy_buf_t *out);
/** "*n\r\n": an array of the n replies written next. */
EDDY_EXTERN int eddy_resp_write_array(eddy_buf_t *out, size_t n);
/** "*-1\r\n": the null array. */
EDDY_EXTERN int eddy_resp_write_null_array(eddy_buf_t *out);

/**
 * Write last (taken over; NULL: nothing more), then eddy_ctx_close_after_flush(): the channel
 * closes gracefully once what was queued before and last are out, dropping what the client
 * still sends meanwhile (channel.h). How a server ends a connection after a protocol error or
 * QUIT. The channel's loop.
 */
EDDY_EXTERN void eddy_resp_close_after_flush(eddy_ctx_t *ctx, eddy_msg_t *last);

#ifdef __cplusplus
}
#endif
#endif /* EDDY_RESP_H */
