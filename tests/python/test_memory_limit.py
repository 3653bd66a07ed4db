"""The memory limit (`--max-stored-bytes`, issue 27): a producer that outruns its consumers
gets ServiceUnavailable (503, which every SDK retries with backoff) once the stored messages
reach the limit, the server stays up and serves everything else, and making room lets sends
through again. Peek pages are bounded in messages and bytes, so reading a queue of large
messages cannot balloon the process either."""

import urllib.parse

import pytest
from botocore.exceptions import ClientError

import sqsim_process

BIG = 256 * 1024 - 1


def fill(sqs, url, body, limit=100):
    """Sends `body` until a send is refused; returns (acknowledged count, the error)."""
    for i in range(limit):
        try:
            sqs.send_message(QueueUrl=url, MessageBody=f"{i:04d}" + body[4:])
        except ClientError as e:
            return i, e
    pytest.fail("the limit never refused a send")


def test_sends_past_the_limit_get_a_retryable_503_and_the_server_stays_up():
    with sqsim_process.running("--max-stored-bytes", "2MiB") as srv:
        sqs = srv.client()
        url = sqs.create_queue(QueueName="big")["QueueUrl"]
        other = sqs.create_queue(QueueName="other")["QueueUrl"]
        sent, err = fill(sqs, url, "x" * BIG)
        # 2 MiB holds 7 messages of 256 KiB (each counted with its overhead), not 8.
        assert sent == 7, sent
        meta = err.response["ResponseMetadata"]
        assert meta["HTTPStatusCode"] == 503
        assert err.response["Error"]["Code"] == "ServiceUnavailable"
        assert "--max-stored-bytes" in err.response["Error"]["Message"]
        # A batch that would pass the limit is refused whole, not entry by entry.
        with pytest.raises(ClientError) as batch:
            sqs.send_message_batch(
                QueueUrl=other,
                Entries=[{"Id": str(i), "MessageBody": "y" * 26_000} for i in range(10)],
            )
        assert batch.value.response["Error"]["Code"] == "ServiceUnavailable"
        # Everything else still works: the server is up and answers reads.
        status, _, _ = srv.http("GET", "/_sqsim/health")
        assert status == 200
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        assert attrs["ApproximateNumberOfMessages"] == "7"
        # Consumers make room: sends go through again.
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2)["Messages"]
        for m in got:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        sqs.send_message(QueueUrl=url, MessageBody="small again")
        # Purging and deleting queues give their bytes back too.
        sqs.purge_queue(QueueUrl=url)
        sqs.delete_queue(QueueUrl=url)
        sent, _ = fill(sqs, other, "z" * BIG)
        assert sent == 7, sent


def test_a_bad_limit_is_refused_at_start():
    proc = sqsim_process.run_to_exit("--max-stored-bytes", "lots")
    assert proc.returncode != 0
    assert "--max-stored-bytes" in proc.stderr


def test_peek_pages_are_bounded_in_messages_and_bytes():
    with sqsim_process.running() as srv:
        sqs = srv.client()
        url = sqs.create_queue(QueueName="paged")["QueueUrl"]
        for start in range(0, 1205, 10):
            sqs.send_message_batch(
                QueueUrl=url,
                Entries=[{"Id": str(i), "MessageBody": f"m{start + i}"} for i in range(10) if start + i < 1205],
            )
        q = urllib.parse.quote(url, safe="")
        first = srv.admin("GET", f"/_sqsim/peek?queue_url={q}")
        assert len(first["messages"]) == 1000 and first["total"] == 1205
        assert first["next_offset"] == 1000
        rest = srv.admin("GET", f"/_sqsim/peek?queue_url={q}&offset=1000&limit=50000")
        assert len(rest["messages"]) == 205 and rest["next_offset"] is None
        bodies = [m["body"] for m in first["messages"] + rest["messages"]]
        assert sorted(bodies) == sorted(f"m{i}" for i in range(1205))

        big = sqs.create_queue(QueueName="large")["QueueUrl"]
        for i in range(80):
            sqs.send_message(QueueUrl=big, MessageBody=f"{i:03d}" + "x" * (BIG - 3))
        q = urllib.parse.quote(big, safe="")
        page = srv.admin("GET", f"/_sqsim/peek?queue_url={q}&limit=100")
        # 16 MiB of 256 KiB messages: 63 of them, and the rest on the next page.
        assert len(page["messages"]) == 63, len(page["messages"])
        assert page["next_offset"] == 63
