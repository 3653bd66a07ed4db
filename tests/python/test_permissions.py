"""AddPermission and RemovePermission (reference §11.2): the Policy document they build, and
their errors."""

import json

import pytest

from sqsim_helpers import expect_error, queue_arn, queue_attrs

A = "111122223333"
B = "444455556666"


def policy_of(sqs, url):
    raw = queue_attrs(sqs, url, "Policy").get("Policy")
    return None if raw is None else json.loads(raw)


def statement(arn, sid, accounts, actions):
    def one_or_many(items):
        return items[0] if len(items) == 1 else items

    return {
        "Sid": sid,
        "Effect": "Allow",
        "Principal": {"AWS": one_or_many([f"arn:aws:iam::{a}:root" for a in accounts])},
        "Action": one_or_many([f"SQS:{a}" for a in actions]),
        "Resource": arn,
    }


def test_policy_document_is_built_statement_by_statement(sqs, queue):
    arn = queue_arn(sqs, queue)
    assert policy_of(sqs, queue) is None
    sqs.add_permission(
        QueueUrl=queue, Label="one", AWSAccountIds=[A], Actions=["ReceiveMessage"]
    )
    assert policy_of(sqs, queue) == {
        "Version": "2008-10-17",
        "Id": f"{arn}/SQSDefaultPolicy",
        "Statement": [statement(arn, "one", [A], ["ReceiveMessage"])],
    }
    # Single account and action are plain strings, not one-element arrays.
    st = policy_of(sqs, queue)["Statement"][0]
    assert st["Principal"]["AWS"] == f"arn:aws:iam::{A}:root"
    assert st["Action"] == "SQS:ReceiveMessage"

    sqs.add_permission(
        QueueUrl=queue,
        Label="two",
        AWSAccountIds=[A, B],
        Actions=["SendMessage", "DeleteMessage"],
    )
    sqs.add_permission(QueueUrl=queue, Label="all_3", AWSAccountIds=[B], Actions=["*"])
    doc = policy_of(sqs, queue)
    assert doc == {
        "Version": "2008-10-17",
        "Id": f"{arn}/SQSDefaultPolicy",
        "Statement": [
            statement(arn, "one", [A], ["ReceiveMessage"]),
            statement(arn, "two", [A, B], ["SendMessage", "DeleteMessage"]),
            statement(arn, "all_3", [B], ["*"]),
        ],
    }
    assert doc["Statement"][1]["Principal"]["AWS"] == [
        f"arn:aws:iam::{A}:root",
        f"arn:aws:iam::{B}:root",
    ]
    assert doc["Statement"][1]["Action"] == ["SQS:SendMessage", "SQS:DeleteMessage"]
    assert doc["Statement"][2]["Action"] == "SQS:*"
    # The document is listed by "All" too.
    assert json.loads(queue_attrs(sqs, queue)["Policy"]) == doc

    # Removing a label drops its statement; the others stay in order.
    sqs.remove_permission(QueueUrl=queue, Label="two")
    assert policy_of(sqs, queue)["Statement"] == [
        statement(arn, "one", [A], ["ReceiveMessage"]),
        statement(arn, "all_3", [B], ["*"]),
    ]
    sqs.remove_permission(QueueUrl=queue, Label="one")
    sqs.remove_permission(QueueUrl=queue, Label="all_3")
    # Removing the last label removes Policy.
    assert policy_of(sqs, queue) is None
    assert "Policy" not in queue_attrs(sqs, queue)


def test_every_shareable_action(sqs, queue):
    actions = [
        "SendMessage",
        "ReceiveMessage",
        "DeleteMessage",
        "ChangeMessageVisibility",
        "GetQueueAttributes",
        "GetQueueUrl",
        "PurgeQueue",
    ]
    sqs.add_permission(QueueUrl=queue, Label="seven", AWSAccountIds=[A], Actions=actions)
    assert policy_of(sqs, queue)["Statement"][0]["Action"] == [f"SQS:{a}" for a in actions]
    sqs.add_permission(
        QueueUrl=queue, Label="dlsq", AWSAccountIds=[A], Actions=["ListDeadLetterSourceQueues"]
    )
    assert policy_of(sqs, queue)["Statement"][1]["Action"] == "SQS:ListDeadLetterSourceQueues"


def test_permissions_are_per_queue(sqs, queue_factory):
    a = queue_factory()
    b = queue_factory()
    sqs.add_permission(QueueUrl=a, Label="shared", AWSAccountIds=[A], Actions=["SendMessage"])
    assert policy_of(sqs, b) is None
    # The same label on another queue is not a duplicate.
    sqs.add_permission(QueueUrl=b, Label="shared", AWSAccountIds=[B], Actions=["SendMessage"])
    assert policy_of(sqs, b)["Statement"][0]["Resource"] == queue_arn(sqs, b)


def test_duplicate_label(sqs, queue):
    sqs.add_permission(QueueUrl=queue, Label="dup", AWSAccountIds=[A], Actions=["SendMessage"])
    before = policy_of(sqs, queue)
    err = expect_error(
        sqs.add_permission,
        "InvalidParameterValue",
        QueueUrl=queue,
        Label="dup",
        AWSAccountIds=[B],
        Actions=["ReceiveMessage"],
    )
    assert err.response["Error"]["Message"] == (
        "Value dup for parameter Label is invalid. Reason: Already exists."
    )
    assert policy_of(sqs, queue) == before


def test_remove_unknown_label(sqs, queue):
    err = expect_error(sqs.remove_permission, "InvalidParameterValue", QueueUrl=queue, Label="nope")
    assert err.response["Error"]["Message"] == (
        "Value nope for parameter Label is invalid. Reason: can't find label."
    )
    sqs.add_permission(QueueUrl=queue, Label="real", AWSAccountIds=[A], Actions=["SendMessage"])
    err = expect_error(sqs.remove_permission, "InvalidParameterValue", QueueUrl=queue, Label="REAL")
    assert err.response["Error"]["Message"] == (
        "Value REAL for parameter Label is invalid. Reason: can't find label."
    )
    assert [s["Sid"] for s in policy_of(sqs, queue)["Statement"]] == ["real"]


def test_eight_actions_is_over_limit(sqs, queue):
    err = expect_error(
        sqs.add_permission,
        "OverLimit",
        403,
        QueueUrl=queue,
        Label="many",
        AWSAccountIds=[A],
        Actions=["SendMessage"] * 8,
    )
    assert err.response["Error"]["Message"] == "8 Actions were found, maximum allowed is 7."
    assert policy_of(sqs, queue) is None


@pytest.mark.parametrize("action", ["CreateQueue", "DeleteQueue", "sendmessage", "Bogus"])
def test_invalid_action(sqs, queue, action):
    err = expect_error(
        sqs.add_permission,
        "InvalidParameterValue",
        QueueUrl=queue,
        Label="bad",
        AWSAccountIds=[A],
        Actions=[action],
    )
    assert err.response["Error"]["Message"].startswith(
        f"Value SQS:{action} for parameter ActionName is invalid. Reason: "
    )
    assert policy_of(sqs, queue) is None


@pytest.mark.parametrize("label", ["has space", "a" * 81, "dot.ted"])
def test_invalid_label(sqs, queue, label):
    expect_error(
        sqs.add_permission,
        "InvalidParameterValue",
        QueueUrl=queue,
        Label=label,
        AWSAccountIds=[A],
        Actions=["SendMessage"],
    )
    assert policy_of(sqs, queue) is None


def test_label_of_eighty_characters(sqs, queue):
    label = "L-_9" * 20
    sqs.add_permission(QueueUrl=queue, Label=label, AWSAccountIds=[A], Actions=["SendMessage"])
    assert policy_of(sqs, queue)["Statement"][0]["Sid"] == label


def test_remove_permission_from_a_set_policy(sqs, queue):
    """A Policy set with SetQueueAttributes is amended by Add/RemovePermission."""
    arn = queue_arn(sqs, queue)
    own = {
        "Version": "2012-10-17",
        "Id": "custom",
        "Statement": [
            {
                "Sid": "mine",
                "Effect": "Allow",
                "Principal": "*",
                "Action": "sqs:SendMessage",
                "Resource": arn,
            }
        ],
    }
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={"Policy": json.dumps(own)})
    sqs.add_permission(QueueUrl=queue, Label="added", AWSAccountIds=[A], Actions=["SendMessage"])
    doc = policy_of(sqs, queue)
    assert doc["Id"] == "custom"
    assert doc["Version"] == "2012-10-17"
    assert doc["Statement"] == own["Statement"] + [statement(arn, "added", [A], ["SendMessage"])]
    sqs.remove_permission(QueueUrl=queue, Label="mine")
    assert [s["Sid"] for s in policy_of(sqs, queue)["Statement"]] == ["added"]
    sqs.remove_permission(QueueUrl=queue, Label="added")
    assert policy_of(sqs, queue) is None
