list(APPEND EDDY_SOURCES
    reactor/sequence.c
    reactor/ring.c
    reactor/wait.c
    reactor/processor.c
    reactor/ring_builder.c)
