"""What IAM authorizes for each AWS operation the tests' code calls: the table.

Key: "<botocore service name>.<operation>", the name of the client and the operation as the
recorder sees them (tests/iam/recorder.py). Each entry:

- `needs`: one or more (action, resource, context) the request is authorized for, the resource an
  ARN template filled from the request's parameters ({Bucket}, {Key}, ...; {region}, {account},
  {partition} are the deployment's; `|lower` lowercases, as SageMaker does with the names in its
  ARNs) or "*" where the action takes no resource type; `context`: {condition key: the request
  parameter it carries}, a path into the parameters ("VpcConfig.Subnets", "A[].B" collects a list;
  a key whose parameter is absent is left out of the request, as AWS leaves it out).
- `implies`: names of rules in tests/iam/implied.py: what AWS also authorizes for this request
  (a role passed, S3's 404 on a missing key, SSE-KMS, the calls SageMaker then makes as the role
  it was passed).
- `source`: where the mapping is documented.

The Service Authorization Reference (SAR) pages list each service's actions, resource types and
condition keys: https://docs.aws.amazon.com/service-authorization/latest/reference/list_<service>.html.
An operation missing here fails the test that calls it: add it, with its source.
"""

SAR = "https://docs.aws.amazon.com/service-authorization/latest/reference/"
S3_API = "https://docs.aws.amazon.com/AmazonS3/latest/API/"
S3_OBJECT = "arn:{partition}:s3:::{Bucket}/{Key}"
S3_BUCKET = "arn:{partition}:s3:::{Bucket}"
# CloudWatch Logs authorizes an action on a log group against the group's ARN with a trailing
# ':*'-matchable part (DescribeLogGroups, LogGroup.arn: "Use this version to refer to the ARN in IAM
# policies"); the request is written as the group's `log-stream:` child, which `:*` matches.
LOG_GROUP = "arn:{partition}:logs:{region}:{account}:log-group:{logGroupName}:log-stream:"
SAGEMAKER = "arn:{partition}:sagemaker:{region}:{account}:"
# Application Auto Scaling names a scalable target by an ID it assigns; no request carries it.
# A statement naming one target matches none of these requests: they are allowed by a statement on
# '*' (or on scalable-target/*) only.
SCALABLE_TARGET = "arn:{partition}:application-autoscaling:{region}:{account}:scalable-target/assigned-by-aws"
SCALING_CONTEXT = {"application-autoscaling:service-namespace": "ServiceNamespace",
                   "application-autoscaling:scalable-dimension": "ScalableDimension"}
S3_LIST_CONTEXT = {"s3:prefix": "Prefix", "s3:delimiter": "Delimiter", "s3:max-keys": "MaxKeys"}


def _need(action, resource, context=None):
    return {"action": action, "resource": resource, "context": context or {}}


OPERATIONS = {
    # --- S3 ---------------------------------------------------------------------------------
    "s3.HeadObject": {
        "needs": [_need("s3:GetObject", S3_OBJECT)],
        "implies": ["s3_missing_object_needs_list_bucket"],
        "source": S3_API + "API_HeadObject.html (Permissions)",
    },
    "s3.GetObject": {
        "needs": [_need("s3:GetObject", S3_OBJECT)],
        "implies": ["s3_missing_object_needs_list_bucket", "sse_kms_read"],
        "source": S3_API + "API_GetObject.html (Permissions)",
    },
    "s3.PutObject": {
        "needs": [_need("s3:PutObject", S3_OBJECT)],
        "implies": ["sse_kms_write"],
        "source": S3_API + "API_PutObject.html (Permissions)",
    },
    "s3.CreateMultipartUpload": {
        "needs": [_need("s3:PutObject", S3_OBJECT)],
        "implies": ["sse_kms_multipart"],
        "source": S3_API + "API_CreateMultipartUpload.html (Permissions)",
    },
    "s3.UploadPart": {
        "needs": [_need("s3:PutObject", S3_OBJECT)],
        "source": S3_API + "API_UploadPart.html (Permissions)",
    },
    "s3.CompleteMultipartUpload": {
        "needs": [_need("s3:PutObject", S3_OBJECT)],
        "source": S3_API + "API_CompleteMultipartUpload.html (Permissions)",
    },
    "s3.AbortMultipartUpload": {
        "needs": [_need("s3:AbortMultipartUpload", S3_OBJECT)],
        "source": S3_API + "API_AbortMultipartUpload.html (Permissions)",
    },
    "s3.DeleteObject": {
        "needs": [_need("s3:DeleteObject", S3_OBJECT)],
        "source": S3_API + "API_DeleteObject.html (Permissions)",
    },
    "s3.ListObjectsV2": {
        "needs": [_need("s3:ListBucket", S3_BUCKET, S3_LIST_CONTEXT)],
        "source": S3_API + "API_ListObjectsV2.html (Permissions); condition keys s3:prefix, "
                  "s3:delimiter, s3:max-keys: " + SAR + "list_amazons3.html",
    },
    "s3.ListObjects": {
        "needs": [_need("s3:ListBucket", S3_BUCKET, S3_LIST_CONTEXT)],
        "source": S3_API + "API_ListObjects.html; " + SAR + "list_amazons3.html",
    },
    "s3.HeadBucket": {
        "needs": [_need("s3:ListBucket", S3_BUCKET)],
        "source": S3_API + "API_HeadBucket.html (Permissions)",
    },
    "s3.GetBucketLocation": {
        "needs": [_need("s3:GetBucketLocation", S3_BUCKET)],
        "source": S3_API + "API_GetBucketLocation.html",
    },
    # --- SSM, STS -----------------------------------------------------------------------------
    "ssm.GetParametersByPath": {
        "needs": [_need("ssm:GetParametersByPath",
                        "arn:{partition}:ssm:{region}:{account}:parameter{Path}",
                        {"ssm:Recursive": "Recursive"})],
        "source": SAR + "list_awssystemsmanager.html (GetParametersByPath: parameter; "
                  "ssm:Recursive)",
    },
    "ssm.GetParameter": {
        "needs": [_need("ssm:GetParameter", "arn:{partition}:ssm:{region}:{account}:parameter{Name}")],
        "source": SAR + "list_awssystemsmanager.html",
    },
    "sts.GetCallerIdentity": {
        "needs": [],
        "source": "https://docs.aws.amazon.com/STS/latest/APIReference/API_GetCallerIdentity.html "
                  "(\"No permissions are required to perform this operation.\")",
    },
    # --- SageMaker: training ------------------------------------------------------------------
    "sagemaker.CreateTrainingJob": {
        "needs": [_need("sagemaker:CreateTrainingJob",
                        SAGEMAKER + "training-job/{TrainingJobName|lower}", {
                            "sagemaker:VpcSubnets": "VpcConfig.Subnets",
                            "sagemaker:VpcSecurityGroupIds": "VpcConfig.SecurityGroupIds",
                            "sagemaker:InstanceTypes": "ResourceConfig.InstanceType",
                            "sagemaker:NetworkIsolation": "EnableNetworkIsolation",
                            "sagemaker:InterContainerTrafficEncryption":
                                "EnableInterContainerTrafficEncryption",
                            "sagemaker:MaxRuntimeInSeconds": "StoppingCondition.MaxRuntimeInSeconds",
                            "sagemaker:KeepAlivePeriod": "ResourceConfig.KeepAlivePeriodInSeconds",
                            "sagemaker:FileSystemId":
                                "InputDataConfig[].DataSource.FileSystemDataSource.FileSystemId",
                            "sagemaker:FileSystemType":
                                "InputDataConfig[].DataSource.FileSystemDataSource.FileSystemType",
                            "sagemaker:FileSystemAccessMode":
                                "InputDataConfig[].DataSource.FileSystemDataSource.FileSystemAccessMode",
                            "sagemaker:FileSystemDirectoryPath":
                                "InputDataConfig[].DataSource.FileSystemDataSource.DirectoryPath",
                            "@tags": "Tags",
                        })],
        "implies": ["passes_role", "sagemaker_tags_on_create", "training_job_runs_as_its_role"],
        "source": SAR + "list_amazonsagemakerai.html (CreateTrainingJob: training-job; "
                  "condition keys; dependent action iam:PassRole)",
    },
    "sagemaker.DescribeTrainingJob": {
        "needs": [_need("sagemaker:DescribeTrainingJob",
                        SAGEMAKER + "training-job/{TrainingJobName|lower}")],
        "source": SAR + "list_amazonsagemakerai.html",
    },
    "sagemaker.UpdateTrainingJob": {
        "needs": [_need("sagemaker:UpdateTrainingJob",
                        SAGEMAKER + "training-job/{TrainingJobName|lower}", {
                            "sagemaker:KeepAlivePeriod": "ResourceConfig.KeepAlivePeriodInSeconds",
                            "sagemaker:EnableRemoteDebug": "RemoteDebugConfig.EnableRemoteDebug",
                        })],
        "source": SAR + "list_amazonsagemakerai.html (UpdateTrainingJob: training-job; condition "
                  "keys sagemaker:KeepAlivePeriod, sagemaker:EnableRemoteDebug; its third, "
                  "sagemaker:InstanceTypes, is left out: only ProfilerRuleConfigurations of the "
                  "request name instance types, and the launcher sends none)",
    },
    "sagemaker.StopTrainingJob": {
        "needs": [_need("sagemaker:StopTrainingJob",
                        SAGEMAKER + "training-job/{TrainingJobName|lower}")],
        "source": SAR + "list_amazonsagemakerai.html",
    },
    "sagemaker.CreateHyperParameterTuningJob": {
        "needs": [_need("sagemaker:CreateHyperParameterTuningJob",
                        SAGEMAKER + "hyper-parameter-tuning-job/{HyperParameterTuningJobName|lower}", {
                            "sagemaker:VpcSubnets": "TrainingJobDefinition.VpcConfig.Subnets",
                            "sagemaker:VpcSecurityGroupIds":
                                "TrainingJobDefinition.VpcConfig.SecurityGroupIds",
                            "sagemaker:InstanceTypes":
                                "TrainingJobDefinition.ResourceConfig.InstanceType",
                            "sagemaker:NetworkIsolation": "TrainingJobDefinition.EnableNetworkIsolation",
                            "sagemaker:InterContainerTrafficEncryption":
                                "TrainingJobDefinition.EnableInterContainerTrafficEncryption",
                            "sagemaker:MaxRuntimeInSeconds":
                                "TrainingJobDefinition.StoppingCondition.MaxRuntimeInSeconds",
                            "sagemaker:FileSystemId": "TrainingJobDefinition.InputDataConfig[]."
                                                      "DataSource.FileSystemDataSource.FileSystemId",
                            "sagemaker:FileSystemType": "TrainingJobDefinition.InputDataConfig[]."
                                                        "DataSource.FileSystemDataSource.FileSystemType",
                            "sagemaker:FileSystemAccessMode":
                                "TrainingJobDefinition.InputDataConfig[].DataSource."
                                "FileSystemDataSource.FileSystemAccessMode",
                            "sagemaker:FileSystemDirectoryPath":
                                "TrainingJobDefinition.InputDataConfig[].DataSource."
                                "FileSystemDataSource.DirectoryPath",
                            "@tags": "Tags",
                        })],
        "implies": ["passes_role", "sagemaker_tags_on_create",
                    "tuning_candidates_run_as_their_role"],
        "source": SAR + "list_amazonsagemakerai.html (CreateHyperParameterTuningJob: "
                  "hyper-parameter-tuning-job; the training definition's condition keys, as "
                  "CreateTrainingJob's; dependent action iam:PassRole)",
    },
    "sagemaker.DescribeHyperParameterTuningJob": {
        "needs": [_need("sagemaker:DescribeHyperParameterTuningJob",
                        SAGEMAKER + "hyper-parameter-tuning-job/{HyperParameterTuningJobName|lower}")],
        "source": SAR + "list_amazonsagemakerai.html",
    },
    "sagemaker.ListTrainingJobsForHyperParameterTuningJob": {
        "needs": [_need("sagemaker:ListTrainingJobsForHyperParameterTuningJob",
                        SAGEMAKER + "hyper-parameter-tuning-job/{HyperParameterTuningJobName|lower}")],
        "source": SAR + "list_amazonsagemakerai.html (ListTrainingJobsForHyperParameterTuningJob: "
                  "hyper-parameter-tuning-job)",
    },
    "sagemaker.StopHyperParameterTuningJob": {
        "needs": [_need("sagemaker:StopHyperParameterTuningJob",
                        SAGEMAKER + "hyper-parameter-tuning-job/{HyperParameterTuningJobName|lower}")],
        "source": SAR + "list_amazonsagemakerai.html",
    },
    "sagemaker.ListTrainingJobs": {
        "needs": [_need("sagemaker:ListTrainingJobs", "*")],
        "source": SAR + "list_amazonsagemakerai.html (ListTrainingJobs: no resource type)",
    },
    # --- SageMaker: hosting -------------------------------------------------------------------
    "sagemaker.CreateModel": {
        "needs": [_need("sagemaker:CreateModel", SAGEMAKER + "model/{ModelName|lower}", {
            "sagemaker:VpcSubnets": "VpcConfig.Subnets",
            "sagemaker:VpcSecurityGroupIds": "VpcConfig.SecurityGroupIds",
            "sagemaker:NetworkIsolation": "EnableNetworkIsolation",
            "@tags": "Tags",
        })],
        "implies": ["passes_role", "sagemaker_tags_on_create", "model_runs_as_its_role"],
        "source": SAR + "list_amazonsagemakerai.html (CreateModel: model; condition keys; "
                  "dependent action iam:PassRole)",
    },
    "sagemaker.DescribeModel": {
        "needs": [_need("sagemaker:DescribeModel", SAGEMAKER + "model/{ModelName|lower}")],
        "source": SAR + "list_amazonsagemakerai.html",
    },
    "sagemaker.DeleteModel": {
        "needs": [_need("sagemaker:DeleteModel", SAGEMAKER + "model/{ModelName|lower}")],
        "source": SAR + "list_amazonsagemakerai.html",
    },
    "sagemaker.CreateTransformJob": {
        "needs": [_need("sagemaker:CreateTransformJob",
                        SAGEMAKER + "transform-job/{TransformJobName|lower}", {
                            "sagemaker:InstanceTypes": "TransformResources.InstanceType",
                            "sagemaker:ModelArn": "=" + SAGEMAKER + "model/{ModelName|lower}",
                            "sagemaker:OutputKmsKeyArn": "TransformOutput.KmsKeyId",
                            "sagemaker:VolumeKmsKeyArn": "TransformResources.VolumeKmsKeyId",
                            "@tags": "Tags",
                        })],
        "implies": ["sagemaker_tags_on_create", "transform_job_runs_as_the_model_role"],
        "source": SAR + "list_amazonsagemakerai.html (CreateTransformJob: transform-job; "
                  "condition keys InstanceTypes, ModelArn, OutputKmsKeyArn, VolumeKmsKeyArn)",
    },
    "sagemaker.DescribeTransformJob": {
        "needs": [_need("sagemaker:DescribeTransformJob",
                        SAGEMAKER + "transform-job/{TransformJobName|lower}")],
        "source": SAR + "list_amazonsagemakerai.html",
    },
    "sagemaker.StopTransformJob": {
        "needs": [_need("sagemaker:StopTransformJob",
                        SAGEMAKER + "transform-job/{TransformJobName|lower}")],
        "source": SAR + "list_amazonsagemakerai.html",
    },
    "sagemaker.CreateEndpointConfig": {
        "needs": [_need("sagemaker:CreateEndpointConfig",
                        SAGEMAKER + "endpoint-config/{EndpointConfigName|lower}", {
                            "sagemaker:InstanceTypes": "ProductionVariants[].InstanceType",
                            "sagemaker:VolumeKmsKeyArn": "KmsKeyId",
                            "@tags": "Tags",
                        })],
        "implies": ["sagemaker_tags_on_create", "data_capture_runs_as_the_model_role"],
        "source": SAR + "list_amazonsagemakerai.html (CreateEndpointConfig: endpoint-config; "
                  "condition keys)",
    },
    "sagemaker.DescribeEndpointConfig": {
        "needs": [_need("sagemaker:DescribeEndpointConfig",
                        SAGEMAKER + "endpoint-config/{EndpointConfigName|lower}")],
        "source": SAR + "list_amazonsagemakerai.html",
    },
    "sagemaker.DeleteEndpointConfig": {
        "needs": [_need("sagemaker:DeleteEndpointConfig",
                        SAGEMAKER + "endpoint-config/{EndpointConfigName|lower}")],
        "source": SAR + "list_amazonsagemakerai.html",
    },
    "sagemaker.CreateEndpoint": {
        "needs": [_need("sagemaker:CreateEndpoint", SAGEMAKER + "endpoint/{EndpointName|lower}",
                        {"@tags": "Tags"}),
                  _need("sagemaker:CreateEndpoint",
                        SAGEMAKER + "endpoint-config/{EndpointConfigName|lower}")],
        "implies": ["sagemaker_tags_on_create", "endpoint_runs_as_the_model_role"],
        "source": SAR + "list_amazonsagemakerai.html (CreateEndpoint: endpoint and "
                  "endpoint-config, both required)",
    },
    "sagemaker.DescribeEndpoint": {
        "needs": [_need("sagemaker:DescribeEndpoint", SAGEMAKER + "endpoint/{EndpointName|lower}")],
        "source": SAR + "list_amazonsagemakerai.html",
    },
    "sagemaker.DeleteEndpoint": {
        "needs": [_need("sagemaker:DeleteEndpoint", SAGEMAKER + "endpoint/{EndpointName|lower}")],
        "source": SAR + "list_amazonsagemakerai.html",
    },
    "sagemaker.ListEndpoints": {
        "needs": [_need("sagemaker:ListEndpoints", "*")],
        "source": SAR + "list_amazonsagemakerai.html (ListEndpoints: no resource type)",
    },
    "sagemaker.AddTags": {
        "needs": [_need("sagemaker:AddTags", "{ResourceArn}", {"@tags": "Tags"})],
        "source": SAR + "list_amazonsagemakerai.html",
    },
    "sagemaker.ListTags": {
        "needs": [_need("sagemaker:ListTags", "{ResourceArn}")],
        "source": SAR + "list_amazonsagemakerai.html",
    },
    # --- SageMaker: the model registry (docs/aws-rules.md REG-2, REG-3, REG-4) ----------------
    "sagemaker.DescribeModelPackageGroup": {
        "needs": [_need("sagemaker:DescribeModelPackageGroup",
                        SAGEMAKER + "model-package-group/{ModelPackageGroupName|lower}")],
        "source": SAR + "list_amazonsagemakerai.html (DescribeModelPackageGroup: "
                  "model-package-group)",
    },
    "sagemaker.CreateModelPackage": {
        # A version's ARN is model-package/<group>/<version>, the version SageMaker's next number:
        # a statement on model-package/<group>/* matches it, as the developer guide's resource
        # policy for registering into a group grants it.
        "needs": [_need("sagemaker:CreateModelPackage",
                        SAGEMAKER + "model-package/{ModelPackageGroupName|lower}/assigned-by-aws",
                        {"sagemaker:ModelApprovalStatus": "ModelApprovalStatus"})],
        "implies": ["registers_a_model_package"],
        "source": SAR + "list_amazonsagemakerai.html (CreateModelPackage: model-package; "
                  "sagemaker:ModelApprovalStatus); SageMaker developer guide, \"Register a Model "
                  "Version from a Different Account\" (sagemaker:CreateModelPackage on "
                  "model-package/<group>/*)",
    },
    "sagemaker.DescribeModelPackage": {
        # The launcher names a version by its ARN.
        "needs": [_need("sagemaker:DescribeModelPackage", "{ModelPackageName}")],
        "source": SAR + "list_amazonsagemakerai.html (DescribeModelPackage: model-package)",
    },
    "sagemaker.UpdateModelPackage": {
        "needs": [_need("sagemaker:UpdateModelPackage", "{ModelPackageArn}",
                        {"sagemaker:ModelApprovalStatus": "ModelApprovalStatus"})],
        "source": SAR + "list_amazonsagemakerai.html (UpdateModelPackage: model-package; "
                  "sagemaker:ModelApprovalStatus)",
    },
    "sagemaker.ListModelPackages": {
        "needs": [_need("sagemaker:ListModelPackages", "*")],
        "source": SAR + "list_amazonsagemakerai.html (ListModelPackages: model-package, not "
                  "required; which ARN a list is authorized against is not documented, and AWS's "
                  "AmazonSageMakerModelRegistryFullAccess grants it on '*')",
    },
    "sagemaker-runtime.InvokeEndpoint": {
        "needs": [_need("sagemaker:InvokeEndpoint", SAGEMAKER + "endpoint/{EndpointName|lower}",
                        {"sagemaker:TargetModel": "TargetModel"})],
        "source": SAR + "list_amazonsagemakerai.html (InvokeEndpoint: endpoint)",
    },
    # --- Application Auto Scaling -------------------------------------------------------------
    "application-autoscaling.RegisterScalableTarget": {
        "needs": [_need("application-autoscaling:RegisterScalableTarget", SCALABLE_TARGET,
                        {**SCALING_CONTEXT, "@tags": "Tags"})],
        "implies": ["scaling_service_linked_role"],
        "source": SAR + "list_applicationautoscaling.html (RegisterScalableTarget: "
                  "scalable-target; service-namespace, scalable-dimension)",
    },
    "application-autoscaling.DeregisterScalableTarget": {
        "needs": [_need("application-autoscaling:DeregisterScalableTarget", SCALABLE_TARGET,
                        SCALING_CONTEXT)],
        "source": SAR + "list_applicationautoscaling.html",
    },
    "application-autoscaling.PutScalingPolicy": {
        "needs": [_need("application-autoscaling:PutScalingPolicy", SCALABLE_TARGET,
                        SCALING_CONTEXT)],
        "implies": ["target_tracking_alarms"],
        "source": SAR + "list_applicationautoscaling.html",
    },
    "application-autoscaling.DeleteScalingPolicy": {
        "needs": [_need("application-autoscaling:DeleteScalingPolicy", SCALABLE_TARGET,
                        SCALING_CONTEXT)],
        "implies": ["target_tracking_alarms"],
        "source": SAR + "list_applicationautoscaling.html",
    },
    "application-autoscaling.DescribeScalableTargets": {
        "needs": [_need("application-autoscaling:DescribeScalableTargets", "*")],
        "source": SAR + "list_applicationautoscaling.html (no resource type)",
    },
    "application-autoscaling.DescribeScalingPolicies": {
        "needs": [_need("application-autoscaling:DescribeScalingPolicies", "*")],
        "source": SAR + "list_applicationautoscaling.html (no resource type)",
    },
    "application-autoscaling.DescribeScalingActivities": {
        "needs": [_need("application-autoscaling:DescribeScalingActivities", "*")],
        "source": SAR + "list_applicationautoscaling.html (no resource type)",
    },
    # --- CloudWatch Logs, CloudWatch ----------------------------------------------------------
    "logs.DescribeLogStreams": {
        "needs": [_need("logs:DescribeLogStreams", LOG_GROUP)],
        "source": SAR + "list_amazoncloudwatchlogs.html (log-group); the ARN form: "
                  "https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/"
                  "API_LogGroup.html (arn)",
    },
    "logs.FilterLogEvents": {
        "needs": [_need("logs:FilterLogEvents", LOG_GROUP)],
        "source": SAR + "list_amazoncloudwatchlogs.html (log-group)",
    },
    "logs.GetLogEvents": {
        "needs": [_need("logs:GetLogEvents", "arn:{partition}:logs:{region}:{account}:log-group:"
                        "{logGroupName}:log-stream:{logStreamName}")],
        "source": SAR + "list_amazoncloudwatchlogs.html (GetLogEvents: log-stream)",
    },
    "cloudwatch.PutMetricAlarm": {
        "needs": [_need("cloudwatch:PutMetricAlarm",
                        "arn:{partition}:cloudwatch:{region}:{account}:alarm:{AlarmName}",
                        {"cloudwatch:AlarmActions": "AlarmActions", "@tags": "Tags"})],
        "source": SAR + "list_amazoncloudwatch.html (PutMetricAlarm: alarm; condition keys "
                  "cloudwatch:AlarmActions, aws:RequestTag, aws:TagKeys); the alarm ARN: "
                  "https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/"
                  "iam-cw-condition-keys-alarm-actions.html",
    },
    "cloudwatch.DeleteAlarms": {
        # One request per name in AlarmNames (tests/iam/implied.py `each_alarm_named`).
        "needs": [],
        "implies": ["each_alarm_named"],
        "source": SAR + "list_amazoncloudwatch.html (DeleteAlarms: alarm, required)",
    },
    "cloudwatch.DescribeAlarms": {
        "needs": [],
        "implies": ["each_alarm_named"],
        "source": SAR + "list_amazoncloudwatch.html (DescribeAlarms: alarm, required)",
    },
    "cloudwatch.GetMetricData": {
        "needs": [_need("cloudwatch:GetMetricData", "*")],
        "source": SAR + "list_amazoncloudwatch.html",
    },
    "cloudwatch.ListMetrics": {
        "needs": [_need("cloudwatch:ListMetrics", "*")],
        "source": SAR + "list_amazoncloudwatch.html",
    },
    # --- DataSync, FSx, EFS -------------------------------------------------------------------
    "datasync.DescribeTask": {
        "needs": [_need("datasync:DescribeTask", "{TaskArn}")],
        "source": SAR + "list_awsdatasync.html (DescribeTask: task)",
    },
    "datasync.StartTaskExecution": {
        "needs": [_need("datasync:StartTaskExecution", "{TaskArn}")],
        "source": SAR + "list_awsdatasync.html (StartTaskExecution: task)",
    },
    "datasync.DescribeTaskExecution": {
        "needs": [_need("datasync:DescribeTaskExecution", "{TaskExecutionArn}")],
        "source": SAR + "list_awsdatasync.html (DescribeTaskExecution: taskexecution)",
    },
    "datasync.ListTaskExecutions": {
        "needs": [_need("datasync:ListTaskExecutions", "*")],
        "source": SAR + "list_awsdatasync.html (ListTaskExecutions: no resource type)",
    },
    "fsx.DescribeDataRepositoryAssociations": {
        "needs": [_need("fsx:DescribeDataRepositoryAssociations", "*")],
        "source": SAR + "list_amazonfsx.html (no resource type)",
    },
    "fsx.DescribeFileSystems": {
        "needs": [_need("fsx:DescribeFileSystems", "*")],
        "source": SAR + "list_amazonfsx.html (no resource type)",
    },
    "efs.DescribeFileSystems": {
        "needs": [_need("elasticfilesystem:DescribeFileSystems",
                        "arn:{partition}:elasticfilesystem:{region}:{account}:file-system/{FileSystemId}")],
        "source": SAR + "list_amazonelasticfilesystem.html (file-system)",
    },
}
