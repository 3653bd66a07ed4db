"""Visibility timeouts, ChangeMessageVisibility and DeleteMessage, driven by the admin clock."""

import uuid

import pytest

from sqsim_helpers import check_error, counts, expect_error, receive, receive_one


@pytest.fixture
def frozen(clock):
    clock.freeze()
    return clock


def test_receive_visibility_timeout(sqs, queue, frozen):
    sqs.send_message(QueueUrl=queue, MessageBody="vt")
    receive_one(sqs, queue, VisibilityTimeout=10)
    assert receive(sqs, queue) == []
    assert counts(sqs, queue) == (0, 1, 0)
    frozen.advance(9)
    assert receive(sqs, queue) == []
    frozen.advance(1)
    assert counts(sqs, queue) == (1, 0, 0)
    msg = receive_one(sqs, queue, AttributeNames=["ApproximateReceiveCount"])
    assert msg["Body"] == "vt"
    assert msg["Attributes"]["ApproximateReceiveCount"] == "2"


def test_queue_visibility_timeout_is_the_default(sqs, queue_factory, frozen):
    url = queue_factory(Attributes={"VisibilityTimeout": "20"})
    sqs.send_message(QueueUrl=url, MessageBody="x")
    receive_one(sqs, url)
    frozen.advance(19)
    assert receive(sqs, url) == []
    frozen.advance(1)
    # A per-receive value is not remembered: this receive uses the queue's 20 s again.
    receive_one(sqs, url, VisibilityTimeout=100)
    frozen.advance(100)
    receive_one(sqs, url)
    frozen.advance(19)
    assert receive(sqs, url) == []
    frozen.advance(1)
    receive_one(sqs, url)


def test_visibility_timeout_zero_leaves_the_message_visible(sqs, queue):
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    receive_one(sqs, queue, VisibilityTimeout=0)
    assert counts(sqs, queue) == (1, 0, 0)
    receive_one(sqs, queue)


def test_change_visibility_to_zero(sqs, queue, frozen):
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    handle = receive_one(sqs, queue, VisibilityTimeout=300)["ReceiptHandle"]
    resp = sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=handle, VisibilityTimeout=0)
    assert resp["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert receive_one(sqs, queue)["Body"] == "x"


def test_change_visibility_counts_from_now(sqs, queue, frozen):
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    handle = receive_one(sqs, queue, VisibilityTimeout=10)["ReceiptHandle"]
    frozen.advance(5)
    sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=handle, VisibilityTimeout=60)
    frozen.advance(59)  # t = 64: past the original 10 s, before 5 + 60
    assert receive(sqs, queue) == []
    frozen.advance(1)  # t = 65
    assert receive_one(sqs, queue)["Body"] == "x"


def test_change_visibility_shortens(sqs, queue, frozen):
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    handle = receive_one(sqs, queue, VisibilityTimeout=600)["ReceiptHandle"]
    sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=handle, VisibilityTimeout=5)
    frozen.advance(5)
    receive_one(sqs, queue)


def test_change_visibility_twelve_hour_cap(sqs, queue, frozen):
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    handle = receive_one(sqs, queue, VisibilityTimeout=30)["ReceiptHandle"]
    frozen.advance(100)
    err = expect_error(
        sqs.change_message_visibility,
        "InvalidParameterValue",
        QueueUrl=queue,
        ReceiptHandle=handle,
        VisibilityTimeout=43200,
    )
    assert "43200" in err.response["Error"]["Message"]
    expect_error(
        sqs.change_message_visibility,
        "InvalidParameterValue",
        QueueUrl=queue,
        ReceiptHandle=handle,
        VisibilityTimeout=43101,
    )
    # 100 s since the receive + 43100 s = exactly 12 hours: allowed.
    sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=handle, VisibilityTimeout=43100)
    # Extending does not reset the cap.
    frozen.advance(1000)
    expect_error(
        sqs.change_message_visibility,
        "InvalidParameterValue",
        QueueUrl=queue,
        ReceiptHandle=handle,
        VisibilityTimeout=42101,
    )
    sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=handle, VisibilityTimeout=42100)


def test_receive_visibility_may_be_twelve_hours(sqs, queue, frozen):
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    handle = receive_one(sqs, queue, VisibilityTimeout=43200)["ReceiptHandle"]
    frozen.advance(43199)
    assert receive(sqs, queue) == []
    expect_error(
        sqs.change_message_visibility,
        "InvalidParameterValue",
        QueueUrl=queue,
        ReceiptHandle=handle,
        VisibilityTimeout=2,
    )
    frozen.advance(1)
    receive_one(sqs, queue)


@pytest.mark.parametrize("timeout", [-1, 43201])
def test_change_visibility_out_of_range(sqs, queue, timeout):
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    handle = receive_one(sqs, queue)["ReceiptHandle"]
    expect_error(
        sqs.change_message_visibility,
        "InvalidParameterValue",
        QueueUrl=queue,
        ReceiptHandle=handle,
        VisibilityTimeout=timeout,
    )


def test_change_visibility_garbage_handle(sqs, queue):
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid) as info:
        sqs.change_message_visibility(
            QueueUrl=queue, ReceiptHandle="garbage", VisibilityTimeout=10
        )
    check_error(info.value, "ReceiptHandleIsInvalid", 404)


def test_change_visibility_of_a_deleted_message(sqs, queue):
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    handle = receive_one(sqs, queue)["ReceiptHandle"]
    sqs.delete_message(QueueUrl=queue, ReceiptHandle=handle)
    err = expect_error(
        sqs.change_message_visibility,
        "InvalidParameterValue",
        QueueUrl=queue,
        ReceiptHandle=handle,
        VisibilityTimeout=10,
    )
    assert "ReceiptHandle" in err.response["Error"]["Message"]


def test_change_visibility_after_expiry_is_ok(sqs, queue, frozen):
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    handle = receive_one(sqs, queue, VisibilityTimeout=10)["ReceiptHandle"]
    frozen.advance(11)
    resp = sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=handle, VisibilityTimeout=0)
    assert resp["ResponseMetadata"]["HTTPStatusCode"] == 200
    receive_one(sqs, queue)


def test_change_visibility_missing_timeout(make_client, queue):
    raw = make_client(parameter_validation=False)
    raw.send_message(QueueUrl=queue, MessageBody="x")
    handle = receive_one(raw, queue)["ReceiptHandle"]
    err = expect_error(
        raw.change_message_visibility, "MissingParameter", QueueUrl=queue, ReceiptHandle=handle
    )
    assert "VisibilityTimeout" in err.response["Error"]["Message"]


# --- DeleteMessage -------------------------------------------------------------------------


def test_delete_message(sqs, queue, frozen):
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    handle = receive_one(sqs, queue, VisibilityTimeout=5)["ReceiptHandle"]
    resp = sqs.delete_message(QueueUrl=queue, ReceiptHandle=handle)
    assert resp["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert counts(sqs, queue) == (0, 0, 0)
    frozen.advance(10)
    assert receive(sqs, queue) == []


def test_delete_message_twice_succeeds(sqs, queue):
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    handle = receive_one(sqs, queue)["ReceiptHandle"]
    sqs.delete_message(QueueUrl=queue, ReceiptHandle=handle)
    sqs.delete_message(QueueUrl=queue, ReceiptHandle=handle)
    assert counts(sqs, queue) == (0, 0, 0)


def test_delete_with_a_stale_handle(sqs, queue, frozen):
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    old = receive_one(sqs, queue, VisibilityTimeout=5)["ReceiptHandle"]
    frozen.advance(5)
    new = receive_one(sqs, queue, VisibilityTimeout=60)["ReceiptHandle"]
    assert new != old
    # On a standard queue an old handle still deletes the message.
    sqs.delete_message(QueueUrl=queue, ReceiptHandle=old)
    assert counts(sqs, queue) == (0, 0, 0)


def test_delete_with_an_expired_handle(sqs, queue, frozen):
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    handle = receive_one(sqs, queue, VisibilityTimeout=5)["ReceiptHandle"]
    frozen.advance(6)
    sqs.delete_message(QueueUrl=queue, ReceiptHandle=handle)
    assert receive(sqs, queue) == []


def test_delete_garbage_handle(sqs, queue):
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid) as info:
        sqs.delete_message(QueueUrl=queue, ReceiptHandle="garbage")
    check_error(info.value, "ReceiptHandleIsInvalid", 404)
    assert "garbage" in info.value.response["Error"]["Message"]


def test_delete_with_another_queues_handle(sqs, queue_factory):
    a = queue_factory()
    b = queue_factory()
    sqs.send_message(QueueUrl=a, MessageBody="from a")
    handle = receive_one(sqs, a)["ReceiptHandle"]
    expect_error(sqs.delete_message, "ReceiptHandleIsInvalid", 404, QueueUrl=b, ReceiptHandle=handle)
    expect_error(
        sqs.change_message_visibility,
        "ReceiptHandleIsInvalid",
        404,
        QueueUrl=b,
        ReceiptHandle=handle,
        VisibilityTimeout=0,
    )
    assert counts(sqs, a) == (0, 1, 0)


def test_handle_of_a_deleted_and_recreated_queue(sqs, queue_factory, advance):
    name = "recreated-" + uuid.uuid4().hex[:10]
    url = queue_factory(name)
    sqs.send_message(QueueUrl=url, MessageBody="x")
    handle = receive_one(sqs, url)["ReceiptHandle"]
    sqs.delete_queue(QueueUrl=url)
    advance(61)  # past AWS's 60 s QueueDeletedRecently window, should it be enforced
    assert queue_factory(name) == url
    expect_error(sqs.delete_message, "ReceiptHandleIsInvalid", 404, QueueUrl=url, ReceiptHandle=handle)


def test_delete_missing_handle(make_client, queue):
    raw = make_client(parameter_validation=False)
    err = expect_error(raw.delete_message, "MissingParameter", QueueUrl=queue)
    assert "ReceiptHandle" in err.response["Error"]["Message"]
