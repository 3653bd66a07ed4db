"""The eight places where moto's SQS suite and sqsim answered differently, each settled by
what real AWS answers (docs/fidelity-research.md has the evidence and its sources; each test
names it). Where moto is right sqsim follows it; where moto is wrong, sqsim follows AWS.
Point 4 (AddPermission by another account: AccessDenied, 403) is tested with the other
cross-account rules in test_access.py::test_owner_only_actions_are_never_shared
and its neighbours."""

import json
import uuid

from sqsim_helpers import expect_error, queue_arn, receive_one


def test_1_an_invalid_attribute_data_type_gets_the_current_aws_text(sqs, queue):
    # AWS now answers this text (a suite run against live AWS, the Ballerina SQS connector,
    # and grafana/k6-jslib-aws#65, 2023); moto keeps the 2015 wording (boto3#362).
    err = expect_error(
        sqs.send_message,
        "InvalidParameterValue",
        QueueUrl=queue,
        MessageBody="x",
        MessageAttributes={"kind": {"DataType": "InvalidType", "StringValue": "v"}},
    )
    assert err.response["Error"]["Message"] == (
        "The type of message (user) attribute 'kind' is invalid. You must use only the "
        "following supported type prefixes: Binary, Number, String."
    )


def test_2_and_3_invalid_receipt_handles(sqs, queue):
    # A garbage handle: ReceiptHandleIsInvalid with HTTP 404 (AWS's Smithy model:
    # httpError 404; recorded for DeleteMessage in LocalStack's AWS-validated
    # test_delete_message_with_illegal_receipt_handle and in the Developer Guide's
    # troubleshooting page). moto answers 400 and "The input receipt handle is invalid.".
    for call, extra in (
        (sqs.delete_message, {}),
        (sqs.change_message_visibility, {"VisibilityTimeout": 5}),
    ):
        err = expect_error(call, "ReceiptHandleIsInvalid", 404, QueueUrl=queue,
                           ReceiptHandle="garbage", **extra)
        assert err.response["Error"]["Message"] == (
            'The input receipt handle "garbage" is not a valid receipt handle.'
        )
    # A real handle whose message was deleted: DeleteMessage succeeds again
    # (test_delete_message_with_deleted_receipt_handle, AWS-validated), and
    # ChangeMessageVisibility answers InvalidParameterValue
    # (test_change_visibility_on_deleted_message_raises_invalid_parameter_value); moto gives
    # ReceiptHandleIsInvalid for the latter.
    sqs.send_message(QueueUrl=queue, MessageBody="once")
    handle = receive_one(sqs, queue)["ReceiptHandle"]
    sqs.delete_message(QueueUrl=queue, ReceiptHandle=handle)
    sqs.delete_message(QueueUrl=queue, ReceiptHandle=handle)
    err = expect_error(sqs.change_message_visibility, "InvalidParameterValue",
                       QueueUrl=queue, ReceiptHandle=handle, VisibilityTimeout=5)
    assert err.response["Error"]["Message"].endswith(
        "Reason: Message does not exist or is not available for visibility timeout change."
    )


def test_5_too_many_tags_counts_the_queues_tags_after_the_change(sqs, queue):
    # AWS documents no text (only "more than 50 tags ... isn't recommended"); moto's text is
    # also the one Yandex's SQS-compatible YMQ gives, which counts the merged total — moto
    # counts only the request's tags, so 40 + 20 passes there.
    name = queue.rsplit("/", 1)[1]
    sqs.tag_queue(QueueUrl=queue, Tags={f"a{i}": "v" for i in range(40)})
    err = expect_error(sqs.tag_queue, "InvalidParameterValue", QueueUrl=queue,
                       Tags={f"b{i}": "v" for i in range(20)})
    assert err.response["Error"]["Message"] == f"Too many tags added for queue {name}."
    assert len(sqs.list_queue_tags(QueueUrl=queue)["Tags"]) == 40


def test_6_an_empty_queue_name_is_a_missing_parameter(sqs):
    # No recording for QueueName=""; the closest AWS-validated case, an empty MessageBody
    # (test_send_empty_message), is MissingParameter in both protocols. moto answers
    # InvalidParameterValue with the bad-name text, which AWS gives for a non-empty bad name.
    err = expect_error(sqs.create_queue, "MissingParameter", QueueName="")
    assert err.response["Error"]["Message"] == "The request must contain the parameter QueueName."
    err = expect_error(sqs.create_queue, "InvalidParameterValue", QueueName="bad/name")
    assert "1 to 80 in length" in err.response["Error"]["Message"]


def test_7_attribute_names_may_hold_non_ascii_letters(sqs, queue):
    # AWS accepts `attr.1øßä` (the valid baseline of LocalStack's AWS-validated
    # test_send_message_with_invalid_string_attributes) and rejects `§`, `!`, `"`, `(`, `?`;
    # moto rejects anything outside [A-Za-z0-9_.-].
    value = {"DataType": "String", "StringValue": "v"}
    sqs.send_message(QueueUrl=queue, MessageBody="x", MessageAttributes={"attr.1øßä": value})
    got = receive_one(sqs, queue, MessageAttributeNames=["All"])
    assert list(got["MessageAttributes"]) == ["attr.1øßä"]
    for bad in ("attr§", "attr!", "attr(", "attr?"):
        expect_error(sqs.send_message, "InvalidParameterValue", QueueUrl=queue,
                     MessageBody="x", MessageAttributes={bad: value})


def test_8_redrive_policy_comes_back_compact_with_a_numeric_count(sqs, queue_factory):
    # The AWS CLI reference's get-queue-attributes example returns
    # {"deadLetterTargetArn":"...","maxReceiveCount":1000} for a policy set with "1000" as a
    # string; LocalStack's AWS-validated test_get_specific_queue_attribute_response reads the
    # count back as a number. moto adds a space after each ':' and ','.
    dlq = queue_factory("dlq-" + uuid.uuid4().hex[:8])
    src = queue_factory("src-" + uuid.uuid4().hex[:8])
    arn = queue_arn(sqs, dlq)
    sent = json.dumps({"maxReceiveCount": "1000", "deadLetterTargetArn": arn})
    sqs.set_queue_attributes(QueueUrl=src, Attributes={"RedrivePolicy": sent})
    got = sqs.get_queue_attributes(QueueUrl=src, AttributeNames=["RedrivePolicy"])
    assert got["Attributes"]["RedrivePolicy"] == (
        f'{{"deadLetterTargetArn":"{arn}","maxReceiveCount":1000}}'
    )
