# The codecs (pipeline/codec/) through the embedded channel.
eddy_add_test(pipeline codec)
