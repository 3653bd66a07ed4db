"""The cluster under SDK traffic and under failures: a sqsim node killed, a JetStream
server killed, an owner stalled past its lease. Each test starts its own cluster."""

import json
import signal
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
from botocore.exceptions import ClientError

from harness import bucket_keys, get_json, js_request, shard_streams, stream_details, wait_for
from load import VISIBILITY_S, Load


def name_of(url):
    return url.rsplit("/", 1)[1]


def make_queues(client, prefix, standard=6, fifo=2):
    attrs = {"VisibilityTimeout": str(VISIBILITY_S)}
    std = [
        client.create_queue(QueueName=f"{prefix}-{i}", Attributes=attrs)["QueueUrl"]
        for i in range(standard)
    ]
    fifos = [
        client.create_queue(
            QueueName=f"{prefix}-f{i}.fifo",
            Attributes={**attrs, "FifoQueue": "true"},
        )["QueueUrl"]
        for i in range(fifo)
    ]
    return std, fifos


def peer_request(node, path, body, headers):
    req = urllib.request.Request(
        node.endpoint + path, data=json.dumps(body).encode(), method="POST", headers=headers
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code


def test_only_peers_reach_the_node_to_node_endpoints(cluster):
    """A client posing as a node (the cluster's endpoints, or a request marked forwarded)
    is refused: only nodes know the peer secret, kept in the cluster's JetStream."""
    node = cluster.nodes[0]
    assert peer_request(node, "/_sqsim/cluster/stats", {}, {"Content-Type": "application/json"}) == 403
    # A forged fan-out of the cluster's realism (a revision no real change would pass).
    forged_realism = {"realism": "aws", "revision": 1 << 60}
    assert peer_request(node, "/_sqsim/cluster/realism", forged_realism, {"Content-Type": "application/json"}) == 403
    assert get_json(f"{node.endpoint}/_sqsim/realism")["realism"] == "off"
    forged = {"Content-Type": "application/json", "x-sqsim-forwarded": "n1"}
    assert peer_request(node, "/_sqsim/reset", {}, forged) == 403
    forged_reset = {"reset": {}, "shards": list(range(node.status()["shards"]))}
    assert peer_request(node, "/_sqsim/cluster/reset", forged_reset, {"Content-Type": "application/json"}) == 403
    forged["x-sqsim-cluster-secret"] = "guess"
    assert peer_request(node, "/_sqsim/cluster/stats", {}, forged) == 403
    # The nodes themselves still talk: a reset through one node reaches every node.
    assert peer_request(node, "/_sqsim/reset", {}, {"Content-Type": "application/json"}) == 200


def test_traffic_through_every_node(cluster):
    a, b, c = (n.client() for n in cluster.nodes)
    std, fifos = make_queues(a, "every")
    # Every node lists every queue, wherever it is served (URLs name the node asked).
    for client in (a, b, c):
        urls = client.list_queues(QueueNamePrefix="every")["QueueUrls"]
        assert sorted(map(name_of, urls)) == sorted(map(name_of, std + fifos))
    owners = {cluster.owner_of(u) for u in std + fifos}
    assert len(owners) > 1, "the queues spread over more than one node"
    # One version: every node writes the same log format and sees no holder of another, so
    # the log is compressed (a message of 8 KiB of the same words, to a fraction).
    for node in cluster.nodes:
        status = node.status()
        assert status["format"] == 1 and status["other_formats"] == {}, status
    stored = lambda: [sum(s[k] for s in get_json(f"{cluster.nodes[0].endpoint}/_sqsim/stats")["store"])
                      for k in ("appended_bytes", "stored_bytes")]
    before = stored()
    b.send_message(QueueUrl=std[0], MessageBody="the same words " * 600)
    (got,) = c.receive_message(QueueUrl=std[0])["Messages"]
    a.delete_message(QueueUrl=std[0], ReceiptHandle=got["ReceiptHandle"])
    appended, kept = [x - y for x, y in zip(stored(), before)]
    assert appended > 8000 and kept * 4 < appended, (appended, kept)
    for i, url in enumerate(std):
        b.send_message(QueueUrl=url, MessageBody=f"hello {i}")
    for i, url in enumerate(std):
        got = c.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        assert [m["Body"] for m in got] == [f"hello {i}"]
        a.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])
        attrs = b.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        assert attrs["ApproximateNumberOfMessages"] == "0"
        assert attrs["ApproximateNumberOfMessagesNotVisible"] == "0"
    for n in range(6):
        c.send_message(
            QueueUrl=fifos[0],
            MessageBody=f"{n}",
            MessageGroupId="g",
            MessageDeduplicationId=f"d{n}",
        )
    bodies = [m["Body"] for m in a.receive_message(QueueUrl=fifos[0], MaxNumberOfMessages=10)["Messages"]]
    assert bodies == [str(n) for n in range(6)]
    # The test controls about one queue act where it is served, through any node: peek,
    # stats (every node's queues), and a reset of one queue.
    c.send_message(QueueUrl=std[1], MessageBody="peek me")
    for node in cluster.nodes:
        peeked = get_json(f"{node.endpoint}/_sqsim/peek?queue_url={urllib.parse.quote(std[1], safe='')}")
        assert [m["body"] for m in peeked["messages"]] == ["peek me"], peeked
        stats = get_json(f"{node.endpoint}/_sqsim/stats")
        by_name = {q["name"]: q for q in stats["queues"]}
        assert set(map(name_of, std + fifos)) <= set(by_name), sorted(by_name)
        assert by_name[name_of(std[1])]["visible"] == 1
        assert not [n for n in by_name if n.startswith("~")]
    # The console works through any node: its page, an SQS action and a delete by id run
    # where the queue is served, listings gather every node.
    def console(node, path, body):
        req = urllib.request.Request(
            f"{node.endpoint}/_sqsim/console/{path}", data=json.dumps(body).encode(), method="POST"
        )
        with urllib.request.urlopen(req) as r:
            return json.loads(r.read())

    with urllib.request.urlopen(f"{cluster.nodes[2].endpoint}/_sqsim/console") as r:
        assert r.status == 200 and b"<html" in r.read().lower()
    sent = console(cluster.nodes[0], "sqs/SendMessage", {"QueueUrl": std[2], "MessageBody": "from the console"})
    listed = console(cluster.nodes[1], "sqs/ListQueues", {"QueueNamePrefix": "every"})["QueueUrls"]
    assert sorted(map(name_of, listed)) == sorted(map(name_of, std + fifos))
    peeked = get_json(f"{cluster.nodes[1].endpoint}/_sqsim/peek?queue_url={urllib.parse.quote(std[2], safe='')}")
    assert [m["message_id"] for m in peeked["messages"]] == [sent["MessageId"]]
    # /metrics: each node shows the queues of the shards it serves.
    owner = cluster.node(cluster.owner_of(std[2]))
    with urllib.request.urlopen(f"{owner.endpoint}/metrics") as r:
        metrics = r.read().decode()
    assert f'sqsim_queue_messages_visible{{queue="{name_of(std[2])}"' in metrics, metrics[:2000]
    # A request is counted once, by the node the client reached: the owner of a forwarded
    # one leaves it out of its request metrics, so the nodes' sums are what clients asked.
    def sends_counted():
        total = 0.0
        for node in cluster.nodes:
            with urllib.request.urlopen(f"{node.endpoint}/metrics") as r:
                for line in r.read().decode().splitlines():
                    if line.startswith('sqsim_requests_total{action="SendMessage",'):
                        total += float(line.rsplit(" ", 1)[1])
        return total

    before = sends_counted()
    elsewhere = next(n for n in cluster.nodes if n.name != cluster.owner_of(std[0]))
    for i in range(5):
        elsewhere.client().send_message(QueueUrl=std[0], MessageBody=f"counted {i}")
    assert sends_counted() - before == 5
    # Moving selected messages runs where the source is served; a destination another node
    # serves is refused with the way that works (a move task), and nothing moves.
    there = next(u for u in std + fifos if cluster.owner_of(u) != cluster.owner_of(std[2]))
    req = urllib.request.Request(
        f"{cluster.nodes[1].endpoint}/_sqsim/console/move-messages",
        data=json.dumps({"queue_url": std[2], "message_ids": [sent["MessageId"]], "to_queue_url": there}).encode(),
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req)
    assert refused.value.code == 409
    assert "use a message move task" in refused.value.read().decode()
    console(cluster.nodes[2], "delete-message", {"queue_url": std[2], "message_id": sent["MessageId"]})
    assert "Messages" not in a.receive_message(QueueUrl=std[2])
    reset = urllib.request.Request(
        f"{cluster.nodes[0].endpoint}/_sqsim/reset",
        data=json.dumps({"queue_url": std[1]}).encode(),
        method="POST",
    )
    with urllib.request.urlopen(reset) as r:
        assert json.loads(r.read())["reset"] == "queue"
    for client in (a, b, c):
        names = map(name_of, client.list_queues(QueueNamePrefix="every")["QueueUrls"])
        assert name_of(std[1]) not in names
    # Deleting a queue is seen from every node.
    b.delete_queue(QueueUrl=std[0])
    for client in (a, b, c):
        names = map(name_of, client.list_queues(QueueNamePrefix="every")["QueueUrls"])
        assert name_of(std[0]) not in names


def name_on(cluster, prefix, want):
    """A queue name starting with `prefix` (in the default account) whose shard and owner,
    as `/_sqsim/cluster/locate` tells them, pass `want`."""
    for i in range(2000):
        name = f"{prefix}-{i}"
        if want(cluster.locate(f"{cluster.nodes[0].endpoint}/000000000000/{name}")):
            return name
    raise AssertionError(f"no name for {prefix}")


def arn_of(client, url):
    return client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def dead_letter_pair(cluster, client, prefix, source_on=None, dlq_on=None):
    """A source (VisibilityTimeout 1, maxReceiveCount 1) and its dead-letter queue, in two
    different shards; `source_on` / `dlq_on`: the node that must serve each (else any)."""
    def on(node):
        return lambda where: node is None or where["owner"] == node
    dlq_name = name_on(cluster, f"{prefix}-dlq", on(dlq_on))
    dlq = client.create_queue(QueueName=dlq_name)["QueueUrl"]
    shard = cluster.locate(dlq)["shard"]
    src_name = name_on(
        cluster, f"{prefix}-src", lambda w: w["shard"] != shard and on(source_on)(w)
    )
    policy = json.dumps({"deadLetterTargetArn": arn_of(client, dlq), "maxReceiveCount": "1"})
    src = client.create_queue(
        QueueName=src_name, Attributes={"RedrivePolicy": policy, "VisibilityTimeout": "1"}
    )["QueueUrl"]
    return src, dlq


def test_dead_letters_and_move_tasks_within_and_across_shards(cluster):
    """Dead letters reach their queue whether it is in the source's shard or another one
    (through the source shard's outbox), with their receive count and source; move tasks
    take them back across shards or to a destination elsewhere; RedrivePolicy checks read a
    target on another node; ListDeadLetterSourceQueues answers from any node."""
    a, b, c = (n.client() for n in cluster.nodes)
    dlq = a.create_queue(QueueName="dl-target")["QueueUrl"]
    shard = cluster.locate(dlq)["shard"]
    near = b.create_queue(QueueName=name_on(cluster, "dl-near", lambda w: w["shard"] == shard))["QueueUrl"]
    far_owner = lambda w: w["shard"] != shard and w["owner"] != cluster.owner_of(dlq)
    far = b.create_queue(QueueName=name_on(cluster, "dl-far", far_owner))["QueueUrl"]
    arn = arn_of(a, dlq)
    policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": "1"})
    for src in (near, far):
        c.set_queue_attributes(QueueUrl=src, Attributes={"RedrivePolicy": policy, "VisibilityTimeout": "1"})
        c.send_message(QueueUrl=src, MessageBody=f"poison {name_of(src)}")
        assert c.receive_message(QueueUrl=src)["Messages"][0]["Body"] == f"poison {name_of(src)}"
    time.sleep(1.2)
    for src in (near, far):
        # This receive moves the message; it answers once the message is in the dead-letter
        # queue, even on another node.
        assert "Messages" not in c.receive_message(QueueUrl=src)
    got = a.receive_message(
        QueueUrl=dlq, AttributeNames=["All"], MaxNumberOfMessages=10, VisibilityTimeout=0
    )["Messages"]
    assert sorted(m["Body"] for m in got) == [f"poison {name_of(far)}", f"poison {name_of(near)}"]
    by_body = {m["Body"]: m["Attributes"] for m in got}
    # Only the source on another shard went through an outbox; delivered, it is empty.
    assert [o["messages"] for o in dead_letter_outboxes(cluster, name_of(far))] == [0]
    assert dead_letter_outboxes(cluster, name_of(near)) == []
    far_attrs = by_body[f"poison {name_of(far)}"]
    assert far_attrs["DeadLetterQueueSourceArn"] == arn_of(a, far)
    assert far_attrs["ApproximateReceiveCount"] == "2"
    for client in (a, b, c):
        sources = client.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"]
        assert sorted(map(name_of, sources)) == sorted(map(name_of, [near, far]))

    # A move task sends each message back to its source, across shards; COMPLETED means
    # they are there.
    c.start_message_move_task(SourceArn=arn)
    wait_for(
        "the move task to complete",
        lambda: b.list_message_move_tasks(SourceArn=arn)["Results"][0]["Status"] == "COMPLETED",
        timeout=30,
    )
    for src in (near, far):
        back = a.receive_message(QueueUrl=src, AttributeNames=["All"])["Messages"]
        assert [m["Body"] for m in back] == [f"poison {name_of(src)}"]
        assert back[0]["Attributes"]["ApproximateReceiveCount"] == "1"
        assert "DeadLetterQueueSourceArn" not in back[0]["Attributes"]
    # Dead-letter them again, then move them to a destination on another shard.
    time.sleep(1.2)
    for src in (near, far):
        assert "Messages" not in b.receive_message(QueueUrl=src)
    dest = c.create_queue(QueueName=name_on(cluster, "dl-dest", lambda w: w["shard"] != shard))["QueueUrl"]
    a.start_message_move_task(SourceArn=arn, DestinationArn=arn_of(a, dest))
    wait_for(
        "the move task to complete",
        lambda: c.list_message_move_tasks(SourceArn=arn)["Results"][0]["Status"] == "COMPLETED",
        timeout=30,
    )
    moved = b.receive_message(QueueUrl=dest, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["Body"] for m in moved) == [f"poison {name_of(far)}", f"poison {name_of(near)}"]
    assert "Messages" not in b.receive_message(QueueUrl=dlq)

    # Checks of a RedrivePolicy read the target wherever it is served.
    def refused(attrs):
        with pytest.raises(ClientError) as e:
            c.set_queue_attributes(QueueUrl=far, Attributes=attrs)
        err = e.value.response["Error"]
        assert err["Code"] in ("InvalidParameterValue", "InvalidParameterValueException"), err
        return err["Message"]

    gone = arn.rsplit(":", 1)[0] + ":" + name_on(cluster, "dl-none", lambda w: w["shard"] != cluster.locate(far)["shard"])
    assert "does not exist" in refused({"RedrivePolicy": json.dumps({"deadLetterTargetArn": gone, "maxReceiveCount": "1"})})
    fifo = a.create_queue(QueueName="dl-fifo.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    if cluster.locate(fifo)["shard"] != cluster.locate(far)["shard"]:
        bad = json.dumps({"deadLetterTargetArn": arn_of(a, fifo), "maxReceiveCount": "1"})
        assert "same type" in refused({"RedrivePolicy": bad})
    a.set_queue_attributes(QueueUrl=dlq, Attributes={"RedriveAllowPolicy": json.dumps({"redrivePermission": "denyAll"})})
    assert "RedriveAllowPolicy" in refused({"RedrivePolicy": policy})
    # Outboxes are nobody's queues: never listed.
    names = [name_of(u) for u in a.list_queues().get("QueueUrls", [])]
    assert not [n for n in names if n.startswith("~")], names
    # A dead-letter outbox stays while its source lives and goes with it.
    assert len(dead_letter_outboxes(cluster, name_of(far))) == 1
    b.delete_queue(QueueUrl=far)
    wait_for("the deleted source's outbox to go", lambda: not dead_letter_outboxes(cluster, name_of(far)), timeout=5)


def dead_letter_outboxes(cluster, source):
    """The dead-letter outboxes of queue `source` as the nodes list them (`/_sqsim/cluster`)."""
    return [
        o
        for n in cluster.nodes
        for o in n.status()["outboxes"]["listed"]
        if o["route"]["via"] == "DeadLetter" and o["route"]["origin"]["name"] == source
    ]


def busiest_node(cluster, urls):
    """The node serving most of the queues `urls`, and those it serves."""
    by_owner = {}
    for url in urls:
        by_owner.setdefault(cluster.owner_of(url), []).append(url)
    busiest = max(by_owner, key=lambda n: len(by_owner[n]))
    return cluster.node(busiest), by_owner[busiest]


def kill9_and_time_failover(victim, probe, urls, load, right_after=lambda: None):
    """Kills `victim` under `load` (which then sends through the others) and returns the
    seconds until every queue of `urls` (the victim's) answered `probe` again: requests
    wait for the new owner instead of failing. `right_after` runs first thing after the
    kill."""
    victim.kill9()
    killed = time.monotonic()
    load.avoid.add(victim.name)
    right_after()
    for url in urls:
        probe.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return time.monotonic() - killed


def test_kill9_of_a_sqsim_node_under_load(cluster):
    control = cluster.nodes[0].client()
    std, fifos = make_queues(control, "kill")
    victim, on_victim = busiest_node(cluster, std + fifos)
    survivors = [n for n in cluster.nodes if n is not victim]
    probe = survivors[0].client(attempts=1)
    # In flight on the victim's queues when it dies: invisible until their deadline.
    held_url = next(u for u in on_victim if u in std)
    for i in range(3):
        probe.send_message(QueueUrl=held_url, MessageBody=f"held-{i}")
    held = probe.receive_message(QueueUrl=held_url, MaxNumberOfMessages=10)["Messages"]
    received_at = time.monotonic()
    assert len(held) == 3
    deadline = received_at + VISIBILITY_S

    # Dead letters crossing shards, into and out of the victim's.
    dead = [
        dead_letter_pair(cluster, control, "kill-a", source_on=victim.name),
        dead_letter_pair(cluster, control, "kill-b", dlq_on=victim.name),
    ]
    load = Load(cluster.nodes, [u for u in std if u != held_url], fifos, dead=dead).start()
    names = sorted(map(name_of, control.list_queues(QueueNamePrefix="kill")["QueueUrls"]))
    assert len(names) > len(std + fifos)

    def listing_waits_for_the_victims_shards():
        # Before its shards moved: a listing and the stats wait for them to move, as a
        # request for one of its queues does, instead of failing (no retries here).
        started = time.monotonic()
        listed = survivors[1].client(attempts=0).list_queues(QueueNamePrefix="kill")["QueueUrls"]
        assert sorted(map(name_of, listed)) == names
        stats = get_json(f"{survivors[1].endpoint}/_sqsim/stats", timeout=30)
        assert set(names) <= {q["name"] for q in stats["queues"]}
        print(f"a listing right after the kill took {time.monotonic() - started:.2f} s")

    time.sleep(2)
    failover = kill9_and_time_failover(
        victim, probe, on_victim, load, right_after=listing_waits_for_the_victims_shards
    )
    print(f"failover after kill -9: {failover:.2f} s for {len(on_victim)} queues")
    assert failover < 5, f"failover took {failover:.2f} s"
    # The in-flight messages kept their deadline.
    if time.monotonic() < deadline - 1:
        early = probe.receive_message(QueueUrl=held_url, MaxNumberOfMessages=10)
        assert "Messages" not in early, "in-flight messages came back before their deadline"
    time.sleep(2)
    load.finish()
    wait_for("the held messages' deadline", lambda: time.monotonic() > deadline + 0.5, timeout=30)
    back = probe.receive_message(QueueUrl=held_url, MaxNumberOfMessages=10, WaitTimeSeconds=2)
    assert sorted(m["Body"] for m in back["Messages"]) == ["held-0", "held-1", "held-2"]
    total = load.check_nothing_lost(probe)
    print(f"{total} acknowledged sends checked; errors seen by clients: {dict(load.errors)}")
    cluster.wait_settled()
    # Ten leases silent, a dead node's name is forgotten, leaving nothing in the bucket (a
    # delete marker per name that ever left would pile up: docs/scale-out.md), and so is
    # its heartbeat in the leases bucket.
    assert victim.name in bucket_keys(cluster, "sqsim_members")
    assert f"beat-{victim.name}" in bucket_keys(cluster, "sqsim_leases")
    wait_for(
        f"{victim.name} to be forgotten",
        lambda: bucket_keys(cluster, "sqsim_members")
        == sorted(n.name for n in survivors),
        timeout=cluster.lease_ms / 1000 * 10 + 15,
    )
    wait_for(
        f"the heartbeat of {victim.name} to be forgotten",
        lambda: f"beat-{victim.name}" not in bucket_keys(cluster, "sqsim_leases"),
        timeout=10,
    )


def wait_for_even_leaders(cluster):
    """Until the shard streams' leaders are spread evenly over the three JetStream servers
    (the nodes move them there, a few per node every four leases)."""
    shards = cluster.nodes[0].status()["shards"]

    def even():
        # The counts that were found even (read again later, a move may be under way: the
        # nodes move streams to their targets, which an even spread need not match).
        led = shard_streams(cluster)[1]
        return cluster.leaders_even(led) and sum(led.values()) == shards and led

    started = time.monotonic()
    led = wait_for("shard stream leaders spread evenly", even, timeout=60, every=0.5)
    moves = sum(n.status()["stats"]["leader_moves"] for n in cluster.nodes if n.alive())
    print(f"leaders even after {time.monotonic() - started:.1f} s: {dict(sorted(led.items()))}; {moves} moves so far")


def test_kill9_of_a_jetstream_server_under_load(cluster):
    """Traffic goes on: every queue takes acknowledged sends again after the kill (a shard
    whose stream leader died waits for JetStream to elect a new one, seconds), and nothing
    acknowledged is lost. Before the kill and once the server is back, the nodes have spread
    the shard streams' leaders evenly over the JetStream servers, moving them under the
    traffic without losing or refusing a request. The server killed leads the leases
    bucket: the worst case, since no lease can be renewed until the bucket elects a new
    leader, and every shard waits for it (a node serves a shard only until 3/4 of a lease
    after its last renewal)."""
    control = cluster.nodes[0].client()
    std, fifos = make_queues(control, "natskill")
    dead = [dead_letter_pair(cluster, control, "natskill-d")]
    load = Load(cluster.nodes, std, fifos, dead=dead).start()
    wait_for_even_leaders(cluster)
    victim = cluster.leader_of("KV_sqsim_leases")
    victim.kill9()
    killed = time.monotonic()

    def every_queue_acknowledged_since_the_kill():
        with load.lock:
            return all(load.last_ack.get(u, 0) > killed for u in std)

    wait_for("a send acknowledged on every queue after the kill", every_queue_acknowledged_since_the_kill, timeout=30)
    resumed = time.monotonic() - killed
    print(f"every queue took sends again {resumed:.2f} s after a JetStream server died")
    time.sleep(2)
    # Back: it catches up, and the nodes hand it its share of the leaders again.
    victim.start()
    wait_for_even_leaders(cluster)
    load.finish()
    total = load.check_nothing_lost(control)
    print(f"{total} acknowledged sends checked; errors seen by clients: {dict(load.errors)}")


def test_a_stalled_owner_is_fenced(cluster):
    control = cluster.nodes[0].client()
    probe = control.create_queue(QueueName="stall-probe")["QueueUrl"]
    stalled = cluster.node(cluster.owner_of(probe))
    others = [n for n in cluster.nodes if n is not stalled]
    std, fifos = make_queues(control, "stall", standard=4, fifo=1)
    dead = [
        dead_letter_pair(cluster, control, "stall-a", source_on=stalled.name),
        dead_letter_pair(cluster, control, "stall-b", dlq_on=stalled.name),
    ]
    # Traffic through every node, the owner too, as it stalls: requests it took stay
    # half-done inside it.
    load = Load(cluster.nodes, std, fifos, dead=dead).start()
    time.sleep(1.5)
    stalled.signal(signal.SIGSTOP)
    stopped = time.monotonic()
    load.avoid.add(stalled.name)
    other = others[0].client(attempts=1)
    # Another node takes the shard over and serves it while the owner sleeps.
    for i in range(5):
        other.send_message(QueueUrl=probe, MessageBody=f"while-stalled-{i}")
    took = time.monotonic() - stopped
    assert took < 5, f"takeover took {took:.2f} s"
    assert cluster.owner_of(probe, via=others[1]) != stalled.name
    time.sleep(max(0, 2 * cluster.lease_ms / 1000 - (time.monotonic() - stopped)))
    stalled.signal(signal.SIGCONT)
    # The resumed node answers from the new owner at once, never from its stale copy
    # (which holds none of the five).
    resumed = stalled.client(attempts=1)
    seen = resumed.get_queue_attributes(
        QueueUrl=probe, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]["ApproximateNumberOfMessages"]
    assert seen == "5", f"the resumed former owner answered {seen} (a stale copy)"
    time.sleep(1)
    load.avoid.discard(stalled.name)
    time.sleep(1)
    load.finish()
    status = stalled.status()
    assert status["stats"]["lost"] >= 1, status
    total = load.check_nothing_lost(other)
    print(f"{total} acknowledged sends checked; errors seen by clients: {dict(load.errors)}")
    got = other.receive_message(QueueUrl=probe, MaxNumberOfMessages=10, WaitTimeSeconds=1)
    assert sorted(m["Body"] for m in got["Messages"]) == [f"while-stalled-{i}" for i in range(5)]
    cluster.wait_settled()


def test_a_node_restarted_under_its_name_takes_its_shards_back(cluster):
    """A node killed and started again at once (same name, same port) is a new holder: it
    waits for its former process's leases to go silent, takes them over, and serves every
    message as it was."""
    control = cluster.nodes[0].client()
    std, fifos = make_queues(control, "restart", standard=6, fifo=1)
    victim, on_victim = busiest_node(cluster, std)
    others = [n for n in cluster.nodes if n is not victim]
    for url in std:
        control.send_message(QueueUrl=url, MessageBody=f"kept-{name_of(url)}")
    victim.kill9()
    victim.start()
    cluster.wait_settled()
    assert cluster.owner_of(on_victim[0]) == victim.name
    # Through the restarted node and the others: every message there, once.
    for i, url in enumerate(std):
        client = (victim if i % 2 else others[0]).client()
        got = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        assert [m["Body"] for m in got] == [f"kept-{name_of(url)}"]
        names = map(name_of, client.list_queues(QueueNamePrefix="restart")["QueueUrls"])
        assert sorted(names) == sorted(map(name_of, std + fifos))


def test_while_a_node_of_an_older_version_holds_shards_the_log_is_written_uncompressed(cluster):
    """A version from before compression (log format 0, shown by no `format` in its leases)
    takes a compressed log message for records. While a lease holder of that format is
    live, every node writes uncompressed messages and says so (`other_formats`); once its
    leases are gone, they compress again. Such a holder is forged here: a lease written
    into the bucket by hand, for a node that never heartbeats (taken over once silent)."""
    a, b, c = cluster.nodes
    queues = [a.client().create_queue(QueueName=f"fmt-{i}")["QueueUrl"] for i in range(2)]
    where = [cluster.locate(u) for u in queues]
    shards = a.status()["shards"]
    forged = next(s for s in range(shards) if s not in {w["shard"] for w in where})
    old = {"node": "old", "url": "http://127.0.0.1:9", "process": "an-old-process"}

    def send(url, shard, body):
        """Sends `body`; how many bytes the shard's stream grew by, as JetStream says."""
        stored = lambda: js_request(cluster, f"$JS.API.STREAM.INFO.SQSIM_shard{shard}", b"")["state"]["bytes"]
        before = stored()
        b.client().send_message(QueueUrl=url, MessageBody=body)
        return stored() - before

    seen_old = lambda: all(n.status()["other_formats"] == {"old": 0} for n in cluster.nodes)
    ack = js_request(cluster, f"$KV.sqsim_leases.shard{forged}", json.dumps(old).encode())
    assert "error" not in ack, ack
    wait_for("every node to see the older node", lambda: seen_old() or None, timeout=10, every=0.05)
    body = "the same words " * 600
    grown = send(queues[0], where[0]["shard"], body)
    assert seen_old(), "the forged holder went silent before the send was checked"
    assert grown > len(body), grown
    # Silent for a lease (it never heartbeats): taken over, and the log is compressed again.
    wait_for(
        "the forged lease to be taken over",
        lambda: all(n.status()["other_formats"] == {} for n in cluster.nodes)
        and a.status()["owners"][forged] in {"n0", "n1", "n2"} or None,
        timeout=30,
        every=0.1,
    )
    grown = send(queues[1], where[1]["shard"], body)
    assert grown < len(body) / 4, grown
    # Both read back, whichever way they were written; the forged shard is served again.
    for u in queues:
        got = c.client().receive_message(QueueUrl=u)["Messages"]
        assert [m["Body"] for m in got] == [body]
    cluster.wait_settled()


def post_json(url, body, timeout=10):
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def queues_on(cluster, node, prefix, made_by):
    """New queues `<prefix>-<i>` (created through client `made_by`) until two are `node`'s."""
    made = []
    while sum(cluster.owner_of(u) == node.name for u in made) < 2:
        made.append(made_by.create_queue(QueueName=f"{prefix}-{len(made)}")["QueueUrl"])
    return made


def test_the_virtual_clock_is_the_clusters(cluster):
    """The test clock moved through one node moves on all: a delayed message on a queue any
    node serves becomes visible when the clock passes its delay, whichever node is asked."""
    a, b, c = cluster.nodes
    queues = [a.client().create_queue(QueueName=f"clock-{i}")["QueueUrl"] for i in range(6)]
    assert len({cluster.owner_of(u) for u in queues}) > 1
    frozen = post_json(f"{a.endpoint}/_sqsim/clock", {"freeze": True})
    try:
        for n in (b, c):
            assert get_json(f"{n.endpoint}/_sqsim/clock") == frozen
        for u in queues:
            b.client().send_message(QueueUrl=u, MessageBody="later", DelaySeconds=600)
        for u in queues:
            assert "Messages" not in c.client().receive_message(QueueUrl=u)
        moved = post_json(f"{b.endpoint}/_sqsim/clock", {"advance_seconds": 601})
        assert moved["now_ms"] == frozen["now_ms"] + 601_000
        for n in (a, c):
            assert get_json(f"{n.endpoint}/_sqsim/clock")["now_ms"] == moved["now_ms"]
        for i, u in enumerate(queues):
            got = cluster.nodes[i % 3].client().receive_message(QueueUrl=u)["Messages"]
            assert [m["Body"] for m in got] == ["later"]
        # A node dies: moving the clock through another waits until its shards have moved
        # (their new owners were told) instead of failing half done, which a retry would
        # have moved twice; its queues follow the move.
        on_c = next(u for u in queues if cluster.owner_of(u) == c.name)
        b.client().send_message(QueueUrl=on_c, MessageBody="after the kill", DelaySeconds=600)
        c.kill9()
        moved = post_json(f"{a.endpoint}/_sqsim/clock", {"advance_seconds": 601})
        # (With the "later" received above, visible again: never deleted.)
        got = b.client().receive_message(QueueUrl=on_c, MaxNumberOfMessages=10)["Messages"]
        assert sorted(m["Body"] for m in got) == ["after the kill", "later"]
        # A node started afterwards takes the cluster's clock from JetStream.
        c.start()
        cluster.wait_settled()
        assert get_json(f"{c.endpoint}/_sqsim/clock")["now_ms"] == moved["now_ms"]
    finally:
        post_json(f"{a.endpoint}/_sqsim/clock", {"freeze": False})


def test_a_reset_right_after_a_kill_resets_the_dead_nodes_queues_too(cluster):
    """A reset of everything through one node right after another died waits until the
    dead node's shards are served again and resets them too (before 2026-11-29 it answered
    503 at once), and what it reset stays reset when that node comes back."""
    a, b, c = cluster.nodes
    queues = queues_on(cluster, c, "reset", a.client())
    for u in queues:
        b.client().send_message(QueueUrl=u, MessageBody="before the reset")
    c.kill9()
    started = time.monotonic()
    assert post_json(f"{a.endpoint}/_sqsim/reset", {}) == {"reset": "cluster"}
    print(f"a reset right after the kill took {time.monotonic() - started:.2f} s")
    assert b.client(attempts=0).list_queues(QueueNamePrefix="reset").get("QueueUrls", []) == []
    for u in queues:
        with pytest.raises(ClientError) as e:
            b.client(attempts=0).get_queue_url(QueueName=name_of(u))
        assert "NonExistentQueue" in e.value.response["Error"]["Code"], e.value.response
    # The dead node back: it recovers its former shards from the log, reset included.
    c.start()
    cluster.wait_settled()
    assert c.client().list_queues(QueueNamePrefix="reset").get("QueueUrls", []) == []
    # The cluster serves on: a queue of the same name is created afresh, empty.
    again = c.client().create_queue(QueueName=name_of(queues[0]))["QueueUrl"]
    assert "Messages" not in a.client().receive_message(QueueUrl=again)


def test_a_reset_and_a_listing_while_a_node_is_stalled_do_not_wait_for_it(cluster):
    """With one node stalled (SIGSTOP: its connections open, nothing answered), a reset of
    everything through another node resets the stalled node's queues too once its shards
    have moved, without waiting out its answer time (10 s); once resumed, that node serves
    what the others hold, so nothing it had comes back. A listing does not wait out its
    answer time (5 s) either."""
    a, b, c = cluster.nodes

    def stalled(what):
        c.signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            answer = what()
            return answer, time.monotonic() - started
        finally:
            c.signal(signal.SIGCONT)

    def reset():
        assert post_json(f"{a.endpoint}/_sqsim/reset", {}, timeout=20) == {"reset": "cluster"}
        return b.client(attempts=0).list_queues(QueueNamePrefix="stall-reset").get("QueueUrls", [])

    queues = queues_on(cluster, c, "stall-reset", a.client())
    for u in queues:
        b.client().send_message(QueueUrl=u, MessageBody="before the reset")
    after, took_reset = stalled(reset)
    assert after == []
    for u in queues:
        with pytest.raises(ClientError) as e:
            b.client(attempts=0).get_queue_url(QueueName=name_of(u))
        assert "NonExistentQueue" in e.value.response["Error"]["Code"], e.value.response
    cluster.wait_settled()
    assert c.client().list_queues(QueueNamePrefix="stall-reset").get("QueueUrls", []) == []
    again = c.client().create_queue(QueueName=name_of(queues[0]))["QueueUrl"]
    assert "Messages" not in a.client().receive_message(QueueUrl=again)

    listed_queues = queues_on(cluster, c, "stall-list", a.client())
    listed, took_listing = stalled(
        lambda: b.client(attempts=0).list_queues(QueueNamePrefix="stall-list")["QueueUrls"]
    )
    assert sorted(map(name_of, listed)) == sorted(map(name_of, listed_queues))
    print(f"with a node stalled: a reset took {took_reset:.2f} s, a listing {took_listing:.2f} s")
    assert took_reset < 8 and took_listing < 5, (took_reset, took_listing)
    cluster.wait_settled()


def test_realism_is_the_clusters(cluster):
    """`/_sqsim/realism` through any node sets every queue's on every node (and on the
    shards a node takes over, and on a node that joins later); with `queue_url`, one
    queue's where it is served; `GET` shows every node's queues."""
    a, b, c = cluster.nodes
    client = a.client()
    queues = [client.create_queue(QueueName=f"realism-{i}")["QueueUrl"] for i in range(6)]
    owners = {u: cluster.owner_of(u) for u in queues}
    assert len(set(owners.values())) > 1
    arns = {
        u: client.get_queue_attributes(QueueUrl=u, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        for u in queues
    }

    def shown(node):
        return get_json(f"{node.endpoint}/_sqsim/realism")

    def mine(view):
        return {arn: view["queues"].get(arn) for arn in arns.values()}

    try:
        assert shown(b)["realism"] == "off"
        assert set(mine(shown(b)).values()) == {None}
        # No --realism-seed: each shard picked its own, so there is no one seed to show.
        assert shown(b)["seed"] is None
        # For the whole cluster, through one node: every node, every queue.
        post_json(f"{b.endpoint}/_sqsim/realism", {"realism": "order=5"})
        for n in (a, b, c):
            view = shown(n)
            assert view["realism"] == "order=5", (n.name, view)
            assert set(mine(view).values()) == {"order=5"}, (n.name, view)
        stats = get_json(f"{c.endpoint}/_sqsim/stats")["realism"]
        assert stats["realism"] == "order=5" and set(mine(stats).values()) == {"order=5"}, stats
        # One queue, through a node that does not serve it.
        post_json(f"{b.endpoint}/_sqsim/realism", {"realism": "off"})
        one = next(u for u in queues if owners[u] != a.name)
        post_json(f"{a.endpoint}/_sqsim/realism", {"realism": "short_poll=4", "queue_url": one})
        for n in (a, b, c):
            view = shown(n)
            assert view["realism"] == "off"
            assert mine(view) == {arn: ("short_poll=4" if u == one else None) for u, arn in arns.items()}
        # A bad setting is refused as in one process.
        try:
            post_json(f"{c.endpoint}/_sqsim/realism", {"realism": "order=banana"})
            raise AssertionError("a bad realism was taken")
        except urllib.error.HTTPError as e:
            assert e.code == 400, e.code

        # The shards of a node killed are opened elsewhere with the cluster's setting, and
        # the node, started again, takes it from JetStream.
        post_json(f"{a.endpoint}/_sqsim/realism", {"realism": "count_lag=5"})
        c.kill9()
        wait_for(
            "c's shards to be served elsewhere",
            lambda: all(cluster.owner_of(u, via=a) != c.name for u in queues),
            timeout=30,
        )

        def answered(node):
            try:
                return shown(node)
            except urllib.error.HTTPError:  # 503 while c is still a member nobody reaches
                return None

        # A queue shows once its shard serves again (the lease moves first, then the shard
        # is recovered); one that came back without the setting would never show.
        wait_for(
            "every queue, c's too, with the cluster's realism",
            lambda: (v := answered(a)) and set(mine(v).values()) == {"count_lag=5"} and v,
            timeout=30,
        )
        c.start()
        cluster.wait_settled()
        view = shown(c)
        assert view["realism"] == "count_lag=5", view
        assert set(mine(view).values()) == {"count_lag=5"}, view
    finally:
        post_json(f"{a.endpoint}/_sqsim/realism", {"realism": "off"})


def test_a_gateway_serves_no_shard_and_forwards_everything(cluster):
    """A `--cluster-gateway` node is no member and takes no shard; every request through it
    is forwarded, and its answers are the owners'."""
    # Its request lines on: each names the request id the client got (the owner's).
    g = cluster.gateway(log_filter="info,async_nats=warn,sqsim::control::request_log=debug")
    status = g.status()
    assert status["serving"] == [] and "n9" not in status["members"]
    assert all("n9" not in n.status()["members"] for n in cluster.nodes)
    client = g.client()
    std, fifos = make_queues(client, "gw", standard=4, fifo=1)
    for url in std:
        sent = client.send_message(QueueUrl=url, MessageBody=name_of(url))
        request_id = sent["ResponseMetadata"]["RequestId"]
        wait_for(
            "the gateway's log line under the owner's request id",
            lambda: request_id in g.log.read_text(),
            timeout=5,
        )
        got = client.receive_message(QueueUrl=url)["Messages"]
        assert [m["Body"] for m in got] == [name_of(url)]
        client.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])
    names = map(name_of, client.list_queues(QueueNamePrefix="gw")["QueueUrls"])
    assert sorted(names) == sorted(map(name_of, std + fifos))
    assert g.status()["serving"] == []
    # Realism through the gateway: the cluster's, on every node and every node's queues.
    post_json(f"{g.endpoint}/_sqsim/realism", {"realism": "order=4"})
    try:
        view = get_json(f"{g.endpoint}/_sqsim/realism")
        arns = {
            client.get_queue_attributes(QueueUrl=u, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
            for u in std + fifos
        }
        assert view["realism"] == "order=4", view
        assert arns <= {a for a, spec in view["queues"].items() if spec == "order=4"}, view
        for n in cluster.nodes:
            assert get_json(f"{n.endpoint}/_sqsim/realism")["realism"] == "order=4", n.name
    finally:
        post_json(f"{g.endpoint}/_sqsim/realism", {"realism": "off"})
    check_idle_cost(cluster, [*cluster.nodes, g])


def check_idle_cost(cluster, nodes, seconds=5):
    """An idle cluster's control steps (every 208 ms on every node) read each bucket in one
    batched request, fenced by the step's heartbeat, not key by key from the buckets'
    leaders (49 JetStream API requests a step: about 1,000 a second with a gateway, 0.4 to
    0.66 of a core). A replica behind the heartbeat is asked again; a step falls back to
    the leaders only when that fails too, which an idle cluster should hardly ever see."""

    def counts():
        stats = [n.status()["stats"] for n in nodes]
        api = sum(n.jsz()["api"]["total"] for n in cluster.nats)
        return api, [(s["batched_reads"], s["leader_reads"], s["batched_behind"]) for s in stats]

    def lease_writes():
        return max(
            st["state"]["last_seq"]
            for _, st in stream_details(cluster)
            if st["name"] == "KV_sqsim_leases"
        )

    writes0 = lease_writes()
    api0, before = counts()
    time.sleep(seconds)
    api1, after = counts()
    writes = (lease_writes() - writes0) / seconds
    rate = (api1 - api0) / seconds
    batched, leader, behind = (
        [b[i] - a[i] for a, b in zip(before, after)] for i in range(3)
    )
    print(f"idle for {seconds} s: {rate:.1f} JetStream API requests/s; bucket reads per node "
          f"batched {batched}, from the leaders {leader}, replica behind {behind}")
    # Two buckets a step, a step every twelfth of a lease.
    steps = seconds / (cluster.lease_ms / 1000 / 12)
    assert all(n >= steps for n in batched), batched
    # A held lease is never rewritten: it lives on its holder's heartbeat, so the leases
    # bucket takes one write a step per member, whatever the shards (renewing every lease
    # each third of a lease added 58 a second with 48 shards).
    members = len(cluster.nodes)
    print(f"leases bucket: {writes:.1f} writes/s for {members} members")
    assert writes <= 1.5 * members * steps / seconds, writes
    assert sum(leader) <= 0.02 * sum(batched), (leader, batched)
    # Direct gets are not API requests; one step that falls back reads ~50 keys, and a
    # round of leader moves lists the streams: the bound catches key-by-key steps only.
    assert rate < 100, f"{rate:.1f} JetStream API requests a second in an idle cluster"


def test_nodes_started_before_jetstream_wait_for_it_and_join():
    """Containers start in any order: nodes started before their JetStream servers (or while
    the JetStream cluster is still forming) retry with a log line, never exit, and join once
    it is ready."""
    from harness import Cluster

    c = Cluster()
    try:
        for node in c.nodes:
            node.start(wait=False)
        time.sleep(3)
        assert all(n.alive() for n in c.nodes), c.logs()
        for n in c.nats:
            n.start()
        for node in c.nodes:
            wait_for(f"{node.name} to answer", node.status, timeout=90)
        c.wait_settled(timeout=90)
        assert all(n.alive() for n in c.nodes)
        assert "JetStream is not ready for this node yet" in c.node("n0").log.read_text()
        for node in c.nodes:
            sqs = node.client()
            url = sqs.create_queue(QueueName=f"late-{node.name}")["QueueUrl"]
            sqs.send_message(QueueUrl=url, MessageBody="hello")
            got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
            assert got[0]["Body"] == "hello"
    except BaseException:
        print(c.logs())
        raise
    finally:
        c.stop()


def test_signatures_hold_across_nodes_and_admin_off_holds_for_peers():
    """With `--auth verify`, a request reaches its queue's owner through any node with its
    signature intact, also one signed for a `Host` without a port (as the Ruby SDK v1 and
    proxies send it): the first node passes the port it was reached on beside the `Host`
    instead of rewriting it. A node started with `--admin off` has no control plane, also
    for a request marked forwarded that carries the peer secret (read here from JetStream,
    as anyone who reaches the cluster's JetStream could)."""
    import base64
    import http.client

    import boto3
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.config import Config
    from botocore.credentials import Credentials

    from harness import Cluster, Node

    key, secret, token = "AKIDCLUSTERTEST", "cluster-test-secret", "cluster-test-admin-token"
    auth = ["--auth", "verify", "--credentials", f"{key}:{secret}", "--admin-token", token]
    c = Cluster()
    for n in c.nodes:
        n.extra += auth
        n.admin_token = token
    try:
        c.start()

        def client(node):
            return boto3.client(
                "sqs", endpoint_url=node.endpoint, region_name="us-east-1",
                aws_access_key_id=key, aws_secret_access_key=secret,
                config=Config(retries={"max_attempts": 0}),
            )

        names = [f"signed-{i}" for i in range(6)]
        for name in names:
            client(c.nodes[0]).create_queue(QueueName=name)
        owners = {c.nodes[0].status()["owners"][s] for s in range(c.nodes[0].status()["shards"])}
        assert len(owners) == 3, owners

        def call(node, target, body, host, signing_secret=secret):
            req = AWSRequest(
                method="POST", url=f"{node.endpoint}/", data=json.dumps(body),
                headers={
                    "Content-Type": "application/x-amz-json-1.0",
                    "X-Amz-Target": f"AmazonSQS.{target}",
                    "Host": host,
                },
            )
            SigV4Auth(Credentials(key, signing_secret), "sqs", "us-east-1").add_auth(req)
            conn = http.client.HTTPConnection("127.0.0.1", node.port, timeout=10)
            try:
                conn.request("POST", "/", body=req.body, headers=dict(req.headers))
                resp = conn.getresponse()
                return resp.status, json.loads(resp.read() or b"{}")
            finally:
                conn.close()

        for node in c.nodes:
            sqs = client(node)
            for name in names:
                url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
                assert url == f"{node.endpoint}/000000000000/{name}"
                sqs.send_message(QueueUrl=url, MessageBody=f"via {node.name}")
                # Signed for `Host: 127.0.0.1`: the URL still carries the port the
                # client reached, whichever node owns the queue.
                status, answer = call(node, "GetQueueUrl", {"QueueName": name}, "127.0.0.1")
                assert (status, answer.get("QueueUrl")) == (200, url), (node.name, name, answer)
                status, answer = call(node, "SendMessage", {"QueueUrl": url, "MessageBody": "x"}, "127.0.0.1")
                assert status == 200, (node.name, name, answer)
                # A wrong signature is still refused, here or at the owner.
                status, answer = call(node, "GetQueueUrl", {"QueueName": name}, "127.0.0.1", "wrong")
                assert status == 403 and "InvalidSignatureException" in answer.get("__type", ""), answer
        for name in names:
            sqs = client(c.nodes[1])
            url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
            attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
            assert attrs["Attributes"]["ApproximateNumberOfMessages"] == "6", (name, attrs)

        # A node with no control plane, and the peer secret as JetStream keeps it.
        off = Node(8, c.nats_urls, c.workdir, c.lease_ms,
                   extra=["--cluster-gateway", "--cluster-replicas", "3", "--admin", "off", *auth])
        off.start(wait=False)
        c.extra_nodes = [off]
        wait_for("the node without a control plane to be ready", lambda: off.health()[0] == 200, timeout=30)
        got = js_request(c, "$JS.API.STREAM.MSG.GET.KV_sqsim_leases",
                         json.dumps({"last_by_subj": "$KV.sqsim_leases.peer-secret"}).encode())
        peer_secret = base64.b64decode(got["message"]["data"]).decode()
        as_peer = {"Content-Type": "application/json", "x-sqsim-forwarded": "n0",
                   "x-sqsim-cluster-secret": peer_secret}
        assert peer_request(off, "/_sqsim/reset", {}, as_peer) == 404
        assert peer_request(off, "/_sqsim/reset", {}, {"Content-Type": "application/json"}) == 404
        # Nothing was reset: every queue still holds its messages.
        assert len(client(c.nodes[0]).list_queues(QueueNamePrefix="signed-")["QueueUrls"]) == 6
        # The node still routes: SQS traffic through it reaches every owner.
        sqs = client(off)
        for name in names:
            url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
            sqs.send_message(QueueUrl=url, MessageBody="via the node without a control plane")
    except BaseException:
        print(c.logs())
        raise
    finally:
        c.stop()
