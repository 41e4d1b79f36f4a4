"""A training launch: the user's choices (options), what it needs staged (inputs) or starts from
(init_from), resolved once (plan), checked as sent (validation, session), built as the SageMaker
SDK 3 ModelTrainer (jobs), sent (submit); and the warm pools launches keep (warm_pools). Only
`jobs`, `session` and `submit` import the SDK."""
