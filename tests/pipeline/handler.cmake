# The ready-made handlers (pipeline/handler/) through the embedded channel.
eddy_add_test(pipeline handler)
