"""The contract between the Mask R-CNN training job, its launcher and the CDK stacks.

Every name and shape that crosses a boundary is defined here once, in pure Python (no
TensorFlow; no AWS SDK import: functions that call AWS take the caller's client), so that each
side imports the same definition:

- `hyperparameters`: the job's hyperparameters (names, types, defaults, validation);
- `metrics`: the metric lines the job prints and the SageMaker regexes that read them;
- `job_io`: channel names, the checkpoint directory, the dataset-complete marker, the staging
  program and its arguments, the SageMaker training toolkits' hyperparameter names;
- `ssm`: the SSM parameters a deployment publishes for launchers;
- `s3_objects`: S3 URIs split, and whether an object (a completeness marker) exists;
- `palette`: the colour of each category wherever instances are drawn;
- `evaluation_report`: the evaluation report's file, its places in the job's output and model,
  and its printed table;
- `tracking`: experiment tracking with MLflow: the environment variables a launch sets, the
  tracking server's ARN and name, the experiment name's rule;
- `labeling`: what a labeling tool's export may hold that Mask R-CNN cannot train as it is (boxes
  without a mask), and the choices the user names about it;
- `model_registry`: the model registry's approval statuses, for the notebook role's conditions
  and the launcher.
"""
