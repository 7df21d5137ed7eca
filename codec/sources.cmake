# The codec layer: the decoder and encoder bases, the framing codecs and the message deadline
# (include/eddy/codec.h); each protocol in a folder of its own, with its library and client
# objects: dns/, http/, http2/, resp/, ws/.
list(APPEND EDDY_LAYER_SOURCES
    codec/deadline.c
    codec/decoder.c
    codec/delimiter.c
    codec/encoder.c
    codec/fixed_length.c
    codec/length_field.c
    codec/packet.c)
include(${CMAKE_CURRENT_LIST_DIR}/dns/sources.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/http/sources.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/http2/sources.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/grpc/sources.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/resp/sources.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/ws/sources.cmake)
