"""Helpers shared by the boto3 tests: error checks, MD5 digests as SQS computes them, and
small wrappers around receive. Imported by conftest.py and the test modules."""

import contextlib
import hashlib
import os
import struct
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from botocore.exceptions import ClientError

#: "json" (current botocore) or "query" (botocore 1.34.89); None when run by hand.
EXPECT_PROTOCOL = os.environ.get("SQSIM_EXPECT_PROTOCOL") or None

ACCOUNT = "000000000000"
REGION = "us-east-1"


def only_protocol(protocol, reason):
    """Skips a test unless the client under test speaks `protocol`."""
    return pytest.mark.skipif(
        EXPECT_PROTOCOL is not None and EXPECT_PROTOCOL != protocol,
        reason=f"{protocol} protocol only: {reason}",
    )


def check_error(err, code, status=400):
    """Asserts that a ClientError carries this legacy (query) code and HTTP status."""
    assert isinstance(err, ClientError), f"expected a ClientError, got {err!r}"
    got_code = err.response["Error"]["Code"]
    got_status = err.response["ResponseMetadata"]["HTTPStatusCode"]
    assert (got_code, got_status) == (code, status), (
        f"expected {code}/{status}, got {got_code}/{got_status}: "
        f"{err.response['Error'].get('Message')!r}"
    )
    # Every client error sqsim sends is the sender's fault.
    assert err.response["Error"].get("Type") == "Sender", err.response["Error"]
    return err


def expect_error(fn, code, status=400, **kwargs):
    """Calls fn(**kwargs), asserts it fails with `code`/`status`, returns the error."""
    with pytest.raises(ClientError) as info:
        fn(**kwargs)
    return check_error(info.value, code, status)


def md5_hex(data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.md5(data).hexdigest()


def md5_of_attributes(attrs):
    """MD5OfMessageAttributes as SQS defines it (reference §5.3), from boto3-shaped values."""
    if not attrs:
        return None
    out = bytearray()

    def chunk(b):
        out.extend(struct.pack(">I", len(b)))
        out.extend(b)

    for name in sorted(attrs, key=lambda n: n.encode("utf-8")):
        value = attrs[name]
        chunk(name.encode("utf-8"))
        chunk(value["DataType"].encode("utf-8"))
        if "StringValue" in value:
            out.append(1)
            chunk(value["StringValue"].encode("utf-8"))
        else:
            out.append(2)
            binary = value["BinaryValue"]
            chunk(binary if isinstance(binary, bytes) else binary.encode("utf-8"))
    return hashlib.md5(bytes(out)).hexdigest()


def receive(sqs, url, **kwargs):
    """ReceiveMessage with a short poll by default; returns the list of messages."""
    kwargs.setdefault("WaitTimeSeconds", 0)
    return sqs.receive_message(QueueUrl=url, **kwargs).get("Messages", [])


def receive_one(sqs, url, **kwargs):
    messages = receive(sqs, url, **kwargs)
    assert len(messages) == 1, messages
    return messages[0]


def queue_attrs(sqs, url, *names):
    names = list(names) or ["All"]
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names).get("Attributes", {})


def counts(sqs, url):
    """(visible, not visible, delayed) as GetQueueAttributes reports them."""
    a = queue_attrs(
        sqs,
        url,
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    )
    return (
        int(a["ApproximateNumberOfMessages"]),
        int(a["ApproximateNumberOfMessagesNotVisible"]),
        int(a["ApproximateNumberOfMessagesDelayed"]),
    )


# --- dead-letter queues and message move tasks -----------------------------------------------


def queue_arn(sqs, url):
    return queue_attrs(sqs, url, "QueueArn")["QueueArn"]


def redrive_policy(dlq_arn, max_receive_count):
    """A RedrivePolicy document, compact, as the tests send it (and expect it echoed)."""
    return f'{{"deadLetterTargetArn":"{dlq_arn}","maxReceiveCount":{max_receive_count}}}'


def set_redrive(sqs, src, dlq_arn, max_receive_count):
    policy = redrive_policy(dlq_arn, max_receive_count)
    sqs.set_queue_attributes(QueueUrl=src, Attributes={"RedrivePolicy": policy})
    return policy


def protocol_of(client):
    """"json" or "query": what this botocore client speaks."""
    return client.meta.service_model.protocol


def dead_letter(sqs, src, dlq, bodies, advance, max_receive_count=1):
    """Sends `bodies` to `src` (RedrivePolicy to `dlq`, maxReceiveCount 1 by default), receives
    them until they have been moved to `dlq`, and returns {MessageId: body}. Uses the server
    clock for the visibility timeouts."""
    set_redrive(sqs, src, queue_arn(sqs, dlq), max_receive_count)
    already = counts(sqs, dlq)[0]
    sent = {}
    for start in range(0, len(bodies), 10):
        chunk = bodies[start : start + 10]
        out = sqs.send_message_batch(
            QueueUrl=src,
            Entries=[{"Id": f"e{i}", "MessageBody": b} for i, b in enumerate(chunk)],
        )
        assert len(out.get("Successful", [])) == len(chunk), out
        by_id = {e["Id"]: e["MessageId"] for e in out["Successful"]}
        for i, b in enumerate(chunk):
            sent[by_id[f"e{i}"]] = b
    for _ in range(max_receive_count):
        seen = 0
        while seen < len(bodies):
            got = receive(sqs, src, MaxNumberOfMessages=10, VisibilityTimeout=30)
            assert got, f"only {seen} of {len(bodies)} delivered"
            seen += len(got)
        advance(30)
    # This receive moves every message instead of returning it.
    assert receive(sqs, src, MaxNumberOfMessages=10) == []
    assert counts(sqs, src) == (0, 0, 0)
    assert counts(sqs, dlq) == (already + len(bodies), 0, 0)
    return sent


def newest_task(sqs, source_arn):
    results = sqs.list_message_move_tasks(SourceArn=source_arn).get("Results", [])
    assert len(results) == 1, results
    return results[0]


def wait_task(sqs, source_arn, done, timeout_s=10.0):
    """Polls (real time, bounded) until the newest move task of `source_arn` satisfies
    `done(entry)`; returns that entry."""
    deadline = time.monotonic() + timeout_s
    while True:
        task = newest_task(sqs, source_arn)
        if done(task):
            return task
        assert time.monotonic() < deadline, f"move task stuck: {task}"
        time.sleep(0.01)


def wait_moved(sqs, source_arn, n, timeout_s=10.0):
    return wait_task(
        sqs, source_arn, lambda t: t["ApproximateNumberOfMessagesMoved"] >= n, timeout_s
    )


def wait_status(sqs, source_arn, status, timeout_s=10.0):
    return wait_task(sqs, source_arn, lambda t: t["Status"] == status, timeout_s)


class AppServer:
    """A tiny HTTP application on a free local port, for a worker to POST to: each POST is
    passed to `answer(path, headers, body)` (header names lower-cased, the body decoded),
    which returns the status sent back, with an empty body."""

    def __init__(self, answer):
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                status = answer(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


@contextlib.contextmanager
def config_file(text):
    """A temporary `.toml` file holding `text`: its path, removed afterwards."""
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        yield path
    finally:
        os.unlink(path)
