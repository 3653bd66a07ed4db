"""Behaviour recorded on real AWS that sqsim once got wrong (issue 11): earlier receipt
handles, self-targeting and normalised redrive policies, and empty tag requests. Run in both
protocols (`make test-python` and `make test-query`)."""

import json
import threading
import urllib.parse
import urllib.request
import uuid

import pytest

from sqsim_helpers import (
    counts,
    expect_error,
    protocol_of,
    queue_arn,
    queue_attrs,
    receive,
    receive_one,
)


@pytest.fixture
def frozen(clock):
    clock.freeze()
    return clock


# --- 1. an earlier receipt handle still changes visibility (standard queues) ---------------


def test_earlier_handle_changes_visibility_after_a_new_receive(sqs, queue, frozen):
    # Recorded on AWS: R1 (timeout 0), R2 (timeout 3), then ChangeMessageVisibility(R1, 0)
    # succeeds and the message is receivable at once.
    sqs.send_message(QueueUrl=queue, MessageBody="again")
    r1 = receive_one(sqs, queue, VisibilityTimeout=0)["ReceiptHandle"]
    r2 = receive_one(sqs, queue, VisibilityTimeout=3)["ReceiptHandle"]
    assert r1 != r2
    assert counts(sqs, queue) == (0, 1, 0)
    sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=r1, VisibilityTimeout=0)
    assert counts(sqs, queue) == (1, 0, 0)
    msg = receive_one(sqs, queue, AttributeNames=["ApproximateReceiveCount"])
    assert msg["Body"] == "again"
    assert msg["Attributes"]["ApproximateReceiveCount"] == "3"
    # The earlier handle can also hide it for longer.
    sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=r1, VisibilityTimeout=60)
    frozen.advance(59)
    assert receive(sqs, queue) == []
    frozen.advance(1)
    assert counts(sqs, queue) == (1, 0, 0)


def test_earlier_handle_in_a_visibility_batch(sqs, queue, frozen):
    sqs.send_message(QueueUrl=queue, MessageBody="a")
    r1 = receive_one(sqs, queue, VisibilityTimeout=0)["ReceiptHandle"]
    receive_one(sqs, queue, VisibilityTimeout=30)
    out = sqs.change_message_visibility_batch(
        QueueUrl=queue,
        Entries=[{"Id": "old", "ReceiptHandle": r1, "VisibilityTimeout": 0}],
    )
    assert [e["Id"] for e in out.get("Successful", [])] == ["old"], out
    assert out.get("Failed", []) == []
    assert counts(sqs, queue) == (1, 0, 0)


def test_earlier_handle_of_a_deleted_message_still_fails(sqs, queue):
    sqs.send_message(QueueUrl=queue, MessageBody="gone")
    r1 = receive_one(sqs, queue, VisibilityTimeout=0)["ReceiptHandle"]
    r2 = receive_one(sqs, queue)["ReceiptHandle"]
    sqs.delete_message(QueueUrl=queue, ReceiptHandle=r2)
    expect_error(
        sqs.change_message_visibility,
        "InvalidParameterValue",
        QueueUrl=queue,
        ReceiptHandle=r1,
        VisibilityTimeout=0,
    )


def test_fifo_keeps_refusing_an_earlier_handle(sqs, queue_factory, frozen):
    url = queue_factory(
        name=f"fid-{uuid.uuid4().hex[:12]}.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )
    sqs.send_message(QueueUrl=url, MessageBody="f", MessageGroupId="g")
    r1 = receive_one(sqs, url, VisibilityTimeout=0)["ReceiptHandle"]
    receive_one(sqs, url, VisibilityTimeout=30)
    expect_error(
        sqs.change_message_visibility,
        "InvalidParameterValue",
        QueueUrl=url,
        ReceiptHandle=r1,
        VisibilityTimeout=0,
    )
    assert counts(sqs, url) == (0, 1, 0)


# --- 3. a RedrivePolicy may name the queue itself ---------------------------------------


def test_queue_can_be_its_own_dead_letter_queue(sqs, queue, frozen):
    arn = queue_arn(sqs, queue)
    sqs.set_queue_attributes(
        QueueUrl=queue,
        Attributes={
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 2})
        },
    )
    assert json.loads(queue_attrs(sqs, queue, "RedrivePolicy")["RedrivePolicy"]) == {
        "deadLetterTargetArn": arn,
        "maxReceiveCount": 2,
    }
    assert sqs.list_dead_letter_source_queues(QueueUrl=queue)["queueUrls"] == [queue]
    sqs.send_message(QueueUrl=queue, MessageBody="loop")
    for _ in range(2):
        receive_one(sqs, queue, VisibilityTimeout=5)
        frozen.advance(5)
    # The receive that exceeds maxReceiveCount moves the message into its own queue once; it
    # is then a dead letter there and is delivered like any other message, never lost.
    assert receive(sqs, queue) == []
    assert counts(sqs, queue) == (1, 0, 0)
    msg = receive_one(sqs, queue, AttributeNames=["All"])
    assert msg["Body"] == "loop"
    assert msg["Attributes"]["DeadLetterQueueSourceArn"] == arn
    assert msg["Attributes"]["ApproximateReceiveCount"] == "3"
    # Setting it to "" removes it.
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={"RedrivePolicy": ""})
    assert "RedrivePolicy" not in queue_attrs(sqs, queue, "All")
    assert sqs.list_dead_letter_source_queues(QueueUrl=queue).get("queueUrls", []) == []


def test_self_target_refused_by_own_allow_policy_set_in_the_same_call(sqs, queue):
    arn = queue_arn(sqs, queue)
    expect_error(
        sqs.set_queue_attributes,
        "InvalidParameterValue",
        QueueUrl=queue,
        Attributes={
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 1}),
            "RedriveAllowPolicy": '{"redrivePermission":"denyAll"}',
        },
    )
    assert "RedrivePolicy" not in queue_attrs(sqs, queue, "All")


def test_self_and_crossed_policies_set_concurrently_never_hang(sqs, queue_factory):
    a, b = queue_factory(), queue_factory()
    arns = {a: queue_arn(sqs, a), b: queue_arn(sqs, b)}
    errors = []

    def worker(i):
        try:
            for j in range(10):
                src = a if (i + j) % 2 == 0 else b
                target = [a, b][(i * j) % 2]
                policy = json.dumps({"deadLetterTargetArn": arns[target], "maxReceiveCount": 3})
                sqs.set_queue_attributes(QueueUrl=src, Attributes={"RedrivePolicy": policy})
                receive(sqs, src)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a SetQueueAttributes call hung"
    assert errors == []


# --- 4. redrive policies come back normalised -------------------------------------------


def test_redrive_policy_count_sent_as_text_comes_back_a_number(sqs, queue_factory):
    dlq = queue_factory()
    dlq_arn = queue_arn(sqs, dlq)
    src = queue_factory(
        Attributes={
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "5"}, indent=2
            )
        }
    )
    got = queue_attrs(sqs, src, "RedrivePolicy")["RedrivePolicy"]
    assert got == f'{{"deadLetterTargetArn":"{dlq_arn}","maxReceiveCount":5}}'
    # The same policy written differently is the same attribute value for CreateQueue.
    same = sqs.create_queue(
        QueueName=src.rsplit("/", 1)[1],
        Attributes={"RedrivePolicy": f'{{"maxReceiveCount":5,"deadLetterTargetArn":"{dlq_arn}"}}'},
    )
    assert same["QueueUrl"] == src


def test_redrive_allow_policy_comes_back_normalised(sqs, queue_factory):
    src = queue_factory()
    src_arn = queue_arn(sqs, src)
    dlq = queue_factory(
        Attributes={
            "RedriveAllowPolicy": json.dumps(
                {"sourceQueueArns": [src_arn], "redrivePermission": "byQueue"}, indent=1
            )
        }
    )
    got = queue_attrs(sqs, dlq, "RedriveAllowPolicy")["RedriveAllowPolicy"]
    assert got == f'{{"redrivePermission":"byQueue","sourceQueueArns":["{src_arn}"]}}'
    sqs.set_queue_attributes(
        QueueUrl=dlq, Attributes={"RedriveAllowPolicy": '{ "redrivePermission" : "allowAll" }'}
    )
    got = queue_attrs(sqs, dlq, "RedriveAllowPolicy")["RedriveAllowPolicy"]
    assert got == '{"redrivePermission":"allowAll"}'


# --- 5. empty tag requests --------------------------------------------------------------


def test_tag_queue_with_no_tags_is_missing_parameter(sqs, queue):
    err = expect_error(sqs.tag_queue, "MissingParameter", QueueUrl=queue, Tags={})
    assert err.response["Error"]["Message"] == "The request must contain the parameter Tags."
    assert sqs.list_queue_tags(QueueUrl=queue).get("Tags", {}) == {}


def test_untag_queue_with_no_keys_is_invalid(sqs, queue):
    sqs.tag_queue(QueueUrl=queue, Tags={"keep": "me"})
    for keys in ([], [""], ["k" * 129]):
        err = expect_error(sqs.untag_queue, "InvalidParameterValue", QueueUrl=queue, TagKeys=keys)
        assert (
            err.response["Error"]["Message"]
            == "Tag keys must be between 1 and 128 characters in length."
        )
    assert sqs.list_queue_tags(QueueUrl=queue)["Tags"] == {"keep": "me"}


# --- 6. siblings: earlier and foreign handles, empty lists ------------------------------


def test_earlier_handle_deletes_in_a_batch(sqs, queue, frozen):
    # AWS's API reference says a delete with an earlier handle succeeds but the message
    # might not be deleted; sqsim deletes it (docs/differences.md, "What differs from AWS").
    sqs.send_message(QueueUrl=queue, MessageBody="old")
    r1 = receive_one(sqs, queue, VisibilityTimeout=0)["ReceiptHandle"]
    r2 = receive_one(sqs, queue, VisibilityTimeout=30)["ReceiptHandle"]
    assert r1 != r2
    out = sqs.delete_message_batch(QueueUrl=queue, Entries=[{"Id": "old", "ReceiptHandle": r1}])
    assert [e["Id"] for e in out.get("Successful", [])] == ["old"], out
    assert out.get("Failed", []) == []
    assert counts(sqs, queue) == (0, 0, 0)
    frozen.advance(30)
    assert receive(sqs, queue) == []


def invalid_handle_message(handle):
    return f'The input receipt handle "{handle}" is not a valid receipt handle.'


def test_a_handle_from_another_queue_is_invalid(sqs, queue_factory):
    mine, other = queue_factory(), queue_factory()
    sqs.send_message(QueueUrl=mine, MessageBody="mine")
    foreign = receive_one(sqs, mine, VisibilityTimeout=30)["ReceiptHandle"]
    sqs.send_message(QueueUrl=other, MessageBody="other's")
    own = receive_one(sqs, other, VisibilityTimeout=30)["ReceiptHandle"]

    err = expect_error(
        sqs.delete_message, "ReceiptHandleIsInvalid", 404, QueueUrl=other, ReceiptHandle=foreign
    )
    assert err.response["Error"]["Message"] == invalid_handle_message(foreign)
    err = expect_error(
        sqs.change_message_visibility,
        "ReceiptHandleIsInvalid",
        404,
        QueueUrl=other,
        ReceiptHandle=foreign,
        VisibilityTimeout=0,
    )
    assert err.response["Error"]["Message"] == invalid_handle_message(foreign)

    # In a batch the foreign entry fails on its own and the others go through.
    failed = {
        "Id": "foreign",
        "SenderFault": True,
        "Code": "ReceiptHandleIsInvalid",
        "Message": invalid_handle_message(foreign),
    }
    out = sqs.change_message_visibility_batch(
        QueueUrl=other,
        Entries=[
            {"Id": "foreign", "ReceiptHandle": foreign, "VisibilityTimeout": 0},
            {"Id": "own", "ReceiptHandle": own, "VisibilityTimeout": 60},
        ],
    )
    assert [e["Id"] for e in out["Successful"]] == ["own"]
    assert out["Failed"] == [failed]
    out = sqs.delete_message_batch(
        QueueUrl=other,
        Entries=[{"Id": "foreign", "ReceiptHandle": foreign}, {"Id": "own", "ReceiptHandle": own}],
    )
    assert [e["Id"] for e in out["Successful"]] == ["own"]
    assert out["Failed"] == [failed]
    assert counts(sqs, other) == (0, 0, 0)

    # Nothing happened to the message in its own queue, where its handle still works.
    assert counts(sqs, mine) == (0, 1, 0)
    sqs.delete_message(QueueUrl=mine, ReceiptHandle=foreign)
    assert counts(sqs, mine) == (0, 0, 0)


@pytest.mark.parametrize("empty", ["AWSAccountIds", "Actions"])
def test_add_permission_with_an_empty_list_is_missing_parameter(sqs, queue, empty):
    # botocore sends the empty list (JSON `[]`; query `AWSAccountId=`), so this is what
    # sqsim itself answers.
    given = {"AWSAccountIds": ["111122223333"], "Actions": ["SendMessage"], empty: []}
    err = expect_error(sqs.add_permission, "MissingParameter", QueueUrl=queue, Label="l", **given)
    assert err.response["Error"]["Message"] == f"The request must contain the parameter {empty}."
    assert "Policy" not in queue_attrs(sqs, queue, "All")


def test_receive_with_empty_attribute_name_lists(sqs, queue, endpoint):
    sqs.send_message(
        QueueUrl=queue,
        MessageBody="plain",
        MessageAttributes={"a": {"DataType": "String", "StringValue": "v"}},
    )
    msg = receive_one(
        sqs, queue, VisibilityTimeout=0, AttributeNames=[], MessageAttributeNames=[]
    )
    assert msg["Body"] == "plain"
    assert "Attributes" not in msg
    assert "MessageAttributes" not in msg
    if protocol_of(sqs) == "json":
        msg = receive_one(sqs, queue, VisibilityTimeout=0, MessageSystemAttributeNames=[])
        assert msg["Body"] == "plain"
        assert "Attributes" not in msg
        return
    # The query pin's botocore predates MessageSystemAttributeNames; an empty list is sent as
    # botocore's query serializer sends one: the bare name with an empty value.
    form = urllib.parse.urlencode(
        [
            ("Action", "ReceiveMessage"),
            ("Version", "2012-11-05"),
            ("QueueUrl", queue),
            ("VisibilityTimeout", "0"),
            ("MessageSystemAttributeName", ""),
        ]
    ).encode()
    req = urllib.request.Request(
        endpoint, data=form, headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200
        body = resp.read().decode()
    assert "<Body>plain</Body>" in body, body
    assert "<Attribute>" not in body, body
