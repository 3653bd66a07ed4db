"""Cluster mode on the oldest nats-server it supports (2.10.23 or newer; the test runs
2.10.26, `NATS_SERVER_OLDEST_BIN`, installed by `make nats`). That server knows neither
batched direct gets nor step-downs to a preferred server (both 2.11): every control step then
reads each lease and member from its bucket's leader, key by key, and stream leaders stay
where elections put them. The paths nothing else runs: the nodes must still settle, serve,
and take a killed node's shards over without losing an acknowledged send."""

import os
import time

from harness import Cluster, wait_for
from load import Load
from test_cluster import busiest_node, kill9_and_time_failover, make_queues


def started_on(binary):
    """A cluster on `binary`. Three 2.10 servers started together sometimes come up with a
    metadata leader that cannot place a replicated stream ("no suitable peers for
    placement", still so 30 s later; seen in 2 of 11 starts here, never with 2.15): the
    nodes then wait for JetStream, as they should, and the start times out. That is
    JetStream's bootstrap, not the path under test, so such a start is made once more."""
    for attempt in range(2):
        c = Cluster(nats_binary=binary)
        try:
            return c.start()
        except AssertionError:
            stuck = any(
                n.log.exists() and "no suitable peers for placement" in n.log.read_text()
                for n in c.nodes
            )
            if not stuck or attempt == 1:
                raise
            print("JetStream 2.10 could not place streams after its start; starting again")


def test_a_cluster_on_the_oldest_supported_nats_server_serves_and_fails_over():
    binary = os.environ.get("NATS_SERVER_OLDEST_BIN")
    # Never skipped: `make nats` installs it, and without it this path goes untested.
    assert binary and os.path.exists(binary), "NATS_SERVER_OLDEST_BIN is not set (make nats)"
    c = started_on(binary)
    try:
        version = c.nats[0].varz()["version"]
        assert version.startswith("2.10."), version

        # Each node found out once, said so, and reads key by key from the leaders.
        def told(node, words):
            return words in node.log.read_text()

        for node in c.nodes:
            wait_for(
                f"{node.name} to note the missing batched reads",
                lambda: told(node, "does not take batched reads"),
                timeout=10,
            )
            assert told(node, "cannot move a stream's leader where asked"), node.name
        before = [n.status()["stats"] for n in c.nodes]
        time.sleep(2)
        after = [n.status()["stats"] for n in c.nodes]
        for b, a, node in zip(before, after, c.nodes):
            # Two buckets a step, a step every twelfth of a lease: leader reads every step.
            steps = 2 / (c.lease_ms / 1000 / 12)
            assert a["leader_reads"] - b["leader_reads"] >= steps, (node.name, b, a)
            assert a["batched_reads"] == b["batched_reads"], (node.name, b, a)

        control = c.nodes[0].client()
        std, fifos = make_queues(control, "old")
        victim, on_victim = busiest_node(c, std + fifos)
        survivor = next(n for n in c.nodes if n is not victim)
        load = Load(c.nodes, std, fifos).start()
        time.sleep(2)
        probe = survivor.client(attempts=1)
        failover = kill9_and_time_failover(victim, probe, on_victim, load)
        print(f"nats-server {version}: failover after kill -9: {failover:.2f} s")
        assert failover < 5, f"failover took {failover:.2f} s"
        time.sleep(2)
        load.finish()
        total = load.check_nothing_lost(probe)
        print(f"{total} acknowledged sends checked; errors seen by clients: {dict(load.errors)}")
        assert total > 0
        c.wait_settled()
    except BaseException:
        print(c.logs())
        raise
    finally:
        c.stop()
