"""Tools that run only on a developer's machine, never in the training image (.dockerignore):
the job run locally as SageMaker would (`local_run`), emulated training hosts under the real
SageMaker toolkits (`emulated_hosts`), a synthetic COCO-format dataset (`synthetic_coco`), and a
trained model's predictions drawn on images (`predict`, `drawing`)."""
