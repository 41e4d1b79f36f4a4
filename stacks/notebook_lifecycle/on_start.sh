#!/bin/bash
# Runs at every start: mounts EFS (TLS) and FSx for Lustre into the home folder and publishes the
# deployment's SSM path for the notebooks. A mount that fails does not stop the instance from
# starting (the S3 notebook needs neither); it is logged to CloudWatch and written to
# ~/SageMaker/MOUNT-STATUS.txt, so the reason is never hidden. Each step is bounded in time: a
# lifecycle script that runs past 5 minutes fails the start.
set -uo pipefail
EFS_ID="@@EFS_ID@@"
FSX_DNS="@@FSX_DNS@@"
FSX_MOUNT_NAME="@@FSX_MOUNT_NAME@@"
SSM_PATH="@@SSM_PATH@@"
HOME_DIR=/home/ec2-user/SageMaker
STATUS="${HOME_DIR}/MOUNT-STATUS.txt"
: > "${STATUS}"

log() { echo "[on-start] $*"; echo "$(date -u +%FT%TZ) $*" >> "${STATUS}"; }

# The notebooks find their deployment here (no copy-paste of stack outputs).
echo "export MASKRCNN_SSM_PATH=${SSM_PATH}" > /etc/profile.d/maskrcnn.sh
mkdir -p /home/ec2-user/.maskrcnn && echo "${SSM_PATH}" > /home/ec2-user/.maskrcnn/ssm-path
chown -R ec2-user:ec2-user /home/ec2-user/.maskrcnn

mount_with_retries() {  # name, mount point, command...
  local name=$1 point=$2; shift 2
  mkdir -p "${point}"
  if mountpoint -q "${point}"; then log "${name}: already mounted at ${point}"; return 0; fi
  for attempt in 1 2 3 4 5 6; do
    if timeout 30 "$@"; then log "${name}: mounted at ${point}"; return 0; fi
    log "${name}: mount attempt ${attempt} failed; retrying in 10 s"
    sleep 10
  done
  log "${name}: NOT MOUNTED at ${point}. Check the notebook security group, the mount targets and the file system state."
  return 1
}

if timeout 120 dnf install -y -q amazon-efs-utils; then
  mount_with_retries "EFS ${EFS_ID}" "${HOME_DIR}/efs" \
    mount -t efs -o tls,noresvport "${EFS_ID}:/" "${HOME_DIR}/efs"
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
chown ec2-user:ec2-user "${STATUS}"
exit 0
