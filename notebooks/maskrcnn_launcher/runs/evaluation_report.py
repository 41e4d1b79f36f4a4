"""A finished training job's evaluation report: fetched from its model.tar.gz, printed, shown.

    fetched = evaluation_report.fetch(deployment, job_name, boto_session)  # reports' root/<job>/
    print("\\n".join(evaluation_report.table(fetched.report)))
    evaluation_report.show(fetched)     # in a notebook: the table, then the pictures

The job writes its last evaluation's report beside the model, code/evaluation/ in model.tar.gz
(report.json and its PNGs; every field: docs/evaluation.md). `fetch` checks the job as `deploy`
does (this deployment's, Completed, a training job, its model.tar.gz present), then streams the
archive from S3 (GetObject) and writes only those members: the SavedModel is read past, never
written, and the download stops once the report and every picture it names are out. The
notebook role reads the output prefix already (the SDK reads results back there): nothing more
is granted for this.
"""

import dataclasses
import os
import shutil
import tarfile
from typing import Dict, Optional

from maskrcnn_contract import evaluation_report as contract
from maskrcnn_contract import s3_objects
from maskrcnn_contract.evaluation_report import table  # noqa: F401  (the launcher's API)

from maskrcnn_launcher.deployment.settings import Deployment
from maskrcnn_launcher.runs import lookup

# On the notebook instance's volume, beside the TensorBoard copies: <root>/<job>/.
ROOT_ENV = "MASKRCNN_REPORTS_DIR"
DEFAULT_ROOT = "~/SageMaker/evaluation-reports"


class ReportMissingError(lookup.RunRequestError):
    """The job's model.tar.gz holds no evaluation report."""


@dataclasses.dataclass(frozen=True)
class Fetched:
    job_name: str
    directory: str              # where report.json and its pictures now are
    report: dict
    pictures: Dict[str, str]    # {kind: path}, the pictures report.json names


def default_root() -> str:
    return os.path.expanduser(os.environ.get(ROOT_ENV) or DEFAULT_ROOT)


def _report_member(member: tarfile.TarInfo) -> Optional[str]:
    """The file name of a member of code/evaluation/ (no deeper, a regular file), else None."""
    name = member.name[2:] if member.name.startswith("./") else member.name
    folder, _, base = name.rpartition("/")
    if folder != contract.MODEL_REPORT_DIR or not member.isfile() or base in ("", ".", ".."):
        return None
    return base


def _extract(body, directory: str) -> None:
    """The report's members of the gzipped tar stream `body` into `directory`; stops reading
    once report.json and each picture it names are written."""
    wanted = None
    with tarfile.open(fileobj=body, mode="r|gz") as archive:
        for member in archive:
            base = _report_member(member)
            if base is None:
                continue
            source = archive.extractfile(member)
            assert source is not None  # _report_member takes files only
            with open(os.path.join(directory, base), "wb") as f:
                shutil.copyfileobj(source, f)
            if base == contract.REPORT_FILE:
                wanted = set(contract.picture_names(contract.read(directory)).values())
            if wanted is not None and all(os.path.isfile(os.path.join(directory, name))
                                          for name in wanted):
                break


def fetch(deployment: Deployment, job_name: str, boto_session,
          out_dir: Optional[str] = None) -> Fetched:
    """The evaluation report of training job `job_name`, from its model.tar.gz into `out_dir`
    (default <$MASKRCNN_REPORTS_DIR or DEFAULT_ROOT>/<job>/), replaced whole. Refused
    (lookup.RunRequestError) for a job that is not this deployment's, does not exist, is not
    Completed, or has no model; ReportMissingError for a model without a report."""
    s3 = boto_session.client("s3")
    job = lookup.training_job(boto_session.client("sagemaker"), s3, deployment, job_name)
    url = job["ModelArtifacts"]["S3ModelArtifacts"]
    bucket, key = s3_objects.split_object_uri(url)
    directory = out_dir or os.path.join(default_root(), job_name)
    temporary = directory.rstrip("/") + ".incomplete"
    shutil.rmtree(temporary, ignore_errors=True)
    os.makedirs(temporary)
    body = s3.get_object(Bucket=bucket, Key=key)["Body"]
    try:
        _extract(body, temporary)
    finally:
        body.close()
    if not os.path.isfile(os.path.join(temporary, contract.REPORT_FILE)):
        shutil.rmtree(temporary)
        raise ReportMissingError(
            f"training job {job_name!r}: its model ({url}) holds no evaluation report "
            f"({contract.MODEL_REPORT_DIR}/{contract.REPORT_FILE}): the job evaluated nothing "
            "(eval_every_epochs, no validation set) or predates the report")
    shutil.rmtree(directory, ignore_errors=True)
    os.replace(temporary, directory)
    return _fetched(job_name, directory)


def _fetched(job_name: str, directory: str) -> Fetched:
    report = contract.read(directory)
    pictures = {kind: os.path.join(directory, file_name)
                for kind, file_name in contract.picture_names(report).items()
                if os.path.isfile(os.path.join(directory, file_name))}
    return Fetched(job_name, directory, report, pictures)


def cached(deployment: Deployment, job_name: str, boto_session) -> Fetched:
    """The report `fetch` wrote for this job before (a Completed job's model.tar.gz does not
    change), else `fetch`: tables over many runs download each model once."""
    directory = os.path.join(default_root(), job_name)
    if not os.path.isfile(os.path.join(directory, contract.REPORT_FILE)):
        return fetch(deployment, job_name, boto_session)
    return _fetched(job_name, directory)


def describe(fetched: Fetched) -> list:
    """The lines printed above the table: what was evaluated, where the files are."""
    report = fetched.report
    step = f"step {report['step']}, " if report.get("step") is not None else ""
    return [f"evaluation report of {fetched.job_name} ({step}{report['images']} images, "
            f"{report['detections']} detections, {report['evaluator']}): "
            f"{os.path.join(fetched.directory, contract.REPORT_FILE)}"]


def show(fetched: Fetched) -> None:
    """In a notebook: the lines of `describe`, the table, then each picture."""
    from IPython.display import Image, display

    print("\n".join(describe(fetched) + table(fetched.report)))
    for kind, path in fetched.pictures.items():
        print(f"{kind}: {path}")
        display(Image(filename=path))
