"""Durable mode on a disk that fills up: the data directory is a small tmpfs (mounting it
needs root, which `make test` has on its Debian machines; without it this test fails rather
than pass unseen). A full disk fails requests with InternalFailure (500) and makes the health
check say so; nothing acknowledged is lost; making room brings service back by itself."""

import time

import pytest
from botocore.exceptions import ClientError

import sqsim_process


@pytest.fixture
def small_disk(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    with sqsim_process.tmpfs(d, "256k"):
        yield d


def wait_healthy(srv, want, timeout=10):
    deadline = time.monotonic() + timeout
    while True:
        status, _, _ = srv.http("GET", "/_sqsim/health")
        if status == want or time.monotonic() > deadline:
            return status
        time.sleep(0.05)


def test_a_full_disk_fails_requests_keeps_acknowledged_ones_and_recovers(small_disk):
    flags = ("--data-dir", str(small_disk), "--sync", "fsync")
    with sqsim_process.running(*flags) as srv:
        sqs = srv.client()
        url = sqs.create_queue(QueueName="full")["QueueUrl"]
        acked, failure = sqsim_process.send_until_refused(
            sqs, url, "m", 2000, 2000, refused=ClientError
        )
        assert failure is not None, "the disk never filled"
        assert failure.response["ResponseMetadata"]["HTTPStatusCode"] == 500
        # AWS's code for a 500 (the SQS API reference's common errors).
        assert failure.response["Error"]["Code"] == "InternalFailure"
        assert len(acked) > 20
        status, _, body = srv.http("GET", "/_sqsim/health")
        assert status == 503, body
        assert b'"writable":false' in body
        # Reads keep working while writes cannot.
        assert sqs.get_queue_url(QueueName="full")["QueueUrl"] == url
        # Room again: the store retries on its own and service resumes.
        sqsim_process.resize(small_disk, "64m")
        assert wait_healthy(srv, 200) == 200
        sqs.send_message(QueueUrl=url, MessageBody="after-")
        acked.append("after-")
    with sqsim_process.running(*flags) as srv:
        sqs = srv.client()
        url = sqs.get_queue_url(QueueName="full")["QueueUrl"]
        bodies = [m["body"] for m in srv.admin("GET", f"/_sqsim/peek?queue_url={url}")["messages"]]
        prefixes = {b.split("-")[0] + "-" for b in bodies}
        lost = [a for a in acked if a not in prefixes]
        assert not lost, f"acknowledged sends lost after the disk filled: {lost[:5]}"
