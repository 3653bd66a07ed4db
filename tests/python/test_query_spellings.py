"""Every query-protocol spelling of a list or map member that an AWS SDK generation sends
(docs/query-spellings.md, with its sources), as raw form POSTs the way those marshallers
write them, checked against what the same call does through boto3 in this run's protocol;
and a member of the wrong shape refused in AWS's words, naming it."""

import re
import urllib.error
import urllib.parse
import urllib.request
import uuid

from sqsim_helpers import ACCOUNT, receive_one


def post(endpoint, pairs):
    """A query-protocol POST; (HTTP status, XML body)."""
    form = urllib.parse.urlencode([("Version", "2012-11-05"), *pairs]).encode()
    req = urllib.request.Request(
        endpoint, data=form, headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_tag_queue_with_tags_n_as_java_v1_v2_ruby_and_rusoto_send_it(sqs, endpoint, queue_factory):
    # aws-sdk-java TagQueueRequestMarshaller: "Tags." + i + ".Key" (aws-sdk-java-v2#2524).
    url = queue_factory()
    status, body = post(
        endpoint,
        [
            ("Action", "TagQueue"),
            ("QueueUrl", url),
            ("Tags.1.Key", "team"),
            ("Tags.1.Value", "payments"),
            ("Tags.2.Key", "env"),
            ("Tags.2.Value", "dev"),
        ],
    )
    assert status == 200, body
    # botocore's spelling, Tag.N, on the same queue, in the same run.
    status, body = post(
        endpoint,
        [("Action", "TagQueue"), ("QueueUrl", url), ("Tag.1.Key", "owner"), ("Tag.1.Value", "me")],
    )
    assert status == 200, body
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {
        "team": "payments",
        "env": "dev",
        "owner": "me",
    }


def test_boto2_bare_attribute_forms(sqs, endpoint, queue_factory):
    # boto 2's set_queue_attribute: Attribute.Name / Attribute.Value, unnumbered (the AWS API
    # Reference lists this form too); get_queue_attributes: AttributeName=All.
    url = queue_factory()
    status, body = post(
        endpoint,
        [
            ("Action", "SetQueueAttributes"),
            ("QueueUrl", url),
            ("Attribute.Name", "VisibilityTimeout"),
            ("Attribute.Value", "45"),
        ],
    )
    assert status == 200, body
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])[
        "Attributes"
    ] == {"VisibilityTimeout": "45"}
    status, body = post(
        endpoint, [("Action", "GetQueueAttributes"), ("QueueUrl", url), ("AttributeName", "All")]
    )
    assert status == 200, body
    assert "<Name>VisibilityTimeout</Name><Value>45</Value>" in body
    assert "<Name>QueueArn</Name>" in body


def test_boto2_bare_add_permission_lists(sqs, endpoint, queue_factory):
    url = queue_factory()
    status, body = post(
        endpoint,
        [
            ("Action", "AddPermission"),
            ("QueueUrl", url),
            ("Label", "bare"),
            ("AWSAccountId", "111122223333"),
            ("ActionName", "SendMessage"),
        ],
    )
    assert status == 200, body
    policy = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"]
    assert '"Sid":"bare"' in policy
    assert "arn:aws:iam::111122223333:root" in policy
    assert '"SQS:SendMessage"' in policy


def test_empty_lists_and_maps_under_their_location_names(sqs, endpoint, queue_factory):
    # Go v1, JS v2, Java v2 and PHP send an empty list as `<locationName>=`; Go v1 also an
    # empty map (`Tag=`, `Attribute=`). Each must be answered as botocore's spelling of the
    # same empty member (`<model name>=`) is.
    url = queue_factory()
    sqs.tag_queue(QueueUrl=url, Tags={"keep": "me"})

    def answer(pairs):
        status, body = post(endpoint, pairs)
        code = re.search(r"<Code>(.*?)</Code>", body)
        message = re.search(r"<Message>(.*?)</Message>", body)
        return status, code and code.group(1), message and message.group(1)

    for action, location, model in [
        ("UntagQueue", "TagKey", "TagKeys"),
        ("GetQueueAttributes", "AttributeName", "AttributeNames"),
        ("ReceiveMessage", "MessageAttributeName", "MessageAttributeNames"),
        ("SetQueueAttributes", "Attribute", "Attributes"),
        ("TagQueue", "Tag", "Tags"),
    ]:
        as_location = answer([("Action", action), ("QueueUrl", url), (location, "")])
        as_model = answer([("Action", action), ("QueueUrl", url), (model, "")])
        assert as_location == as_model, (action, as_location, as_model)
    # An empty UntagQueue is refused (AWS checks the keys' length); nothing changed.
    assert answer([("Action", "UntagQueue"), ("QueueUrl", url), ("TagKey", "")])[:2] == (
        400,
        "InvalidParameterValue",
    )
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"keep": "me"}
    name = "empty-tags-" + uuid.uuid4().hex[:8]
    status, body = post(endpoint, [("Action", "CreateQueue"), ("QueueName", name), ("Tag", "")])
    assert status == 200, body
    created = re.search(r"<QueueUrl>(.*?)</QueueUrl>", body).group(1)
    try:
        assert "Tags" not in sqs.list_queue_tags(QueueUrl=created)
    finally:
        sqs.delete_queue(QueueUrl=created)


def test_message_attributes_under_their_model_name(sqs, endpoint, queue_factory):
    # `MessageAttributes.N.*` (the model name), as API Gateway integration templates write it
    # (localstack#10949: AWS accepts it).
    url = queue_factory()
    status, body = post(
        endpoint,
        [
            ("Action", "SendMessage"),
            ("QueueUrl", url),
            ("MessageBody", "hello"),
            ("MessageAttributes.1.Name", "kind"),
            ("MessageAttributes.1.Value.DataType", "String"),
            ("MessageAttributes.1.Value.StringValue", "greeting"),
        ],
    )
    assert status == 200, body
    m = receive_one(sqs, url, MessageAttributeNames=["All"])
    assert m["MessageAttributes"] == {"kind": {"DataType": "String", "StringValue": "greeting"}}


def test_a_member_of_the_wrong_shape_is_refused_in_aws_words(endpoint, queue_factory):
    url = queue_factory()
    status, body = post(
        endpoint, [("Action", "TagQueue"), ("QueueUrl", url), ("Tags", "not-a-map")]
    )
    assert status == 400, body
    assert "<Code>InvalidParameterValue</Code>" in body
    assert "Value for parameter Tags is invalid. Reason: Malformed input." in body
    assert "invalid type" not in body and "expected" not in body
    assert url.endswith(f"/{ACCOUNT}/" + url.rsplit("/", 1)[1])
