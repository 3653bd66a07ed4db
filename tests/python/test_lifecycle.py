"""PurgeQueue, delays and retention, driven by the admin clock."""

import pytest

from sqsim_helpers import check_error, counts, expect_error, queue_attrs, receive, receive_one


@pytest.fixture
def frozen(clock):
    clock.freeze()
    return clock


# --- PurgeQueue ------------------------------------------------------------------------------


def test_purge_removes_visible_in_flight_and_delayed(sqs, queue):
    for i in range(3):
        sqs.send_message(QueueUrl=queue, MessageBody=f"v{i}")
    sqs.send_message(QueueUrl=queue, MessageBody="delayed", DelaySeconds=300)
    handle = receive_one(sqs, queue, VisibilityTimeout=300)["ReceiptHandle"]
    assert counts(sqs, queue) == (2, 1, 1)
    resp = sqs.purge_queue(QueueUrl=queue)
    assert resp["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert counts(sqs, queue) == (0, 0, 0)
    assert receive(sqs, queue, MaxNumberOfMessages=10) == []
    # Deleting a purged message's handle is harmless.
    sqs.delete_message(QueueUrl=queue, ReceiptHandle=handle)


def test_messages_sent_after_a_purge_are_kept(sqs, queue):
    sqs.send_message(QueueUrl=queue, MessageBody="before")
    sqs.purge_queue(QueueUrl=queue)
    sqs.send_message(QueueUrl=queue, MessageBody="after")
    assert [m["Body"] for m in receive(sqs, queue, MaxNumberOfMessages=10)] == ["after"]


def test_purge_in_progress(sqs, queue, frozen):
    sqs.purge_queue(QueueUrl=queue)
    with pytest.raises(sqs.exceptions.PurgeQueueInProgress) as info:
        sqs.purge_queue(QueueUrl=queue)
    check_error(info.value, "AWS.SimpleQueueService.PurgeQueueInProgress", 403)
    name = queue.rsplit("/", 1)[1]
    assert name in info.value.response["Error"]["Message"]
    frozen.advance(59)
    expect_error(
        sqs.purge_queue, "AWS.SimpleQueueService.PurgeQueueInProgress", 403, QueueUrl=queue
    )
    frozen.advance(1)
    sqs.purge_queue(QueueUrl=queue)


def test_purge_cooldown_is_per_queue(sqs, queue_factory):
    a = queue_factory()
    b = queue_factory()
    sqs.purge_queue(QueueUrl=a)
    sqs.purge_queue(QueueUrl=b)


# --- delays ----------------------------------------------------------------------------------


def test_per_message_delay(sqs, queue, frozen):
    sqs.send_message(QueueUrl=queue, MessageBody="later", DelaySeconds=30)
    assert counts(sqs, queue) == (0, 0, 1)
    assert receive(sqs, queue) == []
    frozen.advance(29)
    assert receive(sqs, queue) == []
    frozen.advance(1)
    assert counts(sqs, queue) == (1, 0, 0)
    assert receive_one(sqs, queue)["Body"] == "later"


def test_queue_delay(sqs, queue_factory, frozen):
    url = queue_factory(Attributes={"DelaySeconds": "10"})
    sqs.send_message(QueueUrl=url, MessageBody="queue-delayed")
    assert counts(sqs, url) == (0, 0, 1)
    frozen.advance(9)
    assert receive(sqs, url) == []
    frozen.advance(1)
    assert receive_one(sqs, url)["Body"] == "queue-delayed"


def test_per_message_delay_overrides_queue_delay(sqs, queue_factory, frozen):
    url = queue_factory(Attributes={"DelaySeconds": "60"})
    sqs.send_message(QueueUrl=url, MessageBody="now", DelaySeconds=0)
    sqs.send_message(QueueUrl=url, MessageBody="soon", DelaySeconds=5)
    assert [m["Body"] for m in receive(sqs, url, MaxNumberOfMessages=10)] == ["now"]
    frozen.advance(5)
    assert [m["Body"] for m in receive(sqs, url, MaxNumberOfMessages=10)] == ["soon"]


def test_changing_queue_delay_does_not_affect_queued_messages(sqs, queue_factory, frozen):
    url = queue_factory(Attributes={"DelaySeconds": "100"})
    sqs.send_message(QueueUrl=url, MessageBody="queued")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "0"})
    assert receive(sqs, url) == []
    frozen.advance(100)
    receive_one(sqs, url)


def test_batch_entry_delay(sqs, queue, frozen):
    sqs.send_message_batch(
        QueueUrl=queue,
        Entries=[
            {"Id": "a", "MessageBody": "a"},
            {"Id": "b", "MessageBody": "b", "DelaySeconds": 20},
        ],
    )
    assert [m["Body"] for m in receive(sqs, queue, MaxNumberOfMessages=10)] == ["a"]
    frozen.advance(20)
    assert [m["Body"] for m in receive(sqs, queue, MaxNumberOfMessages=10)] == ["b"]


def test_max_delay(sqs, queue, frozen):
    sqs.send_message(QueueUrl=queue, MessageBody="max", DelaySeconds=900)
    frozen.advance(899)
    assert receive(sqs, queue) == []
    frozen.advance(1)
    receive_one(sqs, queue)


# --- retention -------------------------------------------------------------------------------


def test_retention_expires_messages(sqs, queue_factory, frozen):
    url = queue_factory(Attributes={"MessageRetentionPeriod": "60"})
    sqs.send_message(QueueUrl=url, MessageBody="short-lived")
    frozen.advance(59)
    assert counts(sqs, url) == (1, 0, 0)
    frozen.advance(2)
    assert counts(sqs, url) == (0, 0, 0)
    assert receive(sqs, url) == []


def test_retention_expires_in_flight_messages(sqs, queue_factory, frozen):
    url = queue_factory(Attributes={"MessageRetentionPeriod": "60"})
    sqs.send_message(QueueUrl=url, MessageBody="in flight")
    handle = receive_one(sqs, url, VisibilityTimeout=600)["ReceiptHandle"]
    frozen.advance(61)
    assert counts(sqs, url) == (0, 0, 0)
    frozen.advance(600)
    assert receive(sqs, url) == []
    # Deleting with the old handle still succeeds.
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)


def test_lowering_retention_expires_older_messages(sqs, queue, frozen):
    sqs.send_message(QueueUrl=queue, MessageBody="old")
    frozen.advance(120)
    sqs.send_message(QueueUrl=queue, MessageBody="new")
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={"MessageRetentionPeriod": "60"})
    assert queue_attrs(sqs, queue, "MessageRetentionPeriod") == {"MessageRetentionPeriod": "60"}
    assert [m["Body"] for m in receive(sqs, queue, MaxNumberOfMessages=10)] == ["new"]


def test_default_retention_is_four_days(sqs, queue, frozen):
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    frozen.advance(345_600 - 1)
    assert counts(sqs, queue) == (1, 0, 0)
    frozen.advance(2)
    assert counts(sqs, queue) == (0, 0, 0)
