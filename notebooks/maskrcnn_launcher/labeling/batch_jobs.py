"""Batch predictions sent, followed and collected.

    batch_jobs.send(plan, boto_session)                       # CreateModel, CreateTransformJob
    batch_jobs.wait(plan.name, boto_session, echo=print)      # progress until it ends
    run = batch_jobs.collect(deployment, plan.name, boto_session, folder)   # the COCO files

The transform writes one `<image key below the input prefix>.out` per image it answered (BT-3); an
image it could not answer has none, and the job ends Failed once every image was tried (BT-3).
`collect` reads what is there either way: each answer becomes the image's COCO results
(labeling/predictions.py), each image without one is named as failed, and the run's files are
written to `folder` and uploaded beside the transform's output.
"""

import json
import os
import time
from typing import Callable, Dict, List, Optional, Tuple

from botocore.exceptions import ClientError

from maskrcnn_contract import s3_objects

from maskrcnn_launcher.deployment.settings import Deployment
from maskrcnn_launcher.labeling import batch_plan, predictions
from maskrcnn_launcher.runs import evaluation_report, lookup

OUT_SUFFIX = ".out"
ENDED = ("Completed", "Failed", "Stopped")
POLL_S = 30.0


class BatchFailure(RuntimeError):
    """A batch predictions run failed after something was created; the message says what
    exists."""


def send(plan: batch_plan.Plan, boto_session, echo: Callable[[str], None] = print) -> None:
    """Creates the model, then the transform job; a refused transform job deletes the model."""
    sagemaker = boto_session.client("sagemaker")
    sagemaker.create_model(**plan.create_model)
    try:
        sagemaker.create_transform_job(**plan.create_transform_job)
    except ClientError as error:
        sagemaker.delete_model(ModelName=plan.name)
        raise BatchFailure(f"transform job {plan.name} was refused ({error}); its model was "
                           "deleted again, nothing of it is left") from None
    echo(f"transform job {plan.name} started: {len(plan.image_keys)} images, answers to "
         f"{plan.create_transform_job['TransformOutput']['S3OutputPath']}")


def output_key(input_uri: str, output_path: str, key: str) -> str:
    """The key of the transform's answer for the input object `key` (BT-3): its path below the
    input prefix, below the output path, with '.out' appended."""
    _, input_prefix = s3_objects.split_s3_uri(input_uri)
    _, output_prefix = s3_objects.split_s3_uri(output_path)
    if not key.startswith(input_prefix):
        raise ValueError(f"{key!r} is not below the input prefix {input_uri}")
    return output_prefix + key[len(input_prefix):] + OUT_SUFFIX


def _answered(s3_client, output_path: str) -> Dict[str, int]:
    bucket, prefix = s3_objects.split_s3_uri(output_path)
    found = {}
    for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            if item["Key"].endswith(OUT_SUFFIX):
                found[item["Key"]] = item["Size"]
    return found


def wait(name: str, boto_session, echo: Callable[[str], None] = print,
         poll_s: float = POLL_S, timeout_s: float = 48 * 3600) -> dict:
    """Follows the transform job until it ends: its status, and the images answered so far with
    images/s and an estimate of the time left. Returns its last DescribeTransformJob."""
    sagemaker, s3 = boto_session.client("sagemaker"), boto_session.client("s3")
    started, last_line, total = time.time(), None, None
    while True:
        job = sagemaker.describe_transform_job(TransformJobName=name)
        status = job["TransformJobStatus"]
        output_path = job["TransformOutput"]["S3OutputPath"]
        if total is None:  # the input prefix is listed once, not at every poll
            total = len([k for k in batch_plan.list_images(
                s3, job["TransformInput"]["DataSource"]["S3DataSource"]["S3Uri"])
                if not k.endswith("/")])
        done = len(_answered(s3, output_path))
        line = f"{name}: {status}, {done}/{total} images answered"
        if status not in ENDED and done:
            rate = done / max(time.time() - started, 1e-9)
            line += f", {rate:.2f} images/s, about {(total - done) / rate / 60:.0f} min left"
        if line != last_line:
            echo(line)
            last_line = line
        if status in ENDED:
            if status != "Completed":
                echo(f"{name} {status}: {job.get('FailureReason', 'no reason given')}")
            return job
        if time.time() - started > timeout_s:
            raise TimeoutError(f"transform job {name} still {status} after {timeout_s:.0f} s; "
                               f"follow it with: python -m maskrcnn_launcher predictions {name}")
        time.sleep(poll_s)


def _transform_job(sagemaker, deployment: Deployment, name: str) -> dict:
    if not name.startswith(f"{deployment.job_name_prefix}-"):
        raise batch_plan.BatchRequestError(
            f"{name!r} is not one of this deployment's batch predictions (they start "
            f"{deployment.job_name_prefix}-)")
    try:
        job = sagemaker.describe_transform_job(TransformJobName=name)
    except ClientError as error:
        if lookup.is_missing(error):
            raise batch_plan.BatchRequestError(
                f"no transform job named {name!r} in {deployment.region}") from None
        raise
    if job["TransformJobStatus"] not in ENDED:
        raise batch_plan.BatchRequestError(
            f"transform job {name} is {job['TransformJobStatus']}: collect its predictions once "
            "it has ended")
    return job


def _categories(deployment: Deployment, training_job: str, boto_session) -> Tuple[List[Dict], dict]:
    """The dataset's categories (its own ids and names) from the model's evaluation report, and the
    report (for the ranking): every class, detected or not, for the labeling tools' label lists."""
    fetched = evaluation_report.fetch(deployment, training_job, boto_session)
    # A report without source ids predates them: its ids are the dataset's own (the job's
    # evaluation/report.py).
    return ([{"id": int(c.get("source_id", c["id"])), "name": c["name"]}
             for c in fetched.report["categories"]], fetched.report)


def collect(deployment: Deployment, name: str, boto_session, folder: str,
            echo: Callable[[str], None] = print) -> Tuple[predictions.Predictions, dict]:
    """The ended transform job's answers as a predictions run, written to `folder` and uploaded to
    the run's output prefix; (the run, the model's evaluation report)."""
    sagemaker, s3 = boto_session.client("sagemaker"), boto_session.client("s3")
    job = _transform_job(sagemaker, deployment, name)
    input_uri = job["TransformInput"]["DataSource"]["S3DataSource"]["S3Uri"]
    output_path = job["TransformOutput"]["S3OutputPath"]
    model = sagemaker.describe_model(ModelName=job["ModelName"])
    training_job, model_name = _model_source(sagemaker, model)
    categories, report = _categories(deployment, training_job, boto_session)
    known = {c["id"] for c in categories}
    keys = sorted(k for k in batch_plan.list_images(s3, input_uri) if not k.endswith("/"))
    answered = _answered(s3, output_path)
    _, input_prefix = s3_objects.split_s3_uri(input_uri)
    out_bucket, _ = s3_objects.split_s3_uri(output_path)
    images: List[Dict]
    images, results, failed = [], [], []
    started = time.time()
    for number, key in enumerate(keys, 1):
        file_name = key[len(input_prefix):]
        answer_key = output_key(input_uri, output_path, key)
        if answer_key not in answered:
            failed.append({"file_name": file_name,
                           "reason": "no answer: the transform failed on it (its data log in "
                                     f"CloudWatch, /aws/sagemaker/TransformJobs, {name}/...)"})
            continue
        body = s3.get_object(Bucket=out_bucket, Key=answer_key)["Body"].read()
        try:
            answer = json.loads(body)
            height, width = answer["image_size"]
            image_results = predictions.results_of(answer, len(images) + 1)
        except (ValueError, KeyError, TypeError) as error:
            failed.append({"file_name": file_name,
                           "reason": f"its answer is not the handler's detections ({error})"})
            continue
        unknown = {r["category_id"] for r in image_results} - known
        if unknown:
            raise BatchFailure(f"{file_name}: the model answered category id(s) "
                               f"{sorted(unknown)}, which its evaluation report does not list "
                               f"({sorted(known)}): is the report another model's?")
        images.append({"id": len(images) + 1, "file_name": file_name,
                       "height": int(height), "width": int(width)})
        results += image_results
        if number % 200 == 0 or number == len(keys):
            rate = number / max(time.time() - started, 1e-9)
            echo(f"collected {number}/{len(keys)} answers ({rate:.1f}/s)")
    run = predictions.Predictions(
        images=images, categories=categories, results=results, model=model_name,
        source=input_uri, score_threshold=float(job.get("Environment", {}).get(
            batch_plan.SCORE_THRESHOLD_ENV, batch_plan.DEFAULT_SCORE_THRESHOLD)),
        failed=failed)
    upload(s3, run.write(folder), batch_plan.output_uri(deployment, name))
    return run, report


def _model_source(sagemaker, model: dict) -> Tuple[str, str]:
    """(the training job whose archive the model serves, how the run names the model): a model
    package version's archive is its InferenceSpecification's."""
    container = model["PrimaryContainer"]
    package = container.get("ModelPackageName")
    url = container.get("ModelDataUrl") or ""
    if package:
        url = sagemaker.describe_model_package(ModelPackageName=package)[
            "InferenceSpecification"]["Containers"][0]["ModelDataUrl"]
    parts = url.split("/")
    if not url.endswith("/output/model.tar.gz") or len(parts) < 4:
        raise BatchFailure(f"model {model['ModelName']} serves {url!r}, not a training job's "
                           "<job>/output/model.tar.gz: its categories are unknown")
    job = parts[-3]
    return job, (f"{package} ({job})" if package else job)


def upload(s3_client, paths: List[str], prefix_uri: str) -> List[str]:
    """Each file to <prefix_uri><its name>; their URIs."""
    bucket, prefix = s3_objects.split_s3_uri(prefix_uri)
    uris = []
    for path in paths:
        key = prefix + os.path.basename(path)
        s3_client.upload_file(path, bucket, key)
        uris.append(f"s3://{bucket}/{key}")
    return uris


def describe_run(run: predictions.Predictions, uris: Optional[List[str]] = None) -> List[str]:
    """The run's summary, a line each."""
    summary = run.summary()
    lines = [f"model:       {summary['model']}",
             f"images:      {summary['images']} ({summary['images_predicted']} answered, "
             f"{len(summary['failed_images'])} failed, "
             f"{len(summary['images_without_detections'])} without a detection)",
             f"detections:  {summary['detections']} at score >= {summary['score_threshold']}: "
             + ", ".join(f"{name} {count}" for name, count in
                         summary["detections_per_class"].items())]
    lines += [f"failed:      {f['file_name']}: {f['reason']}"
              for f in summary["failed_images"][:10]]
    lines += [f"written:     {uri}" for uri in uris or []]
    return lines
