"""A local AWS for the launcher tests: moto's server on 127.0.0.1, wrapped to
- record every CreateTrainingJob request exactly as sent (moto overwrites MetricDefinitions
  when it stores a job, so reading it back would not show what the launcher sent);
- play the part of the job itself: a training job writes metric lines to its CloudWatch log
  stream, the staging job writes the dataset's files into the data prefix and the backbone
  checkpoint into the pretrained prefix;
- answer fsx:DescribeDataRepositoryAssociations, which moto lacks, from a table.
"""

import io
import logging
import json
import threading
import time
from typing import Dict, List

import boto3
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

from maskrcnn_contract import job_io
from maskrcnn_contract import metrics as job_metrics

# One line per request would bury the test output.
logging.getLogger("werkzeug").setLevel(logging.ERROR)

CREATE_TRAINING_JOB = "SageMaker.CreateTrainingJob"
DESCRIBE_DRA = "AWSSimbaAPIService_v20180301.DescribeDataRepositoryAssociations"

# What the fake training job prints: real metric lines, formatted by the job's own module.
TRAINING_LOG = [
    "rank 0 on algo-1: starting",
    job_metrics.format_line("train/loss", 1.25),
    job_metrics.format_line("train/step", 100),
    job_metrics.format_line("train/loss", 0.75),
    job_metrics.format_line("train/step", 200),
    job_metrics.format_line("eval/bbox_AP", 0.377),
    job_metrics.format_line("eval/bbox_AP50", 0.59),
    job_metrics.format_line("eval/segm_AP", 0.339),
]


class FakeAws:
    def __init__(self, region: str):
        self.region = region
        self.create_training_job_requests: List[dict] = []
        self.associations: List[dict] = []
        self._lock = threading.Lock()
        self._app = DomainDispatcherApplication(create_backend_app)
        self._server = make_server("127.0.0.1", 0, self._wsgi, threaded=True,
                                   request_handler=MotoRequestHandler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._server.shutdown()
        self._thread.join()

    def client(self, service: str):
        return boto3.session.Session(region_name=self.region).client(
            service, endpoint_url=self.endpoint, aws_access_key_id="testing",
            aws_secret_access_key="testing")

    def requests_since(self, start: int) -> List[dict]:
        with self._lock:
            return list(self.create_training_job_requests[start:])

    # --- WSGI --------------------------------------------------------------------------------

    def _wsgi(self, environ, start_response):
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if target not in (CREATE_TRAINING_JOB, DESCRIBE_DRA):
            return self._app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length)
        params = json.loads(body or b"{}")
        if target == DESCRIBE_DRA:
            return self._describe_associations(params, start_response)
        environ["wsgi.input"] = io.BytesIO(body)
        response = list(self._app(environ, start_response))
        with self._lock:
            self.create_training_job_requests.append(params)
        self._run_job(params)
        return response

    def _describe_associations(self, params, start_response):
        wanted = {v for f in params.get("Filters", []) if f["Name"] == "file-system-id"
                  for v in f["Values"]}
        found = [a for a in self.associations if not wanted or a["FileSystemId"] in wanted]
        start_response("200 OK", [("Content-Type", "application/x-amz-json-1.1")])
        return [json.dumps({"Associations": found}).encode()]

    def _run_job(self, params: Dict) -> None:
        name = params["TrainingJobName"]
        hps = params.get("HyperParameters", {})
        if hps.get("sagemaker_program") == job_io.STAGING_PROGRAM:
            bucket, _, prefix = hps[job_io.STAGING_S3_URI][len("s3://"):].partition("/")
            s3 = self.client("s3")
            s3.put_object(Bucket=bucket, Key=prefix + "tfrecords/train-00000-of-00001.tfrecord",
                          Body=b"records")
            s3.put_object(Bucket=bucket, Key=prefix + job_io.DATASET_COMPLETE_MARKER,
                          Body=json.dumps({"num_classes": 91}).encode())
            bucket, _, prefix = hps[job_io.STAGING_PRETRAINED_S3_URI][len("s3://"):].partition("/")
            for backbone in hps[job_io.STAGING_BACKBONES].split(","):
                for name in ("ckpt-28080.data-00000-of-00001", "ckpt-28080.index",
                             job_io.PRETRAINED_COMPLETE_MARKER):
                    s3.put_object(Bucket=bucket, Key=f"{prefix}{backbone}/{name}", Body=b"{}")
            return
        logs = self.client("logs")
        group = "/aws/sagemaker/TrainingJobs"
        try:
            logs.create_log_group(logGroupName=group)
        except logs.exceptions.ResourceAlreadyExistsException:
            pass
        stream = f"{name}/algo-1-1700000000"
        logs.create_log_stream(logGroupName=group, logStreamName=stream)
        now_ms = int(time.time() * 1000)  # CloudWatch drops events older than 14 days
        logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=[
            {"timestamp": now_ms + i, "message": line}
            for i, line in enumerate(TRAINING_LOG)])
