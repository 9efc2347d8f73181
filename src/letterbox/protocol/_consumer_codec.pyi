# Stub of the compiled letterbox.protocol._consumer_codec (see its .c file).
