# The HTTP/1.1 codec (pipeline/codec/http/) through the embedded channel.
eddy_add_test(pipeline http)
