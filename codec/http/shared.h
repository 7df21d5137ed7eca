/*
 * What the HTTP codec offers the HTTP/2 codec (codec/http2/), which makes the same request
 * and response objects: making a message, naming a method, reading Content-Length. The rest
 * of this folder is internal.h's, its own (docs/architecture.md, "Adding a protocol").
 */
#ifndef EDDY_CODEC_HTTP_SHARED_H
#define EDDY_CODEC_HTTP_SHARED_H

#include <eddy/http.h>

/* A request (type EDDY_MSG_HTTP_REQUEST, response false) or a response (type
 * EDDY_MSG_HTTP_RESPONSE_HEAD), count 1, with room for count headers in its own block, none
 * used: version 11, no body, content_length -1, the rest zero. Its _head (a buffer the strings
 * point into) and body are released with it. NULL when out of memory. (message.c, as all of
 * the messages' making and freeing.) */
eddy_msg_t *eddy__http_message_new(bool response, size_t count);
/* The same with room for bytes more after the slots, at (char *)(headers + count): for
 * strings that live as long as the message (_head stays NULL). */
eddy_msg_t *eddy__http_message_new_bytes(bool response, size_t count, size_t bytes);

/* The method named by the n bytes at s (EDDY_HTTP_OTHER when not listed). */
eddy_http_method_t eddy__http_method_of(const void *s, size_t n);

/* Content-Length: digits, or a list of the same digits ("42, 42" is allowed by RFC 9110
 * section 8.6). 0 and *out, or EDDY_EDECODE. */
int eddy__http_parse_length(eddy_http_str_t v, int64_t *out);

/* eddy_http_send()'s message (exchange.c): when msg is one, take its request and the promise
 * of its response out of it (both the caller's now), release msg and return true; else
 * false, msg untouched. The HTTP/2 client adapter answers sends as the exchange handler does. */
bool eddy__http_send_take(eddy_msg_t *msg, eddy_http_request_t **req, eddy_promise_t **p);

/* Take the body parts out of the built response r (eddy_http_response_add_body()): the array
 * (the caller's, to free(); NULL when none) of *n messages, each the caller's. r keeps its
 * length for the head (eddy_http_response_body_length()). */
eddy_msg_t **eddy__http_response_take_parts(eddy_http_response_t *r, size_t *n);

/* Make the chunked input `input` (taken over) r's only part, r streamed: its parts (r has
 * some, none an input) move to out, which has room for r->_nparts of them. Cannot fail. */
void eddy__http_response_stream_parts(eddy_http_response_t *r, eddy_msg_t *input,
                                      eddy_msg_t **out);

/* Whether r's body length is not known up front: content messages follow it (chunked), or
 * its one part is a chunked input. */
bool eddy__http_response_streamed(const eddy_http_response_t *r);

/* The bytes a body part holds (a buffer's readable bytes, a region's remaining ones; 0 for a
 * chunked input, whose length is not known). */
uint64_t eddy__http_part_length(eddy_msg_t *msg);

#endif /* EDDY_CODEC_HTTP_SHARED_H */
