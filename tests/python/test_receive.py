"""ReceiveMessage: counts, attribute filters, system attributes and long polling."""

import threading
import time

import pytest

from sqsim_helpers import (
    ACCOUNT,
    expect_error,
    md5_of_attributes,
    only_protocol,
    receive,
    receive_one,
)


def send_n(sqs, url, n, prefix="m"):
    for start in range(0, n, 10):
        batch = [
            {"Id": f"i{i}", "MessageBody": f"{prefix}{i}"} for i in range(start, min(n, start + 10))
        ]
        assert len(sqs.send_message_batch(QueueUrl=url, Entries=batch)["Successful"]) == len(batch)


def test_empty_queue_has_no_messages_key(sqs, queue):
    resp = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=0)
    assert "Messages" not in resp
    assert resp["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_default_max_is_one(sqs, queue):
    send_n(sqs, queue, 3)
    assert len(receive(sqs, queue)) == 1


def test_max_number_of_messages(sqs, queue):
    send_n(sqs, queue, 15)
    first = receive(sqs, queue, MaxNumberOfMessages=10)
    assert len(first) == 10
    second = receive(sqs, queue, MaxNumberOfMessages=10)
    assert len(second) == 5
    bodies = [m["Body"] for m in first + second]
    assert sorted(bodies) == sorted(f"m{i}" for i in range(15))
    assert receive(sqs, queue, MaxNumberOfMessages=10) == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"MaxNumberOfMessages": 0},
        {"MaxNumberOfMessages": 11},
        {"WaitTimeSeconds": 21},
        {"WaitTimeSeconds": -1},
        {"VisibilityTimeout": 43201},
        {"VisibilityTimeout": -1},
    ],
    ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items()),
)
def test_parameter_ranges(sqs, queue, kwargs):
    err = expect_error(sqs.receive_message, "InvalidParameterValue", QueueUrl=queue, **kwargs)
    name = next(iter(kwargs))
    assert name in err.response["Error"]["Message"]


def test_max_number_of_messages_error_text(sqs, queue):
    err = expect_error(
        sqs.receive_message, "InvalidParameterValue", QueueUrl=queue, MaxNumberOfMessages=11
    )
    assert err.response["Error"]["Message"] == (
        "Value 11 for parameter MaxNumberOfMessages is invalid. "
        "Reason: Must be between 1 and 10, if provided."
    )


def test_each_receive_gets_a_new_handle(sqs, queue):
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    first = receive_one(sqs, queue, VisibilityTimeout=0)
    second = receive_one(sqs, queue, VisibilityTimeout=0)
    assert first["MessageId"] == second["MessageId"]
    assert first["ReceiptHandle"] != second["ReceiptHandle"]


def test_one_message_is_returned_once_per_receive(sqs, queue):
    sqs.send_message(QueueUrl=queue, MessageBody="only")
    got = receive(sqs, queue, MaxNumberOfMessages=10, VisibilityTimeout=0)
    assert [m["Body"] for m in got] == ["only"]


def test_concurrent_receivers_never_share_a_message(sqs, make_client, queue):
    send_n(sqs, queue, 40)
    seen = []
    lock = threading.Lock()
    errors = []

    def consume():
        client = make_client()
        try:
            while True:
                got = receive(client, queue, MaxNumberOfMessages=3, VisibilityTimeout=600)
                if not got:
                    return
                with lock:
                    seen.extend(m["MessageId"] for m in got)
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=consume) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(seen) == 40
    assert len(set(seen)) == 40


# --- message attribute filters -----------------------------------------------------------

FILTER_ATTRS = {
    "General": {"DataType": "String", "StringValue": "Kenobi"},
    "Hello": {"DataType": "String", "StringValue": "There"},
    "Help.Me": {"DataType": "String", "StringValue": "Me"},
}


@pytest.mark.parametrize(
    "names,expected,md5",
    [
        (["All"], {"General", "Hello", "Help.Me"}, "4c360f3fdafd970e05fae2f149d997f5"),
        ([".*"], {"General", "Hello", "Help.Me"}, "4c360f3fdafd970e05fae2f149d997f5"),
        (["*"], {"General", "Hello", "Help.Me"}, "4c360f3fdafd970e05fae2f149d997f5"),
        (["General", "Hello"], {"General", "Hello"}, "fca026605781cb4126a1e9044df24232"),
        (["Hel.*"], {"Hello", "Help.Me"}, "83fee93c1bcd8b9a5a923ffacdc636c7"),
        (["Hello"], {"Hello"}, "a311262e065454b75da111d535b8dacd"),
        (["Hello", "Nope"], {"Hello"}, "a311262e065454b75da111d535b8dacd"),
        (["Nope"], set(), None),
        (["hello"], set(), None),
        (["AWS.Foo", "..bar"], set(), None),
        (None, set(), None),
    ],
    ids=lambda v: repr(v),
)
def test_message_attribute_filters(sqs, queue, names, expected, md5):
    sqs.send_message(QueueUrl=queue, MessageBody="filters", MessageAttributes=FILTER_ATTRS)
    kwargs = {} if names is None else {"MessageAttributeNames": names}
    msg = receive_one(sqs, queue, **kwargs)
    if not expected:
        assert "MessageAttributes" not in msg
        assert "MD5OfMessageAttributes" not in msg
        return
    assert set(msg["MessageAttributes"]) == expected
    assert msg["MD5OfMessageAttributes"] == md5
    assert md5_of_attributes(msg["MessageAttributes"]) == md5


def test_message_attribute_names_empty_list(sqs, queue):
    # botocore 1.34.89 (query) sends an empty list as a bare `MessageAttributeNames=`.
    sqs.send_message(QueueUrl=queue, MessageBody="x", MessageAttributes=FILTER_ATTRS)
    msg = receive_one(sqs, queue, MessageAttributeNames=[])
    assert "MessageAttributes" not in msg


# --- system attributes -------------------------------------------------------------------


def test_system_attributes_all(sqs, queue, clock):
    sent_before = clock.now_ms()
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    msg = receive_one(sqs, queue, AttributeNames=["All"], VisibilityTimeout=0)
    attrs = msg["Attributes"]
    assert set(attrs) == {
        "SenderId",
        "SentTimestamp",
        "ApproximateReceiveCount",
        "ApproximateFirstReceiveTimestamp",
    }
    assert attrs["SenderId"] == ACCOUNT
    assert attrs["ApproximateReceiveCount"] == "1"
    sent = int(attrs["SentTimestamp"])
    first = int(attrs["ApproximateFirstReceiveTimestamp"])
    # Epoch milliseconds on the server clock.
    assert sent_before - 1000 <= sent <= clock.now_ms()
    assert sent <= first <= clock.now_ms()
    clock.advance(2)
    again = receive_one(sqs, queue, AttributeNames=["All"], VisibilityTimeout=0)["Attributes"]
    assert again["ApproximateReceiveCount"] == "2"
    assert again["ApproximateFirstReceiveTimestamp"] == attrs["ApproximateFirstReceiveTimestamp"]
    assert again["SentTimestamp"] == attrs["SentTimestamp"]


def test_system_attributes_by_name(sqs, queue):
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    msg = receive_one(sqs, queue, AttributeNames=["SenderId"], VisibilityTimeout=0)
    assert msg["Attributes"] == {"SenderId": ACCOUNT}
    # A FIFO-only name on a standard queue is simply not returned.
    msg = receive_one(
        sqs, queue, AttributeNames=["SenderId", "SequenceNumber"], VisibilityTimeout=0
    )
    assert msg["Attributes"] == {"SenderId": ACCOUNT}
    msg = receive_one(
        sqs,
        queue,
        AttributeNames=["ApproximateReceiveCount", "SentTimestamp"],
        VisibilityTimeout=0,
    )
    assert set(msg["Attributes"]) == {"ApproximateReceiveCount", "SentTimestamp"}
    assert msg["Attributes"]["ApproximateReceiveCount"] == "3"


def test_no_system_attributes_requested(sqs, queue):
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    msg = receive_one(sqs, queue)
    assert "Attributes" not in msg


@only_protocol("json", "the query pin (botocore 1.34.89) has no MessageSystemAttributeNames")
def test_message_system_attribute_names(sqs, queue):
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    msg = receive_one(sqs, queue, MessageSystemAttributeNames=["All"], VisibilityTimeout=0)
    assert {"SenderId", "SentTimestamp", "ApproximateReceiveCount"} <= set(msg["Attributes"])
    msg = receive_one(
        sqs, queue, MessageSystemAttributeNames=["ApproximateReceiveCount"], VisibilityTimeout=0
    )
    assert msg["Attributes"] == {"ApproximateReceiveCount": "2"}
    # Both lists together: the union.
    msg = receive_one(
        sqs,
        queue,
        MessageSystemAttributeNames=["SenderId"],
        AttributeNames=["SentTimestamp"],
        VisibilityTimeout=0,
    )
    assert set(msg["Attributes"]) == {"SenderId", "SentTimestamp"}


# --- long polling ------------------------------------------------------------------------


def test_long_poll_returns_when_a_message_arrives(sqs, make_client, queue):
    sender = make_client()

    def send_later():
        time.sleep(1.0)
        sender.send_message(QueueUrl=queue, MessageBody="wake up")

    t = threading.Thread(target=send_later)
    start = time.monotonic()
    t.start()
    try:
        got = receive(sqs, queue, WaitTimeSeconds=15, MaxNumberOfMessages=10)
    finally:
        t.join()
    elapsed = time.monotonic() - start
    assert [m["Body"] for m in got] == ["wake up"]
    assert 0.8 <= elapsed < 5, elapsed


def test_long_poll_returns_at_once_when_messages_are_there(sqs, queue):
    sqs.send_message(QueueUrl=queue, MessageBody="ready")
    start = time.monotonic()
    got = receive(sqs, queue, WaitTimeSeconds=10, MaxNumberOfMessages=10)
    assert [m["Body"] for m in got] == ["ready"]
    # It does not wait to fill MaxNumberOfMessages.
    assert time.monotonic() - start < 2


def test_long_poll_times_out_empty(sqs, queue):
    start = time.monotonic()
    resp = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=1)
    elapsed = time.monotonic() - start
    assert "Messages" not in resp
    assert 0.9 <= elapsed < 4, elapsed


def test_queue_wait_time_is_the_default(sqs, make_client, queue_factory):
    url = queue_factory(Attributes={"ReceiveMessageWaitTimeSeconds": "15"})
    sender = make_client()
    t = threading.Timer(1.0, lambda: sender.send_message(QueueUrl=url, MessageBody="late"))
    start = time.monotonic()
    t.start()
    try:
        # No WaitTimeSeconds: the queue's 15 s applies, so the late message is caught.
        got = sqs.receive_message(QueueUrl=url).get("Messages", [])
    finally:
        t.join()
    assert [m["Body"] for m in got] == ["late"]
    assert 0.8 <= time.monotonic() - start < 5


def test_long_poll_wakes_when_a_message_becomes_visible(sqs, queue, clock):
    sqs.send_message(QueueUrl=queue, MessageBody="in flight")
    assert len(receive(sqs, queue, VisibilityTimeout=600)) == 1

    def advance_later():
        time.sleep(1.0)
        clock.advance(600)

    t = threading.Thread(target=advance_later)
    start = time.monotonic()
    t.start()
    try:
        got = receive(sqs, queue, WaitTimeSeconds=15)
    finally:
        t.join()
    assert [m["Body"] for m in got] == ["in flight"]
    assert time.monotonic() - start < 5


def test_long_poll_wakes_on_change_visibility_zero(sqs, make_client, queue):
    other = make_client()
    sqs.send_message(QueueUrl=queue, MessageBody="released")
    handle = receive_one(sqs, queue, VisibilityTimeout=600)["ReceiptHandle"]
    t = threading.Timer(
        1.0,
        lambda: other.change_message_visibility(
            QueueUrl=queue, ReceiptHandle=handle, VisibilityTimeout=0
        ),
    )
    start = time.monotonic()
    t.start()
    try:
        got = receive(sqs, queue, WaitTimeSeconds=15)
    finally:
        t.join()
    assert [m["Body"] for m in got] == ["released"]
    assert time.monotonic() - start < 5


def test_long_poll_wakes_when_a_delay_ends(sqs, queue):
    # Real time, no clock advance: the poll must wake at the delay's deadline by itself.
    sqs.send_message(QueueUrl=queue, MessageBody="delayed", DelaySeconds=2)
    start = time.monotonic()
    got = receive(sqs, queue, WaitTimeSeconds=15)
    elapsed = time.monotonic() - start
    assert [m["Body"] for m in got] == ["delayed"]
    assert 1.5 <= elapsed < 6, elapsed
