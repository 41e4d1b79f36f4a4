"""SageMaker training entrypoint (SAGEMAKER_PROGRAM=train.py), one process per rank.

The toolkit's MPI runner starts this on every host with mpirun; locally, `python -m
maskrcnn_local.local_run` does the same. The job itself is `maskrcnn_job.job`.
"""

from maskrcnn_job import job

if __name__ == "__main__":
    job.main()
