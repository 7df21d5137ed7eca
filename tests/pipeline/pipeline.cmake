# The pipeline core and the embedded channel (pipeline/pipeline.c, pipeline/embedded.c).
eddy_add_test(pipeline pipeline)
