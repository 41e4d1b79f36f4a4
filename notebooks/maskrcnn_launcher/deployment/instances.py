"""SageMaker instance types: the format check, how many GPUs (Horovod ranks) each training type
has, which have local NVMe storage (docs/aws-rules.md SM-1, EP-4), and which hosting types take
the GPU or the CPU TensorFlow Serving image (EP-2)."""

import re
from typing import Optional

# One Horovod rank per GPU. Counts from the EC2 instance-type pages; extend here, nowhere else.
GPUS_PER_INSTANCE = {
    "ml.p3.2xlarge": 1,
    "ml.p3.8xlarge": 4,
    "ml.p3.16xlarge": 8,
    "ml.p3dn.24xlarge": 8,
    "ml.p4d.24xlarge": 8,
    "ml.p4de.24xlarge": 8,
    "ml.p5.48xlarge": 8,
    "ml.p5e.48xlarge": 8,
    "ml.p5en.48xlarge": 8,
    "ml.g4dn.12xlarge": 4,
    "ml.g4dn.metal": 8,
    "ml.g5.xlarge": 1,
    "ml.g5.2xlarge": 1,
    "ml.g5.12xlarge": 4,
    "ml.g5.24xlarge": 4,
    "ml.g5.48xlarge": 8,
    "ml.g6.xlarge": 1,
    "ml.g6.12xlarge": 4,
    "ml.g6.24xlarge": 4,
    "ml.g6.48xlarge": 8,
    "ml.g6e.12xlarge": 4,
    "ml.g6e.48xlarge": 8,
}

# Families whose instances have local NVMe instance storage, which SageMaker uses instead of an EBS
# volume. CreateTrainingJob ResourceConfig: "You can't request a VolumeKmsKeyId when using an
# instance type with local storage" (the hardware encrypts it); which types have it: the EC2 user
# guide, "Instance store volumes". Families ending in "d" (m5d, c5d, r5d, m6id, ...) have it too.
LOCAL_STORAGE_FAMILIES = frozenset({
    "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "g4dn", "g5", "g6", "g6e", "trn1", "trn1n", "trn2",
})

# ml.<family><generation><options>.<size>, e.g. ml.p4d.24xlarge, ml.g5.xlarge, ml.m5.large.
INSTANCE_TYPE_PATTERN = re.compile(r"^ml\.[a-z]+[0-9]+[a-z-]*\.([0-9]*xlarge|large|medium|metal)$")


class InstanceTypeError(ValueError):
    """The instance type is malformed, or its GPU count is unknown and was not given."""


def check_instance_type(instance_type: str, use: str = "training") -> str:
    if not INSTANCE_TYPE_PATTERN.match(instance_type or ""):
        example = "ml.p4d.24xlarge or ml.p3dn.24xlarge" if use == "training" else \
            "ml.g5.xlarge or ml.m5.xlarge"
        raise InstanceTypeError(
            f"instance type {instance_type!r} is not a SageMaker {use} instance type; "
            f"expected the form ml.<family>.<size>, e.g. {example}")
    return instance_type


def processes_per_host(instance_type: str, explicit: Optional[int] = None) -> int:
    """Horovod ranks per instance: one per GPU, or `explicit` (e.g. for a type not in the table,
    or 1 to run a CPU instance)."""
    check_instance_type(instance_type)
    if explicit is not None:
        if explicit < 1:
            raise InstanceTypeError(f"processes per host must be >= 1, got {explicit}")
        return explicit
    try:
        return GPUS_PER_INSTANCE[instance_type]
    except KeyError:
        known = ", ".join(sorted(GPUS_PER_INSTANCE))
        raise InstanceTypeError(
            f"GPU count of {instance_type!r} is unknown; pass the processes per host explicitly "
            f"(CLI --processes-per-host, one per GPU) or use one of: {known}") from None


def has_local_storage(instance_type: str) -> bool:
    """True when the type's storage is local NVMe (no EBS volume, so no VolumeKmsKeyId)."""
    family = check_instance_type(instance_type).split(".")[1]
    return family in LOCAL_STORAGE_FAMILIES or family.endswith("d")


# Hosting (real-time endpoints): which TensorFlow Serving image an instance family takes. The
# inference images are CUDA 12 builds (the "gpu" image) or CPU builds; families outside both sets
# are refused rather than guessed: Inferentia and Trainium need Neuron-compiled models, p2's K80
# is too old for CUDA 12. Extend here, nowhere else.
HOSTING_GPU_FAMILIES = frozenset({
    "p3", "p4d", "p4de", "p5", "p5e", "p5en", "g4dn", "g5", "g6", "g6e",
})
HOSTING_CPU_FAMILIES = frozenset({
    "t2", "t3", "m4", "m5", "m5d", "m6i", "m6id", "m7i", "c4", "c5", "c5d", "c6i", "c6id", "c7i",
    "r5", "r5d", "r6i", "r6id", "r7i",
})


def hosting_processor(instance_type: str) -> str:
    """'gpu' or 'cpu': which TensorFlow Serving image an endpoint instance of this type runs."""
    family = check_instance_type(instance_type, use="hosting").split(".")[1]
    if family in HOSTING_GPU_FAMILIES:
        return "gpu"
    if family in HOSTING_CPU_FAMILIES:
        return "cpu"
    raise InstanceTypeError(
        f"instance type {instance_type!r}: family {family!r} is not a known hosting family for "
        f"the TensorFlow Serving images; GPU: {', '.join(sorted(HOSTING_GPU_FAMILIES))}; CPU: "
        f"{', '.join(sorted(HOSTING_CPU_FAMILIES))} "
        "(notebooks/maskrcnn_launcher/deployment/instances.py)")


# An endpoint's hourly price class: an order of magnitude from its accelerators, not a price
# (prices differ by region and change: the SageMaker pricing page has them). "$" CPU only, "$$"
# one GPU, "$$$" two to four, "$$$$" eight of the g or p3 families, "$$$$$" eight A100/H100/H200
# (p4d, p4de, p5, p5e, p5en). The multi-GPU sizes of the g families (EC2 instance-type pages):
# .12xlarge and .24xlarge have 4 GPUs, .48xlarge and .metal 8, the others 1.
PRICE_CLASSES = {"$": "CPU only", "$$": "1 GPU", "$$$": "2 to 4 GPUs",
                 "$$$$": "8 GPUs (g families, p3)", "$$$$$": "8 A100/H100/H200 (p4d, p5)"}
TOP_GPU_FAMILIES = frozenset({"p4d", "p4de", "p5", "p5e", "p5en"})
_G_FAMILY_GPUS = {"12xlarge": 4, "24xlarge": 4, "48xlarge": 8, "metal": 8}
_P3_GPUS = {"2xlarge": 1, "8xlarge": 4, "16xlarge": 8}


def hosting_gpus(instance_type: str) -> Optional[int]:
    """GPUs of a hosting instance type; None when the table does not know."""
    family, size = check_instance_type(instance_type, use="hosting").split(".")[1:3]
    if family in HOSTING_CPU_FAMILIES:
        return 0
    if instance_type in GPUS_PER_INSTANCE:
        return GPUS_PER_INSTANCE[instance_type]
    if family in ("g4dn", "g5", "g6", "g6e"):
        return _G_FAMILY_GPUS.get(size, 1)
    if family == "p3":
        return _P3_GPUS.get(size)
    return 8 if family in TOP_GPU_FAMILIES or family == "p3dn" else None


def price_class(instance_type: str) -> str:
    """PRICE_CLASSES' class of one instance of the type, '?' for a type the tables do not know."""
    try:
        gpus = hosting_gpus(instance_type)
    except InstanceTypeError:
        return "?"
    family = instance_type.split(".")[1]
    if gpus is None:
        return "?"
    if gpus == 0:
        return "$"
    if family in TOP_GPU_FAMILIES:
        return "$$$$$"
    return "$$" if gpus == 1 else "$$$" if gpus <= 4 else "$$$$"
