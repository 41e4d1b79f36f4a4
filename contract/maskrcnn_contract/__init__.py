"""The contract between the Mask R-CNN training job, its launcher and the CDK stacks.

Every name that crosses a boundary is defined here once, in pure Python (no TensorFlow, no AWS
SDK), so that each side imports the same definition:

- `hyperparameters`: the job's hyperparameters (names, types, defaults, validation);
- `metrics`: the metric lines the job prints and the SageMaker regexes that read them;
- `job_io`: channel names, the checkpoint directory, the dataset-complete marker, the staging
  program and its arguments;
- `ssm`: the SSM parameters a deployment publishes for launchers.
"""
