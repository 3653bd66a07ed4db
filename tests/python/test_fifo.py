"""FIFO queues: creation rules, send-side validation, sequence numbers, deduplication, group
ordering and locking, expired receipt handles, ReceiveRequestAttemptId and the counters.

Behaviour follows the reference (/work/shared/sqs-reference.md) §3.3, §6.2-§6.4, §7.1, §7.4
and §8. Anything that depends on time is driven by the admin clock, never by sleeping.
"""

import hashlib
import threading
import time
import uuid

import pytest
from botocore.exceptions import ClientError

from sqsim_helpers import check_error, counts, expect_error, queue_attrs, receive, receive_one

GROUP_ID_TEXT = (
    "MessageGroupId can only include alphanumeric and punctuation characters. 1 to 128 in length."
)
DEDUP_ID_TEXT = (
    "MessageDeduplicationId can only include alphanumeric and punctuation characters. "
    "1 to 128 in length."
)
NO_DEDUP_TEXT = (
    "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId "
    "provided explicitly"
)
NO_GROUP_TEXT = "The request must contain the parameter MessageGroupId."
ALL_PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"


def message(err):
    return err.response["Error"]["Message"]


def fifo_name():
    return f"fifo-{uuid.uuid4().hex[:16]}.fifo"


@pytest.fixture
def fifo_factory(queue_factory):
    """create(cbd=False, **attributes) -> QueueUrl of a new FIFO queue."""

    def create(cbd=False, **attributes):
        attrs = {"FifoQueue": "true", **{k: str(v) for k, v in attributes.items()}}
        if cbd:
            attrs["ContentBasedDeduplication"] = "true"
        return queue_factory(fifo_name(), Attributes=attrs)

    return create


@pytest.fixture
def fifo(fifo_factory):
    """A FIFO queue with content-based deduplication."""
    return fifo_factory(cbd=True)


@pytest.fixture
def frozen(clock):
    clock.freeze()
    return clock


def send(sqs, url, body, group="g1", dedup=None, **kwargs):
    """SendMessage to a FIFO queue; the dedup id defaults to a fresh one."""
    kwargs.setdefault("MessageDeduplicationId", dedup or uuid.uuid4().hex)
    return sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group, **kwargs)


def bodies(messages):
    return [m["Body"] for m in messages]


def seq(value):
    """A SequenceNumber as an int, after checking its form."""
    assert isinstance(value, str) and value.isdigit(), value
    return int(value)


def assert_entry_rejected(sqs, url, entries, bad_id, code="InvalidParameterValue"):
    """The reference does not say whether a bad FIFO parameter in one entry fails the entry
    or the whole request; either way the entry must not be sent and the code must be `code`."""
    try:
        resp = sqs.send_message_batch(QueueUrl=url, Entries=entries)
    except ClientError as err:
        check_error(err, code)
        return None
    assert bad_id not in [e["Id"] for e in resp.get("Successful", [])], resp
    failed = {e["Id"]: e for e in resp.get("Failed", [])}
    assert bad_id in failed, resp
    assert failed[bad_id]["Code"] == code, failed[bad_id]
    assert failed[bad_id]["SenderFault"] is True, failed[bad_id]
    return failed[bad_id]


# --- creation rules (§2, §3.1-§3.3) ------------------------------------------------------


def test_fifo_name_needs_fifo_queue_attribute(sqs):
    name = fifo_name()
    expect_error(sqs.create_queue, "InvalidParameterValue", QueueName=name)
    expect_error(sqs.get_queue_url, "AWS.SimpleQueueService.NonExistentQueue", QueueName=name)


def test_fifo_queue_attribute_needs_fifo_name(sqs):
    name = f"not-fifo-{uuid.uuid4().hex[:12]}"
    expect_error(
        sqs.create_queue,
        "InvalidParameterValue",
        QueueName=name,
        Attributes={"FifoQueue": "true"},
    )
    expect_error(sqs.get_queue_url, "AWS.SimpleQueueService.NonExistentQueue", QueueName=name)


def test_fifo_queue_attribute_is_case_insensitive(sqs, queue_factory):
    url = queue_factory(fifo_name(), Attributes={"FifoQueue": "True"})
    assert queue_attrs(sqs, url, "FifoQueue") == {"FifoQueue": "true"}


def test_fifo_attributes_defaults_in_all(sqs, fifo_factory):
    attrs = queue_attrs(sqs, fifo_factory())
    assert {
        k: attrs[k]
        for k in (
            "ContentBasedDeduplication",
            "DeduplicationScope",
            "FifoQueue",
            "FifoThroughputLimit",
        )
    } == {
        "ContentBasedDeduplication": "false",
        "DeduplicationScope": "queue",
        "FifoQueue": "true",
        "FifoThroughputLimit": "perQueue",
    }
    # The standard set plus exactly the four FIFO attributes.
    assert len(attrs) == 16, sorted(attrs)


def test_fifo_attributes_as_created(sqs, fifo_factory):
    url = fifo_factory(
        cbd=True, DeduplicationScope="messageGroup", FifoThroughputLimit="perMessageGroupId"
    )
    attrs = queue_attrs(sqs, url)
    assert attrs["ContentBasedDeduplication"] == "true"
    assert attrs["DeduplicationScope"] == "messageGroup"
    assert attrs["FifoQueue"] == "true"
    assert attrs["FifoThroughputLimit"] == "perMessageGroupId"
    # Single names work too.
    assert queue_attrs(sqs, url, "FifoThroughputLimit", "DeduplicationScope") == {
        "FifoThroughputLimit": "perMessageGroupId",
        "DeduplicationScope": "messageGroup",
    }


def test_per_message_group_throughput_needs_message_group_scope(sqs, fifo_factory):
    name = fifo_name()
    expect_error(
        sqs.create_queue,
        "InvalidAttributeValue",
        QueueName=name,
        Attributes={"FifoQueue": "true", "FifoThroughputLimit": "perMessageGroupId"},
    )
    expect_error(
        sqs.create_queue,
        "InvalidAttributeValue",
        QueueName=name,
        Attributes={
            "FifoQueue": "true",
            "FifoThroughputLimit": "perMessageGroupId",
            "DeduplicationScope": "queue",
        },
    )
    expect_error(sqs.get_queue_url, "AWS.SimpleQueueService.NonExistentQueue", QueueName=name)
    # The same rule applies to SetQueueAttributes on a queue-scoped FIFO queue.
    url = fifo_factory()
    expect_error(
        sqs.set_queue_attributes,
        "InvalidAttributeValue",
        QueueUrl=url,
        Attributes={"FifoThroughputLimit": "perMessageGroupId"},
    )
    assert queue_attrs(sqs, url, "FifoThroughputLimit") == {"FifoThroughputLimit": "perQueue"}
    # Both together are fine.
    sqs.set_queue_attributes(
        QueueUrl=url,
        Attributes={
            "DeduplicationScope": "messageGroup",
            "FifoThroughputLimit": "perMessageGroupId",
        },
    )
    assert queue_attrs(sqs, url, "FifoThroughputLimit") == {
        "FifoThroughputLimit": "perMessageGroupId"
    }


def test_fifo_queue_false_on_fifo_queue(sqs, fifo_factory):
    url = fifo_factory()
    err = expect_error(
        sqs.set_queue_attributes,
        "InvalidAttributeValue",
        QueueUrl=url,
        Attributes={"FifoQueue": "false"},
    )
    assert message(err) == (
        "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported."
    )
    assert queue_attrs(sqs, url, "FifoQueue") == {"FifoQueue": "true"}
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoQueue": "true"})


@pytest.mark.parametrize(
    "attr,value", [("DeduplicationScope", "group"), ("FifoThroughputLimit", "perGroup")]
)
def test_fifo_enum_attributes_reject_unknown_values(sqs, attr, value):
    expect_error(
        sqs.create_queue,
        "InvalidAttributeValue",
        QueueName=fifo_name(),
        Attributes={"FifoQueue": "true", attr: value},
    )


# --- send-side rules (§7.1, §8.1) --------------------------------------------------------


def test_send_without_group_id(sqs, fifo):
    err = expect_error(
        sqs.send_message, "MissingParameter", QueueUrl=fifo, MessageBody="x"
    )
    assert message(err) == NO_GROUP_TEXT
    assert counts(sqs, fifo) == (0, 0, 0)


def test_batch_without_group_id_fails_whole_request(sqs, fifo):
    err = expect_error(
        sqs.send_message_batch,
        "InvalidParameterValue",
        QueueUrl=fifo,
        Entries=[
            {"Id": "ok", "MessageBody": "a", "MessageGroupId": "g"},
            {"Id": "nogroup", "MessageBody": "b"},
        ],
    )
    assert message(err) == NO_GROUP_TEXT
    # Not even the valid entry was sent.
    assert counts(sqs, fifo) == (0, 0, 0)


def test_send_without_dedup_id_and_content_based_dedup(sqs, fifo_factory):
    url = fifo_factory()
    err = expect_error(
        sqs.send_message,
        "InvalidParameterValue",
        QueueUrl=url,
        MessageBody="x",
        MessageGroupId="g",
    )
    assert message(err) == NO_DEDUP_TEXT
    assert counts(sqs, url) == (0, 0, 0)


def test_batch_without_dedup_id_fails_whole_request(sqs, fifo_factory):
    url = fifo_factory()
    err = expect_error(
        sqs.send_message_batch,
        "InvalidParameterValue",
        QueueUrl=url,
        Entries=[
            {"Id": "ok", "MessageBody": "a", "MessageGroupId": "g", "MessageDeduplicationId": "d"},
            {"Id": "nodedup", "MessageBody": "b", "MessageGroupId": "g"},
        ],
    )
    assert message(err) == NO_DEDUP_TEXT
    assert counts(sqs, url) == (0, 0, 0)


def test_dedup_id_not_needed_with_content_based_dedup(sqs, fifo):
    sqs.send_message(QueueUrl=fifo, MessageBody="x", MessageGroupId="g")
    resp = sqs.send_message_batch(
        QueueUrl=fifo,
        Entries=[{"Id": "a", "MessageBody": "y", "MessageGroupId": "g"}],
    )
    assert [e["Id"] for e in resp["Successful"]] == ["a"]
    assert counts(sqs, fifo) == (2, 0, 0)


def test_content_based_dedup_can_be_turned_on_later(sqs, fifo_factory):
    url = fifo_factory()
    expect_error(
        sqs.send_message, "InvalidParameterValue", QueueUrl=url, MessageBody="x", MessageGroupId="g"
    )
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"ContentBasedDeduplication": "true"})
    sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g")
    assert counts(sqs, url) == (1, 0, 0)


@pytest.mark.parametrize("delay", [1, 2, 900])
def test_per_message_delay_rejected(sqs, fifo, delay):
    err = expect_error(
        sqs.send_message,
        "InvalidParameterValue",
        QueueUrl=fifo,
        MessageBody="x",
        MessageGroupId="g",
        DelaySeconds=delay,
    )
    assert message(err) == (
        f"Value {delay} for parameter DelaySeconds is invalid. Reason: The request include "
        "parameter that is not valid for this queue type."
    )
    assert counts(sqs, fifo) == (0, 0, 0)


def test_per_message_delay_rejected_in_batch(sqs, fifo):
    entries = [
        {"Id": "zero", "MessageBody": "a", "MessageGroupId": "g", "DelaySeconds": 0},
        {"Id": "late", "MessageBody": "b", "MessageGroupId": "g", "DelaySeconds": 5},
    ]
    failed = assert_entry_rejected(sqs, fifo, entries, "late")
    if failed is not None:  # per-entry failure: the other entry went through, undelayed
        assert bodies(receive(sqs, fifo, MaxNumberOfMessages=10)) == ["a"]
    else:
        assert counts(sqs, fifo) == (0, 0, 0)


def test_delay_zero_accepted_and_queue_delay_still_applies(sqs, fifo_factory, frozen):
    plain = fifo_factory(cbd=True)
    resp = sqs.send_message(QueueUrl=plain, MessageBody="x", MessageGroupId="g", DelaySeconds=0)
    assert resp["ResponseMetadata"]["HTTPStatusCode"] == 200
    resp = sqs.send_message_batch(
        QueueUrl=plain,
        Entries=[{"Id": "a", "MessageBody": "y", "MessageGroupId": "g", "DelaySeconds": 0}],
    )
    assert [e["Id"] for e in resp["Successful"]] == ["a"]
    assert counts(sqs, plain) == (2, 0, 0)

    delayed = fifo_factory(cbd=True, DelaySeconds=10)
    sqs.send_message(QueueUrl=delayed, MessageBody="x", MessageGroupId="g", DelaySeconds=0)
    assert counts(sqs, delayed) == (0, 0, 1)
    assert receive(sqs, delayed) == []
    frozen.advance(10)
    assert receive_one(sqs, delayed)["Body"] == "x"


@pytest.mark.parametrize("param", ["MessageGroupId", "MessageDeduplicationId"])
@pytest.mark.parametrize(
    "bad",
    ["has space", "x" * 129, "tab\tchar", "ünicode", ""],
    ids=["space", "129", "tab", "unicode", "empty"],
)
def test_invalid_fifo_ids(sqs, fifo, param, bad):
    kwargs = {"MessageGroupId": "g", "MessageDeduplicationId": "d", param: bad}
    err = expect_error(
        sqs.send_message, "InvalidParameterValue", QueueUrl=fifo, MessageBody="x", **kwargs
    )
    text = GROUP_ID_TEXT if param == "MessageGroupId" else DEDUP_ID_TEXT
    assert message(err) == f"Value {bad} for parameter {param} is invalid. Reason: {text}"
    assert counts(sqs, fifo) == (0, 0, 0)


@pytest.mark.parametrize("param", ["MessageGroupId", "MessageDeduplicationId"])
def test_invalid_fifo_ids_in_batch(sqs, fifo, param):
    good = {"Id": "good", "MessageBody": "a", "MessageGroupId": "g", "MessageDeduplicationId": "d1"}
    bad = {"Id": "bad", "MessageBody": "b", "MessageGroupId": "g", "MessageDeduplicationId": "d2"}
    bad[param] = "has space"
    assert_entry_rejected(sqs, fifo, [good, bad], "bad")
    assert counts(sqs, fifo)[0] in (0, 1)
    assert "b" not in bodies(receive(sqs, fifo, MaxNumberOfMessages=10))


def test_valid_fifo_ids_at_the_limits(sqs, fifo_factory):
    url = fifo_factory()
    for value in (ALL_PUNCTUATION, "x" * 128, "a", "AZaz09"):
        resp = sqs.send_message(
            QueueUrl=url, MessageBody="x", MessageGroupId=value, MessageDeduplicationId=value
        )
        assert "SequenceNumber" in resp
    msgs = receive(sqs, url, MaxNumberOfMessages=10, AttributeNames=["All"])
    got = {
        m["Attributes"]["MessageGroupId"]: m["Attributes"]["MessageDeduplicationId"] for m in msgs
    }
    assert got == {v: v for v in (ALL_PUNCTUATION, "x" * 128, "a", "AZaz09")}


# --- sequence numbers and system attributes (§5.4, §8.1) -------------------------------


def test_sequence_numbers_on_send_and_batch(sqs, fifo):
    def one(body):
        return sqs.send_message(QueueUrl=fifo, MessageBody=body, MessageGroupId="g")[
            "SequenceNumber"
        ]

    numbers = [one(f"s{i}") for i in range(3)]
    resp = sqs.send_message_batch(
        QueueUrl=fifo,
        Entries=[
            {"Id": f"e{i}", "MessageBody": f"b{i}", "MessageGroupId": f"g{i % 2}"}
            for i in range(10)
        ],
    )
    assert [e["Id"] for e in resp["Successful"]] == [f"e{i}" for i in range(10)]
    numbers += [e["SequenceNumber"] for e in resp["Successful"]]
    numbers.append(one("last"))
    as_ints = [seq(n) for n in numbers]
    # Decimal, strictly increasing as numbers, large (AWS's are 20 digits), at most 128 bits.
    assert all(a < b for a, b in zip(as_ints, as_ints[1:])), numbers
    assert all(len(n) >= 20 for n in numbers), numbers
    assert all(n < 2**128 for n in as_ints), numbers


def test_sequence_numbers_increase_across_time(sqs, fifo, advance):
    first = seq(send(sqs, fifo, "a")["SequenceNumber"])
    advance(3600)
    second = seq(send(sqs, fifo, "b")["SequenceNumber"])
    assert second > first


def test_received_fifo_system_attributes(sqs, fifo_factory):
    url = fifo_factory()
    sent = send(sqs, url, "hello", group="grp-1", dedup="dedup-1")
    msg = receive_one(sqs, url, AttributeNames=["All"])
    attrs = msg["Attributes"]
    assert msg["MessageId"] == sent["MessageId"]
    assert attrs["SequenceNumber"] == sent["SequenceNumber"]
    assert attrs["MessageGroupId"] == "grp-1"
    assert attrs["MessageDeduplicationId"] == "dedup-1"
    assert attrs["ApproximateReceiveCount"] == "1"


def test_received_fifo_system_attributes_by_name(sqs, fifo):
    sqs.send_message(QueueUrl=fifo, MessageBody="x", MessageGroupId="only")
    msg = receive_one(sqs, fifo, AttributeNames=["MessageGroupId", "SequenceNumber"])
    assert set(msg["Attributes"]) == {"MessageGroupId", "SequenceNumber"}
    assert msg["Attributes"]["MessageGroupId"] == "only"
    seq(msg["Attributes"]["SequenceNumber"])


def test_batch_entries_received_with_their_sequence_numbers(sqs, fifo):
    resp = sqs.send_message_batch(
        QueueUrl=fifo,
        Entries=[{"Id": f"e{i}", "MessageBody": f"b{i}", "MessageGroupId": "g"} for i in range(5)],
    )
    sent = {e["MessageId"]: e["SequenceNumber"] for e in resp["Successful"]}
    msgs = receive(sqs, fifo, MaxNumberOfMessages=10, AttributeNames=["All"])
    # A batch is enqueued in entry order.
    assert bodies(msgs) == [f"b{i}" for i in range(5)]
    assert {m["MessageId"]: m["Attributes"]["SequenceNumber"] for m in msgs} == sent


def test_content_based_dedup_id_is_sha256_of_body(sqs, fifo):
    body = "content based é ✓"
    sqs.send_message(QueueUrl=fifo, MessageBody=body, MessageGroupId="g")
    msg = receive_one(sqs, fifo, AttributeNames=["All"])
    assert msg["Attributes"]["MessageDeduplicationId"] == hashlib.sha256(body.encode()).hexdigest()


def test_explicit_dedup_id_overrides_content(sqs, fifo):
    send(sqs, fifo, "same", group="g", dedup="a")
    send(sqs, fifo, "same", group="g", dedup="b")
    assert counts(sqs, fifo) == (2, 0, 0)
    # A different body with an id already used is a duplicate.
    send(sqs, fifo, "other", group="g", dedup="a")
    msgs = receive(sqs, fifo, MaxNumberOfMessages=10, AttributeNames=["All"])
    assert bodies(msgs) == ["same", "same"]
    assert [m["Attributes"]["MessageDeduplicationId"] for m in msgs] == ["a", "b"]


# --- deduplication (§8.1, §7.4) ----------------------------------------------------------


def test_duplicate_within_window_enqueues_nothing(sqs, fifo_factory):
    url = fifo_factory()
    first = send(sqs, url, "one", dedup="d")
    dup = send(sqs, url, "two", dedup="d")
    assert dup["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert dup["MessageId"] == first["MessageId"]
    assert counts(sqs, url) == (1, 0, 0)
    assert bodies(receive(sqs, url, MaxNumberOfMessages=10)) == ["one"]


def test_duplicate_content_with_content_based_dedup(sqs, fifo):
    first = sqs.send_message(QueueUrl=fifo, MessageBody="same", MessageGroupId="g")
    dup = sqs.send_message(QueueUrl=fifo, MessageBody="same", MessageGroupId="g")
    assert dup["MessageId"] == first["MessageId"]
    assert counts(sqs, fifo) == (1, 0, 0)


def test_duplicate_in_batch(sqs, fifo_factory):
    url = fifo_factory()
    first = send(sqs, url, "before", dedup="x")
    resp = sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "a", "MessageBody": "a", "MessageGroupId": "g", "MessageDeduplicationId": "y"},
            {"Id": "b", "MessageBody": "b", "MessageGroupId": "g", "MessageDeduplicationId": "y"},
            {"Id": "c", "MessageBody": "c", "MessageGroupId": "g", "MessageDeduplicationId": "x"},
        ],
    )
    ok = {e["Id"]: e for e in resp["Successful"]}
    assert set(ok) == {"a", "b", "c"}
    assert "Failed" not in resp or resp["Failed"] == []
    assert ok["b"]["MessageId"] == ok["a"]["MessageId"]
    assert ok["c"]["MessageId"] == first["MessageId"]
    assert bodies(receive(sqs, url, MaxNumberOfMessages=10)) == ["before", "a"]


def test_duplicate_after_original_was_deleted(sqs, fifo_factory):
    url = fifo_factory()
    first = send(sqs, url, "one", dedup="d")
    msg = receive_one(sqs, url)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"])
    assert counts(sqs, url) == (0, 0, 0)
    dup = send(sqs, url, "again", dedup="d")
    assert dup["MessageId"] == first["MessageId"]
    assert counts(sqs, url) == (0, 0, 0)
    assert receive(sqs, url) == []


def test_duplicate_while_original_in_flight(sqs, fifo_factory):
    url = fifo_factory()
    send(sqs, url, "one", dedup="d")
    receive_one(sqs, url)
    send(sqs, url, "again", dedup="d")
    assert counts(sqs, url) == (0, 1, 0)


def test_dedup_window_is_five_minutes(sqs, fifo_factory, frozen):
    url = fifo_factory()
    first = send(sqs, url, "one", dedup="d")
    msg = receive_one(sqs, url)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"])
    frozen.advance(299)
    send(sqs, url, "still a duplicate", dedup="d")
    assert counts(sqs, url) == (0, 0, 0)
    frozen.advance(1)
    again = send(sqs, url, "new", dedup="d")
    assert again["MessageId"] != first["MessageId"]
    assert seq(again["SequenceNumber"]) > seq(first["SequenceNumber"])
    assert bodies(receive(sqs, url)) == ["new"]
    # The new send starts a new window.
    send(sqs, url, "dup of new", dedup="d")
    assert counts(sqs, url) == (0, 1, 0)


def test_dedup_window_counts_from_the_first_send(sqs, fifo_factory, frozen):
    """A duplicate does not extend the window of the original."""
    url = fifo_factory()
    send(sqs, url, "one", dedup="d")
    frozen.advance(200)
    send(sqs, url, "dup", dedup="d")
    frozen.advance(100)
    send(sqs, url, "two", dedup="d")
    assert bodies(receive(sqs, url, MaxNumberOfMessages=10)) == ["one", "two"]


def test_dedup_scope_queue_spans_groups(sqs, fifo_factory):
    url = fifo_factory()
    first = send(sqs, url, "one", group="g1", dedup="d")
    dup = send(sqs, url, "two", group="g2", dedup="d")
    assert dup["MessageId"] == first["MessageId"]
    assert counts(sqs, url) == (1, 0, 0)
    msg = receive_one(sqs, url, MaxNumberOfMessages=10, AttributeNames=["MessageGroupId"])
    assert msg["Attributes"]["MessageGroupId"] == "g1"


def test_dedup_scope_queue_spans_groups_content_based(sqs, fifo):
    sqs.send_message(QueueUrl=fifo, MessageBody="same", MessageGroupId="g1")
    sqs.send_message(QueueUrl=fifo, MessageBody="same", MessageGroupId="g2")
    assert counts(sqs, fifo) == (1, 0, 0)


def test_dedup_scope_message_group(sqs, fifo_factory):
    url = fifo_factory(DeduplicationScope="messageGroup")
    first = send(sqs, url, "one", group="g1", dedup="d")
    other = send(sqs, url, "two", group="g2", dedup="d")
    assert other["MessageId"] != first["MessageId"]
    dup = send(sqs, url, "three", group="g1", dedup="d")
    assert dup["MessageId"] == first["MessageId"]
    assert counts(sqs, url) == (2, 0, 0)
    assert sorted(bodies(receive(sqs, url, MaxNumberOfMessages=10))) == ["one", "two"]


def test_dedup_scope_is_fixed_at_creation(sqs, fifo_factory):
    """Later changes of DeduplicationScope are reported, but dedup keeps the creation-time
    scope (§3.1 [V])."""
    url = fifo_factory()
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DeduplicationScope": "messageGroup"})
    assert queue_attrs(sqs, url, "DeduplicationScope") == {"DeduplicationScope": "messageGroup"}
    send(sqs, url, "one", group="g1", dedup="d")
    send(sqs, url, "two", group="g2", dedup="d")
    assert counts(sqs, url) == (1, 0, 0)


def test_purge_clears_the_dedup_cache(sqs, fifo_factory):
    url = fifo_factory()
    first = send(sqs, url, "one", dedup="d")
    sqs.purge_queue(QueueUrl=url)
    assert counts(sqs, url) == (0, 0, 0)
    again = send(sqs, url, "two", dedup="d")
    assert again["MessageId"] != first["MessageId"]
    assert counts(sqs, url) == (1, 0, 0)
    assert bodies(receive(sqs, url)) == ["two"]


def test_purge_clears_in_flight_and_unlocks_groups(sqs, fifo):
    sqs.send_message(QueueUrl=fifo, MessageBody="a", MessageGroupId="g")
    receive_one(sqs, fifo)
    sqs.send_message(QueueUrl=fifo, MessageBody="b", MessageGroupId="g")
    sqs.purge_queue(QueueUrl=fifo)
    assert counts(sqs, fifo) == (0, 0, 0)
    sqs.send_message(QueueUrl=fifo, MessageBody="c", MessageGroupId="g")
    assert bodies(receive(sqs, fifo, MaxNumberOfMessages=10)) == ["c"]


# --- receive order and group locking (§8.2) ----------------------------------------------


def test_receive_takes_as_much_as_possible_from_one_group(sqs, fifo):
    for group, body in (("g1", "g1-m1"), ("g2", "g2-m1"), ("g1", "g1-m2"), ("g1", "g1-m3")):
        sqs.send_message(QueueUrl=fifo, MessageBody=body, MessageGroupId=group)
    msgs = receive(sqs, fifo, MaxNumberOfMessages=10)
    assert bodies(msgs) == ["g1-m1", "g1-m2", "g1-m3", "g2-m1"]


def test_order_within_a_group_over_several_receives(sqs, fifo):
    for i in range(12):
        sqs.send_message(QueueUrl=fifo, MessageBody=f"m{i:02}", MessageGroupId="g")
    got = []
    while True:
        msgs = receive(sqs, fifo, MaxNumberOfMessages=3)
        if not msgs:
            break
        got += bodies(msgs)
        for m in msgs:
            sqs.delete_message(QueueUrl=fifo, ReceiptHandle=m["ReceiptHandle"])
    assert got == [f"m{i:02}" for i in range(12)]


def test_in_flight_message_locks_its_group(sqs, fifo):
    sqs.send_message(QueueUrl=fifo, MessageBody="a1", MessageGroupId="a")
    sqs.send_message(QueueUrl=fifo, MessageBody="a2", MessageGroupId="a")
    sqs.send_message(QueueUrl=fifo, MessageBody="b1", MessageGroupId="b")
    first = receive_one(sqs, fifo)
    assert first["Body"] == "a1"
    # a2 is behind an in-flight message; only b's message is served.
    assert bodies(receive(sqs, fifo, MaxNumberOfMessages=10)) == ["b1"]
    # New sends to a locked group are held back too.
    sqs.send_message(QueueUrl=fifo, MessageBody="a3", MessageGroupId="a")
    assert receive(sqs, fifo, MaxNumberOfMessages=10) == []
    # Deleting the only in-flight message of the group unlocks it at once.
    sqs.delete_message(QueueUrl=fifo, ReceiptHandle=first["ReceiptHandle"])
    assert bodies(receive(sqs, fifo, MaxNumberOfMessages=10)) == ["a2", "a3"]


def test_deleting_some_in_flight_messages_keeps_the_group_locked(sqs, fifo):
    for body in ("m1", "m2", "m3"):
        sqs.send_message(QueueUrl=fifo, MessageBody=body, MessageGroupId="g")
    msgs = receive(sqs, fifo, MaxNumberOfMessages=2)
    assert bodies(msgs) == ["m1", "m2"]
    sqs.delete_message(QueueUrl=fifo, ReceiptHandle=msgs[0]["ReceiptHandle"])
    assert receive(sqs, fifo, MaxNumberOfMessages=10) == []
    sqs.send_message(QueueUrl=fifo, MessageBody="m4", MessageGroupId="g")
    assert receive(sqs, fifo, MaxNumberOfMessages=10) == []
    sqs.delete_message(QueueUrl=fifo, ReceiptHandle=msgs[1]["ReceiptHandle"])
    assert bodies(receive(sqs, fifo, MaxNumberOfMessages=10)) == ["m3", "m4"]


def test_deleting_out_of_order_keeps_the_group_locked(sqs, fifo):
    for body in ("m1", "m2", "m3"):
        sqs.send_message(QueueUrl=fifo, MessageBody=body, MessageGroupId="g")
    msgs = receive(sqs, fifo, MaxNumberOfMessages=10)
    assert bodies(msgs) == ["m1", "m2", "m3"]
    sqs.delete_message(QueueUrl=fifo, ReceiptHandle=msgs[2]["ReceiptHandle"])
    sqs.delete_message(QueueUrl=fifo, ReceiptHandle=msgs[1]["ReceiptHandle"])
    sqs.send_message(QueueUrl=fifo, MessageBody="m4", MessageGroupId="g")
    assert receive(sqs, fifo, MaxNumberOfMessages=10) == []
    sqs.delete_message(QueueUrl=fifo, ReceiptHandle=msgs[0]["ReceiptHandle"])
    assert bodies(receive(sqs, fifo, MaxNumberOfMessages=10)) == ["m4"]


def test_delete_message_batch_unlocks_the_group(sqs, fifo):
    for body in ("m1", "m2", "m3"):
        sqs.send_message(QueueUrl=fifo, MessageBody=body, MessageGroupId="g")
    msgs = receive(sqs, fifo, MaxNumberOfMessages=2)
    resp = sqs.delete_message_batch(
        QueueUrl=fifo,
        Entries=[{"Id": f"d{i}", "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs)],
    )
    assert sorted(e["Id"] for e in resp["Successful"]) == ["d0", "d1"]
    assert bodies(receive(sqs, fifo, MaxNumberOfMessages=10)) == ["m3"]


def test_timeout_redelivers_the_group_in_order(sqs, fifo, frozen):
    for body in ("m1", "m2", "m3"):
        sqs.send_message(QueueUrl=fifo, MessageBody=body, MessageGroupId="g")
    assert bodies(receive(sqs, fifo, MaxNumberOfMessages=10, VisibilityTimeout=10)) == [
        "m1",
        "m2",
        "m3",
    ]
    frozen.advance(9)
    assert receive(sqs, fifo, MaxNumberOfMessages=10) == []
    frozen.advance(1)
    msgs = receive(sqs, fifo, MaxNumberOfMessages=10, AttributeNames=["ApproximateReceiveCount"])
    assert bodies(msgs) == ["m1", "m2", "m3"]
    assert [m["Attributes"]["ApproximateReceiveCount"] for m in msgs] == ["2", "2", "2"]


def _receive_foo_bar_baz(sqs, url):
    for body in ("foo", "bar", "baz"):
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="g")
    msgs = receive(sqs, url, MaxNumberOfMessages=10, VisibilityTimeout=30)
    assert bodies(msgs) == ["foo", "bar", "baz"]
    return {m["Body"]: m["ReceiptHandle"] for m in msgs}


def test_partial_release_middle_message_extended(sqs, fifo, frozen):
    handles = _receive_foo_bar_baz(sqs, fifo)
    sqs.change_message_visibility(
        QueueUrl=fifo, ReceiptHandle=handles["bar"], VisibilityTimeout=600
    )
    frozen.advance(31)
    # foo and baz are visible again, but the group is served only up to bar.
    assert counts(sqs, fifo) == (2, 1, 0)
    assert bodies(receive(sqs, fifo, MaxNumberOfMessages=10)) == ["foo"]
    assert receive(sqs, fifo, MaxNumberOfMessages=10) == []
    frozen.advance(600)
    # foo (30 s default) and bar (600 s) are both back now, in order with baz.
    assert bodies(receive(sqs, fifo, MaxNumberOfMessages=10)) == ["foo", "bar", "baz"]


def test_partial_release_first_message_extended(sqs, fifo, frozen):
    handles = _receive_foo_bar_baz(sqs, fifo)
    sqs.change_message_visibility(
        QueueUrl=fifo, ReceiptHandle=handles["foo"], VisibilityTimeout=600
    )
    frozen.advance(31)
    assert counts(sqs, fifo) == (2, 1, 0)
    assert receive(sqs, fifo, MaxNumberOfMessages=10) == []
    # Deleting foo releases bar and baz.
    sqs.delete_message(QueueUrl=fifo, ReceiptHandle=handles["foo"])
    assert bodies(receive(sqs, fifo, MaxNumberOfMessages=10)) == ["bar", "baz"]


def test_change_visibility_zero_releases_only_that_message(sqs, fifo, frozen):
    handles = _receive_foo_bar_baz(sqs, fifo)
    sqs.change_message_visibility(QueueUrl=fifo, ReceiptHandle=handles["baz"], VisibilityTimeout=0)
    assert counts(sqs, fifo) == (1, 2, 0)
    # baz is visible, but foo and bar ahead of it still lock the group.
    assert receive(sqs, fifo, MaxNumberOfMessages=10) == []
    sqs.change_message_visibility(QueueUrl=fifo, ReceiptHandle=handles["foo"], VisibilityTimeout=0)
    assert counts(sqs, fifo) == (2, 1, 0)
    assert bodies(receive(sqs, fifo, MaxNumberOfMessages=10)) == ["foo"]


def test_change_visibility_batch_zero_on_a_group(sqs, fifo):
    handles = _receive_foo_bar_baz(sqs, fifo)
    resp = sqs.change_message_visibility_batch(
        QueueUrl=fifo,
        Entries=[
            {"Id": "foo", "ReceiptHandle": handles["foo"], "VisibilityTimeout": 0},
            {"Id": "bar", "ReceiptHandle": handles["bar"], "VisibilityTimeout": 0},
        ],
    )
    assert sorted(e["Id"] for e in resp["Successful"]) == ["bar", "foo"]
    assert bodies(receive(sqs, fifo, MaxNumberOfMessages=10)) == ["foo", "bar"]


def _g1_g2_received_with_visibility_zero(sqs, url):
    for group in ("g1", "g2", "g3"):
        sqs.send_message(QueueUrl=url, MessageBody=f"{group}-m1", MessageGroupId=group)
    assert bodies(receive(sqs, url, MaxNumberOfMessages=1, VisibilityTimeout=0)) == ["g1-m1"]
    assert bodies(receive(sqs, url, MaxNumberOfMessages=1, VisibilityTimeout=0)) == ["g2-m1"]


def test_groups_rotate_one_at_a_time(sqs, fifo):
    """§8.2 [V]: after g1 and g2 were received with visibility 0, AWS served g3, g1, g2: a
    round-robin in which a served group goes to the back."""
    _g1_g2_received_with_visibility_zero(sqs, fifo)
    got = [bodies(receive(sqs, fifo, MaxNumberOfMessages=1, VisibilityTimeout=0)) for _ in range(6)]
    assert got == [["g3-m1"], ["g1-m1"], ["g2-m1"], ["g3-m1"], ["g1-m1"], ["g2-m1"]]


def test_groups_rotate_in_one_receive(sqs, fifo):
    _g1_g2_received_with_visibility_zero(sqs, fifo)
    assert bodies(receive(sqs, fifo, MaxNumberOfMessages=10)) == ["g3-m1", "g1-m1", "g2-m1"]


def test_receive_count_attribute_grows_per_receive(sqs, fifo):
    sqs.send_message(QueueUrl=fifo, MessageBody="x", MessageGroupId="g")
    for n in ("1", "2", "3"):
        msg = receive_one(
            sqs, fifo, VisibilityTimeout=0, AttributeNames=["ApproximateReceiveCount"]
        )
        assert msg["Attributes"]["ApproximateReceiveCount"] == n


def test_long_poll_wakes_when_a_delete_unlocks_the_group(sqs, make_client, fifo):
    other = make_client()
    sqs.send_message(QueueUrl=fifo, MessageBody="m1", MessageGroupId="g")
    sqs.send_message(QueueUrl=fifo, MessageBody="m2", MessageGroupId="g")
    handle = receive_one(sqs, fifo, VisibilityTimeout=600)["ReceiptHandle"]
    t = threading.Timer(1.0, lambda: other.delete_message(QueueUrl=fifo, ReceiptHandle=handle))
    start = time.monotonic()
    t.start()
    try:
        got = receive(sqs, fifo, WaitTimeSeconds=15, MaxNumberOfMessages=10)
    finally:
        t.join()
    assert bodies(got) == ["m2"]
    assert 0.8 <= time.monotonic() - start < 5


def test_long_poll_ignores_sends_to_a_locked_group(sqs, make_client, fifo, advance):
    other = make_client()
    sqs.send_message(QueueUrl=fifo, MessageBody="m1", MessageGroupId="g")
    receive_one(sqs, fifo, VisibilityTimeout=600)
    result = {}

    def long_poll():
        result["got"] = receive(sqs, fifo, WaitTimeSeconds=20, MaxNumberOfMessages=10)

    t = threading.Thread(target=long_poll, daemon=True)
    t.start()
    time.sleep(0.3)
    other.send_message(QueueUrl=fifo, MessageBody="m2", MessageGroupId="g")
    time.sleep(0.3)
    assert t.is_alive(), f"a send to the locked group woke the long poll: {result}"
    # The wait runs on the server clock: moving it 20 s on ends the poll, empty.
    advance(20)
    t.join(10)
    assert not t.is_alive()
    assert result["got"] == []


# --- receipt handles (§6.2, §6.3) --------------------------------------------------------


def test_expired_fifo_handle_cannot_delete(sqs, fifo, frozen):
    sqs.send_message(QueueUrl=fifo, MessageBody="x", MessageGroupId="g")
    handle = receive_one(sqs, fifo, VisibilityTimeout=10)["ReceiptHandle"]
    frozen.advance(10)
    err = expect_error(
        sqs.delete_message, "InvalidParameterValue", QueueUrl=fifo, ReceiptHandle=handle
    )
    assert message(err) == (
        f"Value {handle} for parameter ReceiptHandle is invalid. "
        "Reason: The receipt handle has expired."
    )
    # The message was not deleted.
    assert counts(sqs, fifo) == (1, 0, 0)
    new = receive_one(sqs, fifo)
    assert new["Body"] == "x"
    # The old handle stays dead after the message was received again; the new one works.
    expect_error(sqs.delete_message, "InvalidParameterValue", QueueUrl=fifo, ReceiptHandle=handle)
    assert counts(sqs, fifo) == (0, 1, 0)
    sqs.delete_message(QueueUrl=fifo, ReceiptHandle=new["ReceiptHandle"])
    assert counts(sqs, fifo) == (0, 0, 0)


def test_handle_valid_until_the_timeout(sqs, fifo, frozen):
    sqs.send_message(QueueUrl=fifo, MessageBody="x", MessageGroupId="g")
    handle = receive_one(sqs, fifo, VisibilityTimeout=10)["ReceiptHandle"]
    frozen.advance(9)
    sqs.delete_message(QueueUrl=fifo, ReceiptHandle=handle)
    assert counts(sqs, fifo) == (0, 0, 0)


def test_extending_before_expiry_keeps_the_handle_valid(sqs, fifo, frozen):
    sqs.send_message(QueueUrl=fifo, MessageBody="x", MessageGroupId="g")
    handle = receive_one(sqs, fifo, VisibilityTimeout=10)["ReceiptHandle"]
    frozen.advance(5)
    sqs.change_message_visibility(QueueUrl=fifo, ReceiptHandle=handle, VisibilityTimeout=60)
    frozen.advance(30)  # past the original 10 s
    assert receive(sqs, fifo) == []
    sqs.delete_message(QueueUrl=fifo, ReceiptHandle=handle)
    assert counts(sqs, fifo) == (0, 0, 0)


def test_expired_fifo_handle_in_delete_batch_fails_the_entry(sqs, fifo, frozen):
    sqs.send_message(QueueUrl=fifo, MessageBody="old", MessageGroupId="g1")
    sqs.send_message(QueueUrl=fifo, MessageBody="fresh", MessageGroupId="g2")
    old = receive_one(sqs, fifo, VisibilityTimeout=10)
    frozen.advance(10)
    msgs = receive(sqs, fifo, MaxNumberOfMessages=1, VisibilityTimeout=300)
    assert bodies(msgs) == ["fresh"]
    resp = sqs.delete_message_batch(
        QueueUrl=fifo,
        Entries=[
            {"Id": "old", "ReceiptHandle": old["ReceiptHandle"]},
            {"Id": "fresh", "ReceiptHandle": msgs[0]["ReceiptHandle"]},
        ],
    )
    assert [e["Id"] for e in resp["Successful"]] == ["fresh"]
    assert [e["Id"] for e in resp["Failed"]] == ["old"]
    assert resp["Failed"][0]["SenderFault"] is True
    assert counts(sqs, fifo) == (1, 0, 0)


# --- ReceiveRequestAttemptId (§6.4) -------------------------------------------------------


def test_receive_attempt_retry_returns_the_same_messages(sqs, fifo):
    for i in range(3):
        sqs.send_message(QueueUrl=fifo, MessageBody=f"m{i}", MessageGroupId="g")
    sqs.send_message(QueueUrl=fifo, MessageBody="other", MessageGroupId="h")
    first = receive(sqs, fifo, MaxNumberOfMessages=3, ReceiveRequestAttemptId="attempt-1")
    assert bodies(first) == ["m0", "m1", "m2"]
    again = receive(sqs, fifo, MaxNumberOfMessages=3, ReceiveRequestAttemptId="attempt-1")
    assert [m["MessageId"] for m in again] == [m["MessageId"] for m in first]
    assert [m["ReceiptHandle"] for m in again] == [m["ReceiptHandle"] for m in first]
    # A receive without the id is a new one.
    assert bodies(receive(sqs, fifo, MaxNumberOfMessages=10)) == ["other"]
    # The handles from the retry are valid.
    for m in again:
        sqs.delete_message(QueueUrl=fifo, ReceiptHandle=m["ReceiptHandle"])
    assert counts(sqs, fifo) == (0, 1, 0)


def test_receive_attempt_id_is_valid_for_five_minutes(sqs, fifo, frozen):
    sqs.send_message(QueueUrl=fifo, MessageBody="x", MessageGroupId="g1")
    sqs.send_message(QueueUrl=fifo, MessageBody="y", MessageGroupId="g2")
    x = receive(sqs, fifo, ReceiveRequestAttemptId="a", VisibilityTimeout=900)
    y = receive(sqs, fifo, ReceiveRequestAttemptId="b", VisibilityTimeout=900)
    assert (bodies(x), bodies(y)) == (["x"], ["y"])
    frozen.advance(299)
    again = receive(sqs, fifo, ReceiveRequestAttemptId="a", VisibilityTimeout=900)
    assert [m["ReceiptHandle"] for m in again] == [m["ReceiptHandle"] for m in x]
    frozen.advance(1)
    # Attempt "b" is 5 minutes old: a new receive, and y is still in flight.
    assert receive(sqs, fifo, ReceiveRequestAttemptId="b", VisibilityTimeout=900) == []


def test_receive_attempt_retry_resets_visibility(sqs, fifo, frozen):
    sqs.send_message(QueueUrl=fifo, MessageBody="x", MessageGroupId="g")
    first = receive(sqs, fifo, ReceiveRequestAttemptId="a", VisibilityTimeout=30)
    frozen.advance(20)
    again = receive(sqs, fifo, ReceiveRequestAttemptId="a", VisibilityTimeout=30)
    assert [m["ReceiptHandle"] for m in again] == [m["ReceiptHandle"] for m in first]
    frozen.advance(20)  # 40 s after the first receive, 20 s after the retry
    assert receive(sqs, fifo) == []
    sqs.delete_message(QueueUrl=fifo, ReceiptHandle=first[0]["ReceiptHandle"])


def test_receive_attempt_after_a_delete_counts_as_new(sqs, fifo):
    sqs.send_message(QueueUrl=fifo, MessageBody="a1", MessageGroupId="a")
    sqs.send_message(QueueUrl=fifo, MessageBody="a2", MessageGroupId="a")
    sqs.send_message(QueueUrl=fifo, MessageBody="b1", MessageGroupId="b")
    first = receive(sqs, fifo, MaxNumberOfMessages=2, ReceiveRequestAttemptId="attempt-2")
    assert bodies(first) == ["a1", "a2"]
    sqs.delete_message(QueueUrl=fifo, ReceiptHandle=first[0]["ReceiptHandle"])
    again = receive(sqs, fifo, MaxNumberOfMessages=2, ReceiveRequestAttemptId="attempt-2")
    # A new receive: group a is still locked by a2, so only b1 comes.
    assert bodies(again) == ["b1"]
    assert again[0]["MessageId"] not in [m["MessageId"] for m in first]


def test_receive_attempt_after_visibility_change_counts_as_new(sqs, fifo):
    sqs.send_message(QueueUrl=fifo, MessageBody="x", MessageGroupId="g")
    first = receive(sqs, fifo, ReceiveRequestAttemptId="attempt-3")
    sqs.change_message_visibility(
        QueueUrl=fifo, ReceiptHandle=first[0]["ReceiptHandle"], VisibilityTimeout=0
    )
    again = receive(
        sqs, fifo, ReceiveRequestAttemptId="attempt-3", AttributeNames=["ApproximateReceiveCount"]
    )
    assert bodies(again) == ["x"]
    assert again[0]["ReceiptHandle"] != first[0]["ReceiptHandle"]
    assert again[0]["Attributes"]["ApproximateReceiveCount"] == "2"


# --- counters (§3.2) ---------------------------------------------------------------------


def test_counts_include_messages_behind_locked_groups(sqs, fifo):
    for group in ("g1", "g2", "g3"):
        for i in (1, 2):
            sqs.send_message(QueueUrl=fifo, MessageBody=f"{group}-m{i}", MessageGroupId=group)
    assert counts(sqs, fifo) == (6, 0, 0)
    assert bodies(receive(sqs, fifo, MaxNumberOfMessages=1)) == ["g1-m1"]
    assert bodies(receive(sqs, fifo, MaxNumberOfMessages=1)) == ["g2-m1"]
    assert counts(sqs, fifo) == (4, 2, 0)
    # Of the 4 visible messages only g3's two are receivable.
    assert bodies(receive(sqs, fifo, MaxNumberOfMessages=10)) == ["g3-m1", "g3-m2"]
    assert counts(sqs, fifo) == (2, 4, 0)


def test_a_fifo_queues_delay_is_retroactive(sqs, fifo, frozen):
    """SQS's delay-queue guide: "For FIFO queues, the per-queue delay setting is retroactive
    — changing the setting affects the delay of messages already in the queue" (a standard
    queue's is not). Lowered, waiting messages come out at once; raised, messages never
    received are held until they entered plus the new delay."""
    sqs.set_queue_attributes(QueueUrl=fifo, Attributes={"DelaySeconds": "60"})
    send(sqs, fifo, "held")
    frozen.advance(10)
    assert counts(sqs, fifo) == (0, 0, 1)
    sqs.set_queue_attributes(QueueUrl=fifo, Attributes={"DelaySeconds": "0"})
    assert counts(sqs, fifo) == (1, 0, 0)
    assert receive_one(sqs, fifo)["Body"] == "held"

    url = sqs.create_queue(QueueName=fifo_name(), Attributes={"FifoQueue": "true"})["QueueUrl"]
    send(sqs, url, "late")
    frozen.advance(5)
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "60"})
    assert counts(sqs, url) == (0, 0, 1)
    frozen.advance(54)
    assert counts(sqs, url) == (0, 0, 1)
    frozen.advance(1)
    assert counts(sqs, url) == (1, 0, 0)

    standard = sqs.create_queue(QueueName=f"std-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    sqs.send_message(QueueUrl=standard, MessageBody="kept")
    sqs.set_queue_attributes(QueueUrl=standard, Attributes={"DelaySeconds": "60"})
    assert counts(sqs, standard) == (1, 0, 0)
