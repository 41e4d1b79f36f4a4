"""The storage constructs alone, each in a bare Stack with only the inputs it takes."""

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from stacks.storage.efs_mirror import EfsMirror
from stacks.storage.lustre_cache import LustreCache
from tests.infra.templates import of_type, only


def bare_stack():
    stack = cdk.Stack(cdk.App(), "Bare")
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2, nat_gateways=0, subnet_configuration=[
        ec2.SubnetConfiguration(name="private", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)])
    inputs = {"vpc": vpc, "bucket": s3.Bucket(stack, "Bucket"), "key": kms.Key(stack, "Key"),
              "prefix": "data/set/", "data_path": "/data/set"}
    return stack, vpc, inputs


def test_lustre_cache_links_the_prefix_and_names_paths_from_its_mount_name():
    stack, vpc, inputs = bare_stack()
    cache = LustreCache(stack, "Cache", subnet=vpc.isolated_subnets[0],
                        security_group=ec2.SecurityGroup(stack, "Sg", vpc=vpc),
                        deployment_type="PERSISTENT_1", capacity_gib=2400, throughput_per_tib=100,
                        **inputs)
    raw = Template.from_stack(stack).to_json()
    file_system_id, file_system = only(raw, "AWS::FSx::FileSystem")
    assert file_system["Properties"]["LustreConfiguration"]["PerUnitStorageThroughput"] == 100
    association = only(raw, "AWS::FSx::DataRepositoryAssociation")[1]["Properties"]
    assert association["FileSystemPath"] == "/data/set"
    assert association["DataRepositoryPath"]["Fn::Join"][1][-1] == "/data/set/"
    path = stack.resolve(cache.data_path)["Fn::Join"][1]
    assert path[0] == "/" and path[-1] == "/data/set"
    assert path[1] == {"Fn::GetAtt": [file_system_id, "LustreMountName"]}


def test_efs_mirror_reattaches_an_existing_file_system_in_every_subnet():
    stack, vpc, inputs = bare_stack()
    mirror = EfsMirror(stack, "Mirror", subnets=vpc.isolated_subnets,
                       security_group=ec2.SecurityGroup(stack, "EfsSg", vpc=vpc),
                       datasync_security_group=ec2.SecurityGroup(stack, "SyncSg", vpc=vpc),
                       task_name="t-s3-to-efs", existing_id="fs-0123456789abcdef0", **inputs)
    raw = Template.from_stack(stack).to_json()
    assert not of_type(raw, "AWS::EFS::FileSystem")
    targets = of_type(raw, "AWS::EFS::MountTarget").values()
    assert [t["Properties"]["FileSystemId"] for t in targets] == ["fs-0123456789abcdef0"] * 2
    location = only(raw, "AWS::DataSync::LocationEFS")[1]
    assert location["Properties"]["Subdirectory"] == "/data/set"
    # DataSync mounts through a mount target: they exist before its EFS location.
    assert len([d for d in location["DependsOn"] if "MountTarget" in d]) == 2
    assert stack.resolve(mirror.task.name) == "t-s3-to-efs"
