"""CreateQueue, GetQueueUrl, ListQueues and DeleteQueue."""

import uuid

import pytest
from botocore.exceptions import ClientError

from sqsim_helpers import ACCOUNT, check_error, expect_error, queue_attrs


def fresh(prefix="q"):
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


# --- CreateQueue -----------------------------------------------------------------------


def test_create_queue_returns_url_under_account(sqs, endpoint, queue_factory):
    name = fresh()
    url = queue_factory(name)
    assert url == f"{endpoint}/{ACCOUNT}/{name}"


def test_create_queue_with_attributes(sqs, queue_factory):
    name = fresh()
    url = queue_factory(
        name,
        Attributes={
            "DelaySeconds": "5",
            "MaximumMessageSize": "2048",
            "MessageRetentionPeriod": "120",
            "ReceiveMessageWaitTimeSeconds": "3",
            "VisibilityTimeout": "45",
        },
    )
    attrs = queue_attrs(sqs, url)
    assert attrs["DelaySeconds"] == "5"
    assert attrs["MaximumMessageSize"] == "2048"
    assert attrs["MessageRetentionPeriod"] == "120"
    assert attrs["ReceiveMessageWaitTimeSeconds"] == "3"
    assert attrs["VisibilityTimeout"] == "45"
    assert attrs["QueueArn"] == f"arn:aws:sqs:us-east-1:{ACCOUNT}:{name}"


def test_create_queue_idempotent_without_attributes(sqs, queue_factory):
    name = fresh()
    url = queue_factory(name, Attributes={"VisibilityTimeout": "60"})
    assert sqs.create_queue(QueueName=name)["QueueUrl"] == url
    # Nothing was reset by the second call.
    assert queue_attrs(sqs, url, "VisibilityTimeout")["VisibilityTimeout"] == "60"


def test_create_queue_idempotent_with_same_attributes(sqs, queue_factory):
    name = fresh()
    attrs = {"VisibilityTimeout": "60", "DelaySeconds": "2"}
    url = queue_factory(name, Attributes=attrs)
    assert sqs.create_queue(QueueName=name, Attributes=attrs)["QueueUrl"] == url
    # A subset of the attributes, equal to the current values, is fine too.
    assert sqs.create_queue(QueueName=name, Attributes={"DelaySeconds": "2"})["QueueUrl"] == url
    # So is a default value that was never set explicitly.
    same_default = {"MessageRetentionPeriod": "345600"}
    assert sqs.create_queue(QueueName=name, Attributes=same_default)["QueueUrl"] == url


def test_create_queue_different_attributes_is_queue_already_exists(sqs, queue_factory):
    name = fresh()
    queue_factory(name, Attributes={"VisibilityTimeout": "60"})
    with pytest.raises(sqs.exceptions.QueueNameExists) as info:
        sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "61"})
    check_error(info.value, "QueueAlreadyExists", 400)
    assert "VisibilityTimeout" in info.value.response["Error"]["Message"]
    # An attribute that was left at its default and is now supplied differently.
    err = expect_error(
        sqs.create_queue,
        "QueueAlreadyExists",
        QueueName=name,
        Attributes={"DelaySeconds": "10"},
    )
    assert "DelaySeconds" in err.response["Error"]["Message"]


def test_create_queue_compares_with_current_values(sqs, queue_factory):
    name = fresh()
    url = queue_factory(name, Attributes={"VisibilityTimeout": "60"})
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "90"})
    expect_error(
        sqs.create_queue,
        "QueueAlreadyExists",
        QueueName=name,
        Attributes={"VisibilityTimeout": "60"},
    )
    assert (
        sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "90"})["QueueUrl"]
        == url
    )


@pytest.mark.parametrize(
    "name",
    ["has space", "bang!", "dot.name", "a" * 81, "ünicode", "slash/name"],
)
def test_create_queue_invalid_name(sqs, name):
    expect_error(sqs.create_queue, "InvalidParameterValue", QueueName=name)


def test_create_queue_name_limits(sqs, queue_factory):
    name = "A-z_9" + "x" * 75
    assert len(name) == 80
    url = queue_factory(name)
    assert url.endswith("/" + name)
    # Names are case-sensitive: a different case is a different queue.
    other = queue_factory(name.lower())
    assert other != url


def test_create_queue_fifo_attribute_on_standard_name(sqs):
    expect_error(
        sqs.create_queue,
        "InvalidParameterValue",
        QueueName=fresh(),
        Attributes={"FifoQueue": "true"},
    )


def test_create_queue_fifo_name_without_fifo_attribute(sqs):
    expect_error(sqs.create_queue, "InvalidParameterValue", QueueName=fresh() + ".fifo")


@pytest.mark.parametrize(
    "attrs,code",
    [
        ({"VisibilityTimeout": "43201"}, "InvalidAttributeValue"),
        ({"DelaySeconds": "-1"}, "InvalidAttributeValue"),
        ({"MessageRetentionPeriod": "abc"}, "InvalidAttributeValue"),
        ({"Foobar": "1"}, "InvalidAttributeName"),
        ({"FifoQueue": "false"}, "InvalidAttributeName"),
        ({"ContentBasedDeduplication": "true"}, "InvalidAttributeName"),
        ({"DeduplicationScope": "queue"}, "InvalidAttributeName"),
        ({"FifoThroughputLimit": "perQueue"}, "InvalidAttributeName"),
        ({"QueueArn": "arn:aws:sqs:us-east-1:000000000000:x"}, "InvalidAttributeName"),
    ],
)
def test_create_queue_invalid_attributes(sqs, attrs, code):
    name = fresh()
    expect_error(sqs.create_queue, code, QueueName=name, Attributes=attrs)
    # Nothing was created.
    expect_error(sqs.get_queue_url, "AWS.SimpleQueueService.NonExistentQueue", QueueName=name)


def test_create_queue_boolean_input_is_case_insensitive(sqs, queue_factory):
    url = queue_factory(Attributes={"SqsManagedSseEnabled": "True"})
    assert queue_attrs(sqs, url, "SqsManagedSseEnabled") == {"SqsManagedSseEnabled": "true"}


def test_create_queue_with_tags(sqs, queue_factory):
    url = queue_factory(tags={"team": "core", "env": "test"})
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "core", "env": "test"}


# --- GetQueueUrl -----------------------------------------------------------------------


def test_get_queue_url(sqs, queue_factory):
    name = fresh()
    url = queue_factory(name)
    assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == url


def test_get_queue_url_with_owner_account(sqs, queue_factory):
    name = fresh()
    url = queue_factory(name)
    got = sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=ACCOUNT)["QueueUrl"]
    assert got == url
    with pytest.raises(sqs.exceptions.QueueDoesNotExist) as info:
        sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId="111111111111")
    check_error(info.value, "AWS.SimpleQueueService.NonExistentQueue", 400)


def test_get_queue_url_unknown(sqs):
    with pytest.raises(sqs.exceptions.QueueDoesNotExist) as info:
        sqs.get_queue_url(QueueName=fresh("missing"))
    check_error(info.value, "AWS.SimpleQueueService.NonExistentQueue", 400)


def test_get_queue_url_is_case_sensitive(sqs, queue_factory):
    name = "Mixed-" + fresh()
    queue_factory(name)
    expect_error(
        sqs.get_queue_url, "AWS.SimpleQueueService.NonExistentQueue", QueueName=name.lower()
    )


# --- ListQueues ------------------------------------------------------------------------


def test_list_queues_by_prefix(sqs, queue_factory):
    prefix = fresh("lst")
    urls = sorted(queue_factory(f"{prefix}-{i}") for i in range(3))
    other = queue_factory(fresh("lst"))
    got = sqs.list_queues(QueueNamePrefix=prefix)
    assert sorted(got["QueueUrls"]) == urls
    assert other not in got["QueueUrls"]
    assert "NextToken" not in got
    # Without a prefix every queue is listed.
    everything = sqs.list_queues()["QueueUrls"]
    assert set(urls + [other]) <= set(everything)


def test_list_queues_prefix_is_case_sensitive(sqs, queue_factory):
    prefix = "CaseP-" + fresh()
    url = queue_factory(prefix + "-a")
    assert sqs.list_queues(QueueNamePrefix=prefix)["QueueUrls"] == [url]
    assert "QueueUrls" not in sqs.list_queues(QueueNamePrefix=prefix.lower())


def test_list_queues_no_match_has_no_queue_urls(sqs):
    got = sqs.list_queues(QueueNamePrefix=fresh("nomatch"))
    assert "QueueUrls" not in got
    assert "NextToken" not in got


def test_list_queues_paging(sqs, queue_factory):
    prefix = fresh("page")
    urls = [queue_factory(f"{prefix}-{i}") for i in range(5)]
    seen = []
    page = sqs.list_queues(QueueNamePrefix=prefix, MaxResults=2)
    pages = 1
    seen += page["QueueUrls"]
    assert len(page["QueueUrls"]) == 2
    while "NextToken" in page:
        page = sqs.list_queues(QueueNamePrefix=prefix, MaxResults=2, NextToken=page["NextToken"])
        pages += 1
        assert 1 <= len(page["QueueUrls"]) <= 2
        seen += page["QueueUrls"]
        assert pages <= 5, "paging does not end"
    assert pages == 3
    assert sorted(seen) == sorted(urls)
    assert len(set(seen)) == len(seen)


def test_list_queues_exact_page_has_no_next_token(sqs, queue_factory):
    prefix = fresh("exact")
    urls = [queue_factory(f"{prefix}-{i}") for i in range(3)]
    page = sqs.list_queues(QueueNamePrefix=prefix, MaxResults=3)
    assert sorted(page["QueueUrls"]) == sorted(urls)
    assert "NextToken" not in page


def test_list_queues_paginator(sqs, queue_factory):
    prefix = fresh("pgr")
    urls = [queue_factory(f"{prefix}-{i}") for i in range(4)]
    paginator = sqs.get_paginator("list_queues")
    pages = list(paginator.paginate(QueueNamePrefix=prefix, PaginationConfig={"PageSize": 3}))
    assert [len(p["QueueUrls"]) for p in pages] == [3, 1]
    assert sorted(u for p in pages for u in p["QueueUrls"]) == sorted(urls)


@pytest.mark.parametrize("max_results", [0, 1001])
def test_list_queues_max_results_out_of_range(sqs, max_results):
    expect_error(sqs.list_queues, "InvalidParameterValue", MaxResults=max_results)


# --- DeleteQueue -----------------------------------------------------------------------


def test_delete_queue(sqs, queue_factory):
    name = fresh()
    url = queue_factory(name)
    sqs.send_message(QueueUrl=url, MessageBody="left behind")
    sqs.delete_queue(QueueUrl=url)
    expect_error(sqs.get_queue_url, "AWS.SimpleQueueService.NonExistentQueue", QueueName=name)
    assert url not in sqs.list_queues(QueueNamePrefix=name).get("QueueUrls", [])
    with pytest.raises(sqs.exceptions.QueueDoesNotExist) as info:
        sqs.send_message(QueueUrl=url, MessageBody="x")
    check_error(info.value, "AWS.SimpleQueueService.NonExistentQueue", 400)


def test_recreated_queue_starts_empty(sqs, queue_factory, advance):
    name = fresh()
    url = queue_factory(name, Attributes={"DelaySeconds": "7"}, tags={"old": "1"})
    sqs.send_message(QueueUrl=url, MessageBody="old message", DelaySeconds=0)
    sqs.delete_queue(QueueUrl=url)
    advance(61)  # past AWS's 60 s QueueDeletedRecently window, should it be enforced
    assert queue_factory(name) == url
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0).get("Messages") is None
    assert queue_attrs(sqs, url, "DelaySeconds") == {"DelaySeconds": "0"}
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=url)


def test_delete_queue_twice(sqs, queue_factory):
    url = queue_factory()
    sqs.delete_queue(QueueUrl=url)
    expect_error(sqs.delete_queue, "AWS.SimpleQueueService.NonExistentQueue", QueueUrl=url)


def test_every_queue_operation_rejects_an_unknown_queue(sqs, endpoint):
    url = f"{endpoint}/{ACCOUNT}/{fresh('ghost')}"
    calls = [
        (sqs.get_queue_attributes, dict(AttributeNames=["All"])),
        (sqs.set_queue_attributes, dict(Attributes={"DelaySeconds": "1"})),
        (sqs.purge_queue, {}),
        (sqs.send_message, dict(MessageBody="x")),
        (sqs.send_message_batch, dict(Entries=[{"Id": "a", "MessageBody": "x"}])),
        (sqs.receive_message, {}),
        (sqs.delete_message, dict(ReceiptHandle="garbage")),
        (sqs.delete_message_batch, dict(Entries=[{"Id": "a", "ReceiptHandle": "garbage"}])),
        (sqs.change_message_visibility, dict(ReceiptHandle="garbage", VisibilityTimeout=1)),
        (
            sqs.change_message_visibility_batch,
            dict(Entries=[{"Id": "a", "ReceiptHandle": "garbage", "VisibilityTimeout": 1}]),
        ),
        (sqs.tag_queue, dict(Tags={"a": "b"})),
        (sqs.untag_queue, dict(TagKeys=["a"])),
        (sqs.list_queue_tags, {}),
        (sqs.delete_queue, {}),
    ]
    for fn, kwargs in calls:
        with pytest.raises(ClientError) as info:
            fn(QueueUrl=url, **kwargs)
        check_error(info.value, "AWS.SimpleQueueService.NonExistentQueue", 400)
        assert isinstance(info.value, sqs.exceptions.QueueDoesNotExist), fn
