"""What AWS authorizes beyond a request's own action: the rules the table's `implies` names.

Each rule takes the recorded call and what the checker knows (the deployment, the calls before it
in the same test) and returns the further requests AWS evaluates, each for the role that makes it
(`None`: the caller) and with why, citing its source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

from maskrcnn_contract.s3_objects import split_s3_uri

SAGEMAKER_SERVICE = "sagemaker.amazonaws.com"
S3_KEY_PERMISSIONS = ("https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingKMSEncryption.html"
                      " (SSE-KMS: kms:GenerateDataKey to upload, kms:Decrypt to download, both for "
                      "a multipart upload)")
SAGEMAKER_ROLES = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-roles.html"
ECR_PULL = ("ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage")
ECR_IMAGE = re.compile(r"^(\d{12})\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/([^:@]+)")
# AWS Deep Learning Containers' registries let every account pull their images (the model role
# pulls the TensorFlow Serving image from 763104351884): this stands in for their repository
# policy, which no one outside AWS can read.
DLC_REPOSITORY_POLICY = {
    "Version": "2012-10-17",
    "Statement": [{"Sid": "DeepLearningContainersArePublic", "Effect": "Allow",
                   "Principal": {"AWS": "*"}, "Action": list(ECR_PULL), "Resource": "*"}],
}
DLC_ACCOUNTS = ("763104351884",)


@dataclass
class Need:
    action: str
    resource: str
    context: Dict[str, object] = field(default_factory=dict)
    why: str = ""
    role: Optional[str] = None              # None: the caller's role
    resource_account: Optional[str] = None  # None: the deployment's account
    resource_policy: Optional[dict] = None  # None: the deployment's (bucket, key) if any


@dataclass
class Known:
    """What the checker knows when it looks at one call."""

    deployment: object                                     # tests.iam.template.Deployment
    models: Dict[str, str] = field(default_factory=dict)   # model name -> role name
    configs: Dict[str, List[str]] = field(default_factory=dict)  # endpoint config -> models
    # model package version ARN -> its InferenceSpecification Containers (CreateModelPackage)
    packages: Dict[str, List[dict]] = field(default_factory=dict)

    def arn(self, service: str, resource: str, region: Optional[str] = None) -> str:
        d = self.deployment
        return f"arn:aws:{service}:{region or d.region}:{d.account}:{resource}"

    def kms_context(self) -> dict:
        return {"kms:ViaService": f"s3.{self.deployment.region}.amazonaws.com",
                "kms:CallerAccount": self.deployment.account}


RULES: Dict[str, Callable[[dict, Known], List[Need]]] = {}


def rule(function):
    RULES[function.__name__] = function
    return function


# --- S3 ----------------------------------------------------------------------------------------

@rule
def s3_missing_object_needs_list_bucket(call: dict, known: Known) -> List[Need]:
    """A 404 for a missing key is AWS's answer only to a caller with s3:ListBucket on the bucket;
    without it S3 answers 403 Forbidden (S3 API Reference, HeadObject and GetObject,
    Permissions). The request carries no s3:prefix: a ListBucket grant conditioned on s3:prefix
    does not apply."""
    if call["status"] != 404:
        return []
    bucket = call["params"]["Bucket"]
    return [Need("s3:ListBucket", f"arn:aws:s3:::{bucket}", why=(
        f"{call['operation']} answered 404 in the test: S3 answers 404 for a missing key only to a "
        "caller with s3:ListBucket on the bucket, else 403 Forbidden (https://docs.aws.amazon.com/"
        f"AmazonS3/latest/API/API_{call['operation']}.html, Permissions)"))]


def _bucket_key(call: dict, known: Known) -> Optional[str]:
    params = call["params"]
    return params.get("SSEKMSKeyId") or known.deployment.bucket_keys.get(params.get("Bucket"))


@rule
def sse_kms_read(call: dict, known: Known) -> List[Need]:
    key = _bucket_key(call, known)
    if key is None or call["status"] >= 300:
        return []
    return [Need("kms:Decrypt", key, known.kms_context(),
                 why="the bucket encrypts its objects with SSE-KMS: " + S3_KEY_PERMISSIONS)]


@rule
def sse_kms_write(call: dict, known: Known) -> List[Need]:
    key = _bucket_key(call, known)
    if key is None:
        return []
    return [Need("kms:GenerateDataKey", key, known.kms_context(),
                 why="the bucket encrypts its objects with SSE-KMS: " + S3_KEY_PERMISSIONS)]


@rule
def sse_kms_multipart(call: dict, known: Known) -> List[Need]:
    key = _bucket_key(call, known)
    if key is None:
        return []
    why = "a multipart upload to an SSE-KMS bucket: " + S3_KEY_PERMISSIONS
    return [Need("kms:GenerateDataKey", key, known.kms_context(), why=why),
            Need("kms:Decrypt", key, known.kms_context(), why=why)]


# --- Roles passed, tags -------------------------------------------------------------------------

def _created_arn(call: dict, known: Known) -> Optional[str]:
    params = call["params"]
    if call["operation"] == "CreateHyperParameterTuningJob":
        name = params["HyperParameterTuningJobName"].lower()
        return known.arn("sagemaker", f"hyper-parameter-tuning-job/{name}", call["region"])
    for param, kind in (("TrainingJobName", "training-job"), ("ModelName", "model"),
                        ("EndpointConfigName", "endpoint-config"), ("EndpointName", "endpoint")):
        if param in params and call["operation"] in ("CreateTrainingJob", "CreateModel",
                                                     "CreateEndpointConfig", "CreateEndpoint"):
            if call["operation"] == "CreateEndpoint" and param != "EndpointName":
                continue
            return known.arn("sagemaker", f"{kind}/{params[param].lower()}", call["region"])
    return None


@rule
def passes_role(call: dict, known: Known) -> List[Need]:
    """A request that names a role for a service to assume is authorized for iam:PassRole on it
    (https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_use_passrole.html)."""
    params = call["params"]
    role = (params.get("RoleArn") or params.get("ExecutionRoleArn")
            or params.get("TrainingJobDefinition", {}).get("RoleArn"))
    if role is None:
        return []
    return [Need("iam:PassRole", role, {"iam:PassedToService": SAGEMAKER_SERVICE,
                                        "iam:AssociatedResourceArn": _created_arn(call, known)},
                 why=f"{call['operation']} passes {role} to SageMaker: https://docs.aws.amazon.com/"
                     "IAM/latest/UserGuide/id_roles_use_passrole.html")]


@rule
def sagemaker_tags_on_create(call: dict, known: Known) -> List[Need]:
    """A SageMaker Create* request with Tags is also authorized for sagemaker:AddTags on what it
    creates (SageMaker Developer Guide, "Grant permission to tag SageMaker resources on
    creation")."""
    tags = call["params"].get("Tags") or []
    if not tags:
        return []
    context = {"aws:TagKeys": [t["Key"] for t in tags],
               **{f"aws:RequestTag/{t['Key']}": t["Value"] for t in tags}}
    return [Need("sagemaker:AddTags", _created_arn(call, known), context,
                 why=f"{call['operation']} carries Tags: https://docs.aws.amazon.com/sagemaker/"
                     "latest/dg/security_iam_id-based-policy-examples.html")]


# --- What SageMaker does as the role it was passed ----------------------------------------------

def _role_name(known: Known, arn: str, call: dict) -> str:
    role = known.deployment.role_by_arn(arn)
    if role is None:
        raise LookupError(f"{call['operation']} passes {arn}, which is none of the template's "
                          "roles: its calls cannot be evaluated")
    return role.name


def _s3_reads(uri: str, known: Known, why: str, role: str, write: bool = False) -> List[Need]:
    bucket, prefix = split_s3_uri(uri)
    needs = [Need("s3:ListBucket", f"arn:aws:s3:::{bucket}", {"s3:prefix": prefix}, why, role),
             Need("s3:GetObject", f"arn:aws:s3:::{bucket}/{prefix}", why=why, role=role)]
    key = known.deployment.bucket_keys.get(bucket)
    if key:
        needs.append(Need("kms:Decrypt", key, known.kms_context(), why, role))
    if write:
        needs += _s3_write(f"arn:aws:s3:::{bucket}/{prefix}", bucket, known, why, role)
    return needs


def _s3_write(object_arn: str, bucket: str, known: Known, why: str, role: str,
              key: Optional[str] = None) -> List[Need]:
    needs = [Need("s3:PutObject", object_arn, why=why, role=role)]
    key = key or known.deployment.bucket_keys.get(bucket)
    if key:
        needs.append(Need("kms:GenerateDataKey", key, known.kms_context(), why, role))
    return needs


def _image_pull(image: str, why: str, role: str) -> List[Need]:
    found = ECR_IMAGE.match(image)
    if not found:
        raise LookupError(f"{image!r} is not an ECR image URI")
    account, region, repository = found.groups()
    arn = f"arn:aws:ecr:{region}:{account}:repository/{repository}"
    policy = DLC_REPOSITORY_POLICY if account in DLC_ACCOUNTS else None
    return ([Need("ecr:GetAuthorizationToken", "*", why=why, role=role)]
            + [Need(action, arn, why=why, role=role, resource_account=account,
                    resource_policy=policy) for action in ECR_PULL])


def _network(vpc_config: Optional[dict], known: Known, why: str, role: str) -> List[Need]:
    if not vpc_config:
        return []
    d = known.deployment
    eni = known.arn("ec2", "network-interface/eni-assigned-by-aws")
    needs = [Need("ec2:CreateNetworkInterface", eni, why=why, role=role)]
    needs += [Need("ec2:CreateNetworkInterface", known.arn("ec2", f"subnet/{s}"), why=why, role=role)
              for s in vpc_config.get("Subnets", [])]
    needs += [Need("ec2:CreateNetworkInterface", known.arn("ec2", f"security-group/{g}"), why=why,
                   role=role) for g in vpc_config.get("SecurityGroupIds", [])]
    vpc = known.arn("ec2", f"vpc/{d.vpc_id}") if d.vpc_id else None
    for action in ("ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface",
                   "ec2:DeleteNetworkInterfacePermission"):
        needs.append(Need(action, eni, {"ec2:Vpc": vpc} if vpc else {}, why, role))
    needs += [Need(f"ec2:{action}", "*", why=why, role=role) for action in (
        "DescribeNetworkInterfaces", "DescribeVpcs", "DescribeDhcpOptions", "DescribeSubnets",
        "DescribeSecurityGroups")]
    return needs


def _logs(group: str, stream: str, namespace: str, known: Known, why: str, role: str) -> List[Need]:
    group_arn = known.arn("logs", f"log-group:{group}:log-stream:")
    stream_arn = known.arn("logs", f"log-group:{group}:log-stream:{stream}")
    return [Need("logs:CreateLogGroup", group_arn, why=why, role=role),
            Need("logs:CreateLogStream", stream_arn, why=why, role=role),
            Need("logs:PutLogEvents", stream_arn, why=why, role=role),
            Need("logs:DescribeLogStreams", group_arn, why=why, role=role),
            Need("cloudwatch:PutMetricData", "*", {"cloudwatch:namespace": namespace}, why, role)]


@rule
def training_job_runs_as_its_role(call: dict, known: Known) -> List[Need]:
    """A training job's role, as SageMaker uses it: read the S3 channels (File or FastFile: the
    same reads), write the output, the checkpoints and TensorBoard's summaries, pull the image,
    write the job's logs and metrics, attach to the VPC (SageMaker Developer Guide,
    "CreateTrainingJob API: Execution Role Permissions")."""
    params = call["params"]
    role = _role_name(known, params["RoleArn"], call)
    job = params["TrainingJobName"]
    why = (f"SageMaker runs {job} as the {role} role: {SAGEMAKER_ROLES}"
           "#sagemaker-roles-createtrainingjob-perms")
    needs = []
    for channel in params.get("InputDataConfig", []):
        source = channel["DataSource"].get("S3DataSource")
        if source:
            needs += _s3_reads(source["S3Uri"], known, f"{why} (channel {channel['ChannelName']})",
                               role)
    output = params["OutputDataConfig"]
    bucket, prefix = split_s3_uri(output["S3OutputPath"])
    needs += _s3_write(f"arn:aws:s3:::{bucket}/{prefix}{job}/output/model.tar.gz", bucket, known,
                       f"{why} (the output)", role, output.get("KmsKeyId"))
    if output.get("KmsKeyId"):
        needs.append(Need("kms:Encrypt", output["KmsKeyId"], why=f"{why} (the output's key)",
                          role=role))
    if params.get("CheckpointConfig"):
        needs += _s3_reads(params["CheckpointConfig"]["S3Uri"], known,
                           f"{why} (the checkpoints)", role, write=True)
    if params.get("TensorBoardOutputConfig"):
        # Uploaded while the job runs, below <S3OutputPath><job>/tensorboard-output/ (the SDK's
        # TensorBoardOutputConfig; docs/aws-rules.md TRN-2), encrypted by the bucket's key.
        bucket, prefix = split_s3_uri(params["TensorBoardOutputConfig"]["S3OutputPath"])
        needs += _s3_write(f"arn:aws:s3:::{bucket}/{prefix}{job}/tensorboard-output/"
                           "events.out.tfevents.1700000000.algo-1", bucket, known,
                           f"{why} (TensorBoard's summaries)", role)
    needs += _image_pull(params["AlgorithmSpecification"]["TrainingImage"], why, role)
    needs += _logs("/aws/sagemaker/TrainingJobs", f"{job}/algo-1-1700000000",
                   "/aws/sagemaker/TrainingJobs", known, why, role)
    needs += _network(params.get("VpcConfig"), known, why, role)
    return needs


@rule
def registers_a_model_package(call: dict, known: Known) -> List[Need]:
    """Nothing more is authorized; a model created from this version later (CreateModel
    PrimaryContainer.ModelPackageName) runs its containers (model_runs_as_its_role)."""
    if call.get("created_arn"):
        known.packages[call["created_arn"]] = \
            call["params"].get("InferenceSpecification", {}).get("Containers", [])
    return []


def _containers(container: dict, known: Known) -> List[dict]:
    """A CreateModel container, or the containers of the model package version it names."""
    package = container.get("ModelPackageName")
    if package is None:
        return [container]
    if package not in known.packages:
        raise LookupError(f"CreateModel from model package {package}, whose CreateModelPackage "
                          "the test did not make: what the model's role reads is unknown")
    return known.packages[package]


@rule
def tuning_candidates_run_as_their_role(call: dict, known: Known) -> List[Need]:
    """A tuning job's candidates are training jobs SageMaker starts from its definition, as the
    role the definition names: what one candidate does as that role, derived as SageMaker derives
    it (the launcher's tuning.candidate_request; docs/aws-rules.md TUN-3)."""
    from maskrcnn_launcher.training import tuning

    candidate = tuning.candidate_request(call["params"], tuning.ends(call["params"]),
                                         suffix="0" * 8)
    return training_job_runs_as_its_role({**call, "params": candidate}, known)


@rule
def model_runs_as_its_role(call: dict, known: Known) -> List[Need]:
    """A model's role, as SageMaker uses it when it hosts the model: read the model archive, pull
    the image, attach to the VPC (SageMaker Developer Guide, "CreateModel API: Execution Role
    Permissions")."""
    params = call["params"]
    role = _role_name(known, params["ExecutionRoleArn"], call)
    known.models[params["ModelName"]] = role
    why = (f"SageMaker hosts {params['ModelName']} as the {role} role: {SAGEMAKER_ROLES}"
           "#sagemaker-roles-createmodel-perms")
    needs = []
    given = [c for c in [params.get("PrimaryContainer")] + params.get("Containers", []) if c]
    for container in [c for g in given for c in _containers(g, known)]:
        if container.get("ModelDataUrl"):
            bucket, key = container["ModelDataUrl"][len("s3://"):].split("/", 1)
            needs.append(Need("s3:GetObject", f"arn:aws:s3:::{bucket}/{key}", why=why, role=role))
            if known.deployment.bucket_keys.get(bucket):
                needs.append(Need("kms:Decrypt", known.deployment.bucket_keys[bucket],
                                  known.kms_context(), why, role))
        needs += _image_pull(container["Image"], why, role)
    needs += _network(params.get("VpcConfig"), known, why, role)
    return needs


@rule
def data_capture_runs_as_the_model_role(call: dict, known: Known) -> List[Need]:
    """An endpoint captures requests into S3 as its model's role (SageMaker Developer Guide,
    "Data capture": the role needs s3:PutObject on the destination, and the key's
    kms:GenerateDataKey when KmsKeyId is given)."""
    params = call["params"]
    known.configs[params["EndpointConfigName"]] = [v["ModelName"] for v in
                                                   params.get("ProductionVariants", [])]
    capture = params.get("DataCaptureConfig")
    if not capture or not capture.get("EnableCapture", True):
        return []
    needs = []
    for model in known.configs[params["EndpointConfigName"]]:
        role = known.models.get(model)
        if role is None:
            raise LookupError(f"CreateEndpointConfig captures data for {model}, whose CreateModel "
                              "the test did not make: the capture's role is unknown")
        bucket, prefix = split_s3_uri(capture["DestinationS3Uri"])
        why = (f"the endpoint writes captured data as {model}'s {role} role: https://docs.aws."
               "amazon.com/sagemaker/latest/dg/model-monitor-data-capture.html")
        needs += _s3_write(f"arn:aws:s3:::{bucket}/{prefix}{params['EndpointConfigName']}/"
                           "AllTraffic/capture.jsonl", bucket, known, why, role,
                           capture.get("KmsKeyId"))
    return needs


@rule
def endpoint_runs_as_the_model_role(call: dict, known: Known) -> List[Need]:
    """An endpoint's containers write their logs and metrics as the model's role (SageMaker
    Developer Guide, "CreateModel API: Execution Role Permissions")."""
    params = call["params"]
    needs = []
    models = known.configs.get(params["EndpointConfigName"])
    if models is None:
        raise LookupError(f"CreateEndpoint of {params['EndpointConfigName']}, whose "
                          "CreateEndpointConfig the test did not make: the endpoint's role is "
                          "unknown")
    for model in models:
        role = known.models[model]
        why = (f"SageMaker runs endpoint {params['EndpointName']} as {model}'s {role} role: "
               f"{SAGEMAKER_ROLES}#sagemaker-roles-createmodel-perms")
        needs += _logs(f"/aws/sagemaker/Endpoints/{params['EndpointName']}",
                       "AllTraffic/i-0123456789abcdef0", "/aws/sagemaker/Endpoints", known, why,
                       role)
    return needs


@rule
def transform_job_runs_as_the_model_role(call: dict, known: Known) -> List[Need]:
    """A batch transform runs its model as the model's role: it lists and reads the input prefix,
    writes each answer below the output path (with the output key when one is given) and writes
    its logs and metrics (SageMaker Developer Guide, "CreateModel API: Execution Role
    Permissions"; docs/aws-rules.md BT-1)."""
    params = call["params"]
    model = params["ModelName"]
    role = known.models.get(model)
    if role is None:
        raise LookupError(f"CreateTransformJob of {model}, whose CreateModel the test did not "
                          "make: the transform's role is unknown")
    why = (f"SageMaker runs transform job {params['TransformJobName']} as {model}'s {role} role: "
           f"{SAGEMAKER_ROLES}#sagemaker-roles-createmodel-perms")
    source = params["TransformInput"]["DataSource"]["S3DataSource"]["S3Uri"]
    output = params["TransformOutput"]
    bucket, prefix = split_s3_uri(output["S3OutputPath"])
    needs = _s3_reads(source, known, why, role)
    needs += _s3_write(f"arn:aws:s3:::{bucket}/{prefix}image.jpg.out", bucket, known, why, role,
                       output.get("KmsKeyId"))
    needs += _logs("/aws/sagemaker/TransformJobs",
                   f"{params['TransformJobName']}/i-0123456789abcdef0-1700000000",
                   "/aws/sagemaker/TransformJobs", known, why, role)
    return needs


# --- Application Auto Scaling ------------------------------------------------------------------

SCALING_PERMISSIONS = ("https://docs.aws.amazon.com/autoscaling/application/userguide/"
                       "security_iam_id-based-policy-examples.html (permissions required for API "
                       "actions)")


@rule
def scaling_service_linked_role(call: dict, known: Known) -> List[Need]:
    """The first RegisterScalableTarget of a SageMaker variant creates the service-linked role
    Application Auto Scaling uses, with the caller's permissions (Application Auto Scaling User
    Guide, "Service-linked roles")."""
    if call["params"].get("ServiceNamespace") != "sagemaker":
        return []
    service = "sagemaker.application-autoscaling.amazonaws.com"
    arn = (f"arn:aws:iam::{known.deployment.account}:role/aws-service-role/{service}/"
           "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint")
    return [Need("iam:CreateServiceLinkedRole", arn, {"iam:AWSServiceName": service}, why=(
        "RegisterScalableTarget creates AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint "
        "the first time: https://docs.aws.amazon.com/autoscaling/application/userguide/"
        "application-auto-scaling-service-linked-roles.html"))]


@rule
def target_tracking_alarms(call: dict, known: Known) -> List[Need]:
    """A target tracking policy's CloudWatch alarms are created and deleted with the caller's
    permissions; they are named TargetTracking-<resource id>-AlarmHigh|Low-<uuid>."""
    params = call["params"]
    if call["operation"] == "PutScalingPolicy" and params.get("PolicyType") != "TargetTrackingScaling":
        return []
    alarm = known.arn("cloudwatch", f"alarm:TargetTracking-{params['ResourceId']}-AlarmHigh-"
                                    "00000000-0000-0000-0000-000000000000", call["region"])
    action = ("cloudwatch:PutMetricAlarm" if call["operation"] == "PutScalingPolicy"
              else "cloudwatch:DeleteAlarms")
    why = f"{call['operation']} of a target tracking policy: {SCALING_PERMISSIONS}"
    return [Need(action, alarm, why=why), Need("cloudwatch:DescribeAlarms", alarm, why=why)]


# --- CloudWatch alarms -------------------------------------------------------------------------

@rule
def each_alarm_named(call: dict, known: Known) -> List[Need]:
    """DeleteAlarms and DescribeAlarms are authorized on each alarm they name (Service
    Authorization Reference, CloudWatch: resource type alarm, required); the table's resource
    templates take one value, so the requests are made here, one per name in AlarmNames."""
    names = call["params"].get("AlarmNames") or []
    if not names:
        raise LookupError(f"cloudwatch.{call['operation']} without AlarmNames: the table has no "
                          "mapping for a call by prefix or for every alarm; add one")
    why = (f"cloudwatch.{call['operation']} of each alarm named: https://docs.aws.amazon.com/"
           "service-authorization/latest/reference/list_amazoncloudwatch.html")
    return [Need(f"cloudwatch:{call['operation']}", known.arn("cloudwatch", f"alarm:{name}",
                                                               call["region"]), why=why)
            for name in names]
