# The DNS message library (include/eddy/dns.h): wire names and the message parser, the zone
# loader, the answerer.
list(APPEND EDDY_LAYER_SOURCES
    codec/dns/answer.c
    codec/dns/cache.c
    codec/dns/message.c
    codec/dns/zone.c)
