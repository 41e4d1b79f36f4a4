"""Network: a private VPC for training, its endpoints, flow logs and security groups.

Nothing here gets a public IP. Notebook, jobs and file systems live in the private subnets;
the public subnets exist only to hold NAT gateways and disappear when `nat_gateways` is 0.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from stacks.config import DeploymentConfig

PRIVATE_SUBNETS = "private"
EFS_PORT = ec2.Port.tcp(2049)
# Lustre: 988 and 1018-1023, both ways between clients and servers and among the servers (FSx for
# Lustre user guide, "File system access control with Amazon VPC"; docs/aws-rules.md).
LUSTRE_PORTS = (ec2.Port.tcp(988), ec2.Port.tcp_range(1018, 1023))
HTTPS = ec2.Port.tcp(443)
RETENTION = {
    30: logs.RetentionDays.ONE_MONTH, 90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS, 365: logs.RetentionDays.ONE_YEAR,
    731: logs.RetentionDays.TWO_YEARS, 1827: logs.RetentionDays.FIVE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}

# Interface endpoints that a notebook or job in an isolated subnet needs to reach AWS APIs.
INTERFACE_ENDPOINTS = {
    "SageMakerApi": ec2.InterfaceVpcEndpointAwsService.SAGEMAKER_API,
    "SageMakerRuntime": ec2.InterfaceVpcEndpointAwsService.SAGEMAKER_RUNTIME,
    "Sts": ec2.InterfaceVpcEndpointAwsService.STS,
    "CloudWatchLogs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    "EcrApi": ec2.InterfaceVpcEndpointAwsService.ECR,
    "EcrDocker": ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER,
    "Ssm": ec2.InterfaceVpcEndpointAwsService.SSM,
}
# Without NAT (nat_gateways=0) the notebook's data preparation must reach these APIs too: the
# DataSync task, the FSx import status, CloudWatch metrics of jobs, the CodeArtifact mirror of
# PyPI from which the notebook installs the SageMaker SDK (stacks/notebook.py), and Application
# Auto Scaling, which the deploy path calls to scale an endpoint (the endpoint itself is invoked
# through SageMakerRuntime above; docs/aws-rules.md VPC-1, VPC-2).
ISOLATED_INTERFACE_ENDPOINTS = {
    "DataSync": ec2.InterfaceVpcEndpointAwsService.DATASYNC,
    "Fsx": ec2.InterfaceVpcEndpointAwsService.FSX,
    "CloudWatchMonitoring": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_MONITORING,
    "CodeArtifactApi": ec2.InterfaceVpcEndpointAwsService.CODEARTIFACT_API,
    "CodeArtifactRepositories": ec2.InterfaceVpcEndpointAwsService.CODEARTIFACT_REPOSITORIES,
    "ApplicationAutoScaling": ec2.InterfaceVpcEndpointAwsService.APPLICATION_AUTOSCALING,
}


class Network(Construct):
    """VPC, S3 gateway and interface endpoints, flow logs, and the security groups."""

    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig,
                 key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        private_type = (ec2.SubnetType.PRIVATE_WITH_EGRESS if config.nat_gateways
                        else ec2.SubnetType.PRIVATE_ISOLATED)
        subnets = [ec2.SubnetConfiguration(name=PRIVATE_SUBNETS, subnet_type=private_type)]
        if config.nat_gateways:
            subnets.insert(0, ec2.SubnetConfiguration(
                name="nat", subnet_type=ec2.SubnetType.PUBLIC, map_public_ip_on_launch=False))

        self.vpc = ec2.Vpc(
            self, "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(config.vpc_cidr),
            availability_zones=list(config.availability_zones) or None,
            max_azs=None if config.availability_zones else config.max_azs,
            nat_gateways=config.nat_gateways,
            subnet_configuration=subnets,
            restrict_default_security_group=True,
        )
        self.private_subnets = ec2.SubnetSelection(subnet_group_name=PRIVATE_SUBNETS)
        # The notebook, jobs, mount targets and DataSync all live in these subnets.
        self.private = self.vpc.select_subnets(subnet_group_name=PRIVATE_SUBNETS)

        flow_log_group = logs.LogGroup(
            self, "FlowLogs",
            retention=RETENTION[config.flow_log_retention_days],
            encryption_key=key,
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.vpc.add_flow_log(
            "FlowLog",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_log_group),
            traffic_type=ec2.FlowLogTrafficType.ALL,
        )

        # Jobs: every host of a multi-host job talks to every other (sshd for mpirun, Open MPI's
        # TCP ports, NCCL sockets, EFA), on ports chosen at run time, so the group admits all
        # traffic from itself and nothing from anywhere else.
        self.training_sg = self._group(
            "TrainingSecurityGroup",
            "Training jobs: all traffic between hosts of a job (MPI, NCCL)")
        self.training_sg.add_ingress_rule(self.training_sg, ec2.Port.all_traffic(),
                                          "MPI and NCCL between the hosts of a job")
        self.notebook_sg = self._group("NotebookSecurityGroup",
                                       "SageMaker notebook instance: no inbound")
        # DataSync's network interfaces that write the S3 copy into EFS.
        self.datasync_sg = self._group("DataSyncSecurityGroup",
                                       "DataSync S3 to EFS copy: no inbound")
        clients = (self.training_sg, self.notebook_sg)

        self.efs_sg = self._group("EfsSecurityGroup",
                                  "EFS mount targets: NFS from training, notebook and DataSync",
                                  allow_all_outbound=False)
        for client in (*clients, self.datasync_sg):
            self.efs_sg.add_ingress_rule(client, EFS_PORT, f"NFS from {client.node.id}")

        self.fsx_sg = self._group("FsxSecurityGroup",
                                  "FSx for Lustre: Lustre from training and notebook",
                                  allow_all_outbound=False)
        for port in LUSTRE_PORTS:
            # The group has no allow-all outbound, so every Lustre flow is opened both ways: the
            # servers among themselves (the FSx construct adds only the self-referencing ingress)
            # and between servers and clients, whose groups must also admit the servers.
            self.fsx_sg.add_egress_rule(self.fsx_sg, port, "Lustre among the file servers")
            for client in clients:
                self.fsx_sg.add_ingress_rule(client, port, f"Lustre from {client.node.id}")
                self.fsx_sg.connections.allow_to(client, port,
                                                 f"Lustre to and from {client.node.id}")

        # Training containers read S3 through the gateway endpoint (no NAT needed for data).
        self.vpc.add_gateway_endpoint("S3", service=ec2.GatewayVpcEndpointAwsService.S3,
                                      subnets=[self.private_subnets])
        self.endpoint_sg = self._group("EndpointSecurityGroup",
                                       "Interface endpoints: HTTPS from training and notebook",
                                       allow_all_outbound=False)
        for client in clients:
            self.endpoint_sg.add_ingress_rule(client, HTTPS, f"HTTPS from {client.node.id}")
        endpoints = dict(INTERFACE_ENDPOINTS)
        if not config.nat_gateways:
            endpoints.update(ISOLATED_INTERFACE_ENDPOINTS)
        for name, service in endpoints.items():
            self.vpc.add_interface_endpoint(
                name, service=service, subnets=self.private_subnets,
                security_groups=[self.endpoint_sg], private_dns_enabled=True, open=False,
            )

    def _group(self, construct_id: str, description: str,
               allow_all_outbound: bool = True) -> ec2.SecurityGroup:
        return ec2.SecurityGroup(self, construct_id, vpc=self.vpc, description=description,
                                 allow_all_outbound=allow_all_outbound)
