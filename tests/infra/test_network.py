"""Network: private subnets only, endpoints behind their own group, narrow security groups."""

from aws_cdk.assertions import Match

from stacks.network import INTERFACE_ENDPOINTS
from tests.infra.templates import of_type


def group_id(raw, construct_prefix):
    """The logical id of the network construct's security group named `construct_prefix`."""
    matches = [k for k in of_type(raw, "AWS::EC2::SecurityGroup")
               if k.startswith("Network" + construct_prefix)]
    assert len(matches) == 1, matches
    return matches[0]


def _rules(raw, group, kind, peer_key):
    """Rules of one group as (protocol, from, to, peer group logical id or CIDR)."""
    rules = set()
    for rule in of_type(raw, kind).values():
        props = rule["Properties"]
        if props["GroupId"] == {"Fn::GetAtt": [group, "GroupId"]}:
            peer = props.get(peer_key, {}).get("Fn::GetAtt", [props.get("CidrIp")])[0]
            rules.add((props["IpProtocol"], props.get("FromPort"), props.get("ToPort"), peer))
    return rules


def ingress_rules(raw, group):
    return _rules(raw, group, "AWS::EC2::SecurityGroupIngress", "SourceSecurityGroupId")


def egress_rules(raw, group):
    return _rules(raw, group, "AWS::EC2::SecurityGroupEgress", "DestinationSecurityGroupId")


LUSTRE = {("tcp", 988, 988), ("tcp", 1018, 1023)}


def test_no_subnet_gives_public_ips_and_private_subnets_span_two_azs(default_app):
    raw = default_app.deployment
    subnets = of_type(raw, "AWS::EC2::Subnet").values()
    assert all(s["Properties"]["MapPublicIpOnLaunch"] is False for s in subnets)
    private = [s for s in subnets if {"Key": "aws-cdk:subnet-name", "Value": "private"} in s["Properties"]["Tags"]]
    assert len(private) == 2
    assert len(of_type(raw, "AWS::EC2::NatGateway")) == 1


def test_flow_logs_capture_all_traffic_into_a_retained_log_group(default_app):
    template = default_app.deployment_template
    template.has_resource_properties("AWS::EC2::FlowLog", {"TrafficType": "ALL", "ResourceType": "VPC"})
    template.has_resource("AWS::Logs::LogGroup", {"DeletionPolicy": "Retain",
                                                  "Properties": {"RetentionInDays": 365}})


def test_s3_gateway_and_every_interface_endpoint_with_private_dns_behind_its_own_group(default_app):
    raw = default_app.deployment
    endpoints = of_type(raw, "AWS::EC2::VPCEndpoint")
    gateways = [e for e in endpoints.values() if e["Properties"].get("VpcEndpointType") == "Gateway"]
    assert len(gateways) == 1 and "s3" in str(gateways[0]["Properties"]["ServiceName"])
    interfaces = [e["Properties"] for e in endpoints.values() if e["Properties"].get("VpcEndpointType") == "Interface"]
    services = sorted(str(i["ServiceName"]) for i in interfaces)
    for short in ("sagemaker.api", "sagemaker.runtime", "sts", "logs", "ecr.api", "ecr.dkr", "ssm"):
        assert sum(s.endswith(f".{short}") or f".{short}'" in s or f'.{short}"' in s or s.endswith(short)
                   for s in services) >= 1, (short, services)
    assert len(interfaces) == len(INTERFACE_ENDPOINTS)
    endpoint_group = group_id(raw, "EndpointSecurityGroup")
    for props in interfaces:
        assert props["PrivateDnsEnabled"] is True
        assert props["SecurityGroupIds"] == [{"Fn::GetAtt": [endpoint_group, "GroupId"]}]
    training, notebook = group_id(raw, "TrainingSecurityGroup"), group_id(raw, "NotebookSecurityGroup")
    assert ingress_rules(raw, endpoint_group) == {("tcp", 443, 443, training), ("tcp", 443, 443, notebook)}


def test_training_group_admits_all_traffic_from_itself_and_lustre_from_the_file_servers(default_app):
    raw = default_app.deployment
    training, fsx = group_id(raw, "TrainingSecurityGroup"), group_id(raw, "FsxSecurityGroup")
    assert ingress_rules(raw, training) == {("-1", None, None, training)} | {
        (*ports, fsx) for ports in LUSTRE}
    assert "SecurityGroupIngress" not in raw["Resources"][training]["Properties"]


def test_file_system_groups_admit_only_their_clients_on_their_ports(default_app):
    raw = default_app.deployment
    training, notebook = group_id(raw, "TrainingSecurityGroup"), group_id(raw, "NotebookSecurityGroup")
    datasync, efs, fsx = (group_id(raw, p) for p in ("DataSyncSecurityGroup", "EfsSecurityGroup", "FsxSecurityGroup"))
    assert ingress_rules(raw, efs) == {("tcp", 2049, 2049, g) for g in (training, notebook, datasync)}
    from_clients = {(*ports, g) for ports in LUSTRE for g in (training, notebook)}
    # The FSx construct opens the whole Lustre range to the file servers' own group.
    assert ingress_rules(raw, fsx) == from_clients | {("tcp", 988, 1023, fsx)}


def test_fsx_group_without_allow_all_outbound_reaches_itself_and_its_clients_on_lustre_ports(default_app):
    """FSx for Lustre user guide, limit-access-security-groups (docs/aws-rules.md): outbound 988
    and 1018-1023 to the group itself and to the clients; the clients accept them inbound."""
    raw = default_app.deployment
    training, notebook, fsx = (group_id(raw, p) for p in
                               ("TrainingSecurityGroup", "NotebookSecurityGroup", "FsxSecurityGroup"))
    assert "SecurityGroupEgress" not in raw["Resources"][fsx]["Properties"] or all(
        rule.get("CidrIp") == "255.255.255.255/32"
        for rule in raw["Resources"][fsx]["Properties"]["SecurityGroupEgress"])
    assert egress_rules(raw, fsx) == {(*ports, g) for ports in LUSTRE for g in (fsx, training, notebook)}
    for client in (training, notebook):
        assert {(*ports, fsx) for ports in LUSTRE} <= ingress_rules(raw, client)


def test_no_ingress_from_any_address(default_app, variant_app):
    for app in (default_app, variant_app):
        raw = app.deployment
        text = str([r for r in raw["Resources"].values()
                    if r["Type"] in ("AWS::EC2::SecurityGroup", "AWS::EC2::SecurityGroupIngress")])
        ingress_cidrs = [rule["Properties"].get("CidrIp") for rule in of_type(raw, "AWS::EC2::SecurityGroupIngress").values()]
        assert all(cidr is None for cidr in ingress_cidrs)
        for group in of_type(raw, "AWS::EC2::SecurityGroup").values():
            for rule in group["Properties"].get("SecurityGroupIngress", []):
                assert rule.get("CidrIp") not in ("0.0.0.0/0",) and rule.get("CidrIpv6") != "::/0", text


def test_isolated_variant_has_no_internet_path_and_uses_three_named_azs(variant_app):
    raw = variant_app.deployment
    assert not of_type(raw, "AWS::EC2::NatGateway")
    assert not of_type(raw, "AWS::EC2::InternetGateway")
    subnets = of_type(raw, "AWS::EC2::Subnet").values()
    assert sorted(s["Properties"]["AvailabilityZone"] for s in subnets) == ["eu-south-1a", "eu-south-1b", "eu-south-1c"]
    variant_app.deployment_template.has_resource_properties("AWS::EC2::Subnet", {
        "Tags": Match.array_with([{"Key": "aws-cdk:subnet-type", "Value": "Isolated"}])})
