"""The launcher tests' fake deployment, for playing the launcher's requests on emulated hosts.

A moto server seeded as tests/launcher/conftest.py seeds it (bucket maskrcnn-test-data-123456789012,
EFS and FSx ids, FSx mount name abcd1234, roles, SSM parameters, eu-west-2), in a process of its
own: moto keeps its state per process, and in one pytest process the launcher tests' server (and
`mock_aws` in the staging tests) would share and reset this one's. `FakeDeployment` builds
requests with the launcher itself (`jobs`, then `submit.send(..., dry_run=True)`: the request the
SDK would send, validated; or a tuning job's candidate, derived from the tuning request) and serves the bucket to the request playback
(maskrcnn_local/sagemaker_job.py).

    python -m tests.training.fake_deployment   # prints {"endpoint", "parameters"}; serves until
                                               # its stdin ends
"""

import contextlib
import json
import os
import subprocess
import sys
from typing import Dict, Iterator, Optional, Tuple

from tests.iam.deployment import BUCKET, REGION, SSM_PATH
from tests.paths import REPO

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_SESSION_TOKEN": "testing"}
# The fake deployment has an MLflow tracking server (its ARN in SSM), which the emulated hosts
# cannot reach: the played runs log none (--no-mlflow). test_evaluation_job.py's run logs to a
# real server; test_tracking.py has the image's client log to one by its ARN.
LOG_TO_MLFLOW = False


@contextlib.contextmanager
def environment_set(values: Dict[str, str]) -> Iterator[None]:
    """This process's environment with `values` for the block, restored afterwards."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class FakeDeployment:
    def __init__(self, endpoint: str, parameters: Dict[str, str]):
        self.endpoint, self.parameters = endpoint, parameters
        self.port = int(endpoint.rsplit(":", 1)[1])
        self.bucket, self.region = BUCKET, REGION
        self._clients: Dict[str, object] = {}
        self._vpc_id: Optional[str] = None
        self.last_tuning_request: Optional[dict] = None

    def client(self, service: str):
        import boto3

        if service not in self._clients:
            self._clients[service] = boto3.session.Session(region_name=REGION).client(
                service, endpoint_url=self.endpoint, aws_access_key_id="testing",
                aws_secret_access_key="testing", aws_session_token="testing")
        return self._clients[service]

    def iam_published(self) -> Tuple[Dict[str, str], str]:
        """What this deployment publishes and its VPC: what the IAM evaluation of a request played
        against it resolves the template to (tests/iam/plugin.py, PlayedJob)."""
        if self._vpc_id is None:
            subnet = self.parameters["subnet-ids"].split(",")[0]
            self._vpc_id = self.client("ec2").describe_subnets(
                SubnetIds=[subnet])["Subnets"][0]["VpcId"]
        return dict(self.parameters), self._vpc_id

    def environment(self) -> Dict[str, str]:
        """What points an AWS SDK at this server (and the launcher at the deployment's SSM path):
        for the launcher in this process, or its CLI in a subprocess."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_DEFAULT_REGION": REGION,
                "AWS_REGION": REGION, "AWS_CONFIG_FILE": "/dev/null",
                "AWS_SHARED_CREDENTIALS_FILE": "/dev/null", "MASKRCNN_SSM_PATH": SSM_PATH,
                **CREDENTIALS}

    def _environment(self):
        """The launcher's SDK session pointed at this server, the process environment restored
        afterwards (the launcher tests' server may be the one it names otherwise)."""
        return environment_set(self.environment())

    def _send(self, build) -> dict:
        import boto3
        from maskrcnn_launcher.deployment import settings
        from maskrcnn_launcher.training import submit

        with self._environment():
            session = boto3.session.Session(region_name=REGION)
            deployment = settings.load(session.client("ssm"), SSM_PATH)
            return submit.send(build(deployment, session), deployment, dry_run=True)

    def training_request(self, distribution: str, data_source: str,
                         hyperparameters: Dict[str, str], instance_count: int = 2) -> dict:
        """The CreateTrainingJob request of a launch trained from scratch (no backbone staged:
        `--no-pretrained`), one process per host on a CPU instance type."""
        from maskrcnn_launcher.training import jobs
        from maskrcnn_launcher.training.options import LaunchOptions

        options = LaunchOptions(
            data_source=data_source, instance_type="ml.m5.xlarge", instance_count=instance_count,
            distribution=distribution, processes_per_host=1 if distribution == "horovod" else None,
            hyperparameters=dict(hyperparameters), use_pretrained=False, max_run_hours=1.0,
            run_name=f"{data_source}-{distribution.replace('_', '-')}", mlflow=LOG_TO_MLFLOW)
        return self._send(lambda deployment, session: jobs.training_job(
            deployment, options, session, echo=lambda line: None))

    def tuning_candidate(self, distribution: str, data_source: str,
                         hyperparameters: Dict[str, str], tuned: str = "base_learning_rate",
                         instance_count: int = 2) -> dict:
        """The CreateTrainingJob request of one candidate of the tuning job the launcher builds
        for the same launch as `training_request`, with `tuned` searched (a log-scaled decade
        around its value), as SageMaker derives it (the launcher's tuning.candidate_request,
        docs/aws-rules.md TUN-3): the candidate tries the value `hyperparameters` give. The
        tuning job's own request is kept as `last_tuning_request`, for a test to derive the
        candidate again by itself."""
        import boto3
        from maskrcnn_launcher.deployment import settings
        from maskrcnn_launcher.training import tuning
        from maskrcnn_launcher.training.options import LaunchOptions

        value = float(hyperparameters[tuned])
        static = {k: v for k, v in hyperparameters.items() if k != tuned}
        options = LaunchOptions(
            data_source=data_source, instance_type="ml.m5.xlarge", instance_count=instance_count,
            distribution=distribution, processes_per_host=1 if distribution == "horovod" else None,
            hyperparameters=static, use_pretrained=False, max_run_hours=1.0,
            run_name=f"{data_source}-{distribution.replace('_', '-')}", mlflow=LOG_TO_MLFLOW)
        search = tuning.TuningOptions(ranges=(tuning.Range(
            tuned, repr(value / 3), repr(value * 3), tuning.LOGARITHMIC),))
        with self._environment():
            session = boto3.session.Session(region_name=REGION)
            deployment = settings.load(session.client("ssm"), SSM_PATH)
            built = tuning.tuning_job(deployment, options, search, session, echo=lambda line: None)
            request = tuning.send(built, deployment, None, dry_run=True)
        self.last_tuning_request = request
        return tuning.candidate_request(request, {tuned: hyperparameters[tuned]})

    def staging_request(self) -> dict:
        from maskrcnn_launcher.training import jobs

        return self._send(jobs.staging_job)

    def put_directory(self, directory: str, prefix: str) -> None:
        """Uploads a local tree under `prefix` of the deployment's bucket."""
        s3 = self.client("s3")
        for folder, _, files in os.walk(directory):
            for name in files:
                path = os.path.join(folder, name)
                s3.upload_file(path, BUCKET, prefix + os.path.relpath(path, directory))

    def keys(self, prefix: str = "") -> list:
        s3 = self.client("s3")
        return [item["Key"] for page in s3.get_paginator("list_objects_v2").paginate(
            Bucket=BUCKET, Prefix=prefix) for item in page.get("Contents", [])]


@contextlib.contextmanager
def running(timeout: float = 60) -> Iterator[FakeDeployment]:
    """The fake deployment's server, for the duration of the block."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    process = subprocess.Popen([sys.executable, "-m", "tests.training.fake_deployment"],
                               cwd=REPO, env=environment, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"the fake deployment's server exited: {process.wait(timeout)}")
        served = json.loads(line)
        yield FakeDeployment(served["endpoint"], served["parameters"])
    finally:
        process.stdin.close()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _serve(stdin=sys.stdin) -> None:
    from tests.launcher.conftest import seed
    from tests.launcher.fake_aws import FakeAws

    # A transform is played with the trained model (maskrcnn_local/batch_transform.py), not the
    # fake's canned answers.
    aws = FakeAws(REGION, play_transforms=False).start()
    parameters = seed(aws)
    print(json.dumps({"endpoint": aws.endpoint, "parameters": parameters}), flush=True)
    stdin.read()  # until the test process closes it
    aws.stop()


if __name__ == "__main__":
    _serve()
