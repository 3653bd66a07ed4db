# The realism example from docs/realism.md: a consumer that drains a queue with one short poll
# passes against sqsim's exact default and fails under --realism aws, as it would against
# SQS; polling until a long poll comes back empty works under both.
import json
import os
import subprocess
import urllib.request

import boto3
import pytest

BODIES = [f"order-{i}" for i in range(10)]


@pytest.fixture(params=["exact", "realism"])
def sqsim(request):
    flags = ["--realism", "aws", "--seed", "7"] if request.param == "realism" else []
    proc = subprocess.Popen(
        [os.environ.get("SQSIM_BIN", "sqsim"), "--port", "0", *flags],
        stdout=subprocess.PIPE,
        text=True,
    )
    endpoint = proc.stdout.readline().split()[-1]  # "sqsim listening on http://127.0.0.1:PORT"
    yield request.param, endpoint
    proc.terminate()
    proc.wait()


def queue_with_orders(endpoint):
    sqs = boto3.client(
        "sqs",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    url = sqs.create_queue(QueueName="orders")["QueueUrl"]
    # SQS asks for a second between creating a queue and using it; move the clock.
    clock = urllib.request.Request(f"{endpoint}/_sqsim/clock", method="POST",
                                   data=json.dumps({"advance_seconds": 1}).encode())
    urllib.request.urlopen(clock)
    for body in BODIES:
        sqs.send_message(QueueUrl=url, MessageBody=body)
    return sqs, url


def drain_with_one_short_poll(sqs, url):  # the bug
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    return [m["Body"] for m in got.get("Messages", [])]


def drain_until_empty(sqs, url):  # the fix
    bodies = []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        if not got.get("Messages"):
            return bodies
        bodies += [m["Body"] for m in got["Messages"]]


def test_one_short_poll_misses_messages_under_realism(sqsim):
    mode, endpoint = sqsim
    sqs, url = queue_with_orders(endpoint)
    drained = drain_with_one_short_poll(sqs, url)
    if mode == "exact":
        assert drained == BODIES  # passes against an exact emulator...
    else:
        assert len(drained) < len(BODIES)  # ...and misses messages, as on SQS


def test_polling_until_empty_gets_everything(sqsim):
    _, endpoint = sqsim
    sqs, url = queue_with_orders(endpoint)
    assert sorted(drain_until_empty(sqs, url)) == sorted(BODIES)
