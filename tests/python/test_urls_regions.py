"""Queue URL styles clients echo back, regions, and FIFO queue attributes."""

import uuid

import boto3
import pytest

from sqsim_helpers import ACCOUNT, expect_error, queue_attrs, receive_one


def test_aws_and_localstack_style_urls_resolve(sqs, queue_factory):
    name = "styles-" + uuid.uuid4().hex[:10]
    queue_factory(name)
    for url in (
        f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/{name}",
        f"https://queue.amazonaws.com/{ACCOUNT}/{name}",
        f"http://localhost:4566/{ACCOUNT}/{name}",
        f"http://sqs.us-east-1.localhost.localstack.cloud:4566/{ACCOUNT}/{name}",
    ):
        sqs.send_message(QueueUrl=url, MessageBody=url)
        assert receive_one(sqs, url)["Body"] == url


def test_url_for_another_region_does_not_resolve(sqs, queue_factory):
    name = "region-" + uuid.uuid4().hex[:10]
    queue_factory(name)
    expect_error(
        sqs.send_message,
        "AWS.SimpleQueueService.NonExistentQueue",
        QueueUrl=f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/{name}",
        MessageBody="x",
    )


def test_regions_are_separate_namespaces(sqs, endpoint, request):
    west = boto3.client(
        "sqs",
        endpoint_url=endpoint,
        region_name="eu-west-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    name = "two-regions-" + uuid.uuid4().hex[:10]
    east_url = sqs.create_queue(QueueName=name, Attributes={"DelaySeconds": "1"})["QueueUrl"]
    request.addfinalizer(lambda: sqs.delete_queue(QueueUrl=east_url))
    west_url = west.create_queue(QueueName=name, Attributes={"DelaySeconds": "2"})["QueueUrl"]
    request.addfinalizer(lambda: west.delete_queue(QueueUrl=west_url))
    east_attrs = queue_attrs(sqs, east_url, "DelaySeconds", "QueueArn")
    west_attrs = queue_attrs(west, west_url, "DelaySeconds", "QueueArn")
    assert east_attrs == {
        "DelaySeconds": "1",
        "QueueArn": f"arn:aws:sqs:us-east-1:{ACCOUNT}:{name}",
    }
    assert west_attrs == {
        "DelaySeconds": "2",
        "QueueArn": f"arn:aws:sqs:eu-west-1:{ACCOUNT}:{name}",
    }
    assert west.list_queues(QueueNamePrefix=name)["QueueUrls"] == [west_url]


# --- FIFO queue attributes (queue-level only) -------------------------------------------


def test_fifo_queue_attributes(sqs, queue_factory):
    name = "attrs-" + uuid.uuid4().hex[:10] + ".fifo"
    url = queue_factory(name, Attributes={"FifoQueue": "true"})
    assert url.endswith("/" + name)
    attrs = queue_attrs(sqs, url)
    assert set(attrs) == {
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesDelayed",
        "ApproximateNumberOfMessagesNotVisible",
        "CreatedTimestamp",
        "DelaySeconds",
        "LastModifiedTimestamp",
        "MaximumMessageSize",
        "MessageRetentionPeriod",
        "QueueArn",
        "ReceiveMessageWaitTimeSeconds",
        "SqsManagedSseEnabled",
        "VisibilityTimeout",
        "FifoQueue",
        "ContentBasedDeduplication",
        "DeduplicationScope",
        "FifoThroughputLimit",
    }
    assert attrs["FifoQueue"] == "true"
    assert attrs["ContentBasedDeduplication"] == "false"
    assert attrs["DeduplicationScope"] == "queue"
    assert attrs["FifoThroughputLimit"] == "perQueue"
    # FifoQueue=true may be repeated; changing the type may not.
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoQueue": "true"})
    expect_error(
        sqs.set_queue_attributes,
        "InvalidAttributeValue",
        QueueUrl=url,
        Attributes={"FifoQueue": "false"},
    )
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"ContentBasedDeduplication": "true"})
    assert queue_attrs(sqs, url, "ContentBasedDeduplication") == {
        "ContentBasedDeduplication": "true"
    }


def test_fifo_name_may_be_80_characters(sqs, queue_factory):
    name = uuid.uuid4().hex[:12] + "x" * 63 + ".fifo"
    assert len(name) == 80
    url = queue_factory(name, Attributes={"FifoQueue": "true"})
    assert url.endswith("/" + name)


@pytest.mark.parametrize("bad", ["has space.fifo", ".fifo", "x" * 76 + ".fifo"])
def test_fifo_queue_invalid_names(sqs, bad):
    expect_error(
        sqs.create_queue, "InvalidParameterValue", QueueName=bad, Attributes={"FifoQueue": "true"}
    )


def test_a_host_header_without_a_port_still_gets_usable_queue_urls(sqs, endpoint, request):
    """The Ruby SDK v1 sends `Host: 127.0.0.1` (no port); a queue URL built from it alone
    would reach nothing. sqsim fills in the port the request arrived on."""
    import http.client
    import json
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint)
    name = "hostless-" + uuid.uuid4().hex[:10]
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    conn.putrequest("POST", "/", skip_host=True)
    conn.putheader("Host", parts.hostname)
    conn.putheader("Content-Type", "application/x-amz-json-1.0")
    conn.putheader("X-Amz-Target", "AmazonSQS.CreateQueue")
    body = json.dumps({"QueueName": name}).encode()
    conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body)
    reply = conn.getresponse()
    assert reply.status == 200
    url = json.loads(reply.read())["QueueUrl"]
    request.addfinalizer(lambda: sqs.delete_queue(QueueUrl=url))
    assert url == f"http://{parts.hostname}:{parts.port}/{ACCOUNT}/{name}"
    # And another client can use it as it is.
    sqs.send_message(QueueUrl=url, MessageBody="reached")
    assert receive_one(sqs, url)["Body"] == "reached"
