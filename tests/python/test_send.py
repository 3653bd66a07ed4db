"""SendMessage: bodies, message attributes, system attributes, digests and validation.

botocore does not check SQS digests itself, so every MD5 is checked here against a local
implementation of the algorithm (and against the reference's AWS-recorded vectors)."""

import re
import uuid

import pytest

from sqsim_helpers import expect_error, md5_hex, md5_of_attributes, only_protocol, receive_one

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def test_send_basic(sqs, queue):
    resp = sqs.send_message(QueueUrl=queue, MessageBody="hello")
    assert resp["MD5OfMessageBody"] == "5d41402abc4b2a76b9719d911017c592"
    assert UUID_RE.match(resp["MessageId"]), resp["MessageId"]
    assert "MD5OfMessageAttributes" not in resp
    assert "MD5OfMessageSystemAttributes" not in resp
    assert "SequenceNumber" not in resp
    msg = receive_one(sqs, queue)
    assert msg["Body"] == "hello"
    assert msg["MessageId"] == resp["MessageId"]
    assert msg["MD5OfBody"] == "5d41402abc4b2a76b9719d911017c592"
    assert "MessageAttributes" not in msg
    assert "MD5OfMessageAttributes" not in msg


def test_message_ids_are_unique(sqs, queue):
    ids = {sqs.send_message(QueueUrl=queue, MessageBody="same")["MessageId"] for _ in range(5)}
    assert len(ids) == 5


BODIES = [
    "line1\r\nline2\rline3\n",
    "\r",
    '"&quot;&quot;\r',
    "<xml attr='1'>&amp; &lt; &gt;</xml>",
    "quotes \" ' and backslash \\ and tab\t",
    "héllo wörld – 世界 – emoji 🎉 – math 𝔘",
    "  leading and trailing spaces  ",
    "]]> <![CDATA[ x ]]>",
    "\ue000\ufffd\U0010ffff",
    "{\"json\": [1, 2, {\"k\": null}]}",
    "percent %20 plus + amp & equals = ",
]


@pytest.mark.parametrize("body", BODIES, ids=range(len(BODIES)))
def test_body_round_trips_exactly(sqs, queue, body):
    resp = sqs.send_message(QueueUrl=queue, MessageBody=body)
    assert resp["MD5OfMessageBody"] == md5_hex(body)
    msg = receive_one(sqs, queue)
    assert msg["Body"] == body
    assert msg["MD5OfBody"] == md5_hex(body)


@pytest.mark.parametrize("bad", ["\x00", "a\x08b", "\uffff", "\x1f", "ok\ufffe"])
def test_body_invalid_characters(sqs, queue, bad):
    expect_error(sqs.send_message, "InvalidMessageContents", QueueUrl=queue, MessageBody=bad)


def test_empty_body_is_missing_parameter(sqs, queue):
    err = expect_error(sqs.send_message, "MissingParameter", QueueUrl=queue, MessageBody="")
    assert "MessageBody" in err.response["Error"]["Message"]


def test_missing_body_is_missing_parameter(make_client, queue):
    raw = make_client(parameter_validation=False)
    err = expect_error(raw.send_message, "MissingParameter", QueueUrl=queue)
    assert "MessageBody" in err.response["Error"]["Message"]


def test_message_size_limit(sqs, queue_factory):
    url = queue_factory(Attributes={"MaximumMessageSize": "1024"})
    sqs.send_message(QueueUrl=url, MessageBody="a" * 1024)  # exactly the limit
    err = expect_error(
        sqs.send_message, "InvalidParameterValue", QueueUrl=url, MessageBody="a" * 1025
    )
    assert "1024" in err.response["Error"]["Message"]
    # Attributes count towards the size: name + type + value.
    attrs = {"k": {"DataType": "String", "StringValue": "v"}}  # 1 + 6 + 1 = 8 bytes
    sqs.send_message(QueueUrl=url, MessageBody="a" * 1016, MessageAttributes=attrs)
    expect_error(
        sqs.send_message,
        "InvalidParameterValue",
        QueueUrl=url,
        MessageBody="a" * 1017,
        MessageAttributes=attrs,
    )
    # Size is counted in UTF-8 bytes: 342 three-byte characters are 1026 bytes.
    expect_error(sqs.send_message, "InvalidParameterValue", QueueUrl=url, MessageBody="€" * 342)


def test_default_maximum_size_is_one_mib(sqs, queue):
    sqs.send_message(QueueUrl=queue, MessageBody="b" * 1048576)
    expect_error(
        sqs.send_message, "InvalidParameterValue", QueueUrl=queue, MessageBody="b" * 1048577
    )


@pytest.mark.parametrize("delay", [-1, 901])
def test_delay_seconds_out_of_range(sqs, queue, delay):
    expect_error(
        sqs.send_message,
        "InvalidParameterValue",
        QueueUrl=queue,
        MessageBody="x",
        DelaySeconds=delay,
    )


def test_unknown_queue(sqs, endpoint):
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.send_message(QueueUrl=f"{endpoint}/000000000000/nope-{uuid.uuid4().hex}", MessageBody="x")


def test_deduplication_id_on_standard_queue(sqs, queue):
    expect_error(
        sqs.send_message,
        "InvalidParameterValue",
        QueueUrl=queue,
        MessageBody="x",
        MessageDeduplicationId="d1",
    )


# --- message attributes ------------------------------------------------------------------

ATTRS = {
    "Str": {"DataType": "String", "StringValue": "héllo\r\n\"world\""},
    "Num": {"DataType": "Number", "StringValue": "-12.5e3"},
    "Int": {"DataType": "Number.int", "StringValue": "42"},
    "Bin": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xfe\xff binary"},
    "Gif": {"DataType": "Binary.gif", "BinaryValue": b"GIF89a\x00"},
    "Custom": {"DataType": "String.custom-label", "StringValue": "c"},
    "attr.1øßä": {"DataType": "String", "StringValue": "unicode name"},
}


def test_message_attributes_round_trip(sqs, queue):
    resp = sqs.send_message(QueueUrl=queue, MessageBody="with attrs", MessageAttributes=ATTRS)
    assert resp["MD5OfMessageAttributes"] == md5_of_attributes(ATTRS)
    msg = receive_one(sqs, queue, MessageAttributeNames=["All"])
    assert msg["MD5OfMessageAttributes"] == resp["MD5OfMessageAttributes"]
    got = msg["MessageAttributes"]
    assert set(got) == set(ATTRS)
    for name, value in ATTRS.items():
        assert got[name]["DataType"] == value["DataType"], name
        if "StringValue" in value:
            assert got[name]["StringValue"] == value["StringValue"], name
            assert "BinaryValue" not in got[name]
        else:
            assert got[name]["BinaryValue"] == value["BinaryValue"], name
            assert "StringValue" not in got[name]
    assert md5_of_attributes(got) == msg["MD5OfMessageAttributes"]


@pytest.mark.parametrize(
    "attrs,expected",
    [
        ({"Foo": {"DataType": "String", "StringValue": "Bar"}}, "ae7155c6026991b6d54b11589678bf9c"),
        (
            {"MyAttribute": {"DataType": "String", "StringValue": "foobar"}},
            "adb59cd4678ea5a855436b949cd07ab6",
        ),
        (
            {"timestamp": {"DataType": "Number", "StringValue": "1493147359900"}},
            "235c5c510d26fb653d073faed50ae77c",
        ),
        (
            {
                "General": {"DataType": "String", "StringValue": "Kenobi"},
                "Hello": {"DataType": "String", "StringValue": "There"},
                "Help.Me": {"DataType": "String", "StringValue": "Me"},
            },
            "4c360f3fdafd970e05fae2f149d997f5",
        ),
        (
            {
                "attr1": {
                    "DataType": "Binary",
                    "BinaryValue": b"traceparent\x1e00-774062d6c37081a5a0b9b5b88e30627c-2d2482211f6489da-01",
                }
            },
            "8cbe4db156db8a94db8b801b7addb984",
        ),
    ],
)
def test_md5_of_message_attributes_matches_aws_vectors(sqs, queue, attrs, expected):
    assert md5_of_attributes(attrs) == expected  # the local implementation is right
    resp = sqs.send_message(QueueUrl=queue, MessageBody="v", MessageAttributes=attrs)
    assert resp["MD5OfMessageAttributes"] == expected
    msg = receive_one(sqs, queue, MessageAttributeNames=["All"])
    assert msg["MD5OfMessageAttributes"] == expected


def test_system_attribute_aws_trace_header(sqs, queue):
    header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    resp = sqs.send_message(
        QueueUrl=queue,
        MessageBody="traced",
        MessageAttributes={"Foo": {"DataType": "String", "StringValue": "Bar"}},
        MessageSystemAttributes={"AWSTraceHeader": {"DataType": "String", "StringValue": header}},
    )
    assert resp["MD5OfMessageSystemAttributes"] == "5ae4d5d7636402d80f4eb6d213245a88"
    # System attributes do not change MD5OfMessageAttributes.
    assert resp["MD5OfMessageAttributes"] == "ae7155c6026991b6d54b11589678bf9c"
    msg = receive_one(sqs, queue, AttributeNames=["All"])
    assert msg["Attributes"]["AWSTraceHeader"] == header


def test_x_amzn_trace_id_header_becomes_aws_trace_header(make_client, queue):
    header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    client = make_client()

    def add_header(request, **_):
        request.headers["X-Amzn-Trace-Id"] = header

    client.meta.events.register("before-sign.sqs.SendMessage", add_header)
    client.send_message(QueueUrl=queue, MessageBody="traced by header")
    msg = receive_one(client, queue, AttributeNames=["AWSTraceHeader"])
    assert msg["Attributes"] == {"AWSTraceHeader": header}


def test_no_trace_header_no_aws_trace_header(sqs, queue):
    sqs.send_message(QueueUrl=queue, MessageBody="untraced")
    msg = receive_one(sqs, queue, AttributeNames=["All"])
    assert "AWSTraceHeader" not in msg["Attributes"]


def test_unknown_system_attribute(sqs, queue):
    expect_error(
        sqs.send_message,
        "InvalidParameterValue",
        QueueUrl=queue,
        MessageBody="x",
        MessageSystemAttributes={"Foo": {"DataType": "String", "StringValue": "x"}},
    )


@pytest.mark.parametrize(
    "attrs",
    [
        {"Empty": {"DataType": "String", "StringValue": ""}},
        {"NoType": {"StringValue": "x", "DataType": ""}},
        {"BadType": {"DataType": "Integer", "StringValue": "1"}},
        {"NotNumber": {"DataType": "Number", "StringValue": "abc"}},
        {"TooPrecise": {"DataType": "Number", "StringValue": "1" * 39}},
        {"EmptyBinary": {"DataType": "Binary", "BinaryValue": b""}},
        {"BadChar": {"DataType": "String", "StringValue": "a\x00b"}},
        {"AWS.reserved": {"DataType": "String", "StringValue": "x"}},
        {"amazon.reserved": {"DataType": "String", "StringValue": "x"}},
        {".leading": {"DataType": "String", "StringValue": "x"}},
        {"trailing.": {"DataType": "String", "StringValue": "x"}},
        {"double..dot": {"DataType": "String", "StringValue": "x"}},
        {"has space": {"DataType": "String", "StringValue": "x"}},
        {f"a{i}": {"DataType": "String", "StringValue": "x"} for i in range(11)},
    ],
    ids=lambda a: next(iter(a)) if len(a) == 1 else f"{len(a)}-attributes",
)
def test_invalid_message_attributes(sqs, queue, attrs):
    expect_error(
        sqs.send_message,
        "InvalidParameterValue",
        QueueUrl=queue,
        MessageBody="x",
        MessageAttributes=attrs,
    )


@pytest.mark.parametrize("number", ["1e200", "-1e200", "1e-200", "1E+127"])
def test_number_attribute_out_of_documented_range(sqs, queue, number):
    # Numbers may range from 10^-128 to 10^126 (reference §5.2).
    expect_error(
        sqs.send_message,
        "InvalidParameterValue",
        QueueUrl=queue,
        MessageBody="x",
        MessageAttributes={"N": {"DataType": "Number", "StringValue": number}},
    )


@pytest.mark.parametrize(
    "number", ["0", "-1", "+3", "3.14159", "1e10", "1E-5", "12345678901234567890123456789012345678"]
)
def test_number_attribute_valid(sqs, queue, number):
    attrs = {"N": {"DataType": "Number", "StringValue": number}}
    resp = sqs.send_message(QueueUrl=queue, MessageBody="x", MessageAttributes=attrs)
    assert resp["MD5OfMessageAttributes"] == md5_of_attributes(attrs)
    got = receive_one(sqs, queue, MessageAttributeNames=["N"])["MessageAttributes"]["N"]
    assert got == {"DataType": "Number", "StringValue": number}


def test_attribute_name_and_type_lengths(sqs, queue):
    ok = {
        "n" * 256: {"DataType": "String", "StringValue": "x"},
        "t": {"DataType": "String." + "l" * 249, "StringValue": "x"},
    }
    assert len(ok["t"]["DataType"]) == 256
    sqs.send_message(QueueUrl=queue, MessageBody="x", MessageAttributes=ok)
    for bad in (
        {"n" * 257: {"DataType": "String", "StringValue": "x"}},
        {"t": {"DataType": "String." + "l" * 250, "StringValue": "x"}},
    ):
        expect_error(
            sqs.send_message,
            "InvalidParameterValue",
            QueueUrl=queue,
            MessageBody="x",
            MessageAttributes=bad,
        )


def test_ten_attributes_allowed(sqs, queue):
    attrs = {f"a{i}": {"DataType": "String", "StringValue": str(i)} for i in range(10)}
    resp = sqs.send_message(QueueUrl=queue, MessageBody="x", MessageAttributes=attrs)
    assert resp["MD5OfMessageAttributes"] == md5_of_attributes(attrs)


@only_protocol("json", "the query pin (botocore 1.34.89) has no MessageSystemAttributeNames")
def test_receive_with_message_system_attribute_names(sqs, queue):
    sqs.send_message(QueueUrl=queue, MessageBody="x")
    msg = receive_one(sqs, queue, MessageSystemAttributeNames=["SenderId", "SentTimestamp"])
    assert set(msg["Attributes"]) == {"SenderId", "SentTimestamp"}
