/*
 * Decompression bombs for the content coding tests (tests/codec/test_http_coding.c,
 * test_http_client_object.c): mib MiB of zeros in gzip at level 1, a MiB at a time, about a
 * thousandth of their size. Include after <cmocka.h>.
 */
#ifndef EDDY_TESTS_SUPPORT_CODING_UTIL_H
#define EDDY_TESTS_SUPPORT_CODING_UTIL_H

#include "codec/http/coding.h"

#include <stdlib.h>

static inline eddy_buf_t *gzip_zeros(size_t mib)
{
    const eddy__coding_ops_t *gzip = eddy__coding_find("gzip", 4);
    void *enc = gzip->enc_new(1, 0);
    uint8_t *zeros = calloc(1, 1u << 20);
    eddy_buf_t *bomb = eddy_buf_new(1u << 16);
    assert_true(enc != NULL && zeros != NULL && bomb != NULL);
    for (size_t i = 0; i < mib; i++) {
        eddy__coding_mode_t mode = i + 1 == mib ? EDDY__CODING_FINISH : EDDY__CODING_RUN;
        assert_int_equal(eddy__coding_encode(gzip, enc, zeros, 1u << 20, mode, bomb), 0);
    }
    gzip->enc_free(enc);
    free(zeros);
    return bomb;
}

#endif /* EDDY_TESTS_SUPPORT_CODING_UTIL_H */
