/* A program built against an installed eddy: it must compile, link and run. */
#include <eddy/eddy.h>

#include <stdio.h>

int main(void)
{
    eddy_buf_t *b = eddy_buf_new(16);
    uint32_t v = 0;
    if (b == NULL || eddy_buf_write_u32(b, 0xedd1u) != 0 ||
        eddy_buf_read_u32(b, &v) != 0 || v != 0xedd1u) {
        fprintf(stderr, "consumer: buffer round trip failed\n");
        return 1;
    }
    eddy_buf_release(b);
    printf("consumer: eddy %s works (%s allocator)\n", eddy_version(),
           eddy_allocator_name(eddy_allocator_default()));
    return 0;
}
