#!/bin/bash
# Runs once, when the notebook instance is created: puts the project's notebooks into the home
# folder. Everything is logged to CloudWatch (/aws/sagemaker/NotebookInstances, stream
# <instance>/LifecycleConfigOnCreate) so a failure says which step and why.
set -euo pipefail
# The scripts' documented environment is PATH alone (CreateNotebookInstanceLifecycleConfig
# reference): the AWS CLI gets the deployment's region from here, not from a default that an
# isolated VPC could not reach (docs/aws-rules.md SM-16).
export AWS_DEFAULT_REGION="@@REGION@@"
NOTEBOOKS_S3_URL="@@NOTEBOOKS_S3_URL@@"
TARGET=/home/ec2-user/SageMaker/mask-rcnn
echo "[on-create] copying notebooks from ${NOTEBOOKS_S3_URL} to ${TARGET}"
tmp=$(mktemp -d)
aws s3 cp --only-show-errors "${NOTEBOOKS_S3_URL}" "${tmp}/notebooks.zip"
mkdir -p "${TARGET}"
# -n: never overwrite a file the user already has there.
unzip -q -n "${tmp}/notebooks.zip" -d "${TARGET}"
chown -R ec2-user:ec2-user "${TARGET}"
rm -rf "${tmp}"
echo "[on-create] done: $(find "${TARGET}" -name '*.ipynb' | wc -l) notebooks in ${TARGET}"
