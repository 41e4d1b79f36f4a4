"""What every flow reads first: the deployment the stack published (settings: SSM -> Deployment,
the boto3 session) and the instance types it knows (instances: GPUs, price classes, hosting)."""
