"""Dead-letter queues (reference §9.1–§9.3): the move on the receive after maxReceiveCount,
what the moved message looks like, RedrivePolicy / RedriveAllowPolicy validation and
ListDeadLetterSourceQueues. Visibility timeouts are driven by the server clock."""

import uuid

import pytest

from sqsim_helpers import (
    ACCOUNT,
    check_error,
    counts,
    dead_letter,
    expect_error,
    protocol_of,
    queue_arn,
    queue_attrs,
    receive,
    receive_one,
    redrive_policy,
    set_redrive,
)


@pytest.fixture
def frozen(clock):
    clock.freeze()
    return clock


@pytest.fixture
def fifo_queue_factory(queue_factory):
    """create(**attributes) -> the URL of a new FIFO queue (content-based dedup on)."""

    def make(**attrs):
        name = f"r-{uuid.uuid4().hex[:12]}.fifo"
        attributes = {"FifoQueue": "true", "ContentBasedDeduplication": "true"}
        attributes.update(attrs)
        return queue_factory(name, Attributes=attributes)

    return make


def receive_all(sqs, url, **kwargs):
    """Receives up to 10 messages with every system and message attribute."""
    kwargs.setdefault("MaxNumberOfMessages", 10)
    return receive(sqs, url, AttributeNames=["All"], MessageAttributeNames=["All"], **kwargs)


# --- the move ------------------------------------------------------------------------------


def test_max_receive_count_two_moves_on_the_third_receive(sqs, queue_factory, frozen):
    dlq = queue_factory()
    src = queue_factory()
    src_arn = queue_arn(sqs, src)
    set_redrive(sqs, src, queue_arn(sqs, dlq), 2)
    attrs = {"colour": {"DataType": "String", "StringValue": "red"}}
    sent = sqs.send_message(
        QueueUrl=src,
        MessageBody="poison pill",
        MessageAttributes=attrs,
        MessageSystemAttributes={
            "AWSTraceHeader": {"DataType": "String", "StringValue": "Root=1-5759e988-bd862e3fe1be46a994272793"}
        },
    )
    sent_at = None
    for n in (1, 2):
        m = receive_one(sqs, src, VisibilityTimeout=30, AttributeNames=["All"])
        assert m["MessageId"] == sent["MessageId"]
        assert m["Attributes"]["ApproximateReceiveCount"] == str(n)
        assert "DeadLetterQueueSourceArn" not in m["Attributes"]
        sent_at = sent_at or m["Attributes"]["SentTimestamp"]
        assert m["Attributes"]["SentTimestamp"] == sent_at
        frozen.advance(30)

    # The third receive moves the message instead of returning it.
    assert receive(sqs, src, MaxNumberOfMessages=10, VisibilityTimeout=30) == []
    assert counts(sqs, src) == (0, 0, 0)
    assert counts(sqs, dlq) == (1, 0, 0)

    moved = receive_all(sqs, dlq, VisibilityTimeout=30)
    assert len(moved) == 1
    m = moved[0]
    assert m["MessageId"] == sent["MessageId"]
    assert m["Body"] == "poison pill"
    assert m["MD5OfBody"] == sent["MD5OfMessageBody"]
    assert m["MessageAttributes"] == attrs
    assert m["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    a = m["Attributes"]
    assert a["DeadLetterQueueSourceArn"] == src_arn
    # 1 and 2 at the source; the move is not counted; 3 is the first receive in the DLQ.
    assert a["ApproximateReceiveCount"] == "3"
    assert a["SentTimestamp"] == sent_at
    assert a["AWSTraceHeader"] == "Root=1-5759e988-bd862e3fe1be46a994272793"
    assert counts(sqs, dlq) == (0, 1, 0)


def test_max_receive_count_one_and_the_receive_goes_on_with_other_messages(
    sqs, queue_factory, frozen
):
    dlq = queue_factory()
    src = queue_factory()
    set_redrive(sqs, src, queue_arn(sqs, dlq), 1)
    first = sqs.send_message(QueueUrl=src, MessageBody="first")["MessageId"]
    assert receive_one(sqs, src, VisibilityTimeout=30)["MessageId"] == first
    second = sqs.send_message(QueueUrl=src, MessageBody="second")["MessageId"]
    frozen.advance(30)
    # "first" is moved by this receive, which still returns "second".
    got = receive(sqs, src, MaxNumberOfMessages=10, VisibilityTimeout=30)
    assert [m["MessageId"] for m in got] == [second]
    assert counts(sqs, src) == (0, 1, 0)
    # The attribute can be asked for by name too.
    moved = receive_one(
        sqs, dlq, AttributeNames=["ApproximateReceiveCount", "DeadLetterQueueSourceArn"]
    )
    assert moved["MessageId"] == first
    assert moved["Attributes"] == {
        "ApproximateReceiveCount": "2",
        "DeadLetterQueueSourceArn": queue_arn(sqs, src),
    }


def test_messages_deleted_before_the_limit_are_not_moved(sqs, queue_factory, frozen):
    dlq = queue_factory()
    src = queue_factory()
    set_redrive(sqs, src, queue_arn(sqs, dlq), 1)
    sqs.send_message(QueueUrl=src, MessageBody="handled")
    m = receive_one(sqs, src, VisibilityTimeout=30)
    sqs.delete_message(QueueUrl=src, ReceiptHandle=m["ReceiptHandle"])
    frozen.advance(30)
    assert receive(sqs, src) == []
    assert counts(sqs, dlq) == (0, 0, 0)


def test_removing_the_policy_stops_further_moves(sqs, queue_factory, frozen):
    dlq = queue_factory()
    src = queue_factory()
    set_redrive(sqs, src, queue_arn(sqs, dlq), 1)
    sqs.send_message(QueueUrl=src, MessageBody="kept")
    receive_one(sqs, src, VisibilityTimeout=30)
    sqs.set_queue_attributes(QueueUrl=src, Attributes={"RedrivePolicy": ""})
    assert "RedrivePolicy" not in queue_attrs(sqs, src)
    frozen.advance(30)
    m = receive_one(sqs, src, VisibilityTimeout=30, AttributeNames=["All"])
    assert m["Body"] == "kept"
    assert m["Attributes"]["ApproximateReceiveCount"] == "2"
    assert "DeadLetterQueueSourceArn" not in m["Attributes"]
    assert counts(sqs, dlq) == (0, 0, 0)
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq).get("queueUrls", []) == []


def test_raising_max_receive_count_applies_to_queued_messages(sqs, queue_factory, frozen):
    dlq = queue_factory()
    src = queue_factory()
    dlq_arn = queue_arn(sqs, dlq)
    set_redrive(sqs, src, dlq_arn, 1)
    sqs.send_message(QueueUrl=src, MessageBody="x")
    receive_one(sqs, src, VisibilityTimeout=30)
    set_redrive(sqs, src, dlq_arn, 2)
    frozen.advance(30)
    assert receive_one(sqs, src, VisibilityTimeout=30, AttributeNames=["All"])["Attributes"][
        "ApproximateReceiveCount"
    ] == "2"
    frozen.advance(30)
    assert receive(sqs, src) == []
    assert counts(sqs, dlq) == (1, 0, 0)


def test_standard_dlq_keeps_the_original_enqueue_time(sqs, queue_factory, frozen):
    dlq = queue_factory(Attributes={"MessageRetentionPeriod": "60"})
    src = queue_factory()
    set_redrive(sqs, src, queue_arn(sqs, dlq), 1)
    sqs.send_message(QueueUrl=src, MessageBody="old")
    receive_one(sqs, src, VisibilityTimeout=30)
    frozen.advance(30)
    assert receive(sqs, src) == []  # moved at t=30
    assert counts(sqs, dlq) == (1, 0, 0)
    frozen.advance(29)  # t=59: still within 60 s of the original send
    assert counts(sqs, dlq) == (1, 0, 0)
    frozen.advance(2)  # t=61: expired, counted from the send to the source
    assert counts(sqs, dlq) == (0, 0, 0)
    assert receive(sqs, dlq) == []


def test_fifo_dlq_resets_the_enqueue_time(sqs, fifo_queue_factory, frozen):
    dlq = fifo_queue_factory(MessageRetentionPeriod="60")
    src = fifo_queue_factory()
    set_redrive(sqs, src, queue_arn(sqs, dlq), 1)
    sqs.send_message(QueueUrl=src, MessageBody="old", MessageGroupId="g")
    receive_one(sqs, src, VisibilityTimeout=30)
    frozen.advance(30)
    assert receive(sqs, src) == []  # moved at t=30
    frozen.advance(31)  # t=61: past 60 s from the send, 31 s after the move
    assert counts(sqs, dlq) == (1, 0, 0)
    frozen.advance(30)  # t=91: past 60 s from the move
    assert counts(sqs, dlq) == (0, 0, 0)


def test_fifo_source_to_fifo_dlq_keeps_order_and_the_group_stays_usable(
    sqs, fifo_queue_factory, frozen
):
    dlq = fifo_queue_factory()
    src = fifo_queue_factory()
    src_arn = queue_arn(sqs, src)
    set_redrive(sqs, src, queue_arn(sqs, dlq), 2)
    sent = [
        sqs.send_message(QueueUrl=src, MessageBody=f"m{i}", MessageGroupId="g")
        for i in range(1, 4)
    ]
    for n in (1, 2):
        got = receive(sqs, src, MaxNumberOfMessages=10, VisibilityTimeout=30, AttributeNames=["All"])
        assert [m["Body"] for m in got] == ["m1", "m2", "m3"], f"delivery {n}"
        assert {m["Attributes"]["ApproximateReceiveCount"] for m in got} == {str(n)}
        frozen.advance(30)
    assert receive(sqs, src, MaxNumberOfMessages=10) == []
    # The group is not left locked: a new message of the same group is delivered.
    sqs.send_message(QueueUrl=src, MessageBody="m4", MessageGroupId="g")
    assert receive_one(sqs, src, VisibilityTimeout=30)["Body"] == "m4"

    moved = receive(sqs, dlq, MaxNumberOfMessages=10, AttributeNames=["All"])
    assert [m["Body"] for m in moved] == ["m1", "m2", "m3"]
    assert [m["MessageId"] for m in moved] == [s["MessageId"] for s in sent]
    for m in moved:
        a = m["Attributes"]
        assert a["MessageGroupId"] == "g"
        assert a["DeadLetterQueueSourceArn"] == src_arn
        assert a["ApproximateReceiveCount"] == "3"
        assert a["SequenceNumber"].isdigit()
    seqs = [int(m["Attributes"]["SequenceNumber"]) for m in moved]
    assert seqs == sorted(seqs)


def test_fifo_dlq_several_groups_keep_their_order(sqs, fifo_queue_factory, frozen):
    dlq = fifo_queue_factory()
    src = fifo_queue_factory()
    set_redrive(sqs, src, queue_arn(sqs, dlq), 1)
    for i in range(3):
        for g in ("a", "b"):
            sqs.send_message(QueueUrl=src, MessageBody=f"{g}{i}", MessageGroupId=g)
    assert len(receive(sqs, src, MaxNumberOfMessages=10, VisibilityTimeout=30)) == 6
    frozen.advance(30)
    assert receive(sqs, src, MaxNumberOfMessages=10) == []
    moved = receive(sqs, dlq, MaxNumberOfMessages=10, AttributeNames=["All"])
    by_group = {}
    for m in moved:
        by_group.setdefault(m["Attributes"]["MessageGroupId"], []).append(m["Body"])
    assert by_group == {"a": ["a0", "a1", "a2"], "b": ["b0", "b1", "b2"]}


# --- RedrivePolicy validation ----------------------------------------------------------------

REASON_PREFIX = "Value {policy} for parameter RedrivePolicy is invalid. Reason: {reason}"


@pytest.fixture
def redrive_setup(sqs, queue_factory, fifo_queue_factory):
    std_dlq = queue_factory()
    fifo_dlq = fifo_queue_factory()
    src = queue_factory()
    return {
        "src": src,
        "std_dlq": std_dlq,
        "std_arn": queue_arn(sqs, std_dlq),
        "fifo_dlq": fifo_dlq,
        "fifo_arn": queue_arn(sqs, fifo_dlq),
    }


def _std_name(setup):
    return setup["std_arn"].rsplit(":", 1)[1]


INVALID_REDRIVE = [
    (
        "type-mismatch",
        lambda s: redrive_policy(s["fifo_arn"], 3),
        "Dead-letter queue must be same type of queue as the source.",
    ),
    (
        "missing-target",
        lambda s: redrive_policy(f"arn:aws:sqs:us-east-1:{ACCOUNT}:no-such-dlq-anywhere", 3),
        "Dead letter target does not exist.",
    ),
    (
        "count-0",
        lambda s: redrive_policy(s["std_arn"], 0),
        "Invalid value for maxReceiveCount: 0, valid values are from 1 to 1000 both inclusive.",
    ),
    (
        "count-1001",
        lambda s: redrive_policy(s["std_arn"], 1001),
        "Invalid value for maxReceiveCount: 1001, valid values are from 1 to 1000 both inclusive.",
    ),
    (
        "no-count",
        lambda s: f'{{"deadLetterTargetArn":"{s["std_arn"]}"}}',
        "Redrive policy does not contain mandatory attribute: maxReceiveCount.",
    ),
    (
        "no-target",
        lambda s: '{"maxReceiveCount":3}',
        "Redrive policy does not contain mandatory attribute: deadLetterTargetArn.",
    ),
    ("bad-json", lambda s: "not json", "Redrive policy is not a valid JSON map."),
    ("json-array", lambda s: "[]", "Redrive policy is not a valid JSON map."),
    (
        "other-region",
        lambda s: redrive_policy(f"arn:aws:sqs:eu-west-1:{ACCOUNT}:{_std_name(s)}", 3),
        "Dead-letter target must be in the same account and region as the source queue.",
    ),
    (
        "other-account",
        lambda s: redrive_policy(f"arn:aws:sqs:us-east-1:111122223333:{_std_name(s)}", 3),
        "Dead-letter target must be in the same account and region as the source queue.",
    ),
]


@pytest.mark.parametrize(
    "make_policy,reason", [c[1:] for c in INVALID_REDRIVE], ids=[c[0] for c in INVALID_REDRIVE]
)
def test_invalid_redrive_policy_on_set(sqs, redrive_setup, make_policy, reason):
    policy = make_policy(redrive_setup)
    err = expect_error(
        sqs.set_queue_attributes,
        "InvalidParameterValue",
        QueueUrl=redrive_setup["src"],
        Attributes={"RedrivePolicy": policy},
    )
    assert err.response["Error"]["Message"] == REASON_PREFIX.format(policy=policy, reason=reason)
    assert "RedrivePolicy" not in queue_attrs(sqs, redrive_setup["src"])


@pytest.mark.parametrize(
    "make_policy,reason",
    [c[1:] for c in INVALID_REDRIVE if c[0] in ("type-mismatch", "missing-target", "count-0")],
    ids=["type-mismatch", "missing-target", "count-0"],
)
def test_invalid_redrive_policy_on_create(sqs, redrive_setup, make_policy, reason):
    name = f"r-create-{uuid.uuid4().hex[:12]}"
    policy = make_policy(redrive_setup)
    err = expect_error(
        sqs.create_queue,
        "InvalidParameterValue",
        QueueName=name,
        Attributes={"RedrivePolicy": policy},
    )
    assert err.response["Error"]["Message"] == REASON_PREFIX.format(policy=policy, reason=reason)
    # Nothing was created.
    expect_error(sqs.get_queue_url, "AWS.SimpleQueueService.NonExistentQueue", QueueName=name)


def test_fifo_source_needs_a_fifo_dlq(sqs, redrive_setup, fifo_queue_factory):
    src = fifo_queue_factory()
    policy = redrive_policy(redrive_setup["std_arn"], 3)
    err = expect_error(
        sqs.set_queue_attributes,
        "InvalidParameterValue",
        QueueUrl=src,
        Attributes={"RedrivePolicy": policy},
    )
    assert err.response["Error"]["Message"] == REASON_PREFIX.format(
        policy=policy, reason="Dead-letter queue must be same type of queue as the source."
    )
    ok = redrive_policy(redrive_setup["fifo_arn"], 3)
    sqs.set_queue_attributes(QueueUrl=src, Attributes={"RedrivePolicy": ok})
    assert queue_attrs(sqs, src, "RedrivePolicy") == {"RedrivePolicy": ok}


@pytest.mark.parametrize(
    "template,count",
    [
        ('{{"deadLetterTargetArn":"{arn}","maxReceiveCount":5}}', 5),
        ('{{"deadLetterTargetArn":"{arn}","maxReceiveCount":"5"}}', 5),
        ('{{"maxReceiveCount": 1000, "deadLetterTargetArn": "{arn}"}}', 1000),
        ('{{"deadLetterTargetArn":"{arn}","maxReceiveCount":1}}', 1),
    ],
    ids=["number", "string", "spaced-reordered-1000", "one"],
)
def test_valid_redrive_policy_comes_back_normalised(sqs, redrive_setup, template, count):
    # AWS re-serialises the document: compact, target first, the count a number.
    policy = template.format(arn=redrive_setup["std_arn"])
    expected = redrive_policy(redrive_setup["std_arn"], count)
    src = redrive_setup["src"]
    sqs.set_queue_attributes(QueueUrl=src, Attributes={"RedrivePolicy": policy})
    assert queue_attrs(sqs, src, "RedrivePolicy") == {"RedrivePolicy": expected}
    assert queue_attrs(sqs, src)["RedrivePolicy"] == expected
    # "" removes it.
    sqs.set_queue_attributes(QueueUrl=src, Attributes={"RedrivePolicy": ""})
    assert "RedrivePolicy" not in queue_attrs(sqs, src)
    assert queue_attrs(sqs, src, "RedrivePolicy") == {}


def test_redrive_policy_on_create_round_trips(sqs, redrive_setup, queue_factory):
    policy = redrive_policy(redrive_setup["std_arn"], 4)
    url = queue_factory(Attributes={"RedrivePolicy": policy})
    assert queue_attrs(sqs, url, "RedrivePolicy") == {"RedrivePolicy": policy}
    # Re-creating with the same policy is idempotent; a different one is a conflict.
    name = url.rsplit("/", 1)[1]
    assert sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": policy})["QueueUrl"] == url
    expect_error(
        sqs.create_queue,
        "QueueAlreadyExists",
        QueueName=name,
        Attributes={"RedrivePolicy": redrive_policy(redrive_setup["std_arn"], 5)},
    )


# --- RedriveAllowPolicy ----------------------------------------------------------------------


def test_redrive_allow_policy_is_enforced(sqs, redrive_setup, queue_factory):
    dlq = redrive_setup["std_dlq"]
    dlq_arn = redrive_setup["std_arn"]
    src = redrive_setup["src"]
    src_arn = queue_arn(sqs, src)
    policy = redrive_policy(dlq_arn, 3)
    refused = REASON_PREFIX.format(
        policy=policy,
        reason=f"The RedriveAllowPolicy of {dlq_arn} does not allow this queue to use it as a "
        "dead-letter queue.",
    )
    other_arn = f"arn:aws:sqs:us-east-1:{ACCOUNT}:some-other-source"
    cases = [
        ('{"redrivePermission":"denyAll"}', False),
        (f'{{"redrivePermission":"byQueue","sourceQueueArns":["{other_arn}"]}}', False),
        (f'{{"redrivePermission":"byQueue","sourceQueueArns":["{other_arn}","{src_arn}"]}}', True),
        ('{"redrivePermission":"allowAll"}', True),
        ("", True),
    ]
    for allow, permitted in cases:
        sqs.set_queue_attributes(QueueUrl=dlq, Attributes={"RedriveAllowPolicy": allow})
        if allow:
            assert queue_attrs(sqs, dlq, "RedriveAllowPolicy") == {"RedriveAllowPolicy": allow}
        else:
            assert "RedriveAllowPolicy" not in queue_attrs(sqs, dlq)
        sqs.set_queue_attributes(QueueUrl=src, Attributes={"RedrivePolicy": ""})
        if permitted:
            sqs.set_queue_attributes(QueueUrl=src, Attributes={"RedrivePolicy": policy})
            assert queue_attrs(sqs, src, "RedrivePolicy") == {"RedrivePolicy": policy}
        else:
            err = expect_error(
                sqs.set_queue_attributes,
                "InvalidParameterValue",
                QueueUrl=src,
                Attributes={"RedrivePolicy": policy},
            )
            assert err.response["Error"]["Message"] == refused, allow
            assert "RedrivePolicy" not in queue_attrs(sqs, src)


def test_redrive_allow_policy_is_enforced_on_create(sqs, redrive_setup):
    dlq_arn = redrive_setup["std_arn"]
    sqs.set_queue_attributes(
        QueueUrl=redrive_setup["std_dlq"],
        Attributes={"RedriveAllowPolicy": '{"redrivePermission":"denyAll"}'},
    )
    name = f"r-denied-{uuid.uuid4().hex[:12]}"
    policy = redrive_policy(dlq_arn, 3)
    err = expect_error(
        sqs.create_queue,
        "InvalidParameterValue",
        QueueName=name,
        Attributes={"RedrivePolicy": policy},
    )
    assert err.response["Error"]["Message"].startswith(
        f"Value {policy} for parameter RedrivePolicy is invalid. Reason: The RedriveAllowPolicy of {dlq_arn}"
    )
    expect_error(sqs.get_queue_url, "AWS.SimpleQueueService.NonExistentQueue", QueueName=name)


ELEVEN = ",".join(f'"arn:aws:sqs:us-east-1:{ACCOUNT}:q{i}"' for i in range(11))


@pytest.mark.parametrize(
    "bad",
    [
        '{"redrivePermission":"sometimes"}',
        "{}",
        '{"redrivePermission":"byQueue"}',
        '{"redrivePermission":"byQueue","sourceQueueArns":[]}',
        f'{{"redrivePermission":"byQueue","sourceQueueArns":[{ELEVEN}]}}',
        '{"redrivePermission":"byQueue","sourceQueueArns":["not-an-arn"]}',
        '{"redrivePermission":"byQueue","sourceQueueArns":"arn:aws:sqs:us-east-1:000000000000:q"}',
        f'{{"redrivePermission":"allowAll","sourceQueueArns":["arn:aws:sqs:us-east-1:{ACCOUNT}:q"]}}',
        f'{{"redrivePermission":"denyAll","sourceQueueArns":["arn:aws:sqs:us-east-1:{ACCOUNT}:q"]}}',
        "[]",
        "not json",
    ],
    ids=[
        "unknown-permission",
        "empty-object",
        "byQueue-without-arns",
        "byQueue-empty-arns",
        "byQueue-eleven-arns",
        "byQueue-bad-arn",
        "arns-not-a-list",
        "allowAll-with-arns",
        "denyAll-with-arns",
        "json-array",
        "bad-json",
    ],
)
def test_malformed_redrive_allow_policy(sqs, queue, bad):
    err = expect_error(
        sqs.set_queue_attributes,
        "InvalidParameterValue",
        QueueUrl=queue,
        Attributes={"RedriveAllowPolicy": bad},
    )
    assert err.response["Error"]["Message"].startswith(
        f"Value {bad} for parameter RedriveAllowPolicy is invalid. Reason: "
    )
    assert "RedriveAllowPolicy" not in queue_attrs(sqs, queue)


def test_redrive_allow_policy_byqueue_with_ten_arns(sqs, queue):
    ten = ",".join(f'"arn:aws:sqs:us-east-1:{ACCOUNT}:q{i}"' for i in range(10))
    allow = f'{{"redrivePermission":"byQueue","sourceQueueArns":[{ten}]}}'
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={"RedriveAllowPolicy": allow})
    assert queue_attrs(sqs, queue, "RedriveAllowPolicy") == {"RedriveAllowPolicy": allow}


# --- ListDeadLetterSourceQueues --------------------------------------------------------------


def test_list_dead_letter_source_queues(sqs, queue_factory):
    dlq = queue_factory()
    dlq_arn = queue_arn(sqs, dlq)
    resp = sqs.list_dead_letter_source_queues(QueueUrl=dlq)
    assert resp.get("queueUrls", []) == []
    assert "NextToken" not in resp
    if protocol_of(sqs) == "json":
        assert resp["queueUrls"] == []  # always present on the wire

    sources = [queue_factory() for _ in range(3)]
    for s in sources:
        set_redrive(sqs, s, dlq_arn, 5)
    unrelated = queue_factory()
    other_dlq = queue_factory()
    set_redrive(sqs, unrelated, queue_arn(sqs, other_dlq), 5)

    resp = sqs.list_dead_letter_source_queues(QueueUrl=dlq)
    assert sorted(resp["queueUrls"]) == sorted(sources)
    assert "NextToken" not in resp
    assert sqs.list_dead_letter_source_queues(QueueUrl=other_dlq)["queueUrls"] == [unrelated]
    # A source is not itself a DLQ.
    assert sqs.list_dead_letter_source_queues(QueueUrl=sources[0]).get("queueUrls", []) == []

    # Pointing a source elsewhere removes it from the list.
    set_redrive(sqs, sources[0], queue_arn(sqs, other_dlq), 5)
    assert sorted(sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"]) == sorted(
        sources[1:]
    )
    assert sorted(sqs.list_dead_letter_source_queues(QueueUrl=other_dlq)["queueUrls"]) == sorted(
        [unrelated, sources[0]]
    )
    # Deleting a source removes it too.
    sqs.delete_queue(QueueUrl=sources[1])
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == [sources[2]]


def test_list_dead_letter_source_queues_pagination(sqs, queue_factory):
    dlq = queue_factory()
    dlq_arn = queue_arn(sqs, dlq)
    sources = [queue_factory() for _ in range(5)]
    for s in sources:
        set_redrive(sqs, s, dlq_arn, 3)

    pages = []
    token = None
    for _ in range(10):
        kwargs = {"QueueUrl": dlq, "MaxResults": 2}
        if token:
            kwargs["NextToken"] = token
        resp = sqs.list_dead_letter_source_queues(**kwargs)
        pages.append(resp["queueUrls"])
        token = resp.get("NextToken")
        if not token:
            break
    assert [len(p) for p in pages] == [2, 2, 1]
    flat = [u for p in pages for u in p]
    assert len(set(flat)) == 5
    assert sorted(flat) == sorted(sources)
    # Sorted by name, like ListQueues.
    assert flat == sorted(sources, key=lambda u: u.rsplit("/", 1)[1])

    # An exact page has no NextToken; no MaxResults means no NextToken at all.
    resp = sqs.list_dead_letter_source_queues(QueueUrl=dlq, MaxResults=5)
    assert len(resp["queueUrls"]) == 5 and "NextToken" not in resp
    resp = sqs.list_dead_letter_source_queues(QueueUrl=dlq)
    assert len(resp["queueUrls"]) == 5 and "NextToken" not in resp

    # The botocore paginator follows the tokens.
    paginator = sqs.get_paginator("list_dead_letter_source_queues")
    got = [
        u
        for page in paginator.paginate(QueueUrl=dlq, PaginationConfig={"PageSize": 2})
        for u in page.get("queueUrls", [])
    ]
    assert got == flat


@pytest.mark.parametrize("max_results", [0, 1001])
def test_list_dead_letter_source_queues_max_results_out_of_range(sqs, queue, max_results):
    expect_error(
        sqs.list_dead_letter_source_queues,
        "InvalidParameterValue",
        QueueUrl=queue,
        MaxResults=max_results,
    )


def test_list_dead_letter_source_queues_unknown_queue(sqs, endpoint):
    with pytest.raises(sqs.exceptions.QueueDoesNotExist) as info:
        sqs.list_dead_letter_source_queues(QueueUrl=f"{endpoint}/{ACCOUNT}/no-such-dlq-here")
    check_error(info.value, "AWS.SimpleQueueService.NonExistentQueue", 400)


# --- the helper the move-task tests use ------------------------------------------------------


def test_dead_letter_helper_moves_a_batch(sqs, queue_factory, advance):
    # The helper the move-task tests rely on: 12 messages, two receives each at count 2.
    dlq = queue_factory()
    src = queue_factory()
    sent = dead_letter(sqs, src, dlq, [f"b{i}" for i in range(12)], advance, max_receive_count=2)
    assert len(sent) == 12
    got = {}
    while True:
        batch = receive(sqs, dlq, MaxNumberOfMessages=10, VisibilityTimeout=60, AttributeNames=["All"])
        if not batch:
            break
        for m in batch:
            got[m["MessageId"]] = m["Body"]
            assert m["Attributes"]["ApproximateReceiveCount"] == "3"
    assert got == sent
