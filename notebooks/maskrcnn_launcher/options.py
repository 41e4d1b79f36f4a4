"""What a user chooses for a launch, and the error a launch that cannot go out raises."""

import dataclasses
from typing import Dict, Optional

from maskrcnn_contract import job_io
from maskrcnn_contract.hyperparameters import DISTRIBUTIONS, Hyperparameters

DATA_SOURCES = ("s3", "efs", "fsx")
HOROVOD, MWMS, PARAMETER_SERVER = DISTRIBUTIONS
DEFAULT_DISTRIBUTION = Hyperparameters.distribution


class LaunchRequestError(ValueError):
    """The launch would be refused by the deployment's policy or fail the job; the message lists
    every problem."""


@dataclasses.dataclass
class LaunchOptions:
    """What the user chooses in a notebook or on the command line."""

    data_source: str = "fsx"
    instance_type: str = "ml.p4d.24xlarge"
    instance_count: int = 2
    # How the hosts share the work (DISTRIBUTIONS; notebooks/README.md, "Choosing a
    # distribution"). None: the `distribution` hyperparameter if given, else horovod.
    distribution: Optional[str] = None
    processes_per_host: Optional[int] = None  # horovod: None is one rank per GPU of instance_type
    hyperparameters: Dict[str, object] = dataclasses.field(default_factory=dict)
    use_pretrained: bool = True
    use_spot: bool = False
    max_run_hours: float = 72.0
    max_wait_hours: Optional[float] = None  # spot only; None: twice max_run_hours
    volume_size_gb: int = 200  # File mode copies the S3 channel (~20 GB) onto it
    # horovod only: extra mpirun options (why these: the contract)
    mpi_options: str = job_io.DEFAULT_MPI_OPTIONS
    # Names the run: its jobs are `<prefix>-<run name>-<time>` and share the checkpoints in
    # s3://<bucket>/checkpoints/<prefix>-<run name>/, so launching a run again resumes it.
    # None: `<data source>-<6 random hex digits>`, a new run.
    run_name: Optional[str] = None
