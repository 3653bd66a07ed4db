"""A JetStream server whose disk fills up under cluster mode. Alone (R1): writes are
refused with an error (never acknowledged), the node's health says it cannot write, and once
there is room again and the server has restarted, every acknowledged send is there and the
node serves again by itself. One of three (R3), under a stream's leader: the two others keep
the quorum, sends go on being acknowledged, nothing is lost."""

import base64
import os
import time

from botocore.exceptions import ClientError

from harness import Cluster, get_json, wait_for

BODY = 60_000


def filler(i):
    """A body of about BODY bytes that fills what it says: random, so that the log's
    compression (store/packed.rs) cannot shrink it."""
    return f"{i:05d}-" + base64.b64encode(os.urandom(BODY * 3 // 4)).decode()


def degraded(node):
    """Health's answer while it is 503, else None."""
    answer = node.health()
    return answer if answer[0] == 503 else None


def test_a_full_jetstream_disk_refuses_writes_and_loses_nothing():
    # One node on one JetStream server (R1, the same write path as R3) whose store is a
    # 24 MB tmpfs: JetStream takes 75% of it, about 18 MB.
    cluster = Cluster(size=1, store_size="24m")
    try:
        cluster.start()
        node = cluster.nodes[0]
        assert node.health()[0] == 200
        # The writer retries a refused write for 20 s before it answers 500.
        sqs = node.client(attempts=0, read_timeout=60)
        url = sqs.create_queue(QueueName="fill")["QueueUrl"]
        acked, refused = [], None
        for i in range(1000):
            body = filler(i)
            try:
                sqs.send_message(QueueUrl=url, MessageBody=body)
                acked.append(f"{i:05d}")
            except ClientError as e:
                refused = e
                break
        assert refused is not None, "the disk never filled"
        assert 100 < len(acked) < 1000, len(acked)
        refused_with = refused.response["ResponseMetadata"]["HTTPStatusCode"]
        assert refused_with in (500, 503), refused.response
        # Its heartbeats cannot be written either: health tells a load balancer.
        _, body = wait_for("health to say writes fail", lambda: degraded(node), timeout=20)
        assert b"writes_failing_for_ms" in body, body

        # Room again. JetStream fixes its limit when it starts, so the server restarts.
        nats = cluster.nats[0]
        nats.resize("256m")
        nats.kill9()
        nats.start()
        started = time.monotonic()

        def sends_again():
            try:
                node.client(attempts=0, read_timeout=20).send_message(QueueUrl=url, MessageBody="after")
                return True
            except ClientError:
                return False

        wait_for("the node to take sends again", sends_again, timeout=90, every=1)
        print(f"took sends again {time.monotonic() - started:.1f} s after the JetStream restart")
        wait_for("health to be ok again", lambda: node.health()[0] == 200, timeout=20)
        got = set()
        while True:
            batch = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600
            ).get("Messages", [])
            if not batch:
                break
            got.update(m["Body"][:5] for m in batch)
        lost = [a for a in acked if a not in got]
        assert not lost, f"acknowledged sends lost: {lost[:10]}"
        assert "after" in got
        print(f"{len(acked)} acknowledged before the disk filled, all there; refused with {refused_with}")
        stats = get_json(f"{node.endpoint}/_sqsim/cluster")["stats"]
        print(f"cluster stats: {stats}")
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


def used_mb(nats):
    st = os.statvfs(nats.dir)
    return (st.f_blocks - st.f_bfree) * st.f_frsize / 1e6


def test_a_full_disk_under_the_leader_of_one_of_three_loses_nothing():
    """R3: the disk under the JetStream server leading a queue's stream fills (shrunk under
    it while it runs: a write fails with ENOSPC, as when another program fills the disk),
    while the two others have room. Every stream keeps a quorum on the two, so sends go on
    being acknowledged; every acknowledged one is there; and once the server has room
    again and restarts, it catches up and leads its share again."""
    cluster = Cluster(store_size="512m")
    try:
        cluster.start()
        node = cluster.nodes[0]
        sqs = node.client(attempts=4, read_timeout=60)
        url = sqs.create_queue(QueueName="fill-one")["QueueUrl"]
        shard = cluster.locate(url)["shard"]
        sqs.send_message(QueueUrl=url, MessageBody="00000-first")
        full = cluster.leader_of(f"SQSIM_shard{shard}")
        assert full is not None
        # Room for about 8 MB more; the sends below write 48 MB to every replica.
        full.resize(f"{int(used_mb(full)) + 8}m")
        acked, errors = ["00000"], []
        started = time.monotonic()
        for i in range(1, 800):
            body = filler(i)
            try:
                sqs.send_message(QueueUrl=url, MessageBody=body)
                acked.append(f"{i:05d}")
            except ClientError as e:
                errors.append(e.response["Error"]["Code"])
        took = time.monotonic() - started
        left = os.statvfs(full.dir).f_bavail * os.statvfs(full.dir).f_frsize / 1e6
        now_led_by = cluster.leader_of(f"SQSIM_shard{shard}")
        print(f"{len(acked)} of 800 sends acknowledged in {took:.1f} s; errors {errors}; "
              f"{left:.1f} MB left under nats{full.index}; the stream now led by "
              f"{now_led_by and f'nats{now_led_by.index}'}")
        assert left < 1, "the disk did not fill"
        assert len(acked) == 800, errors
        for n in cluster.nodes:
            assert n.health()[0] == 200, n.name

        full.resize("512m")
        full.kill9()
        full.start()
        restarted = time.monotonic()
        wait_for("the restarted server to lead its share again", cluster.leaders_even, timeout=120, every=1)
        print(f"leaders even again {time.monotonic() - restarted:.1f} s after the restart")
        got = set()
        while batch := sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600
        ).get("Messages", []):
            got.update(m["Body"][:5] for m in batch)
        lost = [a for a in acked if a not in got]
        assert not lost, f"acknowledged sends lost: {lost[:10]}"
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()
