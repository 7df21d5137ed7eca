/*
 * The built-in handlers as values (pipeline.h, eddy_handler_t): each constructor pairs a
 * handler's ops table with a state made by its _new function, so the two never mismatch and
 * a failed _new becomes a handler whose add fails (and frees what else it was added with).
 */
#include "pipeline/internal.h"

#include <eddy/codec.h>
#include <eddy/handler.h>
#include <eddy/http.h>
#include <eddy/resp.h>

eddy_handler_t eddy_idle_state_handler(int64_t reader_idle_ms, int64_t writer_idle_ms,
                                       int64_t all_idle_ms)
{
    return eddy_handler(NULL, eddy_idle_state_handler_ops(),
                        eddy_idle_state_handler_new(reader_idle_ms, writer_idle_ms, all_idle_ms),
                        eddy_free_state);
}

eddy_handler_t eddy_read_timeout_handler(int64_t timeout_ms)
{
    return eddy_handler(NULL, eddy_read_timeout_handler_ops(),
                        eddy_read_timeout_handler_new(timeout_ms), eddy_free_state);
}

eddy_handler_t eddy_write_timeout_handler(int64_t timeout_ms)
{
    return eddy_handler(NULL, eddy_write_timeout_handler_ops(),
                        eddy_write_timeout_handler_new(timeout_ms), eddy_free_state);
}

eddy_handler_t eddy_message_deadline_handler(int64_t timeout_ms)
{
    return eddy_handler(NULL, eddy_message_deadline_handler_ops(),
                        eddy_message_deadline_handler_new(timeout_ms), eddy_free_state);
}

eddy_handler_t eddy_logging_handler(const eddy_logging_options_t *opts)
{
    return eddy_handler(NULL, eddy_logging_handler_ops(), eddy_logging_handler_new(opts),
                        eddy_free_state);
}

eddy_handler_t eddy_flush_consolidation_handler(unsigned explicit_flush_after_flushes,
                                                bool consolidate_when_no_read_in_progress)
{
    return eddy_handler(NULL, eddy_flush_consolidation_handler_ops(),
                        eddy_flush_consolidation_handler_new(explicit_flush_after_flushes,
                                                             consolidate_when_no_read_in_progress),
                        eddy_free_state);
}

eddy_handler_t eddy_length_field_decoder(size_t max_frame_length, size_t length_field_offset,
                                         unsigned length_field_length, int64_t length_adjustment,
                                         size_t initial_bytes_to_strip)
{
    return eddy_handler(NULL, eddy_length_field_decoder_ops(),
                        eddy_length_field_decoder_new(max_frame_length, length_field_offset,
                                                      length_field_length, length_adjustment,
                                                      initial_bytes_to_strip),
                        eddy_free_state);
}

eddy_handler_t eddy_length_field_prepender(unsigned length_field_length)
{
    return eddy_handler(NULL, eddy_length_field_prepender_ops(),
                        eddy_length_field_prepender_new(length_field_length), eddy_free_state);
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

eddy_handler_t eddy_fixed_length_decoder(size_t frame_length)
{
    return eddy_handler(NULL, eddy_fixed_length_decoder_ops(),
                        eddy_fixed_length_decoder_new(frame_length), eddy_free_state);
}

eddy_handler_t eddy_http_request_decoder(const eddy_http_decoder_options_t *opts)
{
    return eddy_handler(NULL, eddy_http_request_decoder_ops(), eddy_http_request_decoder_new(opts),
                        eddy_free_state);
}

eddy_handler_t eddy_http_aggregator(size_t max_content_length)
{
    return eddy_handler(NULL, eddy_http_aggregator_ops(),
                        eddy_http_aggregator_new(max_content_length), eddy_free_state);
}

eddy_handler_t eddy_http_response_encoder(void)
{
    return eddy_handler(NULL, eddy_http_response_encoder_ops(), eddy_http_response_encoder_new(),
                        eddy_free_state);
}

eddy_handler_t eddy_resp_decoder(const eddy_resp_decoder_options_t *opts)
{
    return eddy_handler(NULL, eddy_resp_decoder_ops(), eddy_resp_decoder_new(opts),
                        eddy_free_state);
}
