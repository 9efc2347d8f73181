# The two compiled codecs of the broker's hot path: everything else about the package is in
# pyproject.toml. Each is a plain CPython extension written here, with a pure-Python reference
# beside it (letterbox/protocol/speedups.py says which is in use; parity tests compare them).
# `make` builds them in place (`python setup.py build_ext --inplace`); pip and `make dist` build
# them into the wheel. They are optional: without a C compiler or Python headers the build warns
# and the package runs on the pure-Python references.
from setuptools import Extension, setup

_FLAGS = ["-std=c11", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"]

setup(
    ext_modules=[
        # SEND frames in: split, command + metadata fields, CRC32C, batch walk
        Extension("letterbox.protocol._send_codec", ["src/letterbox/protocol/_send_codec.c"],
                  depends=["src/letterbox/protocol/_crc32c.h", "src/letterbox/protocol/_pb_wire.h"], extra_compile_args=_FLAGS,
                  optional=True),
        # consumer frames: MESSAGE and SEND_RECEIPT encoding, ACK decoding
        Extension("letterbox.protocol._consumer_codec", ["src/letterbox/protocol/_consumer_codec.c"],
                  extra_compile_args=_FLAGS, optional=True),
    ],
)
