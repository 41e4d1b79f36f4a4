"""Tools that run only on a developer's machine, never in the training image (.dockerignore):
the job run locally as SageMaker would (`local_run`), emulated training hosts under the real
SageMaker toolkits (`emulated_hosts`) and a CreateTrainingJob request played on them
(`sagemaker_job`), a synthetic COCO-format dataset (`synthetic_coco`) and detections made from
its ground truth (`synthetic_detections`), a trained model's predictions drawn on images
(`predict`, `drawing`), and a Batch Transform played here (`batch_transform`) over a folder
(`predict_batch`)."""
