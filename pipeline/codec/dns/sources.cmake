# The DNS message library (include/eddy/dns.h): wire names and the message parser, the zone
# loader, the answerer.
list(APPEND EDDY_SOURCES
    pipeline/codec/dns/answer.c
    pipeline/codec/dns/cache.c
    pipeline/codec/dns/message.c
    pipeline/codec/dns/zone.c)
