"""All 23 SQS actions answer successfully in the protocol this run speaks (JSON with current
botocore, query with botocore 1.34.89); the wire format of every request is checked too."""

import time
import uuid

from sqsim_helpers import (
    EXPECT_PROTOCOL,
    expect_error,
    queue_attrs,
    receive,
    redrive_policy,
)

ALL_ACTIONS = {
    "AddPermission",
    "CancelMessageMoveTask",
    "ChangeMessageVisibility",
    "ChangeMessageVisibilityBatch",
    "CreateQueue",
    "DeleteMessage",
    "DeleteMessageBatch",
    "DeleteQueue",
    "GetQueueAttributes",
    "GetQueueUrl",
    "ListDeadLetterSourceQueues",
    "ListMessageMoveTasks",
    "ListQueueTags",
    "ListQueues",
    "PurgeQueue",
    "ReceiveMessage",
    "RemovePermission",
    "SendMessage",
    "SendMessageBatch",
    "SetQueueAttributes",
    "StartMessageMoveTask",
    "TagQueue",
    "UntagQueue",
}


def test_the_model_has_exactly_these_23_actions(sqs):
    assert len(ALL_ACTIONS) == 23
    assert set(sqs.meta.service_model.operation_names) == ALL_ACTIONS


def test_every_action_succeeds(make_client, clock, sqs):
    client = make_client()
    protocol = client.meta.service_model.protocol
    if EXPECT_PROTOCOL is not None:
        assert protocol == EXPECT_PROTOCOL
    wire = []  # (operation, headers, body) as sent
    answered = []  # (operation, HTTP status)

    def before_send(request, **_):
        headers = {
            k: (v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()
        }
        body = request.body
        body = body.decode() if isinstance(body, bytes) else (body or "")
        wire.append((headers, body))

    def after_call(http_response, model, **_):
        answered.append((model.name, http_response.status_code))

    client.meta.events.register("before-send.sqs", before_send)
    client.meta.events.register("after-call.sqs", after_call)

    tag = uuid.uuid4().hex[:10]
    created = []
    try:
        clock.freeze()
        # CreateQueue, GetQueueUrl, ListQueues
        dlq = client.create_queue(QueueName=f"all-{tag}-dlq")["QueueUrl"]
        created.append(dlq)
        src = client.create_queue(
            QueueName=f"all-{tag}-src", Attributes={"VisibilityTimeout": "30"}, tags={"a": "1"}
        )["QueueUrl"]
        created.append(src)
        assert client.get_queue_url(QueueName=f"all-{tag}-src")["QueueUrl"] == src
        assert sorted(client.list_queues(QueueNamePrefix=f"all-{tag}")["QueueUrls"]) == sorted(
            [dlq, src]
        )

        # GetQueueAttributes, SetQueueAttributes
        dlq_arn = client.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        policy = redrive_policy(dlq_arn, 1)
        client.set_queue_attributes(QueueUrl=src, Attributes={"RedrivePolicy": policy})
        assert queue_attrs(client, src, "RedrivePolicy") == {"RedrivePolicy": policy}

        # TagQueue, ListQueueTags, UntagQueue
        client.tag_queue(QueueUrl=src, Tags={"b": "2"})
        assert client.list_queue_tags(QueueUrl=src)["Tags"] == {"a": "1", "b": "2"}
        client.untag_queue(QueueUrl=src, TagKeys=["a"])
        assert client.list_queue_tags(QueueUrl=src)["Tags"] == {"b": "2"}

        # AddPermission, RemovePermission
        client.add_permission(
            QueueUrl=src, Label="l1", AWSAccountIds=["111122223333"], Actions=["SendMessage"]
        )
        assert "l1" in queue_attrs(client, src, "Policy")["Policy"]
        client.remove_permission(QueueUrl=src, Label="l1")
        assert "Policy" not in queue_attrs(client, src, "Policy")

        # SendMessage, SendMessageBatch, ReceiveMessage
        one = client.send_message(QueueUrl=src, MessageBody="one")["MessageId"]
        batch = client.send_message_batch(
            QueueUrl=src,
            Entries=[{"Id": f"b{i}", "MessageBody": f"batch{i}"} for i in range(4)],
        )
        assert len(batch["Successful"]) == 4 and not batch.get("Failed")
        got = client.receive_message(QueueUrl=src, MaxNumberOfMessages=10, WaitTimeSeconds=0)[
            "Messages"
        ]
        assert sorted(m["Body"] for m in got) == ["batch0", "batch1", "batch2", "batch3", "one"]
        handles = {m["Body"]: m["ReceiptHandle"] for m in got}

        # ChangeMessageVisibility, ChangeMessageVisibilityBatch
        client.change_message_visibility(
            QueueUrl=src, ReceiptHandle=handles["one"], VisibilityTimeout=120
        )
        out = client.change_message_visibility_batch(
            QueueUrl=src,
            Entries=[
                {"Id": "c0", "ReceiptHandle": handles["batch0"], "VisibilityTimeout": 120},
                {"Id": "c1", "ReceiptHandle": handles["batch1"], "VisibilityTimeout": 120},
            ],
        )
        assert sorted(e["Id"] for e in out["Successful"]) == ["c0", "c1"]

        # DeleteMessage, DeleteMessageBatch
        client.delete_message(QueueUrl=src, ReceiptHandle=handles["batch0"])
        out = client.delete_message_batch(
            QueueUrl=src, Entries=[{"Id": "d1", "ReceiptHandle": handles["batch1"]}]
        )
        assert [e["Id"] for e in out["Successful"]] == ["d1"]

        # After 30 s batch2/batch3 are visible again: that receive moves them to the DLQ.
        clock.advance(30)
        assert receive(client, src, MaxNumberOfMessages=10) == []
        # After 120 s "one" follows.
        clock.advance(90)
        assert receive(client, src, MaxNumberOfMessages=10) == []
        counts = queue_attrs(client, dlq, "ApproximateNumberOfMessages")
        assert counts == {"ApproximateNumberOfMessages": "3"}

        # ListDeadLetterSourceQueues
        assert client.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == [src]

        # StartMessageMoveTask (1/s on the frozen clock), ListMessageMoveTasks,
        # CancelMessageMoveTask
        handle = client.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=1)[
            "TaskHandle"
        ]
        deadline = time.monotonic() + 10
        while True:
            task = client.list_message_move_tasks(SourceArn=dlq_arn)["Results"][0]
            if task["ApproximateNumberOfMessagesMoved"] == 1:
                break
            assert time.monotonic() < deadline, task
            time.sleep(0.01)
        assert task["Status"] == "RUNNING" and task["TaskHandle"] == handle
        assert client.cancel_message_move_task(TaskHandle=handle)[
            "ApproximateNumberOfMessagesMoved"
        ] == 1
        assert client.list_message_move_tasks(SourceArn=dlq_arn)["Results"][0]["Status"] in (
            "CANCELLING",
            "CANCELLED",
        )

        # PurgeQueue, DeleteQueue
        client.purge_queue(QueueUrl=dlq)
        assert queue_attrs(client, dlq, "ApproximateNumberOfMessages") == {
            "ApproximateNumberOfMessages": "0"
        }
        for url in (src, dlq):
            client.delete_queue(QueueUrl=url)
            created.remove(url)
        expect_error(
            client.get_queue_url, "AWS.SimpleQueueService.NonExistentQueue", QueueName=f"all-{tag}-src"
        )
    finally:
        clock.unfreeze()
        for url in created:
            try:
                sqs.delete_queue(QueueUrl=url)
            except sqs.exceptions.QueueDoesNotExist:
                pass

    # Every action was called and answered 200 (the last GetQueueUrl is the expected error).
    assert answered[-1] == ("GetQueueUrl", 400)
    ok = {name for name, status in answered[:-1] if status == 200}
    assert {name for name, status in answered[:-1]} == ok, answered
    assert ok == ALL_ACTIONS, sorted(ALL_ACTIONS - ok)

    # And on the wire, in this run's protocol.
    assert len(wire) == len(answered)
    for (name, _), (headers, body) in zip(answered, wire):
        if protocol == "json":
            assert headers.get("X-Amz-Target") == f"AmazonSQS.{name}"
            assert headers.get("Content-Type", "").startswith("application/x-amz-json-1.0")
            assert body.startswith("{")
        else:
            assert protocol == "query"
            assert "X-Amz-Target" not in headers
            assert f"Action={name}&" in body + "&"
            assert "Version=2012-11-05" in body
