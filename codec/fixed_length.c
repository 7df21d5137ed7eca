/*
 * The fixed length decoder (Netty's FixedLengthFrameDecoder): every frame_length bytes are a
 * frame, whatever the reads' sizes.
 */
#include <eddy/codec.h>

#include <assert.h>

static int fixed_length_decode(eddy_ctx_t *ctx, void *self, eddy_cumulation_t *in,
                               eddy_decoder_out_t *out)
{
    (void)ctx;
    size_t n = *(const size_t *)self;
    assert(n > 0); /* eddy_fixed_length_decoder_new() refuses 0 */
    if (eddy_cumulation_readable(in) < n) {
        return 0;
    }
    return eddy_decoder_emit_buf(out, eddy_cumulation_read_buf(in, n));
}

static const eddy_decoder_ops_t fixed_length_decoder = {
    .name = "fixed_length_decoder",
    .decode = fixed_length_decode,
};

static const eddy_handler_ops_t fixed_length_handler =
    EDDY_DECODER_HANDLER_OPS("fixed_length_decoder");

eddy_decoder_t *eddy_fixed_length_decoder_new(size_t frame_length)
{
    if (frame_length == 0) {
        return NULL;
    }
    eddy_decoder_t *d = eddy_decoder_new(&fixed_length_decoder, sizeof(size_t));
    if (d != NULL) {
        *(size_t *)eddy_decoder_self(d) = frame_length;
    }
    return d;
}

const eddy_handler_ops_t *eddy_fixed_length_decoder_ops(void)
{
    return &fixed_length_handler;
}

eddy_handler_t eddy_fixed_length_decoder(size_t frame_length)
{
    return eddy_handler(NULL, eddy_fixed_length_decoder_ops(),
                        eddy_fixed_length_decoder_new(frame_length), eddy_free_state);
}
