"""GetQueueAttributes and SetQueueAttributes."""

import json
import time
import uuid

import pytest

from sqsim_helpers import ACCOUNT, counts, expect_error, only_protocol, queue_attrs, receive

STANDARD_ALL = {
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesDelayed",
    "ApproximateNumberOfMessagesNotVisible",
    "CreatedTimestamp",
    "DelaySeconds",
    "LastModifiedTimestamp",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "QueueArn",
    "ReceiveMessageWaitTimeSeconds",
    "SqsManagedSseEnabled",
    "VisibilityTimeout",
}


def test_all_on_a_new_standard_queue(sqs, queue):
    attrs = queue_attrs(sqs, queue, "All")
    assert set(attrs) == STANDARD_ALL
    name = queue.rsplit("/", 1)[1]
    assert attrs["QueueArn"] == f"arn:aws:sqs:us-east-1:{ACCOUNT}:{name}"
    assert attrs["DelaySeconds"] == "0"
    assert attrs["MaximumMessageSize"] == "1048576"
    assert attrs["MessageRetentionPeriod"] == "345600"
    assert attrs["ReceiveMessageWaitTimeSeconds"] == "0"
    assert attrs["VisibilityTimeout"] == "30"
    assert attrs["SqsManagedSseEnabled"] == "true"
    assert attrs["ApproximateNumberOfMessages"] == "0"
    assert attrs["ApproximateNumberOfMessagesNotVisible"] == "0"
    assert attrs["ApproximateNumberOfMessagesDelayed"] == "0"
    # Epoch seconds, not milliseconds.
    created = int(attrs["CreatedTimestamp"])
    assert abs(created - time.time()) < 10 * 24 * 3600, created
    assert int(attrs["LastModifiedTimestamp"]) >= created


def test_no_attribute_names_means_no_attributes(sqs, queue):
    assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=queue)


def test_empty_attribute_names_means_no_attributes(sqs, queue):
    # botocore 1.34.89 (query) sends an empty list as a bare `AttributeNames=`.
    resp = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=[])
    assert "Attributes" not in resp


def test_named_attributes_only(sqs, queue):
    attrs = queue_attrs(sqs, queue, "VisibilityTimeout", "QueueArn")
    assert set(attrs) == {"VisibilityTimeout", "QueueArn"}
    assert attrs["VisibilityTimeout"] == "30"


def test_all_together_with_names(sqs, queue):
    assert set(queue_attrs(sqs, queue, "All", "QueueArn")) == STANDARD_ALL


def test_unknown_attribute_name(sqs, queue):
    err = expect_error(
        sqs.get_queue_attributes,
        "InvalidAttributeName",
        QueueUrl=queue,
        AttributeNames=["Foobar"],
    )
    assert "Foobar" in err.response["Error"]["Message"]


def test_policy_and_kms_attributes_appear_only_when_set(sqs, queue):
    attrs = queue_attrs(sqs, queue, "All")
    for absent in ("Policy", "RedrivePolicy", "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds"):
        assert absent not in attrs
    assert "Policy" not in queue_attrs(sqs, queue, "Policy")


def test_set_and_get_attributes(sqs, queue, advance):
    before = queue_attrs(sqs, queue)
    advance(5)
    sqs.set_queue_attributes(
        QueueUrl=queue,
        Attributes={
            "VisibilityTimeout": "60",
            "DelaySeconds": "3",
            "MaximumMessageSize": "4096",
            "MessageRetentionPeriod": "600",
            "ReceiveMessageWaitTimeSeconds": "7",
        },
    )
    after = queue_attrs(sqs, queue)
    assert after["VisibilityTimeout"] == "60"
    assert after["DelaySeconds"] == "3"
    assert after["MaximumMessageSize"] == "4096"
    assert after["MessageRetentionPeriod"] == "600"
    assert after["ReceiveMessageWaitTimeSeconds"] == "7"
    assert after["CreatedTimestamp"] == before["CreatedTimestamp"]
    assert int(after["LastModifiedTimestamp"]) >= int(before["LastModifiedTimestamp"]) + 5


def test_set_policy_then_clear_it(sqs, queue):
    arn = queue_attrs(sqs, queue, "QueueArn")["QueueArn"]
    policy = json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": "*",
                    "Action": "sqs:SendMessage",
                    "Resource": arn,
                }
            ],
        }
    )
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={"Policy": policy})
    got = queue_attrs(sqs, queue, "Policy")["Policy"]
    assert json.loads(got) == json.loads(policy)
    assert "Policy" in queue_attrs(sqs, queue, "All")
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={"Policy": ""})
    assert "Policy" not in queue_attrs(sqs, queue, "All")


RANGES = [
    ("DelaySeconds", 0, 900),
    ("MaximumMessageSize", 1024, 1048576),
    ("MessageRetentionPeriod", 60, 1209600),
    ("ReceiveMessageWaitTimeSeconds", 0, 20),
    ("VisibilityTimeout", 0, 43200),
    ("KmsDataKeyReusePeriodSeconds", 60, 86400),
]


@pytest.mark.parametrize("name,low,high", RANGES)
def test_attribute_range_bounds_accepted(sqs, queue, name, low, high):
    if name.startswith("Kms"):
        sqs.set_queue_attributes(QueueUrl=queue, Attributes={"KmsMasterKeyId": "alias/aws/sqs"})
    for value in (low, high):
        sqs.set_queue_attributes(QueueUrl=queue, Attributes={name: str(value)})
        assert queue_attrs(sqs, queue, name)[name] == str(value)


@pytest.mark.parametrize("name,low,high", RANGES)
def test_attribute_out_of_range_rejected(sqs, queue, name, low, high):
    if name.startswith("Kms"):
        sqs.set_queue_attributes(QueueUrl=queue, Attributes={"KmsMasterKeyId": "alias/aws/sqs"})
    before = queue_attrs(sqs, queue, name)[name]
    for value in (str(low - 1), str(high + 1), "abc", ""):
        err = expect_error(
            sqs.set_queue_attributes,
            "InvalidAttributeValue",
            QueueUrl=queue,
            Attributes={name: value},
        )
        assert name in err.response["Error"]["Message"]
    assert queue_attrs(sqs, queue, name)[name] == before


@only_protocol("json", "the query protocol cannot express an empty Attributes map")
def test_set_empty_attributes_is_a_no_op(sqs, queue):
    before = queue_attrs(sqs, queue)
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={})
    assert queue_attrs(sqs, queue) == before


def test_invalid_value_changes_nothing(sqs, queue):
    # Validation happens before anything is applied.
    expect_error(
        sqs.set_queue_attributes,
        "InvalidAttributeValue",
        QueueUrl=queue,
        Attributes={"DelaySeconds": "10", "VisibilityTimeout": "-5"},
    )
    assert queue_attrs(sqs, queue, "DelaySeconds")["DelaySeconds"] == "0"


@pytest.mark.parametrize(
    "name,value",
    [
        ("Foobar", "1"),
        ("QueueArn", "arn:aws:sqs:us-east-1:000000000000:x"),
        ("ApproximateNumberOfMessages", "5"),
        ("CreatedTimestamp", "1"),
        ("FifoQueue", "true"),
        ("FifoQueue", "false"),
        ("ContentBasedDeduplication", "false"),
        ("DeduplicationScope", "queue"),
        ("FifoThroughputLimit", "perQueue"),
    ],
)
def test_set_invalid_attribute_name(sqs, queue, name, value):
    expect_error(
        sqs.set_queue_attributes,
        "InvalidAttributeName",
        QueueUrl=queue,
        Attributes={name: value},
    )


def test_kms_and_sse_together_rejected(sqs, queue):
    expect_error(
        sqs.set_queue_attributes,
        "InvalidAttributeName",
        QueueUrl=queue,
        Attributes={"KmsMasterKeyId": "alias/aws/sqs", "SqsManagedSseEnabled": "true"},
    )


def test_kms_key_turns_sse_off(sqs, queue):
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={"KmsMasterKeyId": "alias/aws/sqs"})
    attrs = queue_attrs(sqs, queue)
    assert attrs["KmsMasterKeyId"] == "alias/aws/sqs"
    assert attrs["KmsDataKeyReusePeriodSeconds"] == "300"
    assert attrs["SqsManagedSseEnabled"] == "false"


def test_message_counts(sqs, queue):
    for i in range(3):
        sqs.send_message(QueueUrl=queue, MessageBody=f"m{i}")
    sqs.send_message(QueueUrl=queue, MessageBody="later", DelaySeconds=60)
    assert counts(sqs, queue) == (3, 0, 1)
    got = receive(sqs, queue, MaxNumberOfMessages=1)
    assert len(got) == 1
    assert counts(sqs, queue) == (2, 1, 1)
    sqs.delete_message(QueueUrl=queue, ReceiptHandle=got[0]["ReceiptHandle"])
    assert counts(sqs, queue) == (2, 0, 1)


def test_clearing_the_kms_key(sqs, queue):
    sqs.set_queue_attributes(
        QueueUrl=queue,
        Attributes={"KmsMasterKeyId": "alias/aws/sqs", "KmsDataKeyReusePeriodSeconds": "600"},
    )
    assert queue_attrs(sqs, queue, "KmsDataKeyReusePeriodSeconds") == {
        "KmsDataKeyReusePeriodSeconds": "600"
    }
    sqs.set_queue_attributes(
        QueueUrl=queue,
        Attributes={"KmsMasterKeyId": "", "KmsDataKeyReusePeriodSeconds": "300"},
    )
    attrs = queue_attrs(sqs, queue)
    assert "KmsMasterKeyId" not in attrs
    assert "KmsDataKeyReusePeriodSeconds" not in attrs


# --- RedrivePolicy (validation only) ------------------------------------------------------


def _arn(sqs, url):
    return queue_attrs(sqs, url, "QueueArn")["QueueArn"]


def test_redrive_policy_round_trip_and_clear(sqs, queue_factory):
    dlq = queue_factory()
    src = queue_factory()
    policy = json.dumps({"deadLetterTargetArn": _arn(sqs, dlq), "maxReceiveCount": 3})
    sqs.set_queue_attributes(QueueUrl=src, Attributes={"RedrivePolicy": policy})
    got = json.loads(queue_attrs(sqs, src, "RedrivePolicy")["RedrivePolicy"])
    assert got["deadLetterTargetArn"] == _arn(sqs, dlq)
    assert int(got["maxReceiveCount"]) == 3
    sqs.set_queue_attributes(QueueUrl=src, Attributes={"RedrivePolicy": ""})
    assert "RedrivePolicy" not in queue_attrs(sqs, src)


@pytest.mark.parametrize("count", [0, 1001])
def test_redrive_policy_count_out_of_range(sqs, queue_factory, count):
    dlq = queue_factory()
    src = queue_factory()
    policy = json.dumps({"deadLetterTargetArn": _arn(sqs, dlq), "maxReceiveCount": count})
    expect_error(
        sqs.set_queue_attributes,
        "InvalidParameterValue",
        QueueUrl=src,
        Attributes={"RedrivePolicy": policy},
    )


def test_redrive_policy_target_must_exist(sqs, queue):
    missing = f"arn:aws:sqs:us-east-1:{ACCOUNT}:no-such-dlq-{uuid.uuid4().hex[:12]}"
    policy = json.dumps({"deadLetterTargetArn": missing, "maxReceiveCount": 3})
    expect_error(
        sqs.set_queue_attributes,
        "InvalidParameterValue",
        QueueUrl=queue,
        Attributes={"RedrivePolicy": policy},
    )
    assert "RedrivePolicy" not in queue_attrs(sqs, queue)


def test_redrive_policy_target_must_be_same_queue_type(sqs, queue_factory):
    fifo_dlq = queue_factory(f"dlq-{uuid.uuid4().hex[:12]}.fifo", Attributes={"FifoQueue": "true"})
    src = queue_factory()
    policy = json.dumps({"deadLetterTargetArn": _arn(sqs, fifo_dlq), "maxReceiveCount": 3})
    err = expect_error(
        sqs.set_queue_attributes,
        "InvalidParameterValue",
        QueueUrl=src,
        Attributes={"RedrivePolicy": policy},
    )
    assert "RedrivePolicy" in err.response["Error"]["Message"]
