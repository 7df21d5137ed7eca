# The WebSocket codec (codec/ws/) through embedded channels: frames, the protocol
# handler, UTF-8, close codes, permessage-deflate, both handshakes, and a seeded mutation run.
eddy_add_test(codec ws TIMEOUT 120)
