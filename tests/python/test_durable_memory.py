"""Durable mode's memory at start-up and compaction (issue 55): a server that sat near its
memory cap must start again after a crash and compact without needing much more than it
held. Every snapshot used to build a full in-memory copy of all messages before writing it,
and a start after kill -9 writes one: a restart peaked at 1.8x the steady RSS and a
compaction at 1.6x, so a server near its cap was OOM-killed at every start, its data out of
reach. Snapshots now stream to the file one frame at a time.

The budget: a restart's and a compaction's peak RSS (VmHWM) at most 1.3x what the server
held in steady state. Linux only (/proc)."""

import sys
import tempfile
import time

import pytest

import sqsim_process

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

BUDGET = 1.3
BIG = "x" * (256 * 1024 - 100)
KEEP_BIG = 240  # 60 MiB of 256 KiB messages
KEEP_SMALL = 5000  # small ones with attributes, whose records cost more than their bodies
ATTRS = {f"a{j}": {"DataType": "String", "StringValue": f"value-{j}"} for j in range(5)}


def mib(pid, field):
    """VmRSS or VmHWM of `pid`, in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def reset_peak(pid):
    """Starts VmHWM over from the current RSS (proc(5): clear_refs, 5)."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def start(data, compact_after):
    flags = ("--data-dir", data, "--sync", "os", "--compact-after", str(compact_after))
    log = tempfile.NamedTemporaryFile(prefix="sqsim-", suffix=".log", delete=False)
    proc = sqsim_process.spawn(*flags, stderr=log)
    endpoint = sqsim_process.wait_ready(proc)
    if endpoint is None:
        proc.kill()
        proc.wait()
        raise AssertionError(f"sqsim did not start: {open(log.name).read()}")
    return sqsim_process.Process(proc, endpoint, log.name)


def churn(sqs, url, count):
    """Sends and deletes `count` large messages: log records of messages gone."""
    for i in range(count):
        sqs.send_message(QueueUrl=url, MessageBody=f"{i:06d}" + BIG)
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]
        sqs.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])


def snapshots(srv):
    return srv.admin("GET", "/_sqsim/stats")["store"]["snapshots"]


def test_a_restart_after_a_crash_and_a_compaction_stay_near_the_steady_memory(tmp_path):
    data = str(tmp_path / "data")
    # No compaction while filling: the restart reads the whole log.
    srv = start(data, 1 << 40)
    try:
        sqs = srv.client()
        keep = sqs.create_queue(QueueName="keep")["QueueUrl"]
        gone = sqs.create_queue(QueueName="gone")["QueueUrl"]
        for i in range(KEEP_BIG):
            sqs.send_message(QueueUrl=keep, MessageBody=f"{i:06d}" + BIG)
        for s in range(0, KEEP_SMALL, 10):
            entries = [
                {"Id": str(k), "MessageBody": f"small-{s + k}-" + "y" * 100, "MessageAttributes": ATTRS}
                for k in range(10)
            ]
            sqs.send_message_batch(QueueUrl=keep, Entries=entries)
        churn(sqs, gone, KEEP_BIG)
        steady = mib(srv.proc.pid, "VmRSS")
    finally:
        srv.proc.kill()
        srv.proc.wait()
    srv = start(data, 1 << 20)
    try:
        restart_peak = mib(srv.proc.pid, "VmHWM")
        sqs = srv.client()
        attrs = sqs.get_queue_attributes(QueueUrl=keep, AttributeNames=["ApproximateNumberOfMessages"])
        assert attrs["Attributes"]["ApproximateNumberOfMessages"] == str(KEEP_BIG + KEEP_SMALL)
        assert restart_peak <= BUDGET * steady, (
            f"a restart peaked at {restart_peak:.0f} MiB, {restart_peak / steady:.2f}x the "
            f"{steady:.0f} MiB held before the crash"
        )
        # As many records of messages gone as of messages kept: the compactor snapshots.
        taken = snapshots(srv)
        reset_peak(srv.proc.pid)
        churn(sqs, gone, KEEP_BIG + 40)
        deadline = time.monotonic() + 10
        while snapshots(srv) == taken:
            assert time.monotonic() < deadline, "no compaction"
            time.sleep(0.05)
        compaction_peak = mib(srv.proc.pid, "VmHWM")
        assert compaction_peak <= BUDGET * steady, (
            f"a compaction peaked at {compaction_peak:.0f} MiB, "
            f"{compaction_peak / steady:.2f}x the {steady:.0f} MiB held"
        )
    finally:
        srv.proc.kill()
        srv.proc.wait()
    print(f"steady {steady:.0f} MiB, restart peak {restart_peak:.0f}, compaction peak {compaction_peak:.0f}")
