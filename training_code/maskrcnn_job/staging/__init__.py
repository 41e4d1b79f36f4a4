"""The staging job (stage_dataset.py): a dataset staged into S3 (`stage_dataset`): COCO 2017
downloaded, verified, converted and uploaded (`stage_coco`), or a labeling tool's export
converted from the imports prefix; the pretrained backbone checkpoint (`stage_backbone`),
resumable verified downloads (`downloads`), S3 prefixes written with their completeness marker
last and read back (`s3_upload`)."""
