/*
 * Delimited framing: the delimiter decoder (Netty's DelimiterBasedFrameDecoder) and the line
 * decoder (Netty's LineBasedFrameDecoder), which is the delimiter decoder over "\r\n" and "\n"
 * with a faster search. Where several delimiters match, the one giving the shortest frame wins.
 * A frame longer than the maximum is never buffered: its bytes are skipped as they arrive, up
 * to and with its delimiter, and EDDY_ETOOLONGFRAME is raised once.
 *
 * Unlike Netty, bytes that may begin a delimiter (a "\r" waiting for its "\n") are kept while
 * discarding, so a delimiter split across two reads still ends the discarded frame, and they do
 * not count toward the maximum, so a frame of exactly the maximum is not refused for the first
 * half of its delimiter.
 */
#include <eddy/codec.h>

#include <assert.h>
#include <string.h>

typedef struct delim_s {
    const uint8_t *bytes; /* in the state's own block, after the array */
    size_t len;
} delim_t;

typedef struct delimiter_s {
    size_t max;
    bool strip;
    bool fail_fast;
    bool lines;      /* the delimiters are "\r\n" and "\n": search for "\n" alone */
    bool discarding; /* skipping a too-long frame up to its delimiter */
    size_t scanned;  /* offsets before this start no delimiter (already searched) */
    size_t longest;  /* the longest delimiter's length */
    uint8_t *tail;   /* scratch: the last longest - 1 readable bytes */
    size_t n;
    delim_t delim[]; /* then the tail scratch, then the delimiters' bytes */
} delimiter_t;

static const eddy_delimiter_t line_delimiters[] = {{"\r\n", 2}, {"\n", 1}};

/* The frame's length up to the first "\r\n" or "\n", with the delimiter's length in *len;
 * EDDY_ENOENT or a search error. */
static int64_t find_line_end(eddy_cumulation_t *in, size_t from, size_t *len)
{
    int64_t i = eddy_cumulation_find(in, from, '\n');
    uint8_t cr = 0;
    if (i > 0 && eddy_cumulation_get_bytes(in, (size_t)i - 1, &cr, 1) == 0 && cr == '\r') {
        *len = 2;
        return i - 1;
    }
    *len = 1;
    return i;
}

/* Whether a delimiter the input ends inside could still beat the one found at best (listed
 * winner-th): one starting before best, or at best and listed before it. Then the frame waits
 * for more bytes, so that where the reads split the stream does not change the frames (with
 * "eee" listed before "ee", "xeee" read as "xee" then "e" must still end at "eee", as read
 * whole). */
static bool may_be_beaten(delimiter_t *dd, const eddy_cumulation_t *in, size_t readable,
                          size_t best, size_t winner)
{
    size_t have = dd->longest - 1 < readable ? dd->longest - 1 : readable;
    assert(best < readable && winner < dd->n);
    if (have == 0) {
        return false;
    }
    eddy_cumulation_get_bytes(in, readable - have, dd->tail, have);
    for (size_t j = 0; j < dd->n; j++) {
        /* k: how many of delimiter j's bytes the input holds, starting at readable - k. */
        for (size_t k = dd->delim[j].len - 1 < have ? dd->delim[j].len - 1 : have; k > 0; k--) {
            size_t start = readable - k;
            if (start > best || (start == best && j >= winner)) {
                continue;
            }
            if (memcmp(dd->tail + have - k, dd->delim[j].bytes, k) == 0) {
                return true;
            }
        }
    }
    return false;
}

/* The frame length to the delimiter making the shortest frame, with that delimiter's length in
 * *len; EDDY_ENOENT when none is there yet (or one still arriving may beat it), or a search
 * error. Searches only from where the last call stopped, so a frame trickling in costs O(its
 * length), not O(length^2). */
static int64_t find_delimiter(delimiter_t *dd, eddy_cumulation_t *in, size_t readable, size_t *len)
{
    size_t from = dd->scanned <= readable ? dd->scanned : 0;
    assert(dd->n > 0 && dd->longest > 0); /* the options had a delimiter */
    int64_t best = EDDY_ENOENT;
    if (dd->lines) {
        best = find_line_end(in, from, len);
    } else {
        size_t winner = 0;
        for (size_t i = 0; i < dd->n; i++) {
            int64_t at = eddy_cumulation_find_bytes(in, from, dd->delim[i].bytes, dd->delim[i].len);
            if (at < 0 && at != EDDY_ENOENT) {
                return at;
            }
            if (at >= 0 && (best < 0 || at < best)) {
                best = at;
                winner = i;
                *len = dd->delim[i].len;
            }
        }
        if (best >= 0 && may_be_beaten(dd, in, readable, (size_t)best, winner)) {
            dd->scanned = 0; /* searched again once more bytes came */
            return EDDY_ENOENT;
        }
    }
    if (best >= 0) {
        dd->scanned = 0;
    } else if (best == EDDY_ENOENT) {
        /* Every delimiter that could start before here would have ended in what we have. */
        dd->scanned = readable >= dd->longest ? readable - dd->longest + 1 : 0;
    }
    return best;
}

/* How many of the last readable bytes may be the start of a delimiter that the next read
 * completes: the longest proper prefix of a delimiter that the bytes end with. */
static size_t partial_delimiter(delimiter_t *dd, const eddy_cumulation_t *in, size_t readable)
{
    size_t have = dd->longest - 1 < readable ? dd->longest - 1 : readable;
    if (have == 0) {
        return 0;
    }
    eddy_cumulation_get_bytes(in, readable - have, dd->tail, have);
    size_t best = 0;
    for (size_t i = 0; i < dd->n; i++) {
        size_t k = dd->delim[i].len - 1 < have ? dd->delim[i].len - 1 : have;
        for (; k > best; k--) {
            if (memcmp(dd->tail + have - k, dd->delim[i].bytes, k) == 0) {
                best = k;
                break;
            }
        }
    }
    return best;
}

static int delimiter_decode(eddy_ctx_t *ctx, void *self, eddy_cumulation_t *in,
                            eddy_decoder_out_t *out)
{
    (void)ctx;
    delimiter_t *dd = self;
    size_t readable = eddy_cumulation_readable(in);
    size_t delim = 0;
    int64_t at = find_delimiter(dd, in, readable, &delim);
    if (at < 0 && at != EDDY_ENOENT) {
        return (int)at; /* out of memory for the search */
    }
    if (at >= 0) {
        size_t len = (size_t)at;
        assert(delim > 0 && delim <= dd->longest && len + delim <= readable);
        if (dd->discarding || len > dd->max) {
            eddy_cumulation_skip(in, len + delim);
            bool was_discarding = dd->discarding;
            dd->discarding = false;
            /* Raised now unless it was when discarding began. */
            if (!was_discarding || !dd->fail_fast) {
                eddy_decoder_raise(out, EDDY_ETOOLONGFRAME);
            }
            return 0;
        }
        eddy_buf_t *frame = eddy_cumulation_read_buf(in, dd->strip ? len : len + delim);
        if (frame != NULL && dd->strip) {
            eddy_cumulation_skip(in, delim);
        }
        return eddy_decoder_emit_buf(out, frame);
    }
    size_t keep = partial_delimiter(dd, in, readable);
    assert(keep < dd->longest && keep <= readable);
    if (!dd->discarding && readable - keep <= dd->max) {
        return 0; /* the frame may still end in time */
    }
    eddy_cumulation_skip(in, readable - keep);
    dd->scanned = 0;
    if (!dd->discarding) {
        dd->discarding = true;
        if (dd->fail_fast) {
            eddy_decoder_raise(out, EDDY_ETOOLONGFRAME);
        }
    }
    return 0;
}

static const eddy_decoder_ops_t delimiter_decoder = {
    .name = "delimiter_decoder",
    .decode = delimiter_decode,
};

static const eddy_decoder_ops_t line_decoder = {
    .name = "line_decoder",
    .decode = delimiter_decode,
};

static const eddy_handler_ops_t delimiter_handler = EDDY_DECODER_HANDLER_OPS("delimiter_decoder");

static const eddy_handler_ops_t line_handler = EDDY_DECODER_HANDLER_OPS("line_decoder");

static eddy_decoder_t *delimited_new(const eddy_decoder_ops_t *ops, size_t max_frame_length,
                                     bool strip_delimiter, bool fail_fast,
                                     const eddy_delimiter_t *delimiters, size_t n)
{
    if (max_frame_length == 0 || delimiters == NULL || n == 0 ||
        n > (SIZE_MAX - sizeof(delimiter_t)) / sizeof(delim_t)) {
        return NULL;
    }
    size_t size = sizeof(delimiter_t) + n * sizeof(delim_t);
    size_t longest = 0;
    for (size_t i = 0; i < n; i++) {
        if (delimiters[i].bytes == NULL || delimiters[i].len == 0 ||
            delimiters[i].len > SIZE_MAX / 2 - size) {
            return NULL;
        }
        size += delimiters[i].len;
        longest = delimiters[i].len > longest ? delimiters[i].len : longest;
    }
    eddy_decoder_t *d = eddy_decoder_new(ops, size + longest);
    if (d == NULL) {
        return NULL;
    }
    delimiter_t *dd = eddy_decoder_self(d);
    dd->max = max_frame_length;
    dd->strip = strip_delimiter;
    dd->fail_fast = fail_fast;
    dd->lines = delimiters == line_delimiters;
    dd->longest = longest;
    dd->n = n;
    dd->tail = (uint8_t *)&dd->delim[n];
    uint8_t *bytes = dd->tail + longest;
    for (size_t i = 0; i < n; i++) {
        memcpy(bytes, delimiters[i].bytes, delimiters[i].len);
        dd->delim[i].bytes = bytes;
        dd->delim[i].len = delimiters[i].len;
        bytes += delimiters[i].len;
    }
    return d;
}

eddy_decoder_t *eddy_delimiter_decoder_new(size_t max_frame_length, bool strip_delimiter,
                                           bool fail_fast, const eddy_delimiter_t *delimiters,
                                           size_t n)
{
    return delimited_new(&delimiter_decoder, max_frame_length, strip_delimiter, fail_fast,
                         delimiters, n);
}

const eddy_handler_ops_t *eddy_delimiter_decoder_ops(void)
{
    return &delimiter_handler;
}

eddy_decoder_t *eddy_line_decoder_new(size_t max_length, bool strip_delimiter, bool fail_fast)
{
    return delimited_new(&line_decoder, max_length, strip_delimiter, fail_fast, line_delimiters, 2);
}

const eddy_handler_ops_t *eddy_line_decoder_ops(void)
{
    return &line_handler;
}

eddy_handler_t eddy_line_decoder(size_t max_length, bool strip_delimiter, bool fail_fast)
{
    return eddy_handler(NULL, eddy_line_decoder_ops(),
                        eddy_line_decoder_new(max_length, strip_delimiter, fail_fast),
                        eddy_free_state);
}

eddy_handler_t eddy_delimiter_decoder(size_t max_frame_length, bool strip_delimiter, bool fail_fast,
                                      const eddy_delimiter_t *delimiters, size_t n)
{
    return eddy_handler(
        NULL, eddy_delimiter_decoder_ops(),
        eddy_delimiter_decoder_new(max_frame_length, strip_delimiter, fail_fast, delimiters, n),
        eddy_free_state);
}
