"""SDK traffic on a cluster, with a record of what the cluster acknowledged: the cluster
tests check, after killing and stalling processes, that nothing acknowledged was lost."""

import itertools
import random
import threading
import time
from collections import Counter, defaultdict

VISIBILITY_S = 10


def take(client, url):
    """Receives up to ten visible messages of `url` and deletes them; the messages."""
    got = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get(
        "Messages", []
    )
    if got:
        client.delete_message_batch(
            QueueUrl=url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)],
        )
    return got


class Load:
    """A sender per standard queue and a receiver over them all, one ordered sender per
    FIFO queue, and a poisoner per dead-letter pair (source, dead-letter queue): it sends to
    the source and receives without deleting, so that the next receive moves the message to
    the dead-letter queue (on another shard: through an outbox)."""

    def __init__(self, nodes, standard, fifo, groups=3, dead=()):
        self.nodes = nodes
        self.clients = {n.name: n.client(attempts=2) for n in nodes}
        self.standard = standard
        self.fifo = fifo
        self.groups = groups
        self.lock = threading.Lock()
        self.sent = {}  # body -> queue url, for every acknowledged send
        self.last_ack = {}  # queue url -> when a send to it was last acknowledged
        self.received = set()
        # Message ids whose delete was acknowledged. Ids, not bodies: a send the SDK retried
        # (its first attempt applied, its answer lost in a failover) leaves two messages
        # with one body, and deleting one of them must not make the other look resurrected.
        self.deleted = {}  # message id -> body
        self.fifo_sent = defaultdict(list)  # (url, group) -> acknowledged numbers, in order
        self.dead = list(dead)  # (source url, dead-letter queue url)
        # Acknowledged sends to a dead-letter source: body -> MessageId. A send the SDK retried
        # (its first attempt cut off by a node's death, yet applied) leaves a second message
        # with the same body and another id, as SQS may: what must never happen is one
        # message (one id) in both queues, or an acknowledged one in neither.
        self.poison_sent = {}
        self.errors = Counter()
        self.avoid = set()  # node names not to send through (dead)
        self.stop = threading.Event()
        self.threads = []

    def _client(self, rng):
        names = [n for n in self.clients if n not in self.avoid]
        return self.clients[rng.choice(names)]

    def _error(self, e):
        with self.lock:
            self.errors[type(e).__name__] += 1

    def _send(self, url, seed):
        rng = random.Random(seed)
        for n in itertools.count():
            if self.stop.is_set():
                return
            body = f"s{seed}-{n}"
            try:
                self._client(rng).send_message(QueueUrl=url, MessageBody=body)
            except Exception as e:  # refused or failed: not acknowledged
                self._error(e)
                continue
            with self.lock:
                self.sent[body] = url
                self.last_ack[url] = time.monotonic()

    def _send_fifo(self, url, seed):
        rng = random.Random(seed)
        for n in itertools.count():
            if self.stop.is_set():
                return
            group = f"g{n % self.groups}"
            body = f"{group}:{n:06d}"
            # The same body and deduplication id until acknowledged: exactly once, in order.
            while not self.stop.is_set():
                try:
                    self._client(rng).send_message(
                        QueueUrl=url,
                        MessageBody=body,
                        MessageGroupId=group,
                        MessageDeduplicationId=body,
                    )
                except Exception as e:
                    self._error(e)
                    time.sleep(0.05)
                    continue
                with self.lock:
                    self.fifo_sent[(url, group)].append(n)
                break

    def _poison(self, source, seed):
        rng = random.Random(seed)
        for n in itertools.count():
            if self.stop.is_set():
                return
            body = f"p{seed}-{n}"
            try:
                sent = self._client(rng).send_message(QueueUrl=source, MessageBody=body)
            except Exception as e:
                self._error(e)
                continue
            with self.lock:
                self.poison_sent[body] = sent["MessageId"]
            # Received once and left: the receive after its visibility ends dead-letters it.
            try:
                self._client(rng).receive_message(QueueUrl=source, MaxNumberOfMessages=10)
            except Exception as e:
                self._error(e)
            time.sleep(0.05)

    def _receive(self, seed):
        rng = random.Random(seed)
        while not self.stop.is_set():
            url = rng.choice(self.standard)
            client = self._client(rng)
            try:
                got = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
            except Exception as e:
                self._error(e)
                continue
            msgs = got.get("Messages", [])
            if not msgs:
                continue
            with self.lock:
                self.received.update(m["Body"] for m in msgs)
            entries = [
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                for i, m in enumerate(msgs)
            ]
            try:
                out = client.delete_message_batch(QueueUrl=url, Entries=entries)
            except Exception as e:
                self._error(e)
                continue
            ok = {e["Id"] for e in out.get("Successful", [])}
            with self.lock:
                self.deleted.update(
                    (m["MessageId"], m["Body"]) for i, m in enumerate(msgs) if str(i) in ok
                )

    def start(self):
        # A sender per queue: a queue whose shard waits (a JetStream leader election) does
        # not hold up the others.
        targets = [(self._send, (u, i)) for i, u in enumerate(self.standard)]
        targets += [(self._send_fifo, (u, 100 + i)) for i, u in enumerate(self.fifo)]
        targets += [(self._poison, (src, 200 + i)) for i, (src, _) in enumerate(self.dead)]
        targets.append((self._receive, (999,)))
        for fn, args in targets:
            t = threading.Thread(target=fn, args=args, daemon=True)
            t.start()
            self.threads.append(t)
        return self

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=70)
        assert not any(t.is_alive() for t in self.threads), "a load thread hung"

    def check_nothing_lost(self, client, timeout=40):
        """Drains every queue and checks: every acknowledged send was delivered, no message
        whose delete was acknowledged came back, and each FIFO group arrived in order."""
        drained = {}  # message id -> body
        missing = set()
        deadline = time.monotonic() + timeout
        # Receives whose delete failed come back once their visibility timeout ends.
        while time.monotonic() < deadline:
            for url in self.standard:
                while got := take(client, url):
                    drained.update((m["MessageId"], m["Body"]) for m in got)
            missing = set(self.sent) - self.received - set(drained.values())
            if not missing:
                break
            time.sleep(0.5)
        assert not missing, f"{len(missing)} acknowledged sends lost, e.g. {sorted(missing)[:5]}"
        resurrected = sorted(drained[i] for i in drained.keys() & self.deleted)
        assert not resurrected, f"acknowledged deletes came back: {resurrected[:5]}"
        deleted_bodies = set(self.deleted.values())
        twice = sorted(b for b in drained.values() if b in deleted_bodies)
        if twice:
            print(f"sent twice (another message with the body of an acknowledged delete): {twice[:5]}")
        for url in self.fifo:
            order = defaultdict(list)
            while got := take(client, url):
                for m in got:
                    group, n = m["Body"].split(":")
                    order[group].append(int(n))
            for g in range(self.groups):
                group = f"g{g}"
                acked = self.fifo_sent[(url, group)]
                got = order[group]
                assert got == sorted(got), f"{url} {group} out of order: {got[:20]}"
                assert len(got) == len(set(got)), f"{url} {group} delivered twice"
                lost = set(acked) - set(got)
                assert not lost, f"{url} {group}: acknowledged sends lost {sorted(lost)[:5]}"
        self.check_dead_letters(client, timeout)
        return (
            len(self.sent)
            + sum(len(v) for v in self.fifo_sent.values())
            + len(self.poison_sent)
        )

    def check_dead_letters(self, client, timeout):
        """Drains every dead-letter pair and checks that each acknowledged send to a source
        is found exactly once, in the source or in its dead-letter queue: never lost on the
        way between shards, never in both."""
        seen = Counter()
        in_dlq = 0
        deadline = time.monotonic() + timeout
        missing = set()
        while time.monotonic() < deadline:
            for pair in self.dead:
                # Messages received once wait out their visibility in the source; the receive
                # after it moves them to the dead-letter queue (keeping their MessageId).
                for url in pair:
                    while got := take(client, url):
                        seen.update(m["MessageId"] for m in got)
                        in_dlq += len(got) if url == pair[1] else 0
            missing = {b for b, i in self.poison_sent.items() if i not in seen}
            if not missing:
                break
            time.sleep(0.5)
        assert not missing, f"{len(missing)} dead-letter-wired sends lost, e.g. {sorted(missing)[:5]}"
        twice = sorted(i for i, n in seen.items() if n > 1)
        assert not twice, f"messages found twice (source and dead-letter queue?): {twice[:5]}"
        if self.dead:
            print(f"{len(self.poison_sent)} sends to dead-letter sources, {in_dlq} found dead-lettered")
            assert in_dlq > 0, "no message was dead-lettered"
