"""A finished run served: the endpoint's requests planned and checked (endpoint_plan), created,
listed and deleted (endpoints), asked (invocation), its answers drawn (detections). Boto3 only."""
