"""Error texts that the reference marks as seen in real AWS responses [V]: the code, the
status and the exact message, identical in both protocols (except NonExistentQueue, which
AWS words differently in the query protocol)."""

import uuid

from sqsim_helpers import expect_error, receive_one


def message(err):
    return err.response["Error"]["Message"]


def test_non_existent_queue_text(sqs, endpoint):
    err = expect_error(
        sqs.get_queue_attributes,
        "AWS.SimpleQueueService.NonExistentQueue",
        QueueUrl=f"{endpoint}/000000000000/no-such-queue-for-text",
    )
    protocol = sqs.meta.service_model.protocol
    expected = {
        "json": "The specified queue does not exist.",
        "query": "The specified queue does not exist for this wsdl version.",
    }[protocol]
    assert message(err) == expected


def test_queue_already_exists_text(sqs, queue_factory):
    url = queue_factory()
    name = url.rsplit("/", 1)[1]
    err = expect_error(
        sqs.create_queue, "QueueAlreadyExists", QueueName=name, Attributes={"DelaySeconds": "5"}
    )
    assert message(err) == (
        "A queue already exists with the same name and a different value for attribute "
        "DelaySeconds"
    )


def test_attribute_texts(sqs, queue):
    err = expect_error(
        sqs.get_queue_attributes, "InvalidAttributeName", QueueUrl=queue, AttributeNames=["Foobar"]
    )
    assert message(err) == "Unknown Attribute Foobar."
    err = expect_error(
        sqs.set_queue_attributes,
        "InvalidAttributeValue",
        QueueUrl=queue,
        Attributes={"VisibilityTimeout": "43201"},
    )
    assert message(err) == "Invalid value for the parameter VisibilityTimeout."
    err = expect_error(
        sqs.set_queue_attributes,
        "InvalidAttributeName",
        QueueUrl=queue,
        Attributes={"FifoQueue": "false"},
    )
    assert message(err) == "Unknown Attribute FifoQueue."
    err = expect_error(
        sqs.set_queue_attributes,
        "InvalidAttributeName",
        QueueUrl=queue,
        Attributes={"DeduplicationScope": "queue"},
    )
    assert message(err) == (
        "You can specify the DeduplicationScope only when FifoQueue is set to true."
    )
    err = expect_error(
        sqs.set_queue_attributes,
        "InvalidAttributeName",
        QueueUrl=queue,
        Attributes={"KmsMasterKeyId": "alias/aws/sqs", "SqsManagedSseEnabled": "true"},
    )
    assert message(err) == (
        "You can use one type of server-side encryption (SSE) at one time. "
        "You can either enable KMS SSE or SQS SSE."
    )


def test_fifo_type_change_text(sqs, queue_factory):
    url = queue_factory(
        f"type-change-{uuid.uuid4().hex[:12]}.fifo",
        Attributes={"FifoQueue": "true"},
    )
    err = expect_error(
        sqs.set_queue_attributes,
        "InvalidAttributeValue",
        QueueUrl=url,
        Attributes={"FifoQueue": "false"},
    )
    assert message(err) == (
        "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported."
    )


def test_send_texts(sqs, queue_factory):
    url = queue_factory(Attributes={"MaximumMessageSize": "1024"})
    err = expect_error(sqs.send_message, "MissingParameter", QueueUrl=url, MessageBody="")
    assert message(err) == "The request must contain the parameter MessageBody."
    err = expect_error(sqs.send_message, "InvalidParameterValue", QueueUrl=url, MessageBody="a" * 1025)
    assert message(err) == (
        "One or more parameters are invalid. Reason: Message must be shorter than 1024 bytes."
    )
    err = expect_error(
        sqs.send_message,
        "InvalidParameterValue",
        QueueUrl=url,
        MessageBody="x",
        MessageAttributes={"ErrorDetails": {"DataType": "String", "StringValue": ""}},
    )
    assert message(err) == (
        "Message (user) attribute 'ErrorDetails' must contain a non-empty value of type 'String'."
    )


def test_batch_texts(sqs, queue_factory):
    url = queue_factory(Attributes={"MaximumMessageSize": "1024"})
    err = expect_error(
        sqs.send_message_batch,
        "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
        QueueUrl=url,
        Entries=[{"Id": f"e{i}", "MessageBody": "x"} for i in range(20)],
    )
    assert message(err) == "Maximum number of entries per request are 10. You have sent 20."
    err = expect_error(
        sqs.send_message_batch,
        "AWS.SimpleQueueService.InvalidBatchEntryId",
        QueueUrl=url,
        Entries=[{"Id": "bad id", "MessageBody": "x"}],
    )
    assert message(err) == (
        "A batch entry id can only contain alphanumeric characters, hyphens and underscores. "
        "It can be at most 80 letters long."
    )
    err = expect_error(
        sqs.send_message_batch,
        "AWS.SimpleQueueService.BatchRequestTooLong",
        QueueUrl=url,
        Entries=[{"Id": f"e{i}", "MessageBody": "z" * 110_000} for i in range(10)],
    )
    assert message(err) == (
        "Batch requests cannot be longer than 1048576 bytes. You have sent 1100000 bytes."
    )
    resp = sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": "big", "MessageBody": "a" * 1025}]
    )
    assert resp["Failed"][0]["Message"] == (
        "One or more parameters cannot be validated. "
        "Reason: Message must be shorter than 1024 bytes."
    )


def test_receive_texts(sqs, queue):
    err = expect_error(
        sqs.receive_message, "InvalidParameterValue", QueueUrl=queue, MaxNumberOfMessages=11
    )
    assert message(err) == (
        "Value 11 for parameter MaxNumberOfMessages is invalid. "
        "Reason: Must be between 1 and 10, if provided."
    )
    for wait in (21, -1):
        err = expect_error(
            sqs.receive_message, "InvalidParameterValue", QueueUrl=queue, WaitTimeSeconds=wait
        )
        assert message(err) == (
            f"Value {wait} for parameter WaitTimeSeconds is invalid. "
            "Reason: Must be >= 0 and <= 20, if provided."
        )


def test_receipt_handle_texts(sqs, queue, clock):
    err = expect_error(
        sqs.delete_message, "ReceiptHandleIsInvalid", 404, QueueUrl=queue, ReceiptHandle="garbage"
    )
    assert message(err) == 'The input receipt handle "garbage" is not a valid receipt handle.'

    clock.freeze()
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    handle = receive_one(sqs, queue)["ReceiptHandle"]
    clock.advance(10)
    err = expect_error(
        sqs.change_message_visibility,
        "InvalidParameterValue",
        QueueUrl=queue,
        ReceiptHandle=handle,
        VisibilityTimeout=43199,
    )
    assert message(err) == (
        "Value 43199 for parameter VisibilityTimeout is invalid. "
        "Reason: Total VisibilityTimeout for the message is beyond the limit [43200 seconds]"
    )
    sqs.delete_message(QueueUrl=queue, ReceiptHandle=handle)
    err = expect_error(
        sqs.change_message_visibility,
        "InvalidParameterValue",
        QueueUrl=queue,
        ReceiptHandle=handle,
        VisibilityTimeout=10,
    )
    assert message(err) == (
        f"Value {handle} for parameter ReceiptHandle is invalid. "
        "Reason: Message does not exist or is not available for visibility timeout change."
    )


def test_purge_in_progress_text(sqs, queue):
    sqs.purge_queue(QueueUrl=queue)
    err = expect_error(
        sqs.purge_queue, "AWS.SimpleQueueService.PurgeQueueInProgress", 403, QueueUrl=queue
    )
    name = queue.rsplit("/", 1)[1]
    assert message(err) == f"Only one PurgeQueue operation on {name} is allowed every 60 seconds."


def test_missing_queue_url(make_client):
    raw = make_client(parameter_validation=False)
    err = expect_error(raw.receive_message, "MissingParameter")
    assert message(err) == "The request must contain the parameter QueueUrl."
