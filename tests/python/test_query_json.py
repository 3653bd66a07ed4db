"""The query protocol answered in JSON: a form POST or GET with `Action=…` that sends
`Accept: application/json` (or the parameter `ContentType=JSON`) gets the JSON rendering AWS
sends (API Gateway's SQS integration and AWS.jl rely on it).

Confirmed against captures of real AWS: the `{Action}Response` / `{Action}Result` /
`ResponseMetadata` wrapper, sorted keys, every member present with null when unset,
`queueUrls` and `messages`, GetQueueAttributes' `Attributes` as Name/Value entries, a
message's `Attributes` as an object, and the `{"Error":{…},"RequestId"}` error body.
Unconfirmed (no capture exists; the shapes follow the same rules): batch results, tags,
message attribute values, move tasks (Start, Cancel, List), the actions without a result
(`{XResponse: {ResponseMetadata}}`), ListDeadLetterSourceQueues' `queueUrls: []` when there are
none and GetQueueAttributes' `Attributes: null` when there are none. ListQueues with none
sends `queueUrls: []` as a 2021 capture shows (a 2020 capture had null)."""

import hashlib
import json
import urllib.error
import urllib.parse
import urllib.request

import pytest

JSON = "application/json"


class Reply:
    def __init__(self, status, headers, raw):
        self.status = status
        self.headers = headers
        self.raw = raw

    @property
    def body(self):
        return json.loads(self.raw)


def call(endpoint, action, params=(), accept=JSON, path="/", get=False, extra_headers=None):
    """One raw query-protocol request; params is a dict or a list of pairs."""
    pairs = [("Action", action), ("Version", "2012-11-05")]
    pairs += list(params.items()) if isinstance(params, dict) else list(params)
    data = urllib.parse.urlencode(pairs)
    headers = dict(extra_headers or {})
    if accept is not None:
        headers["Accept"] = accept
    if get:
        req = urllib.request.Request(f"{endpoint}{path}?{data}", headers=headers, method="GET")
    else:
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        req = urllib.request.Request(endpoint + path, data=data.encode(), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return Reply(resp.status, resp.headers, resp.read())
    except urllib.error.HTTPError as e:
        return Reply(e.code, e.headers, e.read())


def keys_sorted_everywhere(value):
    if isinstance(value, dict):
        keys = list(value)
        assert keys == sorted(keys), keys
        for v in value.values():
            keys_sorted_everywhere(v)
    elif isinstance(value, list):
        for v in value:
            keys_sorted_everywhere(v)


def ok(endpoint, action, params=(), **kw):
    """Calls `action`, checks the wrapper, headers and key order, returns the Result (or
    None for actions without one)."""
    r = call(endpoint, action, params, **kw)
    assert r.status == 200, r.raw
    assert r.headers["Content-Type"] == JSON
    body = r.body
    keys_sorted_everywhere(body)
    assert list(body) == [f"{action}Response"]
    response = body[f"{action}Response"]
    assert response["ResponseMetadata"] == {"RequestId": r.headers["x-amzn-RequestId"]}
    assert set(response) <= {f"{action}Result", "ResponseMetadata"}
    return response.get(f"{action}Result")


def error(endpoint, action, params=(), status=400, **kw):
    r = call(endpoint, action, params, **kw)
    assert r.status == status, r.raw
    assert r.headers["Content-Type"] == JSON
    body = r.body
    assert list(body) == ["Error", "RequestId"]
    assert list(body["Error"]) == ["Code", "Message", "Type"]
    assert body["RequestId"] == r.headers["x-amzn-RequestId"]
    return body["Error"]


@pytest.fixture
def url(endpoint, request):
    name = "qj-" + request.node.name[:40].replace("[", "-").replace("]", "")
    name = "".join(c if c.isalnum() or c in "-_" else "-" for c in name)
    result = ok(endpoint, "CreateQueue", {"QueueName": name})
    assert list(result) == ["QueueUrl"]
    yield result["QueueUrl"]
    call(endpoint, "DeleteQueue", {"QueueUrl": result["QueueUrl"]})


def test_queue_url_actions(endpoint, url):
    name = url.rsplit("/", 1)[1]
    assert ok(endpoint, "GetQueueUrl", {"QueueName": name}) == {"QueueUrl": url}


def test_list_queues_uses_queueUrls_and_an_empty_list_when_none(endpoint, url):
    name = url.rsplit("/", 1)[1]
    got = ok(endpoint, "ListQueues", {"QueueNamePrefix": name})
    assert got == {"NextExclusiveStartQueueName": None, "NextToken": None, "queueUrls": [url]}
    none = ok(endpoint, "ListQueues", {"QueueNamePrefix": "no-such-prefix-anywhere"})
    # As captured from AWS in 2021 (localstack issue 3715); a 2020 capture (AWS.jl) had null.
    assert none == {"NextExclusiveStartQueueName": None, "NextToken": None, "queueUrls": []}
    paged = ok(endpoint, "ListQueues", {"QueueNamePrefix": name, "MaxResults": "1"})
    assert paged["queueUrls"] == [url]


def test_send_message_has_every_member(endpoint, url):
    got = ok(endpoint, "SendMessage", {"QueueUrl": url, "MessageBody": "hello"})
    assert list(got) == [
        "MD5OfMessageAttributes",
        "MD5OfMessageBody",
        "MD5OfMessageSystemAttributes",
        "MessageId",
        "SequenceNumber",
    ]
    assert got["MD5OfMessageBody"] == hashlib.md5(b"hello").hexdigest()
    assert got["MD5OfMessageAttributes"] is None
    assert got["MD5OfMessageSystemAttributes"] is None
    assert got["SequenceNumber"] is None
    with_attrs = ok(
        endpoint,
        "SendMessage",
        {
            "QueueUrl": url,
            "MessageBody": "b",
            "MessageAttribute.1.Name": "a",
            "MessageAttribute.1.Value.DataType": "String",
            "MessageAttribute.1.Value.StringValue": "v",
        },
    )
    assert len(with_attrs["MD5OfMessageAttributes"]) == 32


def test_fifo_send_has_a_sequence_number(endpoint, request):
    name = "qj-fifo-" + hashlib.md5(request.node.name.encode()).hexdigest()[:8] + ".fifo"
    q = ok(
        endpoint,
        "CreateQueue",
        {
            "QueueName": name,
            "Attribute.1.Name": "FifoQueue",
            "Attribute.1.Value": "true",
            "Attribute.2.Name": "ContentBasedDeduplication",
            "Attribute.2.Value": "true",
        },
    )["QueueUrl"]
    try:
        got = ok(endpoint, "SendMessage", {"QueueUrl": q, "MessageBody": "x", "MessageGroupId": "g"})
        assert got["SequenceNumber"].isdigit()
    finally:
        call(endpoint, "DeleteQueue", {"QueueUrl": q})


def test_receive_message_uses_messages(endpoint, url):
    assert ok(endpoint, "ReceiveMessage", {"QueueUrl": url}) == {"messages": None}
    ok(
        endpoint,
        "SendMessage",
        {
            "QueueUrl": url,
            "MessageBody": "body <&>",
            "MessageAttribute.1.Name": "s",
            "MessageAttribute.1.Value.DataType": "String",
            "MessageAttribute.1.Value.StringValue": "v",
            "MessageAttribute.2.Name": "b",
            "MessageAttribute.2.Value.DataType": "Binary",
            "MessageAttribute.2.Value.BinaryValue": "AAEC",
        },
    )
    got = ok(
        endpoint,
        "ReceiveMessage",
        {
            "QueueUrl": url,
            "AttributeName.1": "ApproximateReceiveCount",
            "MessageAttributeName.1": "All",
        },
    )
    [m] = got["messages"]
    assert list(m) == [
        "Attributes",
        "Body",
        "MD5OfBody",
        "MD5OfMessageAttributes",
        "MessageAttributes",
        "MessageId",
        "ReceiptHandle",
    ]
    assert m["Body"] == "body <&>"
    assert m["MD5OfBody"] == hashlib.md5(b"body <&>").hexdigest()
    assert m["Attributes"] == {"ApproximateReceiveCount": "1"}
    assert m["MessageAttributes"] == {
        "b": {
            "BinaryListValues": [],
            "BinaryValue": "AAEC",
            "DataType": "Binary",
            "StringListValues": [],
            "StringValue": None,
        },
        "s": {
            "BinaryListValues": [],
            "BinaryValue": None,
            "DataType": "String",
            "StringListValues": [],
            "StringValue": "v",
        },
    }
    # Without attributes asked for, both maps are null (as captured from AWS).
    assert ok(endpoint, "ChangeMessageVisibility", {"QueueUrl": url, "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": "0"}) is None
    [again] = ok(endpoint, "ReceiveMessage", {"QueueUrl": url})["messages"]
    assert again["Attributes"] is None
    assert again["MessageAttributes"] is None
    assert again["MD5OfMessageAttributes"] is None
    assert ok(endpoint, "DeleteMessage", {"QueueUrl": url, "ReceiptHandle": again["ReceiptHandle"]}) is None


def test_get_queue_attributes_is_a_list_of_name_value(endpoint, url):
    got = ok(
        endpoint,
        "GetQueueAttributes",
        {"QueueUrl": url, "AttributeName.1": "ApproximateNumberOfMessages", "AttributeName.2": "QueueArn"},
    )
    attrs = got["Attributes"]
    assert all(list(a) == ["Name", "Value"] for a in attrs)
    as_dict = {a["Name"]: a["Value"] for a in attrs}
    assert as_dict["ApproximateNumberOfMessages"] == "0"
    assert as_dict["QueueArn"].endswith(":" + url.rsplit("/", 1)[1])
    assert ok(endpoint, "GetQueueAttributes", {"QueueUrl": url}) == {"Attributes": None}


def test_actions_without_a_result(endpoint, url):
    for action, params in [
        ("SetQueueAttributes", {"Attribute.1.Name": "DelaySeconds", "Attribute.1.Value": "0"}),
        ("TagQueue", {"Tag.1.Key": "k", "Tag.1.Value": "v"}),
        ("UntagQueue", {"TagKey.1": "k"}),
        ("AddPermission", {"Label": "l", "AWSAccountId.1": "111122223333", "ActionName.1": "SendMessage"}),
        ("RemovePermission", {"Label": "l"}),
        ("PurgeQueue", {}),
    ]:
        r = call(endpoint, action, {"QueueUrl": url, **params})
        assert r.status == 200, (action, r.raw)
        rid = r.headers["x-amzn-RequestId"]
        assert r.raw == json.dumps(
            {f"{action}Response": {"ResponseMetadata": {"RequestId": rid}}}, separators=(",", ":")
        ).encode()


def test_tags_are_key_value_entries(endpoint, url):
    assert ok(endpoint, "ListQueueTags", {"QueueUrl": url}) == {"Tags": None}
    ok(endpoint, "TagQueue", {"QueueUrl": url, "Tag.1.Key": "team", "Tag.1.Value": "a", "Tag.2.Key": "env", "Tag.2.Value": "b"})
    got = ok(endpoint, "ListQueueTags", {"QueueUrl": url})
    assert got == {"Tags": [{"Key": "env", "Value": "b"}, {"Key": "team", "Value": "a"}]}


def test_batches(endpoint, url):
    sent = ok(
        endpoint,
        "SendMessageBatch",
        {
            "QueueUrl": url,
            "SendMessageBatchRequestEntry.1.Id": "one",
            "SendMessageBatchRequestEntry.1.MessageBody": "1",
            "SendMessageBatchRequestEntry.2.Id": "two",
            "SendMessageBatchRequestEntry.2.MessageBody": "2",
        },
    )
    assert sent["Failed"] == []
    assert [e["Id"] for e in sent["Successful"]] == ["one", "two"]
    assert list(sent["Successful"][0]) == [
        "Id",
        "MD5OfMessageAttributes",
        "MD5OfMessageBody",
        "MD5OfMessageSystemAttributes",
        "MessageId",
        "SequenceNumber",
    ]
    got = ok(endpoint, "ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": "10"})["messages"]
    handle = got[0]["ReceiptHandle"]
    changed = ok(
        endpoint,
        "ChangeMessageVisibilityBatch",
        {
            "QueueUrl": url,
            "ChangeMessageVisibilityBatchRequestEntry.1.Id": "good",
            "ChangeMessageVisibilityBatchRequestEntry.1.ReceiptHandle": handle,
            "ChangeMessageVisibilityBatchRequestEntry.1.VisibilityTimeout": "30",
        },
    )
    assert changed == {"Failed": [], "Successful": [{"Id": "good"}]}
    deleted = ok(
        endpoint,
        "DeleteMessageBatch",
        {
            "QueueUrl": url,
            "DeleteMessageBatchRequestEntry.1.Id": "good",
            "DeleteMessageBatchRequestEntry.1.ReceiptHandle": handle,
            "DeleteMessageBatchRequestEntry.2.Id": "bad",
            "DeleteMessageBatchRequestEntry.2.ReceiptHandle": "not-a-handle",
        },
    )
    assert deleted["Successful"] == [{"Id": "good"}]
    [failed] = deleted["Failed"]
    assert list(failed) == ["Code", "Id", "Message", "SenderFault"]
    assert failed["Id"] == "bad"
    assert failed["Code"] == "ReceiptHandleIsInvalid"
    assert failed["SenderFault"] is True


def test_dead_letters_and_move_tasks(endpoint, url, clock):
    dlq = url
    dlq_arn = next(
        a["Value"]
        for a in ok(endpoint, "GetQueueAttributes", {"QueueUrl": dlq, "AttributeName.1": "QueueArn"})["Attributes"]
    )
    src = ok(
        endpoint,
        "CreateQueue",
        {
            "QueueName": dlq.rsplit("/", 1)[1] + "-src",
            "Attribute.1.Name": "RedrivePolicy",
            "Attribute.1.Value": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1}),
        },
    )["QueueUrl"]
    dest = ok(endpoint, "CreateQueue", {"QueueName": dlq.rsplit("/", 1)[1] + "-dst"})["QueueUrl"]
    try:
        assert ok(endpoint, "ListDeadLetterSourceQueues", {"QueueUrl": dlq}) == {"NextToken": None, "queueUrls": [src]}
        assert ok(endpoint, "ListDeadLetterSourceQueues", {"QueueUrl": dest}) == {"NextToken": None, "queueUrls": []}
        for i in range(3):
            ok(endpoint, "SendMessage", {"QueueUrl": dlq, "MessageBody": f"m{i}"})
        dest_arn = next(
            a["Value"]
            for a in ok(endpoint, "GetQueueAttributes", {"QueueUrl": dest, "AttributeName.1": "QueueArn"})["Attributes"]
        )
        clock.freeze()
        started = ok(
            endpoint,
            "StartMessageMoveTask",
            {"SourceArn": dlq_arn, "DestinationArn": dest_arn, "MaxNumberOfMessagesPerSecond": "1"},
        )
        assert list(started) == ["TaskHandle"]
        [task] = ok(endpoint, "ListMessageMoveTasks", {"SourceArn": dlq_arn})["Results"]
        assert list(task) == [
            "ApproximateNumberOfMessagesMoved",
            "ApproximateNumberOfMessagesToMove",
            "DestinationArn",
            "FailureReason",
            "MaxNumberOfMessagesPerSecond",
            "SourceArn",
            "StartedTimestamp",
            "Status",
            "TaskHandle",
        ]
        assert task["Status"] == "RUNNING"
        assert task["TaskHandle"] == started["TaskHandle"]
        assert task["FailureReason"] is None
        assert isinstance(task["ApproximateNumberOfMessagesToMove"], int)
        assert isinstance(task["StartedTimestamp"], int)
        cancelled = ok(endpoint, "CancelMessageMoveTask", {"TaskHandle": started["TaskHandle"]})
        assert isinstance(cancelled["ApproximateNumberOfMessagesMoved"], int)
        assert ok(endpoint, "ListMessageMoveTasks", {"SourceArn": dest_arn}) == {"Results": []}
    finally:
        clock.unfreeze()
        call(endpoint, "DeleteQueue", {"QueueUrl": src})
        call(endpoint, "DeleteQueue", {"QueueUrl": dest})


def test_errors(endpoint, url):
    e = error(endpoint, "GetQueueUrl", {"QueueName": "qj-no-such-queue"})
    assert e["Code"] == "AWS.SimpleQueueService.NonExistentQueue"
    assert e["Type"] == "Sender"
    assert e["Message"]
    # Recorded on AWS: a queue-less action sent to a queue URL.
    path = "/" + url.split("/", 3)[3]
    e = error(endpoint, "ListQueues", path=path)
    assert e == {
        "Code": "InvalidAction",
        "Message": "The action ListQueues is not valid for this endpoint.",
        "Type": "Sender",
    }
    e = error(endpoint, "SendMessage", {"QueueUrl": url})
    assert e["Code"] == "MissingParameter"
    e = error(endpoint, "NoSuchAction")
    assert e["Code"] == "InvalidAction"
    # Refused before the action is known: the key limits.
    e = error(endpoint, "ListQueues", {"A" + ".1" * 20: "x"}, status=404)
    assert e["Code"] == "MalformedQueryString"


def test_without_an_action_the_answer_stays_xml(endpoint):
    r = urllib.request.Request(endpoint + "/?Version=2012-11-05", headers={"Accept": JSON})
    try:
        urllib.request.urlopen(r, timeout=10)
        raise AssertionError("expected 404")
    except urllib.error.HTTPError as e:
        assert e.code == 404
        assert e.read() == b"<UnknownOperationException/>"


@pytest.mark.parametrize(
    "accept, json_reply",
    [
        (None, False),
        ("*/*", False),
        ("text/xml", False),
        ("application/json, text/xml", False),
        ("application/json;q=0", False),
        (JSON, True),
        ("application/json, text/plain, */*", True),  # axios's default
        ("text/xml;q=0.5, application/json", True),
    ],
)
def test_accept_negotiation(endpoint, accept, json_reply):
    r = call(endpoint, "ListQueues", {"QueueNamePrefix": "qj-none"}, accept=accept)
    assert r.status == 200
    if json_reply:
        assert r.headers["Content-Type"] == JSON
        assert "ListQueuesResponse" in r.body
    else:
        assert r.headers["Content-Type"].startswith("text/xml")
        assert r.raw.startswith(b"<?xml")


def test_content_type_parameter_and_get(endpoint, url):
    # AWS.jl's switch: the ContentType=JSON parameter, with no Accept header.
    r = call(endpoint, "GetQueueUrl", {"QueueName": url.rsplit("/", 1)[1], "ContentType": "JSON"}, accept=None)
    assert r.headers["Content-Type"] == JSON
    assert r.body["GetQueueUrlResponse"]["GetQueueUrlResult"] == {"QueueUrl": url}
    # A GET with the query string, as API Gateway and browsers send it.
    got = ok(endpoint, "ReceiveMessage", {"QueueUrl": url}, get=True)
    assert got == {"messages": None}
    e = error(endpoint, "GetQueueUrl", {"QueueName": "qj-missing", "ContentType": "JSON"}, accept=None, get=True)
    assert e["Code"] == "AWS.SimpleQueueService.NonExistentQueue"
