"""A node cut off by the network (packets dropped: no reset, its connections still look
open) while the other nodes and most of JetStream carry on: from every JetStream server, or
with the one server it reaches split from the others. The others take its shards over; it
must stop answering from its copy in time, never acknowledge a write it could not keep, say
so on its health, and serve again once the network is back, with nothing acknowledged
lost."""

import threading
import time

from botocore.exceptions import ClientError

from harness import Cluster, wait_for
from load import Load, take


def count(client, url):
    attrs = client.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attrs["Attributes"]["ApproximateNumberOfMessages"])


def drain(client, url):
    """Receives and deletes every message of `url`; their bodies."""
    bodies = []
    while got := take(client, url):
        bodies += [m["Body"] for m in got]
    return bodies


class Probe:
    """Asks `node` for a queue's message count over and over; every answer or error with
    when the request started and ended."""

    def __init__(self, node, url):
        self.client = node.client(attempts=0, read_timeout=3)
        self.url = url
        self.seen = []  # (started, ended, count or error code)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                got = count(self.client, self.url)
            except ClientError as e:
                got = e.response["ResponseMetadata"].get("HTTPStatusCode") or "error"
            except Exception as e:  # timed out: no answer
                got = type(e).__name__
            self.seen.append((started, time.monotonic(), got))
            time.sleep(0.05)

    def start(self):
        self.thread.start()
        return self

    def finish(self):
        self.stop.set()
        self.thread.join(timeout=10)


def cut_off(cluster, cut, sever, mend, led_away_from=None):
    """Node `cut` of the started `cluster` is cut off by `sever()` for 13 s under traffic,
    then `mend()` heals the network. Checked: it never acknowledges a write it could not
    keep; it stops answering from its copy within 3/4 of a lease of its last renewal, so
    never stale; its health says 503; the others take its shards over; once healed it
    serves its share again and nothing acknowledged is lost. `led_away_from`: a JetStream
    server that must not lead the probed queue's shard stream."""
    try:
        others = [n for n in cluster.nodes if n is not cut]
        control = others[0].client(attempts=0, read_timeout=30)
        # Two queues the node to be cut off serves, on shards of their own, and others for
        # traffic on the other shards, the node's included. The probed queue's shard gets
        # no write while the node is cut off: a write waiting there would hold back every
        # read after it in that shard (reads wait for the records before them), and hide a
        # stale copy.
        shards = {}
        for i in range(80):
            u = control.create_queue(QueueName=f"cut-{i}")["QueueUrl"]
            place = cluster.locate(u)
            away = (
                led_away_from is None
                or cluster.leader_of(f"SQSIM_shard{place['shard']}") is not led_away_from
            )
            if place["owner"] == cut.name and away:
                shards.setdefault(place["shard"], u)
            if len(shards) == 2:
                break
        url, written_url = shards.values()
        std = [
            u
            for u in (control.create_queue(QueueName=f"cut-load-{i}")["QueueUrl"] for i in range(8))
            if cluster.locate(u)["shard"] not in shards
        ]
        print(f"probed shard, written shard: {list(shards)}; load on shards "
              f"{[(cluster.locate(u)['shard'], cluster.locate(u)['owner']) for u in std]}")
        cut.client(attempts=0).send_message(QueueUrl=url, MessageBody="before")
        assert count(cut.client(attempts=0), url) == 1
        # Traffic through the two other nodes only: a client of the cut-off node would wait
        # for its 20 s of retries each time (the write sent to it is checked below).
        load = Load(others, std, []).start()
        probe = Probe(cut, url).start()
        time.sleep(1)

        sever()
        cut_at = time.monotonic()
        # A write sent to the cut-off node meanwhile: it cannot be kept, so it must not be
        # acknowledged (or, if it is, be there afterwards).
        written = {}

        def write_through_the_cut_node():
            try:
                cut.client(attempts=0, read_timeout=60).send_message(
                    QueueUrl=written_url, MessageBody="through-the-cut-node"
                )
                written["acked"] = True
            except Exception as e:  # refused or unanswered: not acknowledged
                written["refused"] = repr(e)

        writer = threading.Thread(target=write_through_the_cut_node, daemon=True)
        writer.start()

        # Another node takes the queue over and acknowledges a send to it. Sent once the
        # lease has moved: sent before, it would be forwarded to the cut-off node and wait
        # there, and the reads after it in that shard with it (they wait for every record
        # before them), which hides a stale copy.
        wait_for(
            "another node to take the queue over",
            lambda: cluster.owner_of(url, via=others[0]) != cut.name,
            timeout=30,
            every=0.05,
        )
        # Retried as SDKs do (503 while the new owner recovers the shard: with the shard's
        # stream leader on the far side of a split, its stream elects a new one first).
        others[0].client(attempts=5, read_timeout=30).send_message(QueueUrl=url, MessageBody="after")
        acked_at = time.monotonic()
        print(f"another node acknowledged a send to the queue {acked_at - cut_at:.2f} s after the cut")

        status = wait_for("the cut-off node's health to say so", lambda: cut.health()[0] == 503 or None, timeout=20)
        assert status
        print(f"its health said 503 {time.monotonic() - cut_at:.2f} s after the cut")
        # Past the longest a node keeps its shards without renewing its leases (10 s).
        time.sleep(max(0.0, cut_at + 13 - time.monotonic()))
        probe.finish()

        answered = [(s, e, got) for s, e, got in probe.seen if isinstance(got, int) and s >= cut_at]
        # When the last answer from its copy was asked for: the node decides as a request
        # arrives (its end may come later on a busy machine).
        last = max((s for s, _, _ in answered), default=cut_at)
        print(f"the cut-off node answered from its copy the requests sent until {last - cut_at:.2f} s after the cut; "
              f"the probes from then on (started, ended, answer): "
              f"{[(round(s - cut_at, 2), round(e - cut_at, 2), g) for s, e, g in probe.seen if s >= last][:6]}")
        stale = [(round(s - cut_at, 2), got) for s, _, got in answered if s > acked_at and got < 2]
        # Its copy is left in time: within 3/4 of a lease of its last renewal, before anyone
        # can take a lease over, so a read that started after another node acknowledged a
        # write never gets the copy's answer.
        assert last - cut_at < cluster.lease_ms / 1000, f"it answered {last - cut_at:.2f} s after the cut"
        assert not stale, f"the cut-off node answered from its stale copy (s after the cut, count): {stale}"

        mend()
        healed = time.monotonic()
        cluster.wait_settled(timeout=60)
        print(f"it served its share again {time.monotonic() - healed:.2f} s after the network came back")
        writer.join(timeout=70)
        assert not writer.is_alive(), "the write through the cut-off node never ended"
        load.finish()
        total = load.check_nothing_lost(control)
        print(f"{total} acknowledged sends checked; errors seen by clients: {dict(load.errors)}")
        # The queues: what was acknowledged, once each; the write through the cut-off node
        # only if it was acknowledged.
        bodies = drain(control, url)
        assert sorted(bodies) == ["after", "before"], bodies
        through = drain(control, written_url)
        print(f"the write through the cut-off node: {written}; its queue held {through}")
        # Not acknowledged, it is not there either: its publish, held by the network and
        # delivered once it came back, was refused (the new owner's fence), as every write
        # of a former owner is.
        assert through == (["through-the-cut-node"] if written.get("acked") else []), through
        # Through the node that was cut off, too: the new owner's answer.
        assert count(cut.client(attempts=2), url) == 0
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


def test_a_node_cut_off_from_jetstream_stops_answering_and_loses_nothing():
    """A network dropping every packet between n0 and the JetStream servers: within 3/4 of
    a lease of its last renewal it stops answering, before anyone can take over."""
    cluster = Cluster()
    links = cluster.linked(cluster.nodes[0])
    cluster.start()

    def sever():
        for link in links:
            link.cut()

    def mend():
        for link in links:
            link.heal()

    cut_off(cluster, cluster.nodes[0], sever, mend)


def test_a_node_on_a_jetstream_server_split_from_the_others():
    """Node i connected to JetStream server i only, and one server cut off from the two
    others (a split of the JetStream cluster): the nodes on the majority side take the
    cut-off node's shards over; its server can no longer commit anything, so it acknowledges
    no write, and it stops answering within 3/4 of a lease of its last renewal although that
    server still answers its reads of the leases bucket from its copy. The server cut off
    is one that leads neither bucket, and the probed queue's stream is led on the majority
    side: the other side can then take the queue over fastest (no election first), the case
    where a stale copy shows. (When nodes served on while their reads were answered, the
    cut-off node answered from its stale copy until 8.7 s after the cut, and acknowledged a
    delete the new owner never saw: the message came back.)"""
    cluster = Cluster()
    cluster.split_able()
    for node, nats in zip(cluster.nodes, cluster.nats):
        node.nats_urls = f"nats://127.0.0.1:{nats.port}"
    cluster.start()
    try:
        buckets = {cluster.leader_of("KV_sqsim_leases"), cluster.leader_of("KV_sqsim_members")}
        split = next(n for n in cluster.nats if n not in buckets)
    except BaseException:
        cluster.stop()
        raise
    cut_off(
        cluster,
        cluster.nodes[split.index],
        lambda: cluster.split(split.index),
        lambda: cluster.split(split.index, cut=False),
        led_away_from=split,
    )
