"""The `train` channel's layout, defined once: the converter writes it, the job reads it.

    <channel>/dataset_info.json                       DatasetInfo, written last (the marker)
    <channel>/tfrecords/train-00000-of-00008.tfrecord ...   tf.train.Example records
    <channel>/tfrecords/val-00000-of-00001.tfrecord
    <channel>/tfrecords/<split>-skipped.json          only when the converter dropped records
    <channel>/annotations/instances_val.json          the val split's COCO annotations (COCOeval),
                                                      with the dataset's contiguous category ids,
                                                      annotations numbered 1..N (the export's id
                                                      kept as `source_id`)
    <channel>/annotations/split.json                  which images went to which split, and how

The records' feature keys are Model Garden's: its `TfExampleDecoder` reads them
(official/vision/dataloaders/tf_example_decoder.py; a test holds the two sets equal), as its own
converter writes them (official/vision/data/tfrecord_lib.py). Pure Python: no TensorFlow.
"""

import dataclasses
import json
import os
from typing import Dict, List

from maskrcnn_contract.job_io import DATASET_COMPLETE_MARKER

DATASET_INFO = DATASET_COMPLETE_MARKER
TFRECORD_DIR = "tfrecords"
ANNOTATIONS_DIR = "annotations"
TRAIN, VAL = "train", "val"
SPLITS = (TRAIN, VAL)


def shard_name(split: str, index: int, count: int) -> str:
    return f"{split}-{index:05d}-of-{count:05d}.tfrecord"


def shard_pattern(split: str) -> str:
    """Matches the split's complete shards (not a converter's `.incomplete` ones)."""
    return f"{split}-*.tfrecord"


def skipped_report_name(split: str) -> str:
    return f"{split}-skipped.json"


def annotations_name(split: str) -> str:
    return f"instances_{split}.json"


SPLIT_RECORD = "split.json"


# tf.train.Example keys (Model Garden's decoder and converter).
IMAGE_HEIGHT = "image/height"
IMAGE_WIDTH = "image/width"
IMAGE_FILENAME = "image/filename"
IMAGE_SOURCE_ID = "image/source_id"   # the COCO image id, as text: evaluation maps it back
IMAGE_KEY_SHA256 = "image/key/sha256"
IMAGE_ENCODED = "image/encoded"
IMAGE_FORMAT = "image/format"
BOX_XMIN = "image/object/bbox/xmin"   # normalized to [0, 1]
BOX_XMAX = "image/object/bbox/xmax"
BOX_YMIN = "image/object/bbox/ymin"
BOX_YMAX = "image/object/bbox/ymax"
CLASS_LABEL = "image/object/class/label"  # the contiguous category id, 1..K (0 is background)
CLASS_TEXT = "image/object/class/text"
IS_CROWD = "image/object/is_crowd"
AREA = "image/object/area"
MASK = "image/object/mask"            # one 0/1 PNG per instance
# What Model Garden's TfExampleDecoder(include_mask=True) reads.
DECODED_KEYS = frozenset({IMAGE_ENCODED, IMAGE_HEIGHT, IMAGE_WIDTH, IMAGE_SOURCE_ID, BOX_XMIN,
                          BOX_XMAX, BOX_YMIN, BOX_YMAX, CLASS_LABEL, AREA, IS_CROWD, MASK})


class LayoutError(FileNotFoundError):
    """The channel is not a complete dataset in this layout; the message names what is missing."""


@dataclasses.dataclass(frozen=True)
class SplitInfo:
    num_images: int
    num_instances: int
    shards: List[str]
    skipped: int = 0


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """dataset_info.json. The categories are numbered 1..K in the order of their original ids
    (0 is background, so `num_classes` is K + 1), each with the id of the annotation file it came
    from: [{"id": 2, "name": "scratch", "source_id": 17}, ...]. Records and the val annotations
    use `id`; every results file a user reads (predictions, evaluation) uses `source_id`. A
    dataset staged before the ids were numbered has no `source_id`: its ids are the originals.
    `name` is the dataset's name; `source` says what it was converted from (the export's format,
    files and split), `notes` what the user should know (empty categories, crowds, rotations)."""

    num_classes: int
    categories: List[Dict]
    splits: Dict[str, SplitInfo]
    name: str = ""
    source: Dict = dataclasses.field(default_factory=dict)
    notes: List[str] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, payload: dict) -> "DatasetInfo":
        return cls(num_classes=int(payload["num_classes"]), categories=list(payload["categories"]),
                   splits={name: SplitInfo(**split) for name, split in payload["splits"].items()},
                   name=str(payload.get("name", "")), source=dict(payload.get("source") or {}),
                   notes=list(payload.get("notes") or []))

    def source_ids(self) -> Dict[int, int]:
        """{contiguous id: the annotation file's id} (identity for a dataset staged before)."""
        return {int(c["id"]): int(c.get("source_id", c["id"])) for c in self.categories}


@dataclasses.dataclass(frozen=True)
class Channel:
    """Paths of one channel directory (the converter's output, or the job's `train` channel)."""

    root: str

    @property
    def info_file(self) -> str:
        return os.path.join(self.root, DATASET_INFO)

    @property
    def tfrecord_dir(self) -> str:
        return os.path.join(self.root, TFRECORD_DIR)

    def shards(self, split: str) -> str:
        """The glob pattern of a split's shards."""
        return os.path.join(self.tfrecord_dir, shard_pattern(split))

    def annotations(self, split: str = VAL) -> str:
        return os.path.join(self.root, ANNOTATIONS_DIR, annotations_name(split))

    def write_info(self, info: DatasetInfo) -> None:
        """Written last, and atomically: its presence marks a complete dataset."""
        temporary = self.info_file + ".incomplete"
        with open(temporary, "w", encoding="utf-8") as f:
            json.dump(info.to_json(), f, indent=1)
        os.replace(temporary, self.info_file)

    def read_info(self) -> DatasetInfo:
        """The dataset's info, once every file it lists is there; raises LayoutError naming what
        is missing."""
        if not os.path.isfile(self.info_file):
            raise LayoutError(
                f"{self.info_file} is missing: the train channel must be the output of "
                "maskrcnn_job.data.coco_to_tfrecord (tfrecords/, annotations/, dataset_info.json)")
        with open(self.info_file, encoding="utf-8") as f:
            info = DatasetInfo.from_json(json.load(f))
        for split in SPLITS:
            if split not in info.splits:
                raise LayoutError(f"{self.info_file} lists no {split!r} split")
            missing = [s for s in info.splits[split].shards
                       if not os.path.isfile(os.path.join(self.tfrecord_dir, s))]
            if missing:
                raise LayoutError(f"{split} shards listed in {self.info_file} are missing: "
                                  f"{missing[:3]}{' ...' if len(missing) > 3 else ''}")
        if not os.path.isfile(self.annotations(VAL)):
            raise LayoutError(f"{self.annotations(VAL)} is missing")
        return info
