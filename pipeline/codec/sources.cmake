# The codecs (include/eddy/codec.h): the decoder and encoder bases and the framing codecs.
list(APPEND EDDY_SOURCES
    pipeline/codec/decoder.c
    pipeline/codec/delimiter.c
    pipeline/codec/encoder.c
    pipeline/codec/fixed_length.c
    pipeline/codec/length_field.c
    pipeline/codec/packet.c)
include(${CMAKE_CURRENT_LIST_DIR}/dns/sources.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/http/sources.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/resp/sources.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/ws/sources.cmake)
