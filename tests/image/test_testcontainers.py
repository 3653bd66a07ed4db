# sqsim as a Testcontainers container (Python's DockerContainer, the GenericContainer of the
# Java and Node libraries): started for the test, waited on through its health endpoint.
import boto3
import pytest
from testcontainers.core.container import DockerContainer
from testcontainers.core.wait_strategies import HttpWaitStrategy


@pytest.mark.usefixtures("docker_api")
def test_a_queue_in_a_testcontainer():
    sqsim = (
        DockerContainer("localhost/sqsim:latest")
        .with_exposed_ports(9324)
        .waiting_for(HttpWaitStrategy(9324, "/_sqsim/health"))
    )
    with sqsim:
        endpoint = f"http://{sqsim.get_container_host_ip()}:{sqsim.get_exposed_port(9324)}"
        sqs = boto3.client(
            "sqs",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
        url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="hello")
        assert sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "hello"
