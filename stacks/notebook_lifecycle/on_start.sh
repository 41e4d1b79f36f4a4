#!/bin/bash
# Runs at every start. A lifecycle script that runs longer than 5 minutes fails the start
# (CreateNotebookInstanceLifecycleConfig reference; docs/aws-rules.md), so this script only does
# the quick part itself (publish the deployment's SSM path for the notebooks) and starts the slow
# part in the background, detached: installing the EFS and Lustre clients and mounting EFS (TLS
# and IAM, read-only) and FSx into the home folder. Each background step is bounded in time; a
# failure does not stop the instance (the S3 notebook needs neither) and is written to
# ~/SageMaker/MOUNT-STATUS.txt and the background log, so the reason is never hidden.
set -uo pipefail
# The scripts' documented environment is PATH alone (CreateNotebookInstanceLifecycleConfig
# reference): the AWS CLI gets the deployment's region from here (docs/aws-rules.md SM-16).
export AWS_DEFAULT_REGION="@@REGION@@"
EFS_ID="@@EFS_ID@@"
FSX_DNS="@@FSX_DNS@@"
FSX_MOUNT_NAME="@@FSX_MOUNT_NAME@@"
SSM_PATH="@@SSM_PATH@@"
# Set only without NAT: pip on the notebook installs from this CodeArtifact mirror of PyPI.
CODEARTIFACT_DOMAIN="@@CODEARTIFACT_DOMAIN@@"
CODEARTIFACT_OWNER="@@CODEARTIFACT_OWNER@@"
CODEARTIFACT_REPOSITORY="@@CODEARTIFACT_REPOSITORY@@"
ROOT="${LIFECYCLE_ROOT:-}"                  # empty on the instance; a scratch folder in tests
RETRY_DELAY="${MOUNT_RETRY_DELAY:-10}"
HOME_DIR="${ROOT}/home/ec2-user/SageMaker"
STATUS="${HOME_DIR}/MOUNT-STATUS.txt"
BACKGROUND_LOG="${ROOT}/var/log/maskrcnn-mounts.log"
PID_FILE="${ROOT}/var/run/maskrcnn-mounts.pid"
mkdir -p "${HOME_DIR}" "$(dirname "${BACKGROUND_LOG}")" "$(dirname "${PID_FILE}")" \
         "${ROOT}/etc/profile.d" "${ROOT}/home/ec2-user/.maskrcnn"

log() { echo "[on-start] $*"; echo "$(date -u +%FT%TZ) $*" >> "${STATUS}"; }

# The notebooks find their deployment here (no copy-paste of stack outputs).
echo "export MASKRCNN_SSM_PATH=${SSM_PATH}" > "${ROOT}/etc/profile.d/maskrcnn.sh"
echo "${SSM_PATH}" > "${ROOT}/home/ec2-user/.maskrcnn/ssm-path"
chown -R ec2-user:ec2-user "${ROOT}/home/ec2-user/.maskrcnn"

mount_with_retries() {  # name, mount point, command...
  local name=$1 point=$2; shift 2
  mkdir -p "${point}"
  if mountpoint -q "${point}"; then log "${name}: already mounted at ${point}"; return 0; fi
  for attempt in 1 2 3 4 5 6; do
    if timeout 30 "$@"; then log "${name}: mounted at ${point}"; return 0; fi
    log "${name}: mount attempt ${attempt} failed; retrying in ${RETRY_DELAY} s"
    sleep "${RETRY_DELAY}"
  done
  log "${name}: NOT MOUNTED at ${point}. Check the notebook security group, the mount targets and the file system state."
  return 1
}

use_pypi_mirror() {
  # The token lasts 12 hours; every start renews it. pip's configuration is ec2-user's.
  if timeout 60 su - ec2-user -c "aws codeartifact login --region ${AWS_DEFAULT_REGION} --tool pip --domain ${CODEARTIFACT_DOMAIN} --domain-owner ${CODEARTIFACT_OWNER} --repository ${CODEARTIFACT_REPOSITORY}"; then
    log "pip: installs from CodeArtifact ${CODEARTIFACT_DOMAIN}/${CODEARTIFACT_REPOSITORY} (no internet in this VPC)"
  else
    log "pip: CodeArtifact login failed; %pip install in the notebooks will not work"
  fi
}

mount_file_systems() {
  if [ -n "${CODEARTIFACT_DOMAIN}" ]; then use_pypi_mirror; fi
  if timeout 120 dnf install -y -q amazon-efs-utils; then
    mount_with_retries "EFS ${EFS_ID}" "${HOME_DIR}/efs" \
      mount -t efs -o tls,iam,ro,noresvport "${EFS_ID}:/" "${HOME_DIR}/efs"
  else
    log "EFS ${EFS_ID}: amazon-efs-utils could not be installed, so no TLS mount; not mounted"
  fi
  if [ -n "${FSX_DNS}" ]; then
    if timeout 120 dnf install -y -q lustre-client; then
      mount_with_retries "FSx ${FSX_DNS}" "${HOME_DIR}/fsx" \
        mount -t lustre -o relatime,flock "${FSX_DNS}@tcp:/${FSX_MOUNT_NAME}" "${HOME_DIR}/fsx"
    else
      log "FSx: the Lustre client could not be installed; not mounted"
    fi
  fi
  log "mounting finished"
  chown ec2-user:ec2-user "${STATUS}"
}

: > "${STATUS}"
log "mounting EFS and FSx in the background (log: ${BACKGROUND_LOG})"
chown ec2-user:ec2-user "${STATUS}"
# Detached (own session, no inherited stdin/stdout): the lifecycle runner does not wait for it.
export -f log mount_with_retries use_pypi_mirror mount_file_systems
export EFS_ID FSX_DNS FSX_MOUNT_NAME HOME_DIR STATUS RETRY_DELAY \
       CODEARTIFACT_DOMAIN CODEARTIFACT_OWNER CODEARTIFACT_REPOSITORY
nohup setsid bash -c mount_file_systems < /dev/null >> "${BACKGROUND_LOG}" 2>&1 &
echo $! > "${PID_FILE}"
exit 0
