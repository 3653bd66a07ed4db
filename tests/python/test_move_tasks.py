"""Message move tasks (reference §9.4): StartMessageMoveTask, ListMessageMoveTasks and
CancelMessageMoveTask. Rates are counted on the server clock: the tests freeze it, advance
it, and poll ListMessageMoveTasks (short real sleeps, bounded) until the expected count."""

import base64
import json
import re
import time
import uuid

import pytest

from sqsim_helpers import (
    ACCOUNT,
    counts,
    dead_letter,
    expect_error,
    newest_task,
    queue_arn,
    receive,
    set_redrive,
    wait_moved,
    wait_status,
)

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@pytest.fixture
def frozen(clock):
    clock.freeze()
    return clock


@pytest.fixture
def dlq_setup(sqs, queue_factory, advance):
    """fill(n, **kw) -> (src, dlq, dlq_arn, sent): a source whose n messages were moved to a
    fresh DLQ (maxReceiveCount 1)."""

    def fill(n, src=None, dlq=None, prefix="m"):
        src = src or queue_factory()
        dlq = dlq or queue_factory()
        sent = dead_letter(sqs, src, dlq, [f"{prefix}{i}" for i in range(n)], advance)
        return src, dlq, queue_arn(sqs, dlq), sent

    return fill


def drain(sqs, url):
    """Receives everything visible (visibility 300 s); returns the messages."""
    out = []
    while True:
        got = receive(sqs, url, MaxNumberOfMessages=10, VisibilityTimeout=300, AttributeNames=["All"])
        if not got:
            return out
        out.extend(got)


def settle(seconds=0.15):
    """A short real pause to show that nothing more happens without clock time."""
    time.sleep(seconds)


# --- the handle, the rate, completion ----------------------------------------------------------


def test_move_at_one_per_second_back_to_the_source(sqs, dlq_setup, frozen):
    src, dlq, dlq_arn, sent = dlq_setup(4)
    started_ms = frozen.now_ms()
    handle = sqs.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=1)[
        "TaskHandle"
    ]
    decoded = json.loads(base64.b64decode(handle, validate=True))
    assert set(decoded) == {"taskId", "sourceArn"}
    assert decoded["sourceArn"] == dlq_arn
    assert UUID.match(decoded["taskId"]), decoded

    # The clock is frozen: one message goes at once...
    t = wait_moved(sqs, dlq_arn, 1)
    assert t["Status"] == "RUNNING"
    assert t["TaskHandle"] == handle
    assert t["SourceArn"] == dlq_arn
    assert t["MaxNumberOfMessagesPerSecond"] == 1
    assert t["ApproximateNumberOfMessagesToMove"] == 4
    assert t["StartedTimestamp"] == started_ms
    assert "DestinationArn" not in t
    assert "FailureReason" not in t
    # ...and no more without clock time.
    settle()
    t = newest_task(sqs, dlq_arn)
    assert (t["Status"], t["ApproximateNumberOfMessagesMoved"]) == ("RUNNING", 1)
    assert counts(sqs, dlq) == (3, 0, 0)
    assert counts(sqs, src) == (1, 0, 0)

    # Then one per second of clock time.
    for moved in (2, 3, 4):
        frozen.advance(1)
        wait_moved(sqs, dlq_arn, moved)
        settle(0.05)
        assert newest_task(sqs, dlq_arn)["ApproximateNumberOfMessagesMoved"] == moved
    t = wait_status(sqs, dlq_arn, "COMPLETED")
    assert t["ApproximateNumberOfMessagesMoved"] == 4
    assert t["ApproximateNumberOfMessagesToMove"] == 4
    assert t["StartedTimestamp"] == started_ms
    assert "TaskHandle" not in t  # only while RUNNING
    assert "FailureReason" not in t

    assert counts(sqs, dlq) == (0, 0, 0)
    back = drain(sqs, src)
    assert {m["MessageId"]: m["Body"] for m in back} == sent
    for m in back:
        assert m["Attributes"]["ApproximateReceiveCount"] == "1"  # counting starts again
        assert "DeadLetterQueueSourceArn" not in m["Attributes"]


def test_rate_two_per_second(sqs, dlq_setup, frozen):
    _, dlq, dlq_arn, _ = dlq_setup(5)
    sqs.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=2)
    wait_moved(sqs, dlq_arn, 1)
    settle()
    assert newest_task(sqs, dlq_arn)["ApproximateNumberOfMessagesMoved"] == 1
    frozen.advance(1)
    wait_moved(sqs, dlq_arn, 3)
    settle()
    assert newest_task(sqs, dlq_arn)["ApproximateNumberOfMessagesMoved"] == 3
    frozen.advance(1)
    t = wait_status(sqs, dlq_arn, "COMPLETED")
    assert t["ApproximateNumberOfMessagesMoved"] == 5


def test_move_without_a_rate_is_fast_and_returns_each_message_to_its_source(
    sqs, queue_factory, dlq_setup
):
    dlq = queue_factory()
    src_a, _, dlq_arn, sent_a = dlq_setup(3, dlq=dlq, prefix="a")
    src_b, _, _, sent_b = dlq_setup(2, dlq=dlq, prefix="b")
    assert counts(sqs, dlq) == (5, 0, 0)
    handle = sqs.start_message_move_task(SourceArn=dlq_arn)["TaskHandle"]
    t = wait_status(sqs, dlq_arn, "COMPLETED")
    assert t["ApproximateNumberOfMessagesMoved"] == 5
    assert t["ApproximateNumberOfMessagesToMove"] == 5
    assert "MaxNumberOfMessagesPerSecond" not in t
    assert "DestinationArn" not in t
    assert handle
    assert {m["MessageId"]: m["Body"] for m in drain(sqs, src_a)} == sent_a
    assert {m["MessageId"]: m["Body"] for m in drain(sqs, src_b)} == sent_b
    assert counts(sqs, dlq) == (0, 0, 0)


def test_explicit_destination(sqs, queue_factory, dlq_setup):
    src, dlq, dlq_arn, sent = dlq_setup(3)
    dest = queue_factory()
    dest_arn = queue_arn(sqs, dest)
    sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=dest_arn)
    t = wait_status(sqs, dlq_arn, "COMPLETED")
    assert t["DestinationArn"] == dest_arn
    assert t["ApproximateNumberOfMessagesMoved"] == 3
    assert "MaxNumberOfMessagesPerSecond" not in t
    assert counts(sqs, src) == (0, 0, 0)
    assert counts(sqs, dlq) == (0, 0, 0)
    moved = drain(sqs, dest)
    assert {m["MessageId"]: m["Body"] for m in moved} == sent
    for m in moved:
        assert m["Attributes"]["ApproximateReceiveCount"] == "1"
        assert "DeadLetterQueueSourceArn" not in m["Attributes"]


def test_redriven_messages_can_be_dead_lettered_again(sqs, dlq_setup, advance):
    src, dlq, dlq_arn, sent = dlq_setup(2)
    sqs.start_message_move_task(SourceArn=dlq_arn)
    wait_status(sqs, dlq_arn, "COMPLETED")
    # maxReceiveCount is still 1 at the source: one delivery, then back to the DLQ.
    assert len(receive(sqs, src, MaxNumberOfMessages=10, VisibilityTimeout=30)) == 2
    advance(30)
    assert receive(sqs, src, MaxNumberOfMessages=10) == []
    again = drain(sqs, dlq)
    assert {m["MessageId"] for m in again} == set(sent)
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in again} == {"2"}


def test_fifo_move_task_keeps_group_order(sqs, queue_factory, advance):
    def fifo():
        return queue_factory(
            f"mt-{uuid.uuid4().hex[:12]}.fifo",
            Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
        )

    dlq, src = fifo(), fifo()
    dlq_arn = queue_arn(sqs, dlq)
    set_redrive(sqs, src, dlq_arn, 1)
    for i in range(4):
        sqs.send_message(QueueUrl=src, MessageBody=f"f{i}", MessageGroupId="g")
    assert len(receive(sqs, src, MaxNumberOfMessages=10, VisibilityTimeout=30)) == 4
    advance(30)
    assert receive(sqs, src, MaxNumberOfMessages=10) == []
    sqs.start_message_move_task(SourceArn=dlq_arn)
    assert wait_status(sqs, dlq_arn, "COMPLETED")["ApproximateNumberOfMessagesMoved"] == 4
    sqs.set_queue_attributes(QueueUrl=src, Attributes={"RedrivePolicy": ""})
    got = receive(sqs, src, MaxNumberOfMessages=10, VisibilityTimeout=30)
    assert [m["Body"] for m in got] == ["f0", "f1", "f2", "f3"]


# --- cancel ------------------------------------------------------------------------------------


def test_cancel_mid_way(sqs, queue_factory, dlq_setup, frozen):
    _, dlq, dlq_arn, _ = dlq_setup(5)
    dest = queue_factory()
    dest_arn = queue_arn(sqs, dest)
    handle = sqs.start_message_move_task(
        SourceArn=dlq_arn, DestinationArn=dest_arn, MaxNumberOfMessagesPerSecond=1
    )["TaskHandle"]
    wait_moved(sqs, dlq_arn, 1)
    frozen.advance(1)
    wait_moved(sqs, dlq_arn, 2)
    settle(0.05)
    resp = sqs.cancel_message_move_task(TaskHandle=handle)
    assert resp["ApproximateNumberOfMessagesMoved"] == 2
    t = wait_status(sqs, dlq_arn, "CANCELLED")
    assert t["ApproximateNumberOfMessagesMoved"] == 2
    assert t["ApproximateNumberOfMessagesToMove"] == 5
    assert t["DestinationArn"] == dest_arn
    assert t["MaxNumberOfMessagesPerSecond"] == 1
    assert "TaskHandle" not in t
    assert "FailureReason" not in t

    # Clock time no longer moves anything: the rest stay in the DLQ.
    frozen.advance(10)
    settle()
    assert newest_task(sqs, dlq_arn)["ApproximateNumberOfMessagesMoved"] == 2
    assert counts(sqs, dest) == (2, 0, 0)
    assert counts(sqs, dlq) == (3, 0, 0)

    # Only a RUNNING task can be cancelled.
    expect_error(sqs.cancel_message_move_task, "InvalidParameterValue", TaskHandle=handle)

    # A new task may start once the old one is cancelled; it moves the remaining 3.
    sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=dest_arn)
    t = wait_status(sqs, dlq_arn, "COMPLETED")
    assert (t["ApproximateNumberOfMessagesToMove"], t["ApproximateNumberOfMessagesMoved"]) == (3, 3)
    assert counts(sqs, dest) == (5, 0, 0)
    assert counts(sqs, dlq) == (0, 0, 0)


def test_cancel_completed_task_is_refused(sqs, dlq_setup):
    _, _, dlq_arn, _ = dlq_setup(1)
    handle = sqs.start_message_move_task(SourceArn=dlq_arn)["TaskHandle"]
    wait_status(sqs, dlq_arn, "COMPLETED")
    expect_error(sqs.cancel_message_move_task, "InvalidParameterValue", TaskHandle=handle)
    assert newest_task(sqs, dlq_arn)["Status"] == "COMPLETED"


@pytest.mark.parametrize(
    "handle",
    [
        "not-a-handle",
        base64.b64encode(b"not json").decode(),
        base64.b64encode(b'{"taskId":"x"}').decode(),
        base64.b64encode(b"[1,2]").decode(),
    ],
    ids=["not-base64", "not-json", "no-source", "array"],
)
def test_cancel_bad_task_handle(sqs, handle):
    err = expect_error(sqs.cancel_message_move_task, "InvalidParameterValue", TaskHandle=handle)
    assert err.response["Error"]["Message"] == "Value for parameter TaskHandle is invalid."


def test_cancel_unknown_task(sqs, dlq_setup):
    _, _, dlq_arn, _ = dlq_setup(1)
    handle = base64.b64encode(
        json.dumps({"taskId": str(uuid.uuid4()), "sourceArn": dlq_arn}).encode()
    ).decode()
    err = expect_error(
        sqs.cancel_message_move_task, "ResourceNotFoundException", 404, TaskHandle=handle
    )
    assert err.response["Error"]["Message"] == "Task does not exist."


def test_cancel_with_a_missing_source(sqs):
    handle = base64.b64encode(
        json.dumps(
            {"taskId": str(uuid.uuid4()), "sourceArn": f"arn:aws:sqs:us-east-1:{ACCOUNT}:gone-dlq"}
        ).encode()
    ).decode()
    err = expect_error(
        sqs.cancel_message_move_task, "ResourceNotFoundException", 404, TaskHandle=handle
    )
    assert err.response["Error"]["Message"] == (
        "The resource that you specified for the SourceArn parameter doesn't exist."
    )


# --- list ------------------------------------------------------------------------------------


def test_list_newest_first_and_max_results(sqs, queue_factory, dlq_setup, advance):
    src, dlq, dlq_arn, _ = dlq_setup(2)
    resp = sqs.list_message_move_tasks(SourceArn=dlq_arn)
    assert resp.get("Results", []) == []

    dest = queue_factory()
    dest_arn = queue_arn(sqs, dest)
    sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=dest_arn)
    first = wait_status(sqs, dlq_arn, "COMPLETED")
    advance(5)  # a later StartedTimestamp for the second task
    # Dead-letter two more, then a second task back to the source, with a rate.
    dlq_setup(2, src=src, dlq=dlq)
    sqs.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=500)
    second = wait_status(sqs, dlq_arn, "COMPLETED")
    assert second["StartedTimestamp"] >= first["StartedTimestamp"] + 5000

    default = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
    assert len(default) == 1  # MaxResults defaults to 1
    assert default[0] == second
    both = sqs.list_message_move_tasks(SourceArn=dlq_arn, MaxResults=10)["Results"]
    assert both == [second, first]
    assert sqs.list_message_move_tasks(SourceArn=dlq_arn, MaxResults=1)["Results"] == [second]

    assert second["MaxNumberOfMessagesPerSecond"] == 500
    assert "DestinationArn" not in second
    assert first["DestinationArn"] == dest_arn
    assert "MaxNumberOfMessagesPerSecond" not in first
    for t in both:
        assert t["SourceArn"] == dlq_arn
        assert t["Status"] == "COMPLETED"
        assert (t["ApproximateNumberOfMessagesMoved"], t["ApproximateNumberOfMessagesToMove"]) == (
            2,
            2,
        )
        assert isinstance(t["StartedTimestamp"], int)
        assert t["StartedTimestamp"] > 1_600_000_000_000  # epoch milliseconds
        assert set(t) <= {
            "Status",
            "SourceArn",
            "DestinationArn",
            "MaxNumberOfMessagesPerSecond",
            "ApproximateNumberOfMessagesMoved",
            "ApproximateNumberOfMessagesToMove",
            "StartedTimestamp",
        }
    # Tasks are per source: the other queue has none.
    assert sqs.list_message_move_tasks(SourceArn=dest_arn).get("Results", []) == []


def test_list_max_results_ten_of_eleven(sqs, dlq_setup):
    _, dlq, dlq_arn, _ = dlq_setup(1)
    for _ in range(11):
        sqs.start_message_move_task(SourceArn=dlq_arn)
        wait_status(sqs, dlq_arn, "COMPLETED")
    got = sqs.list_message_move_tasks(SourceArn=dlq_arn, MaxResults=10)["Results"]
    assert len(got) == 10
    stamps = [t["StartedTimestamp"] for t in got]
    assert stamps == sorted(stamps, reverse=True)


@pytest.mark.parametrize("max_results", [0, 11])
def test_list_max_results_out_of_range(sqs, dlq_setup, max_results):
    _, _, dlq_arn, _ = dlq_setup(1)
    expect_error(
        sqs.list_message_move_tasks,
        "InvalidParameterValue",
        SourceArn=dlq_arn,
        MaxResults=max_results,
    )


def test_list_unknown_source(sqs):
    err = expect_error(
        sqs.list_message_move_tasks,
        "ResourceNotFoundException",
        404,
        SourceArn=f"arn:aws:sqs:us-east-1:{ACCOUNT}:no-such-source-queue",
    )
    assert err.response["Error"]["Message"] == (
        "The resource that you specified for the SourceArn parameter doesn't exist."
    )


# --- start errors ----------------------------------------------------------------------------


def test_start_unknown_source(sqs):
    err = expect_error(
        sqs.start_message_move_task,
        "ResourceNotFoundException",
        404,
        SourceArn=f"arn:aws:sqs:us-east-1:{ACCOUNT}:no-such-source-queue",
    )
    assert err.response["Error"]["Message"] == (
        "The resource that you specified for the SourceArn parameter doesn't exist."
    )


def test_start_source_in_another_region(sqs, dlq_setup):
    _, _, dlq_arn, _ = dlq_setup(1)
    elsewhere = dlq_arn.replace(":us-east-1:", ":eu-west-1:")
    expect_error(
        sqs.start_message_move_task, "ResourceNotFoundException", 404, SourceArn=elsewhere
    )


def test_start_on_a_queue_that_is_not_a_dlq(sqs, queue_factory):
    plain = queue_factory()
    dlq = queue_factory()
    src = queue_factory()
    set_redrive(sqs, src, queue_arn(sqs, dlq), 3)
    for url in (plain, src):  # neither is anybody's dead-letter queue
        err = expect_error(
            sqs.start_message_move_task, "InvalidParameterValue", SourceArn=queue_arn(sqs, url)
        )
        assert err.response["Error"]["Message"] == (
            "Source queue must be configured as a Dead Letter Queue."
        )
    assert sqs.list_message_move_tasks(SourceArn=queue_arn(sqs, plain)).get("Results", []) == []


def test_start_unknown_destination(sqs, dlq_setup):
    _, dlq, dlq_arn, _ = dlq_setup(1)
    err = expect_error(
        sqs.start_message_move_task,
        "ResourceNotFoundException",
        404,
        SourceArn=dlq_arn,
        DestinationArn=f"arn:aws:sqs:us-east-1:{ACCOUNT}:no-such-destination",
    )
    assert err.response["Error"]["Message"] == (
        "The resource that you specified for the DestinationArn parameter doesn't exist."
    )
    assert sqs.list_message_move_tasks(SourceArn=dlq_arn).get("Results", []) == []
    assert counts(sqs, dlq) == (1, 0, 0)


def test_only_one_running_task_per_source(sqs, dlq_setup, frozen):
    _, _, dlq_arn, _ = dlq_setup(3)
    handle = sqs.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=1)[
        "TaskHandle"
    ]
    wait_moved(sqs, dlq_arn, 1)
    for kwargs in ({}, {"MaxNumberOfMessagesPerSecond": 10}):
        err = expect_error(
            sqs.start_message_move_task, "InvalidParameterValue", SourceArn=dlq_arn, **kwargs
        )
        assert err.response["Error"]["Message"] == (
            "There is already a task running. Only one active task is allowed for a source "
            "queue arn at a given time."
        )
    assert len(sqs.list_message_move_tasks(SourceArn=dlq_arn, MaxResults=10)["Results"]) == 1
    sqs.cancel_message_move_task(TaskHandle=handle)
    wait_status(sqs, dlq_arn, "CANCELLED")


@pytest.mark.parametrize("rate", [0, 501])
def test_start_rate_out_of_range(sqs, dlq_setup, rate):
    _, dlq, dlq_arn, _ = dlq_setup(1)
    expect_error(
        sqs.start_message_move_task,
        "InvalidParameterValue",
        SourceArn=dlq_arn,
        MaxNumberOfMessagesPerSecond=rate,
    )
    assert sqs.list_message_move_tasks(SourceArn=dlq_arn).get("Results", []) == []
    assert counts(sqs, dlq) == (1, 0, 0)


def test_start_rate_500_is_allowed(sqs, dlq_setup):
    _, _, dlq_arn, _ = dlq_setup(1)
    sqs.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=500)
    assert wait_status(sqs, dlq_arn, "COMPLETED")["MaxNumberOfMessagesPerSecond"] == 500


# --- failures --------------------------------------------------------------------------------


def test_original_source_deleted_fails_without_losing_messages(sqs, queue_factory, dlq_setup):
    src, dlq, dlq_arn, sent = dlq_setup(3)
    sqs.delete_queue(QueueUrl=src)
    # Keep the DLQ a dead-letter queue through another source.
    other = queue_factory()
    set_redrive(sqs, other, dlq_arn, 3)
    sqs.start_message_move_task(SourceArn=dlq_arn)
    t = wait_status(sqs, dlq_arn, "FAILED")
    assert t["FailureReason"] == "AWS.SimpleQueueService.NonExistentQueue"
    assert t["ApproximateNumberOfMessagesMoved"] == 0
    assert "TaskHandle" not in t
    assert counts(sqs, other) == (0, 0, 0)
    assert counts(sqs, dlq) == (3, 0, 0), "nothing is lost"
    # A failed task is not running: a new one may start, here to an explicit destination.
    sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=queue_arn(sqs, other))
    t = wait_status(sqs, dlq_arn, "COMPLETED")
    assert t["ApproximateNumberOfMessagesMoved"] == 3
    assert {m["MessageId"]: m["Body"] for m in drain(sqs, other)} == sent


def test_destination_deleted_mid_way_fails_without_losing_messages(
    sqs, queue_factory, dlq_setup, frozen
):
    _, dlq, dlq_arn, sent = dlq_setup(4)
    dest = queue_factory()
    dest_arn = queue_arn(sqs, dest)
    sqs.start_message_move_task(
        SourceArn=dlq_arn, DestinationArn=dest_arn, MaxNumberOfMessagesPerSecond=1
    )
    wait_moved(sqs, dlq_arn, 1)
    first = receive(sqs, dest, AttributeNames=["All"])
    assert len(first) == 1
    sqs.delete_queue(QueueUrl=dest)
    frozen.advance(1)
    t = wait_status(sqs, dlq_arn, "FAILED")
    assert t["FailureReason"] == "AWS.SimpleQueueService.NonExistentQueue"
    assert t["ApproximateNumberOfMessagesMoved"] == 1
    assert t["DestinationArn"] == dest_arn
    assert "TaskHandle" not in t
    # The message that was due stays in the DLQ with the others.
    rest = drain(sqs, dlq)
    assert len(rest) == 3
    assert {m["MessageId"] for m in rest} | {first[0]["MessageId"]} == set(sent)
