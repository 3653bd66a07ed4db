"""SendMessageBatch, DeleteMessageBatch and ChangeMessageVisibilityBatch: whole-request
errors and per-entry results."""

import pytest

from sqsim_helpers import counts, expect_error, md5_hex, md5_of_attributes, receive


def entries(n, body="m"):
    return [{"Id": f"e{i}", "MessageBody": f"{body}{i}"} for i in range(n)]


def test_send_batch_success(sqs, queue):
    attrs = {"Foo": {"DataType": "String", "StringValue": "Bar"}}
    batch = [
        {"Id": "plain", "MessageBody": "one"},
        {"Id": "with-attrs", "MessageBody": "two", "MessageAttributes": attrs},
        {"Id": "delayed_1", "MessageBody": "three", "DelaySeconds": 30},
    ]
    resp = sqs.send_message_batch(QueueUrl=queue, Entries=batch)
    assert resp["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert "Failed" not in resp
    ok = {e["Id"]: e for e in resp["Successful"]}
    assert set(ok) == {"plain", "with-attrs", "delayed_1"}
    assert ok["plain"]["MD5OfMessageBody"] == md5_hex("one")
    assert "MD5OfMessageAttributes" not in ok["plain"]
    assert ok["with-attrs"]["MD5OfMessageAttributes"] == md5_of_attributes(attrs)
    assert len({e["MessageId"] for e in ok.values()}) == 3
    assert counts(sqs, queue) == (2, 0, 1)
    got = receive(sqs, queue, MaxNumberOfMessages=10, MessageAttributeNames=["All"])
    by_body = {m["Body"]: m for m in got}
    assert set(by_body) == {"one", "two"}
    assert by_body["two"]["MessageId"] == ok["with-attrs"]["MessageId"]
    assert by_body["two"]["MessageAttributes"]["Foo"]["StringValue"] == "Bar"


def test_send_batch_system_attributes(sqs, queue):
    header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    system = {"AWSTraceHeader": {"DataType": "String", "StringValue": header}}
    resp = sqs.send_message_batch(
        QueueUrl=queue,
        Entries=[
            {"Id": "traced", "MessageBody": "t", "MessageSystemAttributes": system},
            {"Id": "plain", "MessageBody": "p"},
        ],
    )
    ok = {e["Id"]: e for e in resp["Successful"]}
    assert ok["traced"]["MD5OfMessageSystemAttributes"] == "5ae4d5d7636402d80f4eb6d213245a88"
    assert "MD5OfMessageSystemAttributes" not in ok["plain"]


def test_send_batch_ten_entries(sqs, queue):
    resp = sqs.send_message_batch(QueueUrl=queue, Entries=entries(10))
    assert len(resp["Successful"]) == 10
    assert counts(sqs, queue)[0] == 10


def test_send_batch_per_entry_failures(sqs, queue_factory):
    url = queue_factory(Attributes={"MaximumMessageSize": "1024"})
    batch = [
        {"Id": "good1", "MessageBody": "fine"},
        {"Id": "badchars", "MessageBody": "nul \x00 here"},
        {"Id": "toolong", "MessageBody": "x" * 1025},
        {"Id": "badattr", "MessageBody": "y",
         "MessageAttributes": {"E": {"DataType": "String", "StringValue": ""}}},
        {"Id": "good2", "MessageBody": "also fine"},
    ]
    resp = sqs.send_message_batch(QueueUrl=url, Entries=batch)
    assert resp["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert sorted(e["Id"] for e in resp["Successful"]) == ["good1", "good2"]
    failed = {e["Id"]: e for e in resp["Failed"]}
    assert set(failed) == {"badchars", "toolong", "badattr"}
    assert failed["badchars"]["Code"] == "InvalidMessageContents"
    assert failed["toolong"]["Code"] == "InvalidParameterValue"
    assert "1024" in failed["toolong"]["Message"]
    assert failed["badattr"]["Code"] == "InvalidParameterValue"
    for e in failed.values():
        assert e["SenderFault"] is True
        assert e["Message"]
    assert counts(sqs, url)[0] == 2


def test_send_batch_empty(sqs, queue):
    # botocore 1.34.89 (query) sends an empty list as a bare `Entries=`.
    err = expect_error(
        sqs.send_message_batch,
        "AWS.SimpleQueueService.EmptyBatchRequest",
        QueueUrl=queue,
        Entries=[],
    )
    assert isinstance(err, sqs.exceptions.EmptyBatchRequest)


def test_send_batch_too_many_entries(sqs, queue):
    err = expect_error(
        sqs.send_message_batch,
        "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
        QueueUrl=queue,
        Entries=entries(11),
    )
    assert isinstance(err, sqs.exceptions.TooManyEntriesInBatchRequest)
    assert "11" in err.response["Error"]["Message"]
    assert counts(sqs, queue)[0] == 0


def test_send_batch_ids_not_distinct(sqs, queue):
    err = expect_error(
        sqs.send_message_batch,
        "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
        QueueUrl=queue,
        Entries=[{"Id": "same", "MessageBody": "a"}, {"Id": "same", "MessageBody": "b"}],
    )
    assert isinstance(err, sqs.exceptions.BatchEntryIdsNotDistinct)
    assert counts(sqs, queue)[0] == 0


@pytest.mark.parametrize("bad_id", ["has space", "dot.id", "x" * 81, "ünï", ""])
def test_send_batch_invalid_entry_id(sqs, queue, bad_id):
    err = expect_error(
        sqs.send_message_batch,
        "AWS.SimpleQueueService.InvalidBatchEntryId",
        QueueUrl=queue,
        Entries=[{"Id": "ok", "MessageBody": "a"}, {"Id": bad_id, "MessageBody": "b"}],
    )
    assert isinstance(err, sqs.exceptions.InvalidBatchEntryId)
    assert counts(sqs, queue)[0] == 0


def test_send_batch_entry_id_limits(sqs, queue):
    ok_id = "A-z_0" + "9" * 75
    resp = sqs.send_message_batch(QueueUrl=queue, Entries=[{"Id": ok_id, "MessageBody": "a"}])
    assert [e["Id"] for e in resp["Successful"]] == [ok_id]


def test_send_batch_request_too_long(sqs, queue):
    # 10 x 110,000 bytes = 1,100,000 > 1,048,576; each entry alone is fine.
    batch = [{"Id": f"big{i}", "MessageBody": "z" * 110_000} for i in range(10)]
    err = expect_error(
        sqs.send_message_batch,
        "AWS.SimpleQueueService.BatchRequestTooLong",
        QueueUrl=queue,
        Entries=batch,
    )
    assert isinstance(err, sqs.exceptions.BatchRequestTooLong)
    assert counts(sqs, queue)[0] == 0


def test_send_batch_exactly_the_total_limit(sqs, queue):
    batch = [{"Id": f"q{i}", "MessageBody": "z" * 262_144} for i in range(4)]  # 1,048,576
    resp = sqs.send_message_batch(QueueUrl=queue, Entries=batch)
    assert len(resp["Successful"]) == 4
    assert "Failed" not in resp


def test_send_batch_too_long_counts_attributes(sqs, queue):
    attrs = {"pad": {"DataType": "String", "StringValue": "p" * 100}}
    batch = [{"Id": f"q{i}", "MessageBody": "z" * 262_144} for i in range(3)]
    batch.append({"Id": "q3", "MessageBody": "z" * 262_100, "MessageAttributes": attrs})
    expect_error(
        sqs.send_message_batch,
        "AWS.SimpleQueueService.BatchRequestTooLong",
        QueueUrl=queue,
        Entries=batch,
    )


# --- DeleteMessageBatch ------------------------------------------------------------------


def test_delete_batch(sqs, queue):
    sqs.send_message_batch(QueueUrl=queue, Entries=entries(3))
    got = receive(sqs, queue, MaxNumberOfMessages=10)
    assert len(got) == 3
    resp = sqs.delete_message_batch(
        QueueUrl=queue,
        Entries=[
            {"Id": "d0", "ReceiptHandle": got[0]["ReceiptHandle"]},
            {"Id": "d1", "ReceiptHandle": got[1]["ReceiptHandle"]},
            {"Id": "garbage", "ReceiptHandle": "garbage"},
        ],
    )
    assert resp["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert sorted(e["Id"] for e in resp["Successful"]) == ["d0", "d1"]
    assert len(resp["Failed"]) == 1
    failure = resp["Failed"][0]
    assert failure["Id"] == "garbage"
    assert failure["Code"] == "ReceiptHandleIsInvalid"
    assert failure["SenderFault"] is True
    assert counts(sqs, queue) == (0, 1, 0)


def test_delete_batch_all_success_has_no_failed(sqs, queue):
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    handle = receive(sqs, queue)[0]["ReceiptHandle"]
    resp = sqs.delete_message_batch(QueueUrl=queue, Entries=[{"Id": "a", "ReceiptHandle": handle}])
    assert [e["Id"] for e in resp["Successful"]] == ["a"]
    assert "Failed" not in resp
    assert counts(sqs, queue) == (0, 0, 0)


ID_BATCH_OPS = [
    ("delete_message_batch", {"ReceiptHandle": "h"}),
    ("change_message_visibility_batch", {"ReceiptHandle": "h", "VisibilityTimeout": 5}),
]


@pytest.mark.parametrize("op_name", [op for op, _ in ID_BATCH_OPS])
def test_id_batch_empty(sqs, queue, op_name):
    op = getattr(sqs, op_name)
    err = expect_error(op, "AWS.SimpleQueueService.EmptyBatchRequest", QueueUrl=queue, Entries=[])
    assert isinstance(err, sqs.exceptions.EmptyBatchRequest)


@pytest.mark.parametrize("op_name,entry", ID_BATCH_OPS)
def test_id_batch_whole_request_errors(sqs, queue, op_name, entry):
    op = getattr(sqs, op_name)
    expect_error(
        op,
        "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
        QueueUrl=queue,
        Entries=[dict(entry, Id=f"i{i}") for i in range(11)],
    )
    expect_error(
        op,
        "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
        QueueUrl=queue,
        Entries=[dict(entry, Id="dup"), dict(entry, Id="dup")],
    )
    expect_error(
        op,
        "AWS.SimpleQueueService.InvalidBatchEntryId",
        QueueUrl=queue,
        Entries=[dict(entry, Id="bad id")],
    )


# --- ChangeMessageVisibilityBatch --------------------------------------------------------


def test_change_visibility_batch(sqs, queue, clock):
    clock.freeze()
    sqs.send_message_batch(QueueUrl=queue, Entries=entries(3))
    got = receive(sqs, queue, MaxNumberOfMessages=10, VisibilityTimeout=30)
    assert len(got) == 3
    by_body = {m["Body"]: m["ReceiptHandle"] for m in got}
    resp = sqs.change_message_visibility_batch(
        QueueUrl=queue,
        Entries=[
            {"Id": "now", "ReceiptHandle": by_body["m0"], "VisibilityTimeout": 0},
            {"Id": "later", "ReceiptHandle": by_body["m1"], "VisibilityTimeout": 300},
            {"Id": "bad", "ReceiptHandle": "garbage", "VisibilityTimeout": 10},
            {"Id": "toolong", "ReceiptHandle": by_body["m2"], "VisibilityTimeout": 43201},
        ],
    )
    assert resp["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert sorted(e["Id"] for e in resp["Successful"]) == ["later", "now"]
    failed = {e["Id"]: e for e in resp["Failed"]}
    assert failed["bad"]["Code"] == "ReceiptHandleIsInvalid"
    assert failed["toolong"]["Code"] == "InvalidParameterValue"
    assert all(e["SenderFault"] is True for e in failed.values())
    # m0 is visible at once; m2 keeps its 30 s; m1 now waits 300 s.
    again = receive(sqs, queue, MaxNumberOfMessages=10)
    assert [m["Body"] for m in again] == ["m0"]
    sqs.delete_message(QueueUrl=queue, ReceiptHandle=again[0]["ReceiptHandle"])
    clock.advance(29)
    assert receive(sqs, queue, MaxNumberOfMessages=10) == []
    clock.advance(1)
    again = receive(sqs, queue, MaxNumberOfMessages=10)
    assert [m["Body"] for m in again] == ["m2"]
    sqs.delete_message(QueueUrl=queue, ReceiptHandle=again[0]["ReceiptHandle"])
    clock.advance(269)  # t = 299 s
    assert receive(sqs, queue, MaxNumberOfMessages=10) == []
    clock.advance(1)
    assert [m["Body"] for m in receive(sqs, queue, MaxNumberOfMessages=10)] == ["m1"]
