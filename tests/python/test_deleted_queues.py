"""A deleted queue's name cannot be used again for 60 s (reference §3.4: QueueDeletedRecently),
counted on the server clock."""

import uuid

import pytest

from sqsim_helpers import check_error, counts, expect_error

COOLDOWN_TEXT = (
    "You must wait 60 seconds after deleting a queue before you can create another with the "
    "same name."
)


@pytest.fixture
def frozen(clock):
    clock.freeze()
    return clock


def deleted_recently(sqs, name, **kwargs):
    with pytest.raises(sqs.exceptions.QueueDeletedRecently) as info:
        sqs.create_queue(QueueName=name, **kwargs)
    check_error(info.value, "AWS.SimpleQueueService.QueueDeletedRecently", 400)
    assert info.value.response["Error"]["Message"] == COOLDOWN_TEXT
    return info.value


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
def test_recreate_within_60_seconds_is_refused(sqs, queue_factory, frozen, fifo):
    name = f"gone-{uuid.uuid4().hex[:12]}" + (".fifo" if fifo else "")
    attrs = {"FifoQueue": "true"} if fifo else {}
    url = queue_factory(name, Attributes=attrs)
    sqs.send_message(
        QueueUrl=url, MessageBody="old", **({"MessageGroupId": "g", "MessageDeduplicationId": "d"} if fifo else {})
    )
    sqs.delete_queue(QueueUrl=url)
    expect_error(sqs.get_queue_url, "AWS.SimpleQueueService.NonExistentQueue", QueueName=name)

    deleted_recently(sqs, name, Attributes=attrs)
    frozen.advance(30)
    deleted_recently(sqs, name, Attributes=attrs)
    frozen.advance(29)  # 59 s
    deleted_recently(sqs, name, Attributes=attrs)
    # The refused attempts created nothing.
    expect_error(sqs.get_queue_url, "AWS.SimpleQueueService.NonExistentQueue", QueueName=name)
    assert sqs.list_queues(QueueNamePrefix=name).get("QueueUrls", []) == []

    frozen.advance(1)  # 60 s after the delete
    assert queue_factory(name, Attributes=attrs) == url
    assert counts(sqs, url) == (0, 0, 0)  # a new, empty queue


def test_other_names_are_not_blocked(sqs, queue_factory, frozen):
    base = f"gone-{uuid.uuid4().hex[:12]}"
    url = queue_factory(base)
    sqs.delete_queue(QueueUrl=url)
    # A longer name sharing the prefix, and a different case, are different names.
    queue_factory(base + "-2")
    queue_factory(base.upper())
    deleted_recently(sqs, base)


def test_each_delete_starts_its_own_cooldown(sqs, queue_factory, frozen):
    name = f"gone-{uuid.uuid4().hex[:12]}"
    url = queue_factory(name)
    sqs.delete_queue(QueueUrl=url)
    frozen.advance(60)
    queue_factory(name)
    frozen.advance(10)
    sqs.delete_queue(QueueUrl=url)
    frozen.advance(59)
    deleted_recently(sqs, name)
    frozen.advance(1)
    assert queue_factory(name) == url


def test_get_queue_url_and_operations_on_a_deleted_queue(sqs, queue_factory, frozen):
    url = queue_factory()
    sqs.delete_queue(QueueUrl=url)
    with pytest.raises(sqs.exceptions.QueueDoesNotExist) as info:
        sqs.send_message(QueueUrl=url, MessageBody="x")
    check_error(info.value, "AWS.SimpleQueueService.NonExistentQueue", 400)
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.list_queue_tags(QueueUrl=url)


@pytest.mark.parametrize("clock_mode", ["running", "frozen"])
def test_a_restart_right_after_a_delete_starts_with_the_config_files_queue(tmp_path, clock_mode):
    """The cooldown is a rule for CreateQueue calls: a restart within 60 s of deleting a queue
    its config file declares must start (it once exited "deleted less than 60 seconds ago"),
    with the declared queue there at once — also with the clock frozen, where no second of
    the cooldown ever passes. A CreateQueue call in the same window is still refused."""
    import sqsim_process

    config = tmp_path / "sqsim.toml"
    config.write_text('[queues.declared]\nattributes = { VisibilityTimeout = 45 }\n')
    data = tmp_path / "data"
    flags = ("--data-dir", str(data), "--config", str(config))
    with sqsim_process.running(*flags) as srv:
        sqs = srv.client()
        if clock_mode == "frozen":
            srv.admin("POST", "/_sqsim/clock", {"freeze": True})
        url = sqs.get_queue_url(QueueName="declared")["QueueUrl"]
        sqs.delete_queue(QueueUrl=url)
        other = sqs.create_queue(QueueName="undeclared")["QueueUrl"]
        sqs.delete_queue(QueueUrl=other)
    with sqsim_process.running(*flags) as srv:
        sqs = srv.client()
        url = sqs.get_queue_url(QueueName="declared")["QueueUrl"]
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])
        assert attrs["Attributes"]["VisibilityTimeout"] == "45"
        assert "created again at once" in srv.log()
        # A name the file does not declare still cools down, as CreateQueue's rule says.
        deleted_recently(sqs, "undeclared")
        if clock_mode == "frozen":
            assert srv.admin("GET", "/_sqsim/clock")["frozen"]
    # The queue made at the start is recorded: the next start finds it without a cooldown.
    with sqsim_process.running(*flags) as srv:
        assert srv.client().get_queue_url(QueueName="declared")["QueueUrl"]
