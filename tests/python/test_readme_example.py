# The pytest example without the package, from docs/testing.md: one sqsim per session, a clean
# slate per test, and time that passes without sleeping.
import json
import os
import subprocess
import urllib.request

import boto3
import pytest


@pytest.fixture(scope="session")
def sqsim():
    proc = subprocess.Popen(
        [os.environ.get("SQSIM_BIN", "sqsim"), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    endpoint = proc.stdout.readline().split()[-1]  # "sqsim listening on http://127.0.0.1:PORT"
    yield endpoint
    proc.terminate()
    proc.wait()


def admin(endpoint, path, body):
    req = urllib.request.Request(f"{endpoint}/_sqsim/{path}", data=json.dumps(body).encode(), method="POST")
    return json.load(urllib.request.urlopen(req))


@pytest.fixture
def sqs(sqsim):
    admin(sqsim, "reset", {})  # every test starts from an empty server
    return boto3.client(
        "sqs",
        endpoint_url=sqsim,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def test_a_message_comes_back_after_its_visibility_timeout(sqs, sqsim):
    url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="hello")
    first = sqs.receive_message(QueueUrl=url, VisibilityTimeout=60)["Messages"][0]
    assert "Messages" not in sqs.receive_message(QueueUrl=url)

    admin(sqsim, "clock", {"advance_seconds": 60})  # no sleep

    again = sqs.receive_message(QueueUrl=url)["Messages"][0]
    assert again["MessageId"] == first["MessageId"]
