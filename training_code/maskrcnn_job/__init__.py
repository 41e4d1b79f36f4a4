"""The Mask R-CNN training job: everything here ships in the training image (/opt/ml/code).

One folder per flow: `training/` (the loop, the Model Garden experiment, COCO evaluation),
`distribution/` (the seam between the loop and Horovod or TensorFlow's strategies), `data/`
(the channel layout and the COCO converter, no TensorFlow), `staging/` (the staging job: COCO
and the pretrained backbone into S3), `serving/` (the SavedModel and the endpoint's handler).
`job.py` is the training program (train.py runs it), `sagemaker_env.py` the container contract.
Nothing here imports `maskrcnn_local`, the tools that run only on a developer's machine.
"""
