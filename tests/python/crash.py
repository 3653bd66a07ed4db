"""Crash test for durable mode: producers and consumers on a standard, a FIFO and a
dead-letter-wired queue record everything sqsim acknowledged; sqsim is killed with SIGKILL at
a random moment, restarted on the same data directory, and checked:

- every acknowledged send is still there, unless a delete of it was attempted (an
  unacknowledged delete may or may not have happened) — and it is in exactly one queue (a
  dead letter is in its source or its dead-letter queue, never both, never neither);
- no acknowledged delete comes back;
- receive counts never go down;
- messages received (acknowledged) in the cycle stay in flight until their deadline;
- FIFO order holds within each group, across restarts.

`python crash.py --cycles 100 --sync fsync` is `make crash`'s run; test_crash.py runs a few
cycles of each mode inside `make test`. The log is compacted once it passes 64 KiB and holds
as many records of messages gone as of messages kept; with a few thousand messages kept that
happens in only a few of the short cycles (the run prints how many snapshots the processes
took, the start-up ones included), so snapshots racing dead letters, moves and crashes are
tested step by step in src/engine/durable/replay/tests.rs.
"""

import argparse
import json
import os
import random
import re
import signal
import sys
import tempfile
import threading
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

import boto3
from botocore.config import Config

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sqsim_process  # noqa: E402

IN_FLIGHT_S = 120
GROUPS = ("g0", "g1", "g2")
COUNTER = re.compile(r"-(\d+)$")


class Server:
    """sqsim on a data directory, killed with SIGKILL (never stopped politely)."""

    def __init__(self, data_dir, sync):
        self.proc = sqsim_process.spawn(
            "--data-dir", data_dir, "--sync", sync, "--compact-after", "65536"
        )
        self.endpoint = sqsim_process.wait_ready(self.proc)
        if self.endpoint is None:
            self.proc.kill()
            _, err = self.proc.communicate()
            raise AssertionError(f"sqsim did not start: {err.decode(errors='replace')}")

    def client(self):
        return boto3.client(
            "sqs",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
            config=Config(
                retries={"total_max_attempts": 1},
                connect_timeout=2,
                read_timeout=10,
                max_pool_connections=4,
            ),
        )

    def admin(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.endpoint + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def peek(self, url):
        """Every message of the queue, page by page (a peek returns at most one page)."""
        q = urllib.request.quote(url, safe="")
        out, offset = [], 0
        while offset is not None:
            page = self.admin("GET", f"/_sqsim/peek?queue_url={q}&offset={offset}")
            out.extend(page["messages"])
            offset = page["next_offset"]
        return out

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        for f in (self.proc.stdout, self.proc.stderr):
            f.close()


class Ledger:
    """What sqsim acknowledged, across every cycle."""

    def __init__(self):
        self.lock = threading.Lock()
        self.sent = {}  # body -> queue name it was sent to
        self.delete_tried = set()
        self.deleted = set()
        self.max_count = {}  # body -> highest ApproximateReceiveCount seen
        self.held = {}  # body -> queue: received this cycle, in flight, no delete tried
        self.fifo_last = {}  # group -> highest counter whose delete was acknowledged
        self.counts = defaultdict(int)

    def note_receive(self, queue, messages, held):
        with self.lock:
            for m in messages:
                body = m["Body"]
                n = int(m["Attributes"]["ApproximateReceiveCount"])
                self.max_count[body] = max(self.max_count.get(body, 0), n)
                self.counts["receives"] += 1
                if held:
                    self.held[body] = queue


def counter(body):
    return int(COUNTER.search(body).group(1))


def traffic(server, urls, ledger, cycle, stop, rng_seed):
    """Runs the workers until `stop` is set; every worker ends at its first error (the kill)."""
    errors = []

    def worker(fn):
        def run():
            c = server.client()
            try:
                while not stop.is_set():
                    fn(c)
            except Exception as e:  # the server went away: everything after is unacknowledged
                errors.append((time.monotonic(), f"{fn.__name__}: {e!r}"))

        return threading.Thread(target=run, daemon=True)

    seq = {"std": 0, "src": 0}
    fifo_seq = defaultdict(int)
    rng = random.Random(rng_seed)

    def produce_std(c):
        seq["std"] += 1
        body = f"std-{cycle}-{seq['std']}"
        c.send_message(QueueUrl=urls["std"], MessageBody=body)
        with ledger.lock:
            ledger.sent[body] = "std"
            ledger.counts["sends"] += 1

    def produce_src(c):
        seq["src"] += 1
        body = f"src-{cycle}-{seq['src']}"
        c.send_message(QueueUrl=urls["src"], MessageBody=body)
        with ledger.lock:
            ledger.sent[body] = "src"
            ledger.counts["sends"] += 1

    def produce_fifo(c):
        g = rng.choice(GROUPS)
        fifo_seq[g] += 1
        # Counters grow across cycles: cycle * 1e6 + n.
        body = f"fifo-{g}-{cycle * 1_000_000 + fifo_seq[g]}"
        c.send_message(
            QueueUrl=urls["f.fifo"], MessageBody=body, MessageGroupId=g, MessageDeduplicationId=body
        )
        with ledger.lock:
            ledger.sent[body] = "f.fifo"
            ledger.counts["sends"] += 1

    def consume_std(c):
        got = c.receive_message(
            QueueUrl=urls["std"],
            MaxNumberOfMessages=10,
            VisibilityTimeout=IN_FLIGHT_S,
            AttributeNames=["All"],
        ).get("Messages", [])
        ledger.note_receive("std", got, held=True)
        for m in got:
            if rng.random() < 0.7:
                with ledger.lock:
                    ledger.delete_tried.add(m["Body"])
                    ledger.held.pop(m["Body"], None)
                c.delete_message(QueueUrl=urls["std"], ReceiptHandle=m["ReceiptHandle"])
                with ledger.lock:
                    ledger.deleted.add(m["Body"])
                    ledger.counts["deletes"] += 1

    def consume_src(c):
        # Never deleted: the third receive hands each message to the dead-letter queue.
        got = c.receive_message(
            QueueUrl=urls["src"],
            MaxNumberOfMessages=10,
            VisibilityTimeout=0,
            AttributeNames=["All"],
        ).get("Messages", [])
        ledger.note_receive("src", got, held=False)

    def consume_fifo(c):
        got = c.receive_message(
            QueueUrl=urls["f.fifo"],
            MaxNumberOfMessages=10,
            VisibilityTimeout=IN_FLIGHT_S,
            AttributeNames=["All"],
        ).get("Messages", [])
        ledger.note_receive("f.fifo", got, held=True)
        check_fifo_order(got, ledger)
        for m in got:
            with ledger.lock:
                ledger.delete_tried.add(m["Body"])
                ledger.held.pop(m["Body"], None)
            c.delete_message(QueueUrl=urls["f.fifo"], ReceiptHandle=m["ReceiptHandle"])
            with ledger.lock:
                ledger.deleted.add(m["Body"])
                ledger.counts["deletes"] += 1
                g = m["Attributes"]["MessageGroupId"]
                ledger.fifo_last[g] = max(ledger.fifo_last.get(g, 0), counter(m["Body"]))

    workers = [
        worker(f)
        for f in (produce_std, produce_src, produce_fifo, consume_std, consume_src, consume_fifo)
    ]
    for w in workers:
        w.start()
    return workers, errors


def check_fifo_order(messages, ledger):
    """Within a group, a receive hands out messages oldest first, and nothing older than a
    message whose delete was acknowledged."""
    last = {}
    for m in messages:
        g = m["Attributes"]["MessageGroupId"]
        n = counter(m["Body"])
        assert n > last.get(g, -1), f"group {g}: {m['Body']} after counter {last[g]}"
        with ledger.lock:
            done = ledger.fifo_last.get(g, 0)
        assert n > done, f"group {g}: {m['Body']} came back after {done} was deleted"
        last[g] = n


def verify(server, urls, ledger):
    """The checks after a restart; returns how many messages were checked."""
    where = defaultdict(list)
    state = {}
    for name, url in urls.items():
        for m in server.peek(url):
            where[m["body"]].append(name)
            state[m["body"]] = m
    for body, places in where.items():
        assert len(places) == 1, f"{body} is in {places}"
    checked = 0
    with ledger.lock:
        for body, queue in ledger.sent.items():
            if body in ledger.delete_tried:
                continue
            allowed = {"src", "dlq"} if queue == "src" else {queue}
            assert body in where, f"acknowledged send {body} to {queue} is lost"
            assert where[body][0] in allowed, f"{body} sent to {queue} is in {where[body]}"
            checked += 1
        for body in ledger.deleted:
            assert body not in where, f"acknowledged delete of {body} came back ({where[body]})"
        for body, n in ledger.max_count.items():
            if body in state:
                got = state[body]["receive_count"]
                assert got >= n, f"{body}: receive count went from {n} down to {got}"
        for body, queue in ledger.held.items():
            assert body in state, f"{body}, received and not deleted, is gone"
            assert state[body]["state"] == "in_flight", f"{body} in flight is {state[body]['state']}"
    # A receive right after the restart does not return anything still in flight.
    c = server.client()
    for name in ("std", "f.fifo"):
        got = c.receive_message(QueueUrl=urls[name], MaxNumberOfMessages=10).get("Messages", [])
        for m in got:
            with ledger.lock:
                assert m["Body"] not in ledger.held, f"{m['Body']} was released early"
    with ledger.lock:
        ledger.held.clear()
    return checked


def setup(server):
    c = server.client()
    dlq = c.create_queue(QueueName="dlq")["QueueUrl"]
    arn = c.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    src = c.create_queue(
        QueueName="src",
        Attributes={"RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 2})},
    )["QueueUrl"]
    std = c.create_queue(QueueName="std")["QueueUrl"]
    fifo = c.create_queue(QueueName="f.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    return {"std": std, "src": src, "dlq": dlq, "f.fifo": fifo}


def urls_of(server):
    c = server.client()
    return {n: c.get_queue_url(QueueName=n)["QueueUrl"] for n in ("std", "src", "dlq", "f.fifo")}


def run(cycles, sync, seed=None, data_dir=None, out=print):
    """Runs `cycles` kill/restart cycles; returns the totals."""
    seed = random.randrange(1 << 30) if seed is None else seed
    rng = random.Random(seed)
    own_dir = data_dir is None
    tmp = tempfile.TemporaryDirectory(prefix="sqsim-crash-") if own_dir else None
    data_dir = tmp.name if own_dir else data_dir
    ledger = Ledger()
    checked = 0
    # Snapshots each process had taken shortly before its kill (the start-up one included).
    snapshots = 0
    try:
        server = Server(data_dir, sync)
        urls = setup(server)
        for cycle in range(1, cycles + 1):
            stop = threading.Event()
            workers, errors = traffic(server, urls, ledger, cycle, stop, rng.randrange(1 << 30))
            time.sleep(rng.uniform(0.2, 1.2))
            snapshots += server.admin("GET", "/_sqsim/stats")["store"]["snapshots"]
            killed_at = time.monotonic()
            early = [e for at, e in errors if at < killed_at]
            assert not early, f"workers failed before the kill: {early}"
            server.kill()
            stop.set()
            for w in workers:
                w.join(timeout=15)
            server = Server(data_dir, sync)
            urls = urls_of(server)
            checked += verify(server, urls, ledger)
            # Release what the cycle left in flight, so the next cycle's consumers (and the
            # FIFO groups) move on; the clock's offset is durable too.
            server.admin("POST", "/_sqsim/clock", {"advance_seconds": IN_FLIGHT_S + 1})
        server.kill()
    finally:
        if tmp is not None:
            tmp.cleanup()
    totals = defaultdict(int, ledger.counts)
    totals.update(cycles=cycles, sync=sync, seed=seed, checked=checked, snapshots=snapshots)
    out(
        f"crash {sync}: {cycles} kill -9 cycles (seed {seed}): {totals['sends']} acknowledged "
        f"sends, {totals['deletes']} acknowledged deletes, {totals['receives']} received, "
        f"{checked} presence checks, {snapshots} snapshots (start-up ones included) taken "
        f"before the kills — all held"
    )
    return totals


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--cycles", type=int, default=100)
    p.add_argument("--sync", choices=("fsync", "os"), default="fsync")
    p.add_argument("--seed", type=int)
    args = p.parse_args()
    if not os.access(sqsim_process.binary(), os.X_OK):
        sys.exit(f"no sqsim binary at {sqsim_process.binary()}; build it first")
    run(args.cycles, args.sync, args.seed)


if __name__ == "__main__":
    main()
