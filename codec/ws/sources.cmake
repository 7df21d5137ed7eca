# The WebSocket codec (include/eddy/websocket.h): frames, the protocol handler, the opening
# handshake of both sides, permessage-deflate (zlib).
list(APPEND EDDY_LAYER_SOURCES
    codec/ws/codec.c
    codec/ws/deflate.c
    codec/ws/frame.c
    codec/ws/handshake.c
    codec/ws/protocol.c
    codec/ws/sha1.c)
