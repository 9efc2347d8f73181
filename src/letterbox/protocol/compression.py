# Payload (de)compression for the codecs Pulsar's CompressionType names, so the
# broker can open a batch (to check it at SEND, dead-letter part of it, show it
# through the admin API) the way a client would. LZ4 is a raw block with the
# size from the metadata, SNAPPY is raw snappy, ZSTD is a frame, ZLIB a zlib
# stream; cramjam provides the first three.
#
# Invariant: decompression never produces more than `limit` bytes, whatever the
# payload claims. The output buffer is allocated up front at the declared
# uncompressed size (itself refused above `limit`), every codec writes into it
# or stops, and a payload that expands beyond what it declared is an error, so
# a 33 KB "bomb" costs at most `limit` bytes of memory.
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
# the largest uncompressed payload any codec may produce unless a caller says
# otherwise (the broker passes its max_message_size)
DEFAULT_LIMIT = 5 * 1024 * 1024


class CompressionError(ValueError):
    """A payload could not be decompressed with the codec its metadata names,
    or it would expand beyond its declared size or the limit."""


def codec_name(codec: int) -> str:
    try:
        return pb.CompressionType.Name(codec)  # type: ignore[arg-type]
    except ValueError:
        return str(codec)


def declared_size(meta: pb.MessageMetadata) -> int | None:
    """The uncompressed size the metadata claims, None when it claims none."""
    return meta.uncompressed_size if meta.HasField("uncompressed_size") else None


def decompress(codec: int, data: bytes, uncompressed_size: int | None, limit: int = DEFAULT_LIMIT) -> bytes:
    """`data` expanded with `codec`. The result is exactly `uncompressed_size`
    bytes when a size is declared (None: up to `limit` bytes); anything that
    would be larger is refused before or while expanding, never allocated."""
    if codec == NONE:
        return data
    if uncompressed_size is not None and uncompressed_size > limit:
        raise CompressionError(
            f"declared uncompressed size {uncompressed_size} exceeds the limit of {limit} bytes"
        )
    bound = limit if uncompressed_size is None else uncompressed_size
    name = codec_name(codec)
    if codec == ZLIB:
        out = _zlib(data, bound)
    elif codec in (LZ4, ZSTD, SNAPPY):
        out = _cramjam(codec, data, bound, uncompressed_size is not None)
    else:
        raise CompressionError(f"unknown compression type {codec}")
    if uncompressed_size is not None and len(out) != uncompressed_size:
        raise CompressionError(
            f"{name} payload expands to {len(out)} bytes, not its declared uncompressed size {uncompressed_size}"
        )
    return out


def _zlib(data: bytes, bound: int) -> bytes:
    d = zlib.decompressobj()
    try:
        out = d.decompress(data, bound)
    except zlib.error as exc:
        raise CompressionError(f"cannot decompress a ZLIB payload: {exc}") from None
    if d.unconsumed_tail:
        raise CompressionError(f"ZLIB payload expands beyond {bound} bytes")
    if not d.eof:
        raise CompressionError("cannot decompress a ZLIB payload: truncated stream")
    return out


def _cramjam(codec: int, data: bytes, bound: int, exact: bool) -> bytes:
    name = codec_name(codec)
    if codec == SNAPPY:
        try:
            claimed = int(cramjam.snappy.decompress_raw_len(data))
        except Exception as exc:
            raise CompressionError(f"cannot decompress a SNAPPY payload: {exc}") from None
        if claimed > bound:
            raise CompressionError(f"SNAPPY payload expands to {claimed} bytes, more than {bound}")
    # one spare byte: a payload that fills it expands beyond the bound
    out = bytearray(bound + 1)
    try:
        if codec == LZ4:
            n = int(cramjam.lz4.decompress_block_into(data, out))
        elif codec == ZSTD:
            n = int(cramjam.zstd.decompress_into(data, out))
        else:
            n = int(cramjam.snappy.decompress_raw_into(data, out))
    except Exception as exc:
        text = str(exc)
        if "whole buffer" in text or "large enough" in text:
            raise CompressionError(f"{name} payload expands beyond {bound} bytes") from None
        raise CompressionError(f"cannot decompress a {name} payload: {text}") from None
    if n > bound:
        raise CompressionError(f"{name} payload expands beyond {bound} bytes")
    del out[n:]
    return bytes(out)


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
