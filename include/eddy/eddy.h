/*
 * eddy: one include for the whole public API.
 */
#ifndef EDDY_EDDY_H
#define EDDY_EDDY_H

#include <eddy/common.h>
#include <eddy/buffer.h>
#include <eddy/file.h>
#include <eddy/ring.h>
#include <eddy/loop.h>
#include <eddy/carrier.h>
#include <eddy/channel.h>
#include <eddy/channel_group.h>
#include <eddy/datagram.h>
#include <eddy/pipeline.h>
#include <eddy/codec.h>
#include <eddy/handler.h>
#include <eddy/tls.h>
#include <eddy/http.h>
#include <eddy/http2.h>
#include <eddy/grpc.h>
#include <eddy/resp.h>
#include <eddy/dns.h>
#include <eddy/websocket.h>
#include <eddy/resolver.h>
#include <eddy/bootstrap.h>
#include <eddy/channel_pool.h>
#include <eddy/http_client.h>
#include <eddy/http_coding.h>

#endif /* EDDY_EDDY_H */
