# The WebSocket codec (include/eddy/websocket.h): frames, the protocol handler, the opening
# handshake of both sides, permessage-deflate (zlib; without it, deflate_none.c declines).
list(APPEND EDDY_LAYER_SOURCES
    codec/ws/codec.c
    codec/ws/frame.c
    codec/ws/handshake.c
    codec/ws/protocol.c
    codec/ws/sha1.c)
if(EDDY_HAVE_ZLIB)
    list(APPEND EDDY_LAYER_SOURCES codec/ws/deflate.c)
else()
    list(APPEND EDDY_LAYER_SOURCES codec/ws/deflate_none.c)
endif()
