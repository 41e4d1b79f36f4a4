"""The scalars of TensorBoard event files, read without TensorFlow.

The notebook instance's launcher environment has no TensorFlow (notebooks/requirements.txt), so
the files a job's TensorBoard output holds are read here: the TFRecord framing (each record: its
length as a little-endian uint64, the length's masked CRC-32C, the data, the data's masked
CRC-32C) and the `Event` proto, both with TensorBoard's own code (the `tensorboard` package the
job writes its summaries with, pinned alike): `event_pb2` parses, `tensor_util` decodes a tensor,
and its TensorFlow stand-in computes the masked CRC-32C. Every length is checked; a record's data
is checked when it holds a scalar that is returned (an image record is read past unchecked: the
pure-Python CRC runs at a few MB/s, and the job's evaluation pictures would make it seconds per
file). A record cut short at the end of a file is one SageMaker has not uploaded whole yet: it
ends the file's reading, and `Scalars.truncated` names the file.

    scalars = event_files.read(paths)      # Scalars: {tag: [Point(step, wall_time, value)]}
    scalars.curves["train/loss"]

Scalars come as TensorFlow 2's `tf.summary.scalar` writes them (a 0-d numeric tensor, the
`scalars` plugin named in the tag's first summary metadata) or as TensorFlow 1's `simple_value`.
A step written twice (a job that restarted from a checkpoint writes its steps again) keeps the
value written last, as TensorBoard shows it.
"""

import dataclasses
import struct
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

from tensorboard.compat.proto import event_pb2, types_pb2
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
from tensorboard.util import tensor_util

# What a file of TensorBoard's event files is called (the writer's own prefix).
EVENT_FILE_MARKER = "tfevents"
SCALARS_PLUGIN = "scalars"
_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_NUMERIC = frozenset({types_pb2.DT_FLOAT, types_pb2.DT_DOUBLE, types_pb2.DT_HALF,
                      types_pb2.DT_BFLOAT16, types_pb2.DT_INT32, types_pb2.DT_INT64})


class EventFileError(ValueError):
    """An event file is corrupt: a checksum does not match, or a record is not an Event."""


@dataclasses.dataclass(frozen=True)
class Point:
    step: int
    wall_time: float
    value: float


@dataclasses.dataclass
class Scalars:
    curves: Dict[str, List[Point]]          # by tag, each by step
    files: List[str]                        # the event files read, in reading order
    truncated: List[str]                    # those whose last record was cut short


def _records(path: Path) -> Iterator[Tuple[int, bytes, int]]:
    """(offset, data, stored masked CRC of the data) of each whole record of the file; stops at a
    record cut short. The length's checksum is checked here."""
    data = path.read_bytes()
    offset = 0
    while offset < len(data):
        header = data[offset:offset + 12]
        if len(header) < 12:
            return
        length_bytes, (length_crc,) = header[:8], _CRC.unpack(header[8:])
        if masked_crc32c(length_bytes) != length_crc:
            raise EventFileError(f"{path}: the length of the record at byte {offset} fails its "
                                 "CRC-32C check: not an event file, or corrupt")
        (length,) = _LENGTH.unpack(length_bytes)
        end = offset + 12 + length
        if end + 4 > len(data):
            return
        yield offset, data[offset + 12:end], _CRC.unpack(data[end:end + 4])[0]
        offset = end + 4


def _scalar(value, plugins: Dict[str, str]) -> Optional[float]:
    """The value's scalar, or None for anything else (an image, text, a histogram)."""
    if value.HasField("metadata") and value.metadata.plugin_data.plugin_name:
        plugins[value.tag] = value.metadata.plugin_data.plugin_name
    if plugins.get(value.tag, SCALARS_PLUGIN) != SCALARS_PLUGIN:
        return None
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind == "tensor" and value.tensor.dtype in _NUMERIC and not value.tensor.tensor_shape.dim:
        return float(tensor_util.make_ndarray(value.tensor))
    return None


def _by_file_order(paths: Iterable) -> List[Path]:
    # The writer names its files events.out.tfevents.<seconds>.<host>...: by name is by time.
    return sorted((Path(p) for p in paths), key=lambda p: (p.name, str(p)))


def read(paths: Iterable) -> Scalars:
    """The scalars of the event files `paths` (and of the event files below any directory among
    them), every tag's points by step."""
    files: List[Path] = []
    for path in map(Path, paths):
        files += ([p for p in path.rglob(f"*{EVENT_FILE_MARKER}*") if p.is_file()]
                  if path.is_dir() else [path])
    written: Dict[str, Dict[int, Point]] = {}
    truncated: List[str] = []
    for path in _by_file_order(files):
        plugins: Dict[str, str] = {}
        end = 0
        for offset, data, data_crc in _records(path):
            end = offset + 12 + len(data) + 4
            try:
                event = event_pb2.Event.FromString(data)
            except Exception as error:  # noqa: BLE001 - protobuf's DecodeError, named below
                raise EventFileError(f"{path}: the record at byte {offset} is not an Event "
                                     f"({error})") from None
            scalars = [(v.tag, _scalar(v, plugins)) for v in event.summary.value]
            found = [(tag, x) for tag, x in scalars if x is not None]
            if found and masked_crc32c(data) != data_crc:
                raise EventFileError(f"{path}: the record at byte {offset} fails its CRC-32C "
                                     "check: corrupt")
            for tag, x in found:
                point = Point(int(event.step), float(event.wall_time), x)
                kept = written.setdefault(tag, {}).get(point.step)
                if kept is None or kept.wall_time <= point.wall_time:
                    written[tag][point.step] = point
        if end < path.stat().st_size:
            truncated.append(str(path))
    curves = {tag: [points[s] for s in sorted(points)] for tag, points in sorted(written.items())}
    return Scalars(curves, [str(p) for p in _by_file_order(files)], truncated)
