# The codecs (codec/) through the embedded channel.
eddy_add_test(codec codec)
