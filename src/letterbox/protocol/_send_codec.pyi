# Stub of the compiled letterbox.protocol._send_codec (see its .c file).
