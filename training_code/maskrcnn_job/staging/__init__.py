"""The staging job (stage_coco.py): COCO 2017 downloaded, verified, converted and uploaded
(`stage_coco`), the pretrained backbone checkpoint (`stage_backbone`), resumable verified
downloads (`downloads`), S3 prefixes written with their completeness marker last (`s3_upload`)."""
