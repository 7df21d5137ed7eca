# The WebSocket codec (include/eddy/websocket.h): frames, the protocol handler, the opening
# handshake of both sides, permessage-deflate (zlib).
list(APPEND EDDY_SOURCES
    pipeline/codec/ws/codec.c
    pipeline/codec/ws/deflate.c
    pipeline/codec/ws/frame.c
    pipeline/codec/ws/handshake.c
    pipeline/codec/ws/protocol.c
    pipeline/codec/ws/sha1.c)
