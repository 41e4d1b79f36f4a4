"""The model registry's names, shared by the stack (the notebook role's IAM conditions,
stacks/notebook.py) and the launcher (notebooks/maskrcnn_launcher/runs/registry.py).

A version of the deployment's model package group is registered PENDING, then APPROVED or
REJECTED by a person; only an APPROVED version is deployed (docs/aws-rules.md REG-4). The values
are SageMaker's ModelApprovalStatus (CreateModelPackage, UpdateModelPackage).
"""

PENDING = "PendingManualApproval"
APPROVED = "Approved"
REJECTED = "Rejected"
STATUSES = (PENDING, APPROVED, REJECTED)
DECISIONS = (APPROVED, REJECTED)
