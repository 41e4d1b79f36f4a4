"""Storage: encrypted, private, retained data; FSx linked to S3 and DataSync over TLS, both for
the dataset and the pretrained prefix."""

from tests.infra.templates import actions, data_key, of_type, only, statements_of


def test_data_key_rotates_and_is_retained(default_app):
    _, key = data_key(default_app.deployment)  # not the notification topic's key (SNS-1)
    assert key["DeletionPolicy"] == "Retain" and key["Properties"]["EnableKeyRotation"] is True


def test_data_bucket_is_private_kms_encrypted_versioned_logged_and_retained(default_app):
    raw = default_app.deployment
    key_id = data_key(raw)[0]
    buckets = of_type(raw, "AWS::S3::Bucket")
    data_id = next(k for k in buckets if k.startswith("StorageDataBucket"))
    log_id = next(k for k in buckets if k.startswith("StorageDataAccessLogs"))
    data = buckets[data_id]
    assert data["DeletionPolicy"] == "Retain"
    props = data["Properties"]
    rule = props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert rule["ServerSideEncryptionByDefault"] == {
        "SSEAlgorithm": "aws:kms", "KMSMasterKeyID": {"Fn::GetAtt": [key_id, "Arn"]}}
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True}
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["LoggingConfiguration"]["DestinationBucketName"] == {"Ref": log_id}
    assert buckets[log_id]["DeletionPolicy"] == "Retain"
    # Rule S3-1: server access logs are delivered only to an SSE-S3 bucket, not SSE-KMS.
    log_rule, = buckets[log_id]["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert log_rule["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}


def test_both_buckets_deny_requests_without_tls(default_app):
    policies = of_type(default_app.deployment, "AWS::S3::BucketPolicy").values()
    assert len(policies) == 2
    for policy in policies:
        assert any(s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
                   for s in policy["Properties"]["PolicyDocument"]["Statement"])


def test_efs_is_encrypted_with_the_data_key_retained_and_mounted_in_each_private_subnet(default_app):
    raw = default_app.deployment
    key_id = data_key(raw)[0]
    efs_id, efs = only(raw, "AWS::EFS::FileSystem")
    assert efs["DeletionPolicy"] == "Retain"
    assert efs["Properties"]["Encrypted"] is True
    assert efs["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    targets = of_type(raw, "AWS::EFS::MountTarget").values()
    assert len(targets) == 2
    assert all(t["Properties"]["FileSystemId"] == {"Ref": efs_id} for t in targets)


def test_fsx_persistent_2_lustre_2_15_encrypted_with_context_capacity(default_app):
    raw = default_app.deployment
    fsx = only(raw, "AWS::FSx::FileSystem")[1]["Properties"]
    assert fsx["FileSystemType"] == "LUSTRE"
    assert fsx["FileSystemTypeVersion"] == "2.15"
    assert fsx["StorageCapacity"] == 1200
    assert fsx["KmsKeyId"]
    lustre = fsx["LustreConfiguration"]
    assert lustre["DeploymentType"] == "PERSISTENT_2" and lustre["PerUnitStorageThroughput"] == 250
    assert "ImportPath" not in lustre  # the association does the linking


def test_fsx_associations_auto_import_every_dataset_and_the_pretrained_prefix(default_app):
    """One association for the datasets prefix: a dataset staged later needs no change, and
    nothing else of the bucket (imports, outputs, checkpoints) reaches the file system."""
    raw = default_app.deployment
    associations = {a["Properties"]["FileSystemPath"]: a
                    for a in of_type(raw, "AWS::FSx::DataRepositoryAssociation").values()}
    assert set(associations) == {"/datasets", "/pretrained"}
    for path, association in associations.items():
        props = association["Properties"]
        assert props["S3"]["AutoImportPolicy"]["Events"] == ["NEW", "CHANGED", "DELETED"]
        assert props["BatchImportMetaDataOnCreate"] is True
        assert props["DataRepositoryPath"]["Fn::Join"][1][-1] == path + "/"


def test_fsx_service_role_may_decrypt_only_through_s3(default_app):
    key = data_key(default_app.deployment)[1]
    statement = next(s for s in key["Properties"]["KeyPolicy"]["Statement"] if s.get("Sid") == "FsxLinkedBucketRead")
    assert statement["Condition"]["ArnLike"]["aws:PrincipalArn"]["Fn::Join"][1][-1].endswith(
        "role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/*")
    assert "kms:ViaService" in statement["Condition"]["StringEquals"]


def test_datasync_copies_every_dataset_and_the_pretrained_prefix_to_efs_over_tls(default_app):
    """One task for the datasets prefix (every dataset, nothing else), mirroring deletes."""
    raw = default_app.deployment
    tasks = of_type(raw, "AWS::DataSync::Task").values()
    copies = {}
    for task in tasks:
        props = task["Properties"]
        source_id = props["SourceLocationArn"]["Fn::GetAtt"][0]
        destination_id = props["DestinationLocationArn"]["Fn::GetAtt"][0]
        destination = raw["Resources"][destination_id]["Properties"]
        assert destination["InTransitEncryption"] == "TLS1_2"
        copies[props["Name"]] = (raw["Resources"][source_id]["Properties"]["Subdirectory"],
                                 destination["Subdirectory"])
        assert props["Options"]["TransferMode"] == "CHANGED"
        assert props["Options"]["PreserveDeletedFiles"] == "REMOVE"
        assert props["Options"]["VerifyMode"] == "ONLY_FILES_TRANSFERRED"
        assert props["CloudWatchLogGroupArn"]
    assert copies == {
        "maskrcnn-s3-to-efs-datasets": ("/datasets/", "/datasets"),
        "maskrcnn-s3-to-efs-pretrained": ("/pretrained/", "/pretrained"),
    }


def test_datasync_read_role_reads_only_the_datasets_and_pretrained_prefixes(default_app):
    raw = default_app.deployment
    policy = statements_of(raw, "StorageEfsS3ReadRole")
    allowed = actions(policy)
    assert "s3:PutObject" not in allowed and "s3:DeleteObject" not in allowed
    objects = next(s for s in policy if s["Action"] == "s3:GetObject")
    assert [r["Fn::Join"][1][-1] for r in objects["Resource"]] == ["/datasets/*", "/pretrained/*"]


def test_existing_efs_is_imported_with_new_mount_targets_and_scratch_2_fsx(variant_app):
    raw = variant_app.deployment
    assert not of_type(raw, "AWS::EFS::FileSystem")
    targets = of_type(raw, "AWS::EFS::MountTarget").values()
    assert len(targets) == 3
    assert all(t["Properties"]["FileSystemId"] == "fs-0123456789abcdef0" for t in targets)
    lustre = only(raw, "AWS::FSx::FileSystem")[1]["Properties"]["LustreConfiguration"]
    assert lustre["DeploymentType"] == "SCRATCH_2" and "PerUnitStorageThroughput" not in lustre
    assert len(of_type(raw, "AWS::FSx::DataRepositoryAssociation")) == 2
    assert len(of_type(raw, "AWS::DataSync::Task")) == 2
