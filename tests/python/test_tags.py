"""TagQueue, UntagQueue and ListQueueTags."""

import uuid

import pytest

from sqsim_helpers import expect_error


def tags_of(sqs, url):
    return sqs.list_queue_tags(QueueUrl=url).get("Tags")


def test_untagged_queue_has_no_tags_key(sqs, queue):
    resp = sqs.list_queue_tags(QueueUrl=queue)
    assert "Tags" not in resp
    assert resp["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_tag_list_untag(sqs, queue):
    sqs.tag_queue(QueueUrl=queue, Tags={"team": "core", "cost-center": "42"})
    assert tags_of(sqs, queue) == {"team": "core", "cost-center": "42"}
    sqs.untag_queue(QueueUrl=queue, TagKeys=["team"])
    assert tags_of(sqs, queue) == {"cost-center": "42"}
    sqs.untag_queue(QueueUrl=queue, TagKeys=["cost-center"])
    assert tags_of(sqs, queue) is None


def test_tag_merges_and_overwrites(sqs, queue):
    sqs.tag_queue(QueueUrl=queue, Tags={"a": "1", "b": "2"})
    sqs.tag_queue(QueueUrl=queue, Tags={"b": "20", "c": "3"})
    assert tags_of(sqs, queue) == {"a": "1", "b": "20", "c": "3"}


def test_tag_keys_are_case_sensitive_and_values_may_be_empty(sqs, queue):
    sqs.tag_queue(QueueUrl=queue, Tags={"MyTag": "upper", "mytag": "", "with space": "x y"})
    assert tags_of(sqs, queue) == {"MyTag": "upper", "mytag": "", "with space": "x y"}


def test_untag_missing_key_is_ignored(sqs, queue):
    sqs.tag_queue(QueueUrl=queue, Tags={"keep": "me"})
    sqs.untag_queue(QueueUrl=queue, TagKeys=["nope", "KEEP"])
    assert tags_of(sqs, queue) == {"keep": "me"}


def test_tag_special_characters(sqs, queue):
    tags = {"k_.:/=+-@": "v_.:/=+-@", "ünï": "çødé"}
    sqs.tag_queue(QueueUrl=queue, Tags=tags)
    assert tags_of(sqs, queue) == tags


def test_create_queue_tags_then_tag_queue(sqs, queue_factory):
    url = queue_factory(tags={"from": "create"})
    sqs.tag_queue(QueueUrl=url, Tags={"from": "tag", "extra": "1"})
    assert tags_of(sqs, url) == {"from": "tag", "extra": "1"}


def test_tags_are_per_queue(sqs, queue_factory):
    a = queue_factory()
    b = queue_factory()
    sqs.tag_queue(QueueUrl=a, Tags={"only": "a"})
    assert tags_of(sqs, b) is None


@pytest.mark.parametrize(
    "tags",
    [
        {"aws:reserved": "x"},
        {"k" * 129: "x"},
        {"k": "v" * 257},
        {"bad#key": "x"},
        {f"t{i}": "x" for i in range(51)},
    ],
    ids=["aws-prefix", "long-key", "long-value", "bad-char", "51-tags"],
)
def test_invalid_tags(sqs, queue, tags):
    expect_error(sqs.tag_queue, "InvalidParameterValue", QueueUrl=queue, Tags=tags)
    assert tags_of(sqs, queue) is None


def test_tag_limits_allowed(sqs, queue):
    tags = {f"t{i}": "x" for i in range(49)}
    tags["k" * 128] = "v" * 256
    sqs.tag_queue(QueueUrl=queue, Tags=tags)
    assert tags_of(sqs, queue) == tags
    # One more new key would make 51.
    expect_error(sqs.tag_queue, "InvalidParameterValue", QueueUrl=queue, Tags={"extra": "1"})
    # Overwriting an existing key does not add one.
    sqs.tag_queue(QueueUrl=queue, Tags={"t0": "y"})
    assert tags_of(sqs, queue)["t0"] == "y"



# --- CreateQueue tags and the 50-tag limit ---------------------------------------------------


def test_create_queue_tags_are_listed_exactly(sqs, queue_factory):
    tags = {"Team": "core", "team": "other", "empty": "", "path": "a/b:c=d+e-f@g_h.i"}
    url = queue_factory(tags=tags)
    assert tags_of(sqs, url) == tags


def test_create_queue_with_fifty_tags(sqs, queue_factory):
    tags = {f"k{i:02d}": f"v{i}" for i in range(50)}
    url = queue_factory(tags=tags)
    assert tags_of(sqs, url) == tags
    expect_error(sqs.tag_queue, "InvalidParameterValue", QueueUrl=url, Tags={"k50": "x"})
    assert tags_of(sqs, url) == tags
    # Untag one, and there is room for one more.
    sqs.untag_queue(QueueUrl=url, TagKeys=["k00"])
    sqs.tag_queue(QueueUrl=url, Tags={"k50": "x"})
    assert len(tags_of(sqs, url)) == 50


@pytest.mark.parametrize(
    "tags",
    [
        {f"k{i}": "v" for i in range(51)},
        {"aws:cloudformation": "x"},
        {"k" * 129: "v"},
        {"k": "v" * 257},
        {"bad*key": "v"},
        {"": "v"},
    ],
    ids=["51-tags", "aws-prefix", "long-key", "long-value", "bad-char", "empty-key"],
)
def test_create_queue_with_invalid_tags_creates_nothing(sqs, tags):
    name = f"tags-{uuid.uuid4().hex[:12]}"
    expect_error(sqs.create_queue, "InvalidParameterValue", QueueName=name, tags=tags)
    expect_error(sqs.get_queue_url, "AWS.SimpleQueueService.NonExistentQueue", QueueName=name)


def test_tag_queue_over_the_limit_changes_nothing(sqs, queue):
    sqs.tag_queue(QueueUrl=queue, Tags={f"k{i}": "v" for i in range(45)})
    # 45 + 6 new = 51: the whole request is refused, including the overwrite of k0.
    new = {f"n{i}": "v" for i in range(6)}
    new["k0"] = "changed"
    expect_error(sqs.tag_queue, "InvalidParameterValue", QueueUrl=queue, Tags=new)
    current = tags_of(sqs, queue)
    assert len(current) == 45 and current["k0"] == "v"


def test_untag_every_key_removes_tags(sqs, queue):
    sqs.tag_queue(QueueUrl=queue, Tags={"a": "1", "b": "2"})
    sqs.untag_queue(QueueUrl=queue, TagKeys=["a", "b", "c"])
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=queue)


def test_tag_key_case_is_kept_on_overwrite_and_untag(sqs, queue):
    sqs.tag_queue(QueueUrl=queue, Tags={"Env": "prod"})
    sqs.tag_queue(QueueUrl=queue, Tags={"env": "dev"})
    assert tags_of(sqs, queue) == {"Env": "prod", "env": "dev"}
    sqs.untag_queue(QueueUrl=queue, TagKeys=["ENV", "env"])
    assert tags_of(sqs, queue) == {"Env": "prod"}


def test_tag_queue_empty_key(sqs, queue):
    expect_error(sqs.tag_queue, "InvalidParameterValue", QueueUrl=queue, Tags={"": "v"})
    assert tags_of(sqs, queue) is None
