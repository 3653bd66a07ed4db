"""The client really speaks the protocol this run is meant to exercise, on the wire too."""

import pytest

from sqsim_helpers import EXPECT_PROTOCOL, check_error


def test_client_protocol_is_the_expected_one(sqs):
    if EXPECT_PROTOCOL is None:
        pytest.skip("SQSIM_EXPECT_PROTOCOL is not set (the Makefile sets it)")
    assert sqs.meta.service_model.protocol == EXPECT_PROTOCOL


def test_requests_on_the_wire_use_that_protocol(make_client, queue):
    client = make_client()
    seen = []

    def capture(request, **_):
        headers = {
            k: (v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()
        }
        seen.append((headers, request.body))

    client.meta.events.register("before-send.sqs", capture)
    client.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])
    assert len(seen) == 1
    headers, body = seen[0]
    body = body.decode() if isinstance(body, bytes) else (body or "")
    protocol = client.meta.service_model.protocol
    if protocol == "json":
        assert headers.get("X-Amz-Target") == "AmazonSQS.GetQueueAttributes"
        assert headers.get("Content-Type", "").startswith("application/x-amz-json-1.0")
    else:
        assert protocol == "query"
        assert "X-Amz-Target" not in headers
        assert "Action=GetQueueAttributes" in body
        assert "AttributeName.1=QueueArn" in body


def test_errors_carry_the_legacy_code_and_sender_type(sqs, endpoint):
    # Whatever the protocol, botocore must surface the query code, the Sender fault and
    # the modeled exception class.
    url = f"{endpoint}/000000000000/does-not-exist-anywhere"
    with pytest.raises(sqs.exceptions.QueueDoesNotExist) as info:
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
    check_error(info.value, "AWS.SimpleQueueService.NonExistentQueue", 400)
    assert info.value.response["Error"]["Message"] in (
        "The specified queue does not exist.",
        "The specified queue does not exist for this wsdl version.",
    )
    assert info.value.response["ResponseMetadata"]["RequestId"]


def test_success_responses_carry_a_request_id(sqs, queue):
    resp = sqs.send_message(QueueUrl=queue, MessageBody="x")
    assert resp["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert resp["ResponseMetadata"]["RequestId"]
    other = sqs.send_message(QueueUrl=queue, MessageBody="y")
    assert other["ResponseMetadata"]["RequestId"] != resp["ResponseMetadata"]["RequestId"]
