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


def assert_kept(flags, acked):
    """Started again on the same data, the queue "full" holds every acknowledged send."""
    with sqsim_process.running(*flags) as srv:
        sqs = srv.client()
        url = sqs.get_queue_url(QueueName="full")["QueueUrl"]
        bodies = [m["body"] for m in srv.admin("GET", f"/_sqsim/peek?queue_url={url}")["messages"]]
        prefixes = {b.split("-")[0] + "-" for b in bodies}
        lost = [a for a in acked if a not in prefixes]
        assert not lost, f"acknowledged sends lost after the disk filled: {lost[:5]}"


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
    assert_kept(flags, acked)


def test_a_full_disk_that_also_holds_the_servers_log_recovers(small_disk):
    """The server's own log on the same disk as its data (`sqsim … 2> /var/lib/sqsim/log`):
    once the disk is full, a log line that cannot be written is dropped — before, the
    logging library panicked the thread that wrote it, the log writer among them, and the
    server never took a write again, room or not. Nothing acknowledged is lost."""
    data, logs = small_disk / "data", small_disk / "logs"
    data.mkdir()
    logs.mkdir()
    flags = ("--data-dir", str(data), "--sync", "fsync")
    with sqsim_process.running(*flags, log_dir=logs) as srv:
        sqs = srv.client()
        url = sqs.create_queue(QueueName="full")["QueueUrl"]
        acked, failure = sqsim_process.send_until_refused(
            sqs, url, "m", 2000, 2000, refused=ClientError
        )
        assert failure is not None, "the disk never filled"
        # Whatever room is left goes too, so the server's next log lines cannot be written.
        try:
            with open(small_disk / "filler", "wb") as f:
                while True:
                    f.write(b"x" * 4096)
                    f.flush()
        except OSError:
            pass  # full (perhaps already too full to make the file)
        # Requests that log their failure, while the writer retries (and logs) on its own.
        # Each is answered (a 500 once the writer gives up on it), not left hanging.
        quick = srv.client(read_timeout=30)
        for i in range(5):
            try:
                quick.send_message(QueueUrl=url, MessageBody=f"refused-{i}")
            except ClientError:
                pass
        time.sleep(1)
        assert wait_healthy(srv, 503) == 503
        (small_disk / "filler").unlink(missing_ok=True)
        sqsim_process.resize(small_disk, "64m")
        assert wait_healthy(srv, 200) == 200, "service did not resume once there was room"
        sqs.send_message(QueueUrl=url, MessageBody="after-")
        acked.append("after-")
    assert_kept(flags, acked)


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))


def test_changes_the_full_disk_refuses_hold_bounded_memory(small_disk):
    """While the disk refuses writes, every change waits in memory for the writer's retry,
    and every client's retry adds another: 16 clients re-setting an 8 KB Policy and sending
    200 KB messages once grew RSS by hundreds of MiB with nothing stored. The waiting
    changes now count against --max-stored-bytes, and past a quarter of it (at most 64 MiB)
    any change is refused with a retryable 503 until the disk takes writes again."""
    import concurrent.futures
    import json

    flags = ("--data-dir", str(small_disk), "--sync", "fsync", "--max-stored-bytes", "64MiB")
    with sqsim_process.running(*flags) as srv:
        sqs = srv.client(retries={"max_attempts": 1})
        url = sqs.create_queue(QueueName="full")["QueueUrl"]
        acked, failure = sqsim_process.send_until_refused(sqs, url, "m", 2000, 2000, refused=ClientError)
        assert failure is not None, "the disk never filled"
        before = rss_bytes(srv.proc.pid)
        policy = json.dumps({"Statement": [{"Sid": "p" * 8000, "Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage"}]})
        codes = {}
        # Until the backlog's bound answers 503 (a few seconds; slower on a loaded machine),
        # then a while longer: memory must stay bounded while refusals go on.
        deadline = time.monotonic() + 60
        refused_until = []

        def hammer(i):
            c = srv.client(retries={"max_attempts": 1})
            while time.monotonic() < deadline and not (refused_until and time.monotonic() > refused_until[0]):
                try:
                    if i % 2:
                        c.set_queue_attributes(QueueUrl=url, Attributes={"Policy": policy})
                    else:
                        c.send_message(QueueUrl=url, MessageBody=f"x{i}-" + "y" * 200_000)
                except ClientError as e:
                    code = e.response["Error"]["Code"]
                    codes[code] = codes.get(code, 0) + 1
                    if code == "ServiceUnavailable" and not refused_until:
                        refused_until.append(time.monotonic() + 3)

        with concurrent.futures.ThreadPoolExecutor(16) as ex:
            list(ex.map(hammer, range(16)))
        grown = rss_bytes(srv.proc.pid) - before
        print(f"\nRSS grew {grown / 2**20:.1f} MiB while the disk refused; answers: {codes}")
        # The backlog's bound (16 MiB here) and what is in flight around it.
        assert grown < 64 * 2**20, f"{grown / 2**20:.0f} MiB"
        assert codes.get("ServiceUnavailable"), codes
        assert set(codes) <= {"ServiceUnavailable", "InternalFailure"}, codes
        # Room again: the backlog is written, and changes are taken again.
        sqsim_process.resize(small_disk, "256m")
        assert wait_healthy(srv, 200) == 200
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                sqs.send_message(QueueUrl=url, MessageBody="after-")
                break
            except ClientError:
                time.sleep(0.1)
        acked.append("after-")
    assert_kept(flags, acked)
