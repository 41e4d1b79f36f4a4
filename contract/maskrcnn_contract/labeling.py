"""What a labeling tool's export may hold that Mask R-CNN cannot train as it is, and the choices the
user makes about it: one name and its values, for the converter, the staging job's hyperparameter,
local_run and the launcher alike
(docs/staging.md, "Your own dataset: a labeling tool's COCO export").

Boxes without a mask: a box drawn with the rectangle tool is exported as an annotation whose
`segmentation` is an empty list, by CVAT (Datumaro's COCO exporter, `_InstancesExporter.
convert_instance`: a bbox with neither polygon nor mask gets `"segmentation": []`) and by Label
Studio (label_studio_sdk's `Converter.convert_to_coco`: every `rectanglelabels` result gets
`"segmentation": []`). Mask R-CNN needs a mask per instance: the converter refuses such an export
unless one of the choices below is named (Detectron2 drops them with a warning,
detectron2/data/datasets/coco.py; a silent drop is not made here).
"""

# The staging job's hyperparameter, the converter's and local_run's option (--boxes-without-mask).
BOXES_WITHOUT_MASK = "boxes_without_mask"
# The default: refuse the export, naming the two choices below.
REFUSE = "refuse"
# Leave those annotations out of training and of the val annotations, counted and named in the
# dataset's notes.
LEAVE_OUT = "leave_out"
# Train each with its box filled as its mask (the val annotations too, so evaluation scores them).
BOX_AS_MASK = "box_as_mask"
BOXES_WITHOUT_MASK_CHOICES = (REFUSE, LEAVE_OUT, BOX_AS_MASK)


def check_boxes_without_mask(value) -> str:
    """`value` when it is one of the choices; ValueError naming the option and the choices."""
    if value not in BOXES_WITHOUT_MASK_CHOICES:
        raise ValueError(f"{BOXES_WITHOUT_MASK}={value!r}: expected one of "
                         f"{', '.join(BOXES_WITHOUT_MASK_CHOICES)}")
    return value
