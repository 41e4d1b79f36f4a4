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
    inputs = {"vpc": vpc, "bucket": s3.Bucket(stack, "Bucket"), "key": kms.Key(stack, "Key")}
    return stack, vpc, inputs


def test_lustre_cache_links_both_prefixes_one_after_the_other_and_names_paths_from_its_mount_name():
    stack, vpc, inputs = bare_stack()
    cache = LustreCache(stack, "Cache", subnet=vpc.isolated_subnets[0],
                        security_group=ec2.SecurityGroup(stack, "Sg", vpc=vpc),
                        datasets_prefix="data/set/", datasets_path="/data/set",
                        pretrained_prefix="weights/",
                        pretrained_path="/weights", deployment_type="PERSISTENT_1",
                        capacity_gib=2400, throughput_per_tib=100, **inputs)
    raw = Template.from_stack(stack).to_json()
    file_system_id, file_system = only(raw, "AWS::FSx::FileSystem")
    assert file_system["Properties"]["LustreConfiguration"]["PerUnitStorageThroughput"] == 100
    associations = of_type(raw, "AWS::FSx::DataRepositoryAssociation")
    links = {a["Properties"]["FileSystemPath"]: a["Properties"]["DataRepositoryPath"]["Fn::Join"][1][-1]
             for a in associations.values()}
    assert links == {"/data/set": "/data/set/", "/weights": "/weights/"}
    # FSx works on one association request at a time (Rule FSX-5).
    data_id = next(k for k, a in associations.items() if a["Properties"]["FileSystemPath"] == "/data/set")
    pretrained = next(a for a in associations.values() if a["Properties"]["FileSystemPath"] == "/weights")
    assert pretrained["DependsOn"] == [data_id]
    for path, expected in ((cache.datasets_path, "/data/set"), (cache.pretrained_path, "/weights")):
        parts = stack.resolve(path)["Fn::Join"][1]
        assert parts == ["/", {"Fn::GetAtt": [file_system_id, "LustreMountName"]}, expected]


def test_efs_mirror_reattaches_an_existing_file_system_and_copies_each_prefix_with_its_own_task():
    stack, vpc, inputs = bare_stack()
    mirror = EfsMirror(stack, "Mirror", subnets=vpc.isolated_subnets,
                       security_group=ec2.SecurityGroup(stack, "EfsSg", vpc=vpc),
                       datasync_security_group=ec2.SecurityGroup(stack, "SyncSg", vpc=vpc),
                       mirrors=[("data/set/", "/data/set"), ("weights/", "/weights")],
                       task_name_prefix="t-s3-to-efs", existing_id="fs-0123456789abcdef0", **inputs)
    raw = Template.from_stack(stack).to_json()
    assert not of_type(raw, "AWS::EFS::FileSystem")
    targets = of_type(raw, "AWS::EFS::MountTarget").values()
    assert [t["Properties"]["FileSystemId"] for t in targets] == ["fs-0123456789abcdef0"] * 2
    locations = of_type(raw, "AWS::DataSync::LocationEFS").values()
    assert sorted(location["Properties"]["Subdirectory"] for location in locations) == ["/data/set", "/weights"]
    # DataSync mounts through a mount target: they exist before its EFS locations.
    for location in locations:
        assert len([d for d in location["DependsOn"] if "MountTarget" in d]) == 2
    sources = of_type(raw, "AWS::DataSync::LocationS3").values()
    assert sorted(source["Properties"]["Subdirectory"] for source in sources) == ["/data/set/", "/weights/"]
    assert [stack.resolve(task.name) for task in mirror.tasks] == ["t-s3-to-efs-data-set",
                                                                   "t-s3-to-efs-weights"]
