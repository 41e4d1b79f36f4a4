"""TFRecord files of tf.train.Example records, written without TensorFlow (the converter's).

Why not `tf.train.Example` and `tf.io.TFRecordWriter`: importing TensorFlow costs a process about
4 CPU seconds, as much as encoding 2000 small images (benchmarks/converter_speed.py); without it
the converter's workers and its main process start in a fraction of a second. Both formats are
small and stable:
- tf.train.Example: tensorflow/core/example/example.proto (Example.features = 1;
  Features.feature = 1, a map<string, Feature>) and feature.proto (Feature's oneof: bytes_list = 1,
  float_list = 2, int64_list = 3; each list's `value` = 1, numbers packed);
- a TFRecord file: per record, the length (uint64, little-endian), its masked CRC-32C (uint32),
  the data, the data's masked CRC-32C (tensorflow/core/lib/io/record_writer.cc; the mask is
  tensorflow/core/lib/hash/crc32c.h's). CRC-32C comes from google-crc32c (C, hardware-assisted).
tests/training/test_converter.py reads these files with TensorFlow (which checks the CRCs) and
compares the records with the Examples that Model Garden's tfrecord_lib builds.
"""

import struct
from typing import Dict, Iterable

import google_crc32c

_LENGTH_DELIMITED = 2


def _varint(value: int) -> bytes:
    if value < 0:  # int64 two's complement, as protobuf encodes negative int64
        value += 1 << 64
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | _LENGTH_DELIMITED) + _varint(len(payload)) + payload


def bytes_feature(values: Iterable[bytes]) -> bytes:
    return _field(1, b"".join(_field(1, value) for value in values))


def float_feature(values: Iterable[float]) -> bytes:
    values = list(values)
    packed = _field(1, struct.pack(f"<{len(values)}f", *values)) if values else b""
    return _field(2, packed)


def int64_feature(values: Iterable[int]) -> bytes:
    values = [int(v) for v in values]
    packed = _field(1, b"".join(_varint(v) for v in values)) if values else b""
    return _field(3, packed)


def example(features: Dict[str, bytes]) -> bytes:
    """A serialized Example from {key: one of the *_feature encodings above}."""
    entries = b"".join(_field(1, _field(1, key.encode("utf-8")) + _field(2, feature))
                       for key, feature in features.items())
    return _field(1, entries)


def _masked_crc(data: bytes) -> bytes:
    crc = google_crc32c.value(data)
    return struct.pack("<I", (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF)


def framed(record: bytes) -> bytes:
    """One record as a TFRecord file holds it: a file of these, one after another, is a
    TFRecord file."""
    length = struct.pack("<Q", len(record))
    return length + _masked_crc(length) + record + _masked_crc(record)

