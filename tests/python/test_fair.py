"""Fair queues: MessageGroupId on standard queues (reference §8.3). The group id is stored
and returned, there are no sequence numbers and no FIFO locking, and sqsim serves groups
round-robin so a noisy group cannot starve a quiet one."""

import pytest

from sqsim_helpers import counts, expect_error, receive, receive_one

GROUP_ID_TEXT = (
    "MessageGroupId can only include alphanumeric and punctuation characters. 1 to 128 in length."
)


def send_batches(sqs, url, group, bodies):
    for start in range(0, len(bodies), 10):
        chunk = bodies[start : start + 10]
        resp = sqs.send_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": f"e{i}", "MessageBody": b, "MessageGroupId": group}
                for i, b in enumerate(chunk)
            ],
        )
        assert len(resp["Successful"]) == len(chunk), resp


def test_group_id_accepted_without_sequence_number(sqs, queue):
    resp = sqs.send_message(QueueUrl=queue, MessageBody="x", MessageGroupId="tenant-1")
    assert resp["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert "SequenceNumber" not in resp
    batch = sqs.send_message_batch(
        QueueUrl=queue,
        Entries=[{"Id": "a", "MessageBody": "y", "MessageGroupId": "tenant-2"}],
    )
    assert [e["Id"] for e in batch["Successful"]] == ["a"]
    assert "SequenceNumber" not in batch["Successful"][0]
    assert counts(sqs, queue) == (2, 0, 0)


def test_group_id_returned_as_system_attribute(sqs, queue):
    sqs.send_message(QueueUrl=queue, MessageBody="x", MessageGroupId="tenant-1")
    msg = receive_one(sqs, queue, AttributeNames=["All"])
    attrs = msg["Attributes"]
    assert attrs["MessageGroupId"] == "tenant-1"
    assert "SequenceNumber" not in attrs
    assert "MessageDeduplicationId" not in attrs


def test_group_id_by_name_and_ungrouped_message(sqs, queue):
    sqs.send_message(QueueUrl=queue, MessageBody="grouped", MessageGroupId="g")
    sqs.send_message(QueueUrl=queue, MessageBody="plain")
    msgs = receive(
        sqs, queue, MaxNumberOfMessages=10, AttributeNames=["MessageGroupId", "SequenceNumber"]
    )
    by_body = {m["Body"]: m for m in msgs}
    assert set(by_body) == {"grouped", "plain"}
    assert by_body["grouped"]["Attributes"] == {"MessageGroupId": "g"}
    assert "Attributes" not in by_body["plain"] or by_body["plain"]["Attributes"] == {}


@pytest.mark.parametrize("bad", ["has space", "x" * 129], ids=["space", "129"])
def test_group_id_format_validated_on_standard_queue(sqs, queue, bad):
    err = expect_error(
        sqs.send_message,
        "InvalidParameterValue",
        QueueUrl=queue,
        MessageBody="x",
        MessageGroupId=bad,
    )
    assert err.response["Error"]["Message"] == (
        f"Value {bad} for parameter MessageGroupId is invalid. Reason: {GROUP_ID_TEXT}"
    )
    assert counts(sqs, queue) == (0, 0, 0)


def test_no_group_locking_on_standard_queue(sqs, queue):
    sqs.send_message(QueueUrl=queue, MessageBody="m1", MessageGroupId="g")
    sqs.send_message(QueueUrl=queue, MessageBody="m2", MessageGroupId="g")
    first = receive_one(sqs, queue)
    # The other message of the same group is delivered while the first is in flight.
    second = receive_one(sqs, queue)
    assert {first["Body"], second["Body"]} == {"m1", "m2"}
    assert counts(sqs, queue) == (0, 2, 0)


def test_per_message_delay_still_allowed(sqs, queue, clock):
    clock.freeze()
    sqs.send_message(QueueUrl=queue, MessageBody="later", MessageGroupId="g", DelaySeconds=5)
    assert counts(sqs, queue) == (0, 0, 1)
    clock.advance(5)
    assert receive_one(sqs, queue)["Body"] == "later"


def test_quiet_group_is_not_starved_by_a_noisy_one(sqs, queue):
    send_batches(sqs, queue, "noisy", [f"noisy-{i}" for i in range(50)])
    sqs.send_message(QueueUrl=queue, MessageBody="quiet", MessageGroupId="quiet")
    msgs = receive(sqs, queue, MaxNumberOfMessages=10, AttributeNames=["MessageGroupId"])
    got = [m["Body"] for m in msgs]
    assert len(got) == 10 and len(set(got)) == 10, got
    assert "quiet" in got
    assert {m["Attributes"]["MessageGroupId"] for m in msgs} == {"noisy", "quiet"}
    assert counts(sqs, queue) == (41, 10, 0)


def test_several_quiet_groups_share_one_receive(sqs, queue):
    send_batches(sqs, queue, "noisy", [f"noisy-{i}" for i in range(30)])
    for g in ("q1", "q2", "q3"):
        sqs.send_message(QueueUrl=queue, MessageBody=g, MessageGroupId=g)
    msgs = receive(sqs, queue, MaxNumberOfMessages=4, AttributeNames=["MessageGroupId"])
    # Round-robin over four groups: one message of each.
    assert sorted(m["Attributes"]["MessageGroupId"] for m in msgs) == ["noisy", "q1", "q2", "q3"]
