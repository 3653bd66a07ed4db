"""Access between accounts under `--auth verify` (issue 28): a queue's owner may do
anything; another account only what AddPermission or the queue's Policy grants, a Deny
beating any Allow, RemovePermission taking a grant back, and the actions AWS never shares
across accounts refused whatever the policy says. Every SQS action is tried with exactly its
required permission ("Amazon SQS API permissions") and without it; errors are AWS's
(AccessDenied, 403; GetQueueUrl answers QueueDoesNotExist). Run by boto3 in both
protocols (make test-python and test-query)."""

import json
import time
import uuid

import pytest
from botocore.exceptions import ClientError

from sqsim_helpers import check_error, queue_attrs
from sqsim_process import running

OWNER = ("AKIDOWNER", "owner-secret", "222222222222")
OTHER = ("AKIDOTHER", "other-secret", "111111111111")
THIRD = ("AKIDTHIRD", "third-secret", "333333333333")
TOKEN = "admin-token-for-the-access-tests"


@pytest.fixture(scope="module")
def srv():
    creds = [f"{k}:{s}:{a}" for k, s, a in (OWNER, OTHER, THIRD)]
    flags = ["--auth", "verify", "--admin-token", TOKEN]
    for c in creds:
        flags += ["--credentials", c]
    with running(*flags, token=TOKEN) as p:
        yield p


def client(srv, who):
    key, secret, _ = who
    return srv.client(key=key, secret=secret)


@pytest.fixture
def owner(srv):
    return client(srv, OWNER)


@pytest.fixture
def other(srv):
    return client(srv, OTHER)


@pytest.fixture
def queue(owner):
    name = "acc-" + uuid.uuid4().hex[:10]
    url = owner.create_queue(QueueName=name)["QueueUrl"]
    arn = queue_attrs(owner, url, "QueueArn")["QueueArn"]
    return name, url, arn


def denied(call, **kwargs):
    with pytest.raises(ClientError) as info:
        call(**kwargs)
    check_error(info.value, "AccessDenied", 403)
    return info.value.response["Error"]["Message"]


def not_denied(call, **kwargs):
    """Runs `call`; any outcome but AccessDenied (an invalid handle, say) means access was
    granted and the action went on to check its input."""
    try:
        call(**kwargs)
    except ClientError as e:
        assert e.response["Error"]["Code"] != "AccessDenied", e.response["Error"]


def set_policy(owner, url, arn, *statements):
    doc = {"Version": "2012-10-17", "Statement": list(statements)}
    for s in doc["Statement"]:
        s.setdefault("Resource", arn)
    owner.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(doc)})


def test_another_account_can_do_nothing_without_a_grant(owner, other, queue):
    name, url, arn = queue
    owner.send_message(QueueUrl=url, MessageBody="private")
    message = denied(other.receive_message, QueueUrl=url)
    assert message == (
        f"User: arn:aws:iam::{OTHER[2]}:root is not authorized to perform: sqs:receivemessage "
        f"on resource: {arn} because no resource-based policy allows the sqs:receivemessage action"
    )
    denied(other.send_message, QueueUrl=url, MessageBody="planted")
    denied(other.set_queue_attributes, QueueUrl=url, Attributes={"VisibilityTimeout": "5"})
    denied(other.purge_queue, QueueUrl=url)
    denied(other.delete_queue, QueueUrl=url)
    # Its URL is not even found by name from the other account.
    with pytest.raises(ClientError) as info:
        other.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=OWNER[2])
    check_error(info.value, "AWS.SimpleQueueService.NonExistentQueue", 400)
    # ListQueues shows only the caller's own queues.
    assert url not in other.list_queues(QueueNamePrefix=name).get("QueueUrls", [])
    # Nothing changed.
    assert queue_attrs(owner, url, "ApproximateNumberOfMessages")["ApproximateNumberOfMessages"] == "1"


def test_add_permission_grants_exactly_what_it_names_and_remove_takes_it_back(owner, other, queue):
    name, url, _ = queue
    owner.add_permission(
        QueueUrl=url, Label="send", AWSAccountIds=[OTHER[2]], Actions=["SendMessage"]
    )
    other.send_message(QueueUrl=url, MessageBody="granted")
    other.send_message_batch(QueueUrl=url, Entries=[{"Id": "1", "MessageBody": "batched"}])
    denied(other.receive_message, QueueUrl=url)
    # A third account got nothing.
    denied(client_of(owner, THIRD).send_message, QueueUrl=url, MessageBody="x")
    owner.remove_permission(QueueUrl=url, Label="send")
    denied(other.send_message, QueueUrl=url, MessageBody="after removal")
    got = owner.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["Body"] for m in got) == ["batched", "granted"]


def client_of(owner, who):
    """A client for `who` at the same endpoint as `owner`."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "sqs",
        endpoint_url=owner.meta.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id=who[0],
        aws_secret_access_key=who[1],
        config=Config(retries={"total_max_attempts": 1}),
    )


def test_a_policy_grants_and_a_deny_beats_an_allow(owner, other, queue):
    _, url, arn = queue
    set_policy(
        owner,
        url,
        arn,
        {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{OTHER[2]}:root"}, "Action": "sqs:*"},
        {"Effect": "Deny", "Principal": {"AWS": OTHER[2]}, "Action": "sqs:DeleteMessage"},
    )
    other.send_message(QueueUrl=url, MessageBody="m")
    m = other.receive_message(QueueUrl=url, VisibilityTimeout=30)["Messages"][0]
    message = denied(other.delete_message, QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    assert "explicit deny" in message
    # The owner is not bound by its queue's grants to others.
    owner.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    # sqs:* in a policy still shares none of the owner-only actions.
    denied(other.set_queue_attributes, QueueUrl=url, Attributes={"DelaySeconds": "1"})
    denied(other.tag_queue, QueueUrl=url, Tags={"k": "v"})
    denied(other.delete_queue, QueueUrl=url)


def test_conditions_and_principal_star(owner, other, queue):
    _, url, arn = queue
    set_policy(
        owner,
        url,
        arn,
        {
            "Effect": "Allow",
            "Principal": "*",
            "Action": "sqs:SendMessage",
            "Condition": {"StringEquals": {"aws:PrincipalAccount": THIRD[2]}},
        },
    )
    denied(other.send_message, QueueUrl=url, MessageBody="not the named account")
    client_of(owner, THIRD).send_message(QueueUrl=url, MessageBody="the named account")
    # A grant that only SNS deliveries would meet (aws:SourceArn) gives a direct caller
    # nothing.
    set_policy(
        owner,
        url,
        arn,
        {
            "Effect": "Allow",
            "Principal": "*",
            "Action": "sqs:SendMessage",
            "Condition": {"ArnEquals": {"aws:SourceArn": "arn:aws:sns:us-east-1:111111111111:t"}},
        },
    )
    denied(other.send_message, QueueUrl=url, MessageBody="no source")


@pytest.mark.parametrize(
    "condition",
    [
        {"Null": {"aws:SourceArn": "true"}},
        {"StringNotEqualsIgnoreCase": {"aws:SourceAccount": OWNER[2]}},
        {"ForAllValues:StringEquals": {"aws:SourceAccount": [OWNER[2]]}},
        {"ArnNotLikeIfExists": {"aws:SourceArn": "arn:aws:sns:*:222222222222:*"}},
        # Not evaluated by sqsim (the caller's IP): fails closed, so the Deny denies.
        {"NotIpAddress": {"aws:SourceIp": "10.0.0.0/8"}},
    ],
    ids=["Null", "StringNotEqualsIgnoreCase", "ForAllValues", "IfExists", "unevaluated"],
)
def test_a_deny_whose_condition_holds_for_an_absent_key_denies_a_direct_call(owner, other, queue, srv, condition):
    """IAM's missing-key rules: a negated operator, `Null: true`, `ForAllValues:` and
    `…IfExists` hold when the request lacks the key (a direct call has no aws:SourceArn or
    aws:SourceAccount), so this Deny applies; it once let another account through."""
    _, url, arn = queue
    allow_all = {"Effect": "Allow", "Principal": "*", "Action": "sqs:*"}
    set_policy(owner, url, arn, allow_all, {"Effect": "Deny", "Principal": "*", "Action": "sqs:SendMessage", "Condition": condition})
    message = denied(other.send_message, QueueUrl=url, MessageBody="through the deny")
    assert "explicit deny" in message
    # The same Deny, its condition now false for a direct call, leaves the Allow in force.
    set_policy(owner, url, arn, allow_all, {"Effect": "Deny", "Principal": "*", "Action": "sqs:SendMessage", "Condition": {"Null": {"aws:SourceArn": "false"}}})
    other.send_message(QueueUrl=url, MessageBody="allowed")


def test_a_policy_sqsim_cannot_fully_evaluate_is_set_with_a_warning(owner, queue, srv):
    _, url, arn = queue
    set_policy(owner, url, arn, {"Effect": "Deny", "Principal": "*", "Action": "sqs:*", "Condition": {"IpAddress": {"aws:SourceIp": "192.0.2.0/24"}}})
    deadline = time.time() + 5
    while "IpAddress on aws:SourceIp" not in srv.log() and time.time() < deadline:
        time.sleep(0.05)
    assert "IpAddress on aws:SourceIp" in srv.log()


def test_a_malformed_policy_is_refused(owner, queue):
    _, url, _ = queue
    for bad in ("not json", "[]", json.dumps({"Version": "2012-10-17"}), json.dumps({"Statement": [{"Effect": "Maybe"}]})):
        with pytest.raises(ClientError) as info:
            owner.set_queue_attributes(QueueUrl=url, Attributes={"Policy": bad})
        check_error(info.value, "InvalidAttributeValue", 400)
        assert info.value.response["Error"]["Message"] == "Invalid value for the parameter Policy."


# Each shareable action, a call of it by the other account, and the permission it needs.
def calls(url, arn):
    handle = "AQEB" + "x" * 40
    return [
        ("SendMessage", "send_message", dict(QueueUrl=url, MessageBody="b")),
        ("SendMessage", "send_message_batch", dict(QueueUrl=url, Entries=[{"Id": "1", "MessageBody": "b"}])),
        ("ReceiveMessage", "receive_message", dict(QueueUrl=url)),
        ("DeleteMessage", "delete_message", dict(QueueUrl=url, ReceiptHandle=handle)),
        ("DeleteMessage", "delete_message_batch", dict(QueueUrl=url, Entries=[{"Id": "1", "ReceiptHandle": handle}])),
        ("ChangeMessageVisibility", "change_message_visibility", dict(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=1)),
        ("ChangeMessageVisibility", "change_message_visibility_batch", dict(QueueUrl=url, Entries=[{"Id": "1", "ReceiptHandle": handle, "VisibilityTimeout": 1}])),
        ("GetQueueAttributes", "get_queue_attributes", dict(QueueUrl=url, AttributeNames=["All"])),
        ("ListDeadLetterSourceQueues", "list_dead_letter_source_queues", dict(QueueUrl=url)),
        ("PurgeQueue", "purge_queue", dict(QueueUrl=url)),
    ]


OWNER_ONLY = [
    ("set_queue_attributes", lambda url, arn: dict(QueueUrl=url, Attributes={"DelaySeconds": "1"})),
    ("delete_queue", lambda url, arn: dict(QueueUrl=url)),
    ("tag_queue", lambda url, arn: dict(QueueUrl=url, Tags={"k": "v"})),
    ("untag_queue", lambda url, arn: dict(QueueUrl=url, TagKeys=["k"])),
    ("list_queue_tags", lambda url, arn: dict(QueueUrl=url)),
    ("add_permission", lambda url, arn: dict(QueueUrl=url, Label="x", AWSAccountIds=[OTHER[2]], Actions=["SendMessage"])),
    ("remove_permission", lambda url, arn: dict(QueueUrl=url, Label="x")),
    ("start_message_move_task", lambda url, arn: dict(SourceArn=arn)),
    ("list_message_move_tasks", lambda url, arn: dict(SourceArn=arn)),
]


def test_every_action_needs_exactly_its_permission(owner, other):
    for i, (permission, method, _) in enumerate(calls("u", "a")):
        name = f"perm-{i}-" + uuid.uuid4().hex[:8]
        url = owner.create_queue(QueueName=name)["QueueUrl"]
        arn = queue_attrs(owner, url, "QueueArn")["QueueArn"]
        _, _, kwargs = calls(url, arn)[i]
        call = getattr(other, method)
        denied(call, **kwargs)
        # Every other permission but this one: still denied.
        others = sorted({p for p, _, _ in calls(url, arn)} - {permission})
        owner.add_permission(QueueUrl=url, Label="others", AWSAccountIds=[OTHER[2]], Actions=others)
        denied(call, **kwargs)
        owner.add_permission(QueueUrl=url, Label="this", AWSAccountIds=[OTHER[2]], Actions=[permission])
        not_denied(call, **kwargs)
    # GetQueueUrl: hidden without sqs:GetQueueUrl, found with it.
    name = "perm-url-" + uuid.uuid4().hex[:8]
    url = owner.create_queue(QueueName=name)["QueueUrl"]
    with pytest.raises(ClientError) as info:
        other.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=OWNER[2])
    check_error(info.value, "AWS.SimpleQueueService.NonExistentQueue", 400)
    owner.add_permission(QueueUrl=url, Label="url", AWSAccountIds=[OTHER[2]], Actions=["GetQueueUrl"])
    assert other.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=OWNER[2])["QueueUrl"] == url


def test_owner_only_actions_are_never_shared(owner, other, queue):
    _, url, arn = queue
    owner.add_permission(QueueUrl=url, Label="all", AWSAccountIds=[OTHER[2]], Actions=["*"])
    for method, kwargs in OWNER_ONLY:
        denied(getattr(other, method), **kwargs(url, arn))
    # ...while the owner may do each of them.
    owner.tag_queue(QueueUrl=url, Tags={"k": "v"})
    assert owner.list_queue_tags(QueueUrl=url)["Tags"] == {"k": "v"}


def test_a_move_task_sends_only_where_its_caller_may_send(owner, other, queue):
    """StartMessageMoveTask sends to its destination: another account's queue only as that
    queue's Policy grants the caller sqs:SendMessage (AWS's redrive permissions), else
    AccessDenied and nothing moves."""
    _, url, arn = queue
    tag = uuid.uuid4().hex[:8]
    dlq = other.create_queue(QueueName=f"mv-dlq-{tag}")["QueueUrl"]
    dlq_arn = queue_attrs(other, dlq, "QueueArn")["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "1"})
    other.create_queue(QueueName=f"mv-src-{tag}", Attributes={"RedrivePolicy": policy})
    other.send_message(QueueUrl=dlq, MessageBody="from another account")
    denied(other.start_message_move_task, SourceArn=dlq_arn, DestinationArn=arn)
    assert queue_attrs(owner, url, "ApproximateNumberOfMessages")["ApproximateNumberOfMessages"] == "0"
    assert queue_attrs(other, dlq, "ApproximateNumberOfMessages")["ApproximateNumberOfMessages"] == "1"
    # Granted SendMessage, the task may send there.
    owner.add_permission(QueueUrl=url, Label="send", AWSAccountIds=[OTHER[2]], Actions=["SendMessage"])
    other.start_message_move_task(SourceArn=dlq_arn, DestinationArn=arn)
    for _ in range(100):
        if queue_attrs(owner, url, "ApproximateNumberOfMessages")["ApproximateNumberOfMessages"] == "1":
            break
        time.sleep(0.05)
    assert queue_attrs(owner, url, "ApproximateNumberOfMessages")["ApproximateNumberOfMessages"] == "1"
