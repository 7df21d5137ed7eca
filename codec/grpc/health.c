/*
 * The standard health service (grpc/grpc doc/health-checking.md, grpc.health.v1): Check
 * answers a service's status from the server's table; Watch sends it once and stays open
 * until the client goes (a change later is not pushed: the table has no listeners yet).
 * The two messages are small enough to read and write by hand, without protobuf in the core:
 * HealthCheckRequest { string service = 1; }, HealthCheckResponse { ServingStatus status = 1; }.
 */
#include "internal.h"

#include <string.h>

int eddy__grpc_health_status(eddy_grpc_server_t *s, const char *service, size_t n);

/* The service named in a HealthCheckRequest (field 1, length-delimited): 0, or -1 for a
 * message that does not parse. Unknown fields are skipped as protobuf says. */
static int request_service(eddy_buf_t *req, const char **name, size_t *n)
{
    const uint8_t *p = eddy_buf_read_ptr(req);
    size_t len = eddy_buf_readable(req), i = 0;
    *name = "";
    *n = 0;
    while (i < len) {
        uint64_t key = 0, v = 0;
        for (int shift = 0; i < len && shift < 64; shift += 7) {
            key |= (uint64_t)(p[i] & 0x7f) << shift;
            if (!(p[i++] & 0x80)) {
                break;
            }
        }
        int wire = (int)(key & 7);
        if (wire == 0 || wire == 2) {
            for (int shift = 0; i < len && shift < 64; shift += 7) {
                v |= (uint64_t)(p[i] & 0x7f) << shift;
                if (!(p[i++] & 0x80)) {
                    break;
                }
            }
        } else if (wire == 1 || wire == 5) {
            v = 0;
            i += wire == 1 ? 8 : 4;
        } else {
            return -1;
        }
        if (wire == 2 && v > len - i) {
            return -1;
        }
        if (wire == 2 && key >> 3 == 1) {
            *name = (const char *)p + i;
            *n = (size_t)v;
        }
        i += wire == 2 ? (size_t)v : 0;
    }
    return i == len ? 0 : -1;
}

static eddy_buf_t *response(int status)
{
    uint8_t bytes[2] = {0x08, (uint8_t)status};
    return eddy_buf_from(bytes, sizeof(bytes));
}

/* The status for req, or -1 (with the call finished) when it cannot be given. */
static int status_of(eddy_grpc_call_t *call, eddy_buf_t *req)
{
    const char *name;
    size_t n;
    int rc = request_service(req, &name, &n);
    int status = rc == 0 ? eddy__grpc_health_status(eddy_grpc_call_arg(call), name, n) : -1;
    eddy_buf_release(req);
    if (rc != 0) {
        eddy_grpc_call_finish(call, EDDY_GRPC_INVALID_ARGUMENT, "bad HealthCheckRequest", NULL, 0);
    }
    return status;
}

static void check(eddy_grpc_call_t *call, eddy_buf_t *req)
{
    int status = status_of(call, req);
    if (status == 3) {
        eddy_grpc_call_finish(call, EDDY_GRPC_NOT_FOUND, "unknown service", NULL, 0);
    } else if (status > 0) {
        eddy_grpc_call_reply(call, response(status));
    }
}

static void watch(eddy_grpc_call_t *call, eddy_buf_t *req)
{
    int status = status_of(call, req);
    if (status > 0) {
        eddy_grpc_call_send(call, response(status), NULL); /* open until the client goes */
    }
}

static const eddy_grpc_method_ops_t check_ops = {.on_request = check};
static const eddy_grpc_method_ops_t watch_ops = {.on_request = watch};

int eddy_grpc_server_add_health(eddy_grpc_server_t *s)
{
    int err = eddy_grpc_server_add_method(s, "/grpc.health.v1.Health/Check", EDDY_GRPC_UNARY,
                                          &check_ops, s);
    if (err == 0) {
        err = eddy_grpc_server_add_method(s, "/grpc.health.v1.Health/Watch",
                                          EDDY_GRPC_SERVER_STREAMING, &watch_ops, s);
    }
    return err;
}
