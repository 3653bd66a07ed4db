"""The memory limit (`--max-stored-bytes`, issue 27): a producer that outruns its consumers
gets ServiceUnavailable (503, which every SDK retries with backoff) once the stored messages
reach the limit, the server stays up and serves everything else, and making room lets sends
through again. Peek pages are bounded in messages and bytes, so reading a queue of large
messages cannot balloon the process either."""

import time
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


# What --max-stored-bytes promises (docs/reliability.md): filled with any shape of data until
# it refuses, the server grows its RSS by at most this many times the cap.
RSS_BUDGET = 1.5
CAP_MIB = 16


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def fill_shape(srv, shape, rss_limit):
    """Fills a capped server with `shape` until it answers 503 (or its RSS passes
    `rss_limit`: the cap did not hold, and filling on would only take longer to fail)."""
    import concurrent.futures
    import itertools
    import json
    import threading
    import uuid

    sqs = srv.client()
    fifo = shape in ("long FIFO ids", "FIFO sends all deleted")
    url = sqs.create_queue(
        QueueName="shape" + (".fifo" if fifo else ""), Attributes={"FifoQueue": "true"} if fifo else {}
    )["QueueUrl"]
    refused = threading.Event()
    counter = itertools.count()

    def one(_):
        c = srv.client()
        while not refused.is_set():
            n = next(counter)
            try:
                if shape == "queues with tags and a policy":
                    u = c.create_queue(QueueName=f"q{n}", tags={f"tag{t:02d}": "v" * 40 for t in range(50)})["QueueUrl"]
                    statement = {"Sid": "s" * 7_900, "Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage", "Resource": "*"}
                    c.set_queue_attributes(QueueUrl=u, Attributes={"Policy": json.dumps({"Statement": [statement]})})
                    continue
                entries = []
                for i in range(10):
                    e = {"Id": str(i), "MessageBody": "b" * 10}
                    if shape == "ten small attributes":
                        e["MessageAttributes"] = {f"a{k}": {"DataType": "String", "StringValue": "v"} for k in range(10)}
                    if fifo:
                        e["MessageGroupId"] = uuid.uuid4().hex * 4
                        e["MessageDeduplicationId"] = uuid.uuid4().hex * 4
                    entries.append(e)
                r = c.send_message_batch(QueueUrl=url, Entries=entries)
                if r.get("Failed"):
                    assert all(f["Code"] == "ServiceUnavailable" for f in r["Failed"]), r["Failed"]
                    refused.set()
                if shape == "FIFO sends all deleted":
                    got = c.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
                    if got:
                        c.delete_message_batch(
                            QueueUrl=url,
                            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)],
                        )
            except ClientError as e:
                assert e.response["Error"]["Code"] == "ServiceUnavailable", e.response["Error"]
                refused.set()
            if n % 50 == 0 and rss_bytes(srv.proc.pid) > rss_limit:
                refused.set()

    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        list(ex.map(one, range(4)))


@pytest.mark.parametrize(
    "shape",
    ["ten small attributes", "long FIFO ids", "FIFO sends all deleted", "queues with tags and a policy"],
)
def test_the_cap_bounds_rss_whatever_shape_the_data_has(shape):
    """Each shape once grew RSS 4.6-5.9 times the cap (the attributes' and ids' real costs,
    the deduplication memory and queues were not counted): now at most RSS_BUDGET times."""
    with sqsim_process.running("--max-stored-bytes", f"{CAP_MIB}MiB") as srv:
        time.sleep(0.2)
        before = rss_bytes(srv.proc.pid)
        cap = CAP_MIB * 2**20
        fill_shape(srv, shape, before + 2 * RSS_BUDGET * cap)
        grown = rss_bytes(srv.proc.pid) - before
        print(f"\n{shape}: RSS grew {grown / 2**20:.1f} MiB under a {CAP_MIB} MiB cap ({grown / cap:.2f}x)")
        assert grown <= RSS_BUDGET * cap, f"{shape}: {grown / cap:.2f}x the cap"
        # Still serving: reads answer, and a refused client sees AWS's retryable error.
        assert srv.client().list_queues()["QueueUrls"]


def memory_cgroup(name, limit):
    """A memory cgroup limited to `limit` bytes (v1's memory controller where mounted, as on
    this project's machines, else v2); returns (the file a process joins it by, its dir)."""
    from pathlib import Path

    v1 = Path("/sys/fs/cgroup/memory")
    if (v1 / "memory.limit_in_bytes").exists():
        group = v1 / name
        group.mkdir(exist_ok=True)
        (group / "memory.limit_in_bytes").write_text(str(limit))
    else:
        root = Path("/sys/fs/cgroup")
        assert "memory" in (root / "cgroup.controllers").read_text(), "no memory controller"
        (root / "cgroup.subtree_control").write_text("+memory")
        group = root / name
        group.mkdir(exist_ok=True)
        (group / "memory.max").write_text(str(limit))
    return group / "cgroup.procs", group


def test_the_default_cap_is_half_the_smallest_limit_a_container_or_unit_sets():
    """The default --max-stored-bytes is half of what the process may use: a cgroup's limit
    (v1 or v2, at its own level or a parent's: a container's --memory, a unit's MemoryMax)
    or its address-space limit (ulimit -v), not only cgroup v2's root file."""
    import os
    import resource

    procs, group = memory_cgroup(f"sqsim-test-{os.getpid()}", 1 << 30)
    try:
        with sqsim_process.running(preexec=lambda: procs.write_text(str(os.getpid()))) as srv:
            memory = srv.admin("GET", "/_sqsim/stats")["memory"]
            assert memory["max_stored_bytes"] == 512 * 2**20, memory
            assert memory["process_limit_source"].startswith(str(group)), memory
    finally:
        deadline = time.time() + 5
        while time.time() < deadline:
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)
    limit = 16 << 30

    def address_space():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    with sqsim_process.running(preexec=address_space) as srv:
        memory = srv.admin("GET", "/_sqsim/stats")["memory"]
        assert (memory["max_stored_bytes"], memory["process_limit_source"]) == (limit // 2, "RLIMIT_AS"), memory
