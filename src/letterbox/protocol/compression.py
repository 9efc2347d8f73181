# Payload (de)compression for the codecs Pulsar's CompressionType names, so the
# broker can open a batch (to dead-letter part of it) the way a client would.
# LZ4 is a raw block with the size from the metadata, SNAPPY is raw snappy,
# ZSTD is a frame, ZLIB a zlib stream; cramjam provides the first three.
from __future__ import annotations

import zlib

import cramjam

from letterbox.protocol import pulsar_api_pb2 as pb

NONE, LZ4, ZLIB, ZSTD, SNAPPY = (
    pb.CompressionType.NONE,
    pb.CompressionType.LZ4,
    pb.CompressionType.ZLIB,
    pb.CompressionType.ZSTD,
    pb.CompressionType.SNAPPY,
)


class CompressionError(ValueError):
    """A payload could not be decompressed with the codec its metadata names."""


def decompress(codec: int, data: bytes, uncompressed_size: int) -> bytes:
    try:
        if codec == NONE:
            return data
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress_block(data, output_len=uncompressed_size))
        if codec == ZLIB:
            return zlib.decompress(data)
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
        if codec == SNAPPY:
            return bytes(cramjam.snappy.decompress_raw(data))
    except Exception as exc:  # each codec raises its own error type
        raise CompressionError(f"cannot decompress a {codec} payload: {exc}") from None
    raise CompressionError(f"unknown compression type {codec}")


def compress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec == LZ4:
        return bytes(cramjam.lz4.compress_block(data, store_size=False))
    if codec == ZLIB:
        return zlib.compress(data)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    raise CompressionError(f"unknown compression type {codec}")
