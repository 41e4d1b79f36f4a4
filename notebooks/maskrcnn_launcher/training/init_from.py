"""Where a fine-tuning launch starts from: an earlier run's checkpoints, found and checked before
anything is sent.

`--init-from` / `init_from` names a training job of this deployment (its CheckpointConfig S3 URI,
read with DescribeTrainingJob; a tuning job's candidate kept its own below its name there:
`job_checkpoints`), a tuning job (its best candidate's) or a checkpoint S3 URI below the
deployment's checkpoint prefix, which the training role reads. The job receives that prefix as
its `init` channel (S3, whatever the data source). Refused here, naming what to do, before
anything is sent: a job that does not exist, is another deployment's or a staging job, or kept no
checkpoints; a URI outside the checkpoint prefix; a prefix without a checkpoint or without the
run's RUN_INFO (a run of the job before fine-tuning existed); a run of another backbone or model
preset (maskrcnn_contract `hyperparameters.init_run_problems`, which the job applies again at
start).
"""

import dataclasses
import json
from typing import List, Optional, Tuple

from maskrcnn_contract import hyperparameters, job_io, s3_objects
from maskrcnn_contract.hyperparameters import Hyperparameters

from maskrcnn_launcher.deployment.settings import Deployment
from maskrcnn_launcher.runs import lookup
from maskrcnn_launcher.training import inputs
from maskrcnn_launcher.training.options import LaunchRequestError

WHERE = "--init-from, init_from"


@dataclasses.dataclass(frozen=True)
class InitSource:
    """The checkpoints a launch fine-tunes from."""

    s3_uri: str          # the `init` channel: the run's checkpoint prefix
    run_info: dict       # job_io.RUN_INFO of that run
    job_name: Optional[str] = None  # when named by its training job


def _refuse(problem: str) -> LaunchRequestError:
    return LaunchRequestError(f"cannot fine-tune ({WHERE}): {problem}")


def job_checkpoints(job: dict) -> Optional[str]:
    """Where a training job (its DescribeTrainingJob) kept its checkpoints, or None without a
    CheckpointConfig: the S3Uri, below the job's name for a tuning job's candidate, whose
    DescribeTrainingJob HyperParameters carry _tuning_objective_metric as its container's did
    (job_io.own_checkpoints, the rule the job follows; docs/aws-rules.md TUN-6)."""
    uri = (job.get("CheckpointConfig") or {}).get("S3Uri")
    if not uri:
        return None
    return job_io.own_checkpoints(uri, job.get("HyperParameters") or {}, job["TrainingJobName"])


def _job_checkpoints(sagemaker_client, deployment: Deployment, name: str) -> Tuple[str, str]:
    """(the training job, its checkpoint S3 URI) for the training job `name` of this deployment,
    or for the tuning job `name`: its best candidate."""
    tuning = lookup.describe_tuning_job(sagemaker_client, deployment, name)
    if tuning is not None:
        name = lookup.best_candidate(tuning, _refuse)
    job = lookup.describe_job(sagemaker_client, deployment, name, _refuse)
    # Known by its name as well: a DescribeTrainingJob answer need not carry the Environment.
    if lookup.is_staging_job(deployment, name, job):
        raise _refuse(f"{name!r} is a staging job: it trains no model")
    uri = job_checkpoints(job)
    if not uri:
        raise _refuse(f"training job {name!r} kept no checkpoints (no CheckpointConfig); name a "
                      "job the launcher started, or a checkpoint s3:// URI")
    return name, uri


def resolve(sagemaker_client, s3_client, deployment: Deployment, init_from: str,
            hps: Hyperparameters) -> InitSource:
    """The checkpoints `init_from` names, checked against the launch's hyperparameters."""
    if not isinstance(init_from, str) or not init_from.strip():
        raise _refuse(f"{init_from!r}: expected a training job name or a checkpoint s3:// URI")
    init_from = init_from.strip()
    job_name = None
    if init_from.startswith("s3://"):
        uri = init_from
    else:
        job_name, uri = _job_checkpoints(sagemaker_client, deployment, init_from)
    try:
        bucket, prefix = s3_objects.split_s3_uri(uri)
    except s3_objects.S3UriError as error:
        raise _refuse(str(error)) from None
    uri = f"s3://{bucket}/{prefix}"
    below = deployment.checkpoints_s3_uri
    if bucket != deployment.data_bucket or not prefix.startswith(deployment.checkpoint_prefix) \
            or prefix == deployment.checkpoint_prefix:
        raise _refuse(f"{uri} is not a run's checkpoints of this deployment: they are below "
                      f"{below}<run>/, where the training role reads them")
    page = s3_client.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1000)
    names = [item["Key"][len(prefix):] for item in page.get("Contents", [])]
    if not inputs.has_checkpoint(names):
        raise _refuse(f"no checkpoint (.index and .data-*) in {uri}"
                      + (f" (training job {job_name} wrote none yet)" if job_name else ""))
    if job_io.RUN_INFO not in names:
        raise _refuse(f"{uri} has no {job_io.RUN_INFO}: the run was trained by a version of the "
                      "job that did not record its backbone, preset and classes; fine-tune from "
                      "a run of this version")
    run_info = json.loads(s3_client.get_object(Bucket=bucket, Key=prefix + job_io.RUN_INFO)
                          ["Body"].read())
    problems = hyperparameters.init_run_problems(hps, run_info, where=uri)
    if problems:
        raise LaunchRequestError(f"cannot fine-tune ({WHERE}):\n  - " + "\n  - ".join(problems))
    return InitSource(uri, run_info, job_name)


def class_names(categories: List[dict]) -> List[str]:
    return [str(c.get("name")) for c in categories]


def describe(source: InitSource, dataset: str, dataset_categories: Optional[List[dict]]) -> str:
    """What the job will do with the run's weights, for the launch's notes."""
    theirs = source.run_info.get("categories") or []
    origin = f"training job {source.job_name}, " if source.job_name else ""
    line = (f"fine-tuning from {source.s3_uri} ({origin}{source.run_info.get('backbone')}, "
            f"{source.run_info.get('model_preset')}, trained on "
            f"{source.run_info.get('dataset') or 'an unnamed dataset'} with {len(theirs)} "
            f"classes): every variable of the same shape is restored, the optimizer starts anew")
    if dataset_categories is None:
        return line
    # The job's rule, from the contract: what it says here is what the job does.
    if hyperparameters.same_classes(source.run_info, dataset_categories):
        return line + (f"; dataset {dataset!r} has the same classes, so the class-specific "
                       "layers are kept")
    return (line + f"; dataset {dataset!r} has {len(dataset_categories)} other classes "
            f"({', '.join(class_names(dataset_categories)[:10])}"
            f"{' ...' if len(dataset_categories) > 10 else ''}), so the classifier, the "
            "class-specific box regression and the mask predictor are re-initialized")
