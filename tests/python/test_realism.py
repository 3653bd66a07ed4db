"""AWS-realism mode (`--realism SPEC`, `--seed N`) driven through boto3, one section per
behaviour: short-poll sampling, best-effort order, duplicate deliveries and stale or lost
deletes, lagging counts, propagation delays (attributes, new queues, purges) and throughput
quotas. For each, a test shows the effect at the configured strength; the replay section
runs one scripted request sequence against fresh servers with the same seed (identical
observations) and another seed (different ones), and against a server with realism off
(exactly sqsim's default answers). The controls come last: /_sqsim/realism, /_sqsim/stats,
the seed line on stdout, the environment and the config file.

Every test starts its own sqsim (sqsim_process.running) and moves only its virtual clock;
where timing matters the clock is frozen first, so that lags, delays and token buckets
depend on the seed and the requests alone, never on how fast the machine is."""

import queue as queue_module
import threading

import pytest
from botocore.exceptions import ClientError

from sqsim_helpers import check_error, config_file, counts, expect_error, queue_attrs, receive
from sqsim_process import run_to_exit, running

NON_EXISTENT = "AWS.SimpleQueueService.NonExistentQueue"
AWS_SPEC = "short_poll=8,order=10,duplicates=0.01,count_lag=60,propagation,throttle"


# --- helpers ---------------------------------------------------------------------------------


def realism(spec, seed=7, *flags, env=None):
    """A private sqsim with `--realism spec --seed seed`."""
    return running("--realism", spec, "--seed", str(seed), *flags, env=env)


def freeze(proc):
    proc.admin("POST", "/_sqsim/clock", {"freeze": True})


def frozen_queue(proc, name):
    """Freezes the clock and creates a standard queue; returns (client, queue URL)."""
    freeze(proc)
    sqs = proc.client()
    return sqs, sqs.create_queue(QueueName=name)["QueueUrl"]


def send_bodies(sqs, url, bodies, **extra):
    """Sends `bodies` in batches of ten, in order."""
    for start in range(0, len(bodies), 10):
        chunk = bodies[start : start + 10]
        out = sqs.send_message_batch(
            QueueUrl=url,
            Entries=[{"Id": f"e{i}", "MessageBody": b, **extra} for i, b in enumerate(chunk)],
        )
        assert len(out.get("Successful", [])) == len(chunk), out


def bodies_of(messages):
    return [m["Body"] for m in messages]


def stats_queue(proc, name):
    (q,) = [q for q in proc.admin("GET", "/_sqsim/stats")["queues"] if q["name"] == name]
    return q


def true_counts(proc, name):
    q = stats_queue(proc, name)
    return (q["visible"], q["in_flight"], q["delayed"])


def read_stdout_line(proc, timeout_s=10.0):
    """The next line sqsim prints after its listen line (None if none comes in time)."""
    out = queue_module.Queue()
    threading.Thread(
        target=lambda: out.put(proc.proc.stdout.readline().decode()), daemon=True
    ).start()
    try:
        return out.get(timeout=timeout_s)
    except queue_module.Empty:
        return None


BODIES = [f"m{i:02d}" for i in range(20)]


# --- short_poll: a short poll samples partitions, a long poll sees them all --------------------


def test_short_polls_return_fewer_than_available():
    with realism("short_poll=8") as proc:
        sqs, url = frozen_queue(proc, "drain")
        send_bodies(sqs, url, BODIES)
        log = []  # (visible before the poll, bodies received); messages stay in flight
        for _ in range(3):
            visible = true_counts(proc, "drain")[0]
            log.append((visible, bodies_of(receive(sqs, url, MaxNumberOfMessages=10,
                                                   VisibilityTimeout=300))))
        assert any(len(got) < min(10, visible) for visible, got in log), log
        received = [b for _, got in log for b in got]
        assert len(received) == len(set(received)), "each message once"
        # With 20 waiting, a short poll returns about one or two (docs/fidelity-research.md).
        assert all(len(got) <= 4 for _, got in log), log
        # A long poll sees every partition and is not held back: it takes what it asks for.
        left = true_counts(proc, "drain")[0]
        assert left > 10, log
        got = []
        while len(got) < left:
            batch = bodies_of(receive(sqs, url, MaxNumberOfMessages=10, WaitTimeSeconds=1))
            assert len(batch) == min(10, left - len(got))
            got += batch
        assert sorted(received + got) == BODIES


def test_short_polls_sample_and_sometimes_return_nothing():
    with realism("short_poll=8") as proc:
        sqs, url = frozen_queue(proc, "twenty")
        send_bodies(sqs, url, BODIES)
        # VisibilityTimeout 0: every poll faces the same 20 visible messages.
        polls = [bodies_of(receive(sqs, url, MaxNumberOfMessages=10, VisibilityTimeout=0))
                 for _ in range(150)]
        assert all(len(p) <= 10 for p in polls)
        assert any(len(p) < 10 for p in polls), polls
        assert any(p != BODIES[:10] for p in polls), "not simply the oldest ten"
        assert sorted({b for p in polls for b in p}) == BODIES, "every partition gets sampled"
        two = sqs.create_queue(QueueName="two")["QueueUrl"]
        send_bodies(sqs, two, BODIES[:2])
        sizes = [len(receive(sqs, two, MaxNumberOfMessages=10, VisibilityTimeout=0))
                 for _ in range(20)]
        assert 0 in sizes and max(sizes) > 0, sizes
        # Long polls always find both.
        for _ in range(5):
            got = receive(sqs, two, MaxNumberOfMessages=10, VisibilityTimeout=0, WaitTimeSeconds=1)
            assert sorted(bodies_of(got)) == BODIES[:2]


def test_long_polls_see_all_partitions():
    with realism("short_poll=8") as proc:
        sqs = proc.client()
        url = sqs.create_queue(QueueName="longpoll")["QueueUrl"]
        send_bodies(sqs, url, BODIES)
        first = receive(sqs, url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        second = receive(sqs, url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        # short_poll alone keeps the order (no order window): a long poll is exact.
        assert bodies_of(first) + bodies_of(second) == BODIES


def test_fifo_queues_are_not_sampled():
    with realism("short_poll=8,order=5") as proc:
        sqs = proc.client()
        url = sqs.create_queue(
            QueueName="q.fifo",
            Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
        )["QueueUrl"]
        send_bodies(sqs, url, BODIES[:10], MessageGroupId="g")
        assert bodies_of(receive(sqs, url, MaxNumberOfMessages=10)) == BODIES[:10]


# --- order: best-effort order within a window --------------------------------------------------


def receive_all_in_order(proc, name, n=40):
    sqs = proc.client()
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sent = [f"o{i:02d}" for i in range(n)]
    send_bodies(sqs, url, sent)
    got = []
    while len(got) < n:
        batch = receive(sqs, url, MaxNumberOfMessages=10, VisibilityTimeout=300)
        assert batch, got
        got += bodies_of(batch)
    return sent, got


def test_order_window_shuffles_but_never_more_than_window_places():
    window = 4
    with realism(f"order={window}") as proc:
        sent, got = receive_all_in_order(proc, "ordered")
    assert sorted(got) == sent
    assert got != sent, "best-effort order shuffles"
    # Each message taken was among the first `window` still waiting.
    remaining = list(sent)
    for body in got:
        assert body in remaining[:window], (body, remaining[:window], got)
        remaining.remove(body)
    # Hence never more than window - 1 places early.
    assert all(sent.index(b) - i <= window - 1 for i, b in enumerate(got))
    assert max(sent.index(b) - i for i, b in enumerate(got)) > 0


# --- duplicates: at-least-once delivery ------------------------------------------------------


def test_duplicate_arrives_while_first_copy_in_flight_and_stale_delete_keeps_it():
    with realism("duplicates=1") as proc:
        sqs, url = frozen_queue(proc, "dups")
        sqs.send_message(QueueUrl=url, MessageBody="once")
        attrs = {"AttributeNames": ["ApproximateReceiveCount"]}
        (first,) = receive(sqs, url, VisibilityTimeout=60, **attrs)
        assert receive(sqs, url) == [], "not back before the clock moves"
        # The duplicate shows up within the first half of the 60 s timeout.
        proc.advance(31)
        (second,) = receive(sqs, url, VisibilityTimeout=60, **attrs)
        assert second["MessageId"] == first["MessageId"]
        assert second["ReceiptHandle"] != first["ReceiptHandle"]
        assert first["Attributes"]["ApproximateReceiveCount"] == "1"
        assert second["Attributes"]["ApproximateReceiveCount"] == "2"
        # A delete with the older handle succeeds without deleting.
        sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
        assert sum(true_counts(proc, "dups")) == 1
        # The latest handle's delete is lost once (chance 1): the message is visible at once.
        sqs.delete_message(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"])
        assert true_counts(proc, "dups") == (1, 0, 0)
        (third,) = receive(sqs, url, **attrs)
        assert third["Attributes"]["ApproximateReceiveCount"] == "3"
        # A delete is lost only once: this one deletes.
        sqs.delete_message(QueueUrl=url, ReceiptHandle=third["ReceiptHandle"])
        assert true_counts(proc, "dups") == (0, 0, 0)
        proc.advance(120)
        assert receive(sqs, url) == []


def count_duplicates(proc, name, n=100):
    """Receives `n` messages (600 s visibility), advances 301 s and counts those back early."""
    sqs = proc.client()
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    send_bodies(sqs, url, [f"d{i:03d}" for i in range(n)])
    first = []
    while len(first) < n:
        got = receive(sqs, url, MaxNumberOfMessages=10, VisibilityTimeout=600)
        assert got, first
        first += bodies_of(got)
    assert receive(sqs, url, MaxNumberOfMessages=10) == []
    proc.advance(301)
    again = []
    while got := receive(sqs, url, MaxNumberOfMessages=10, VisibilityTimeout=600):
        again += bodies_of(got)
    assert set(again) <= set(first)
    return again


def test_duplicates_occur_at_the_configured_chance():
    with realism("duplicates=0.5") as proc:
        freeze(proc)
        again = count_duplicates(proc, "half")
    assert 30 <= len(again) <= 70, len(again)


def test_duplicates_do_not_apply_to_fifo_queues():
    with realism("duplicates=1") as proc:
        freeze(proc)
        sqs = proc.client()
        url = sqs.create_queue(
            QueueName="d.fifo",
            Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
        )["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g")
        (m,) = receive(sqs, url, VisibilityTimeout=60)
        proc.advance(59)
        assert receive(sqs, url) == []
        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        assert true_counts(proc, "d.fifo") == (0, 0, 0)


# --- count_lag: ApproximateNumberOf* refreshed at random moments --------------------------------


def test_counts_lag_until_the_clock_moves_past_the_lag():
    with realism("count_lag=60") as proc:
        sqs, url = frozen_queue(proc, "lagging")
        assert counts(sqs, url) == (0, 0, 0)  # the first read refreshes
        send_bodies(sqs, url, BODIES[:5])
        assert len(receive(sqs, url, MaxNumberOfMessages=2, VisibilityTimeout=300)) == 2
        assert counts(sqs, url) == (0, 0, 0)  # stale
        assert true_counts(proc, "lagging") == (3, 2, 0)  # stats are exact
        proc.advance(30)
        send_bodies(sqs, url, BODIES[5:7])
        proc.advance(31)  # 61 s since the last refresh: past the lag
        assert counts(sqs, url) == (5, 2, 0)


def test_fifo_counts_are_exact_under_count_lag():
    with realism("count_lag=60") as proc:
        freeze(proc)
        sqs = proc.client()
        url = sqs.create_queue(
            QueueName="exact.fifo",
            Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
        )["QueueUrl"]
        assert counts(sqs, url) == (0, 0, 0)
        send_bodies(sqs, url, BODIES[:4], MessageGroupId="g")
        assert counts(sqs, url) == (4, 0, 0)


# --- propagation: attribute changes, new queues, purges --------------------------------------


def test_attribute_change_takes_effect_within_60_seconds():
    with realism("propagation") as proc:
        sqs, url = frozen_queue(proc, "slow-attrs")
        proc.advance(1)
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "100"})
        assert queue_attrs(sqs, url, "VisibilityTimeout") == {"VisibilityTimeout": "30"}
        # The old timeout still governs receives.
        sqs.send_message(QueueUrl=url, MessageBody="x")
        assert len(receive(sqs, url)) == 1
        proc.advance(60)
        assert queue_attrs(sqs, url, "VisibilityTimeout") == {"VisibilityTimeout": "100"}
        assert len(receive(sqs, url)) == 1, "received with the old 30 s timeout"
        assert receive(sqs, url) == []


def test_retention_change_takes_up_to_15_minutes():
    with realism("propagation") as proc:
        sqs, url = frozen_queue(proc, "slow-retention")
        proc.advance(1)
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"MessageRetentionPeriod": "3600"})
        name = "MessageRetentionPeriod"
        assert queue_attrs(sqs, url, name) == {name: "345600"}
        proc.advance(900)
        assert queue_attrs(sqs, url, name) == {name: "3600"}


def test_new_queue_is_unknown_for_up_to_a_second():
    with realism("propagation") as proc:
        sqs, url = frozen_queue(proc, "brand-new")
        assert url.endswith("/brand-new")
        expect_error(sqs.send_message, NON_EXISTENT, QueueUrl=url, MessageBody="x")
        expect_error(sqs.get_queue_attributes, NON_EXISTENT, QueueUrl=url)
        proc.advance(1)
        sqs.send_message(QueueUrl=url, MessageBody="x")
        assert len(receive(sqs, url)) == 1


def test_switching_propagation_on_does_not_hide_existing_queues():
    with running("--seed", "3") as proc:
        sqs = proc.client()
        url = sqs.create_queue(QueueName="old")["QueueUrl"]
        proc.advance(3600)
        freeze(proc)
        proc.admin("POST", "/_sqsim/realism", {"realism": "propagation"})
        sqs.send_message(QueueUrl=url, MessageBody="x")
        got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
        assert [m["Body"] for m in got] == ["x"]


def test_durable_restart_does_not_hide_existing_queues(tmp_path):
    with realism("propagation", 3, "--data-dir", str(tmp_path)) as proc:
        proc.client().create_queue(QueueName="kept")
        proc.advance(5)
    with realism("propagation", 3, "--data-dir", str(tmp_path)) as proc:
        freeze(proc)
        sqs = proc.client()
        url = sqs.get_queue_url(QueueName="kept")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="x")
        got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
        assert [m["Body"] for m in got] == ["x"]


def test_purge_lets_stored_messages_through_for_up_to_a_minute():
    with realism("propagation") as proc:
        sqs, url = frozen_queue(proc, "purging")
        proc.advance(1)
        send_bodies(sqs, url, BODIES[:5])
        sqs.purge_queue(QueueUrl=url)
        got = receive(sqs, url, MaxNumberOfMessages=10, VisibilityTimeout=5)
        assert sorted(bodies_of(got)) == BODIES[:5]
        sqs.send_message(QueueUrl=url, MessageBody="after")
        proc.advance(60)
        assert true_counts(proc, "purging") == (1, 0, 0)
        assert bodies_of(receive(sqs, url, MaxNumberOfMessages=10)) == ["after"]
        assert stats_queue(proc, "purging")["purged"] == 5


def test_a_message_sent_after_purging_an_empty_queue_survives():
    with realism("propagation") as proc:
        sqs, url = frozen_queue(proc, "never-used")
        proc.advance(1)
        sqs.purge_queue(QueueUrl=url)  # nothing stored yet
        sqs.send_message(QueueUrl=url, MessageBody="first")
        proc.advance(61)
        assert bodies_of(receive(sqs, url)) == ["first"]


def test_changing_realism_finishes_a_purge_under_way():
    with realism("propagation") as proc:
        sqs, url = frozen_queue(proc, "switching")
        proc.advance(1)
        send_bodies(sqs, url, BODIES[:3])
        sqs.purge_queue(QueueUrl=url)
        proc.admin("POST", "/_sqsim/realism", {"realism": "propagation"})
        assert receive(sqs, url, MaxNumberOfMessages=10) == []
        assert stats_queue(proc, "switching")["purged"] == 3


def test_fifo_queues_purge_at_once_under_propagation():
    with realism("propagation") as proc:
        freeze(proc)
        sqs = proc.client()
        url = sqs.create_queue(QueueName="p.fifo", Attributes={
            "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
        proc.advance(1)
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g")
        sqs.purge_queue(QueueUrl=url)
        assert receive(sqs, url) == []


def test_setting_the_same_attributes_again_does_not_postpone_a_change():
    with realism("propagation", 11) as proc:
        sqs, url = frozen_queue(proc, "reapplied")
        proc.advance(1)
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "7"})
        for _ in range(5):
            proc.advance(15)
            sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "7"})
        # 75 s after the change, it has taken effect however often it was re-applied.
        assert queue_attrs(sqs, url, "DelaySeconds") == {"DelaySeconds": "7"}


def test_duplicates_leave_a_zero_visibility_receive_alone():
    with realism("duplicates=1") as proc:
        sqs, url = frozen_queue(proc, "zero")
        sqs.send_message(QueueUrl=url, MessageBody="z")
        for count in ("1", "2", "3"):
            (m,) = receive(sqs, url, VisibilityTimeout=0, AttributeNames=["ApproximateReceiveCount"])
            assert m["Attributes"]["ApproximateReceiveCount"] == count


def test_purge_is_immediate_in_durable_mode(tmp_path):
    with realism("propagation", 7, "--data-dir", str(tmp_path)) as proc:
        sqs, url = frozen_queue(proc, "durable")
        proc.advance(1)
        send_bodies(sqs, url, BODIES[:3])
        sqs.purge_queue(QueueUrl=url)
        assert receive(sqs, url, MaxNumberOfMessages=10) == []


# --- throttle: FIFO quotas, and standard queues with throttle=N -------------------------------


def fifo_send(sqs, url, i):
    sqs.send_message(QueueUrl=url, MessageBody=f"b{i}", MessageGroupId="g",
                     MessageDeduplicationId=f"d{i}")


def test_fifo_queue_allows_300_calls_a_second_per_action():
    with realism("throttle") as proc:
        freeze(proc)
        sqs = proc.client()
        url = sqs.create_queue(QueueName="t.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        for i in range(300):
            fifo_send(sqs, url, i)
        with pytest.raises(ClientError) as info:
            fifo_send(sqs, url, 300)
        check_error(info.value, "RequestThrottled", 403)
        # A batch is one call of the same family: throttled too.
        expect_error(sqs.send_message_batch, "RequestThrottled", 403, QueueUrl=url,
                     Entries=[{"Id": "a", "MessageBody": "x", "MessageGroupId": "g",
                               "MessageDeduplicationId": "batch"}])
        # Other families have their own buckets; other actions are not limited.
        (m,) = receive(sqs, url)
        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        assert queue_attrs(sqs, url, "FifoQueue") == {"FifoQueue": "true"}
        # The bucket refills with the clock: 0.1 s gives 30 calls.
        proc.advance(0.1)
        for i in range(301, 331):
            fifo_send(sqs, url, i)
        expect_error(fifo_send, "RequestThrottled", 403, sqs=sqs, url=url, i=331)
        proc.advance(1)
        fifo_send(sqs, url, 332)
        assert true_counts(proc, "t.fifo") == (330, 0, 0)


def test_high_throughput_fifo_has_the_regions_quota():
    with realism("throttle") as proc:
        freeze(proc)
        sqs = proc.client()
        url = sqs.create_queue(
            QueueName="ht.fifo",
            Attributes={"FifoQueue": "true", "FifoThroughputLimit": "perMessageGroupId",
                        "DeduplicationScope": "messageGroup"},
        )["QueueUrl"]
        for i in range(320):
            fifo_send(sqs, url, i)
        assert true_counts(proc, "ht.fifo") == (320, 0, 0)


def test_standard_queues_unlimited_under_plain_throttle_and_limited_by_throttle_n():
    with realism("throttle") as proc:
        sqs, url = frozen_queue(proc, "free")
        for i in range(40):
            sqs.send_message(QueueUrl=url, MessageBody=str(i))
    with realism("throttle=5") as proc:
        sqs, url = frozen_queue(proc, "limited")
        send_bodies(sqs, url, BODIES)  # 2 batches: 2 calls
        for i in range(3):
            sqs.send_message(QueueUrl=url, MessageBody=str(i))
        expect_error(sqs.send_message, "RequestThrottled", 403, QueueUrl=url, MessageBody="x")
        for _ in range(5):
            receive(sqs, url)
        expect_error(sqs.receive_message, "RequestThrottled", 403, QueueUrl=url)
        proc.advance(1)
        sqs.send_message(QueueUrl=url, MessageBody="again")
        assert true_counts(proc, "limited")[0] + true_counts(proc, "limited")[1] == 24


# --- replay: the same seed and requests give the same run; realism off is exact --------------

REPLAY_SPEC = "short_poll=4,order=4,duplicates=0.3,count_lag=60,propagation"


def scripted_run(proc):
    """One fixed request sequence; returns what a client observes (bodies, receive counts,
    reported counts, errors), nothing that is random by nature (ids, handles)."""
    freeze(proc)
    sqs = proc.client()
    seen = []
    url = sqs.create_queue(QueueName="replay")["QueueUrl"]
    try:
        sqs.get_queue_attributes(QueueUrl=url)
        seen.append("found")
    except ClientError as e:
        seen.append(e.response["Error"]["Code"])
    proc.advance(1)
    seen.append(counts(sqs, url))
    send_bodies(sqs, url, [f"r{i:02d}" for i in range(30)])
    seen.append(counts(sqs, url))
    attrs = {"AttributeNames": ["ApproximateReceiveCount"]}

    def poll():
        got = receive(sqs, url, MaxNumberOfMessages=10, VisibilityTimeout=40, **attrs)
        seen.append([(m["Body"], m["Attributes"]["ApproximateReceiveCount"]) for m in got])

    for _ in range(6):
        poll()
    proc.advance(25)
    for _ in range(4):
        poll()
    seen.append(counts(sqs, url))
    proc.advance(61)
    seen.append(counts(sqs, url))
    return seen


def exact_run():
    """What scripted_run observes with realism off."""
    batches = [[(f"r{i:02d}", "1") for i in range(s, s + 10)] for s in (0, 10, 20)]
    return (["found", (0, 0, 0), (30, 0, 0)] + batches + [[]] * 7
            + [(0, 30, 0), (30, 0, 0)])


def polls_of(run):
    return [x for x in run if isinstance(x, list)]


def test_same_seed_replays_identically_and_another_seed_differs():
    with realism(REPLAY_SPEC, 1234) as proc:
        first = scripted_run(proc)
    with realism(REPLAY_SPEC, 1234) as proc:
        second = scripted_run(proc)
    with realism(REPLAY_SPEC, 4321) as proc:
        other = scripted_run(proc)
    assert first == second
    assert first != exact_run(), "realism changed what the client saw"
    # Sampling, order and duplicates depend on the seed.
    assert polls_of(first) != polls_of(other)


def sampled_polls(proc):
    sqs, url = frozen_queue(proc, "sampling")
    send_bodies(sqs, url, BODIES)
    return [bodies_of(receive(sqs, url, MaxNumberOfMessages=10, VisibilityTimeout=0))
            for _ in range(10)]


def received_order(proc):
    freeze(proc)
    return receive_all_in_order(proc, "ordering")[1]


@pytest.mark.parametrize("spec,script", [("short_poll=8", sampled_polls),
                                         ("order=4", received_order)])
def test_each_behaviour_replays_by_seed(spec, script):
    results = {}
    for run, seed in (("a", 11), ("b", 11), ("c", 12)):
        with realism(spec, seed) as proc:
            results[run] = script(proc)
    assert results["a"] == results["b"]
    assert results["a"] != results["c"]


def test_aws_preset_replays_identically():
    runs = []
    for _ in range(2):
        with realism("aws", 99) as proc:
            runs.append(scripted_run(proc))
    assert runs[0] == runs[1]
    assert runs[0][0] == NON_EXISTENT, "a new queue is unknown for a moment"
    assert runs[0] != exact_run()


@pytest.mark.parametrize("flags", [(), ("--realism", "off", "--seed", "1234"),
                                   ("--realism", "aws,off")])
def test_realism_off_changes_nothing(flags):
    with running(*flags) as proc:
        assert scripted_run(proc) == exact_run()
        assert proc.admin("GET", "/_sqsim/realism")["realism"] == "off"
        # Nothing throttles, nothing is delayed.
        sqs = proc.client()
        url = sqs.create_queue(QueueName="free.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        for i in range(310):
            fifo_send(sqs, url, i)


# --- controls: /_sqsim/realism, stats, stdout, environment, config file ----------------------


def test_get_and_post_realism_globally_and_per_queue():
    with running("--seed", "5") as proc:
        sqs = proc.client()
        a = sqs.create_queue(QueueName="a")["QueueUrl"]
        sqs.create_queue(QueueName="b")
        assert proc.admin("GET", "/_sqsim/realism") == {"realism": "off", "seed": 5, "queues": {}}
        arn_a = queue_attrs(sqs, a, "QueueArn")["QueueArn"]
        # One queue.
        got = proc.admin("POST", "/_sqsim/realism", {"realism": "order=3", "queue_url": a})
        assert got == {"realism": "off", "seed": 5, "queues": {arn_a: "order=3"}}
        assert stats_queue(proc, "a")["realism"] == "order=3"
        assert stats_queue(proc, "b")["realism"] == "off"
        # Every queue, and new ones; the spec is shown normalized.
        got = proc.admin("POST", "/_sqsim/realism", {"realism": "aws,order=off,throttle=20"})
        spec = "short_poll=8,duplicates=0.01,count_lag=60,propagation,throttle=20"
        assert got["realism"] == spec
        assert len(got["queues"]) == 2 and set(got["queues"].values()) == {spec}
        sqs.create_queue(QueueName="c")
        prefix = arn_a[: -len("a")]
        assert proc.admin("GET", "/_sqsim/stats")["realism"]["queues"] == {
            prefix + name: spec for name in "abc"}
        # Off again.
        assert proc.admin("POST", "/_sqsim/realism", {"realism": "off"})["queues"] == {}


@pytest.mark.parametrize("spec,named", [("colour", "colour"), ("duplicates=2", "duplicates"),
                                        ("order=1", "order"), ("propagation=5", "propagation")])
def test_post_bad_spec_is_400_naming_the_item(spec, named):
    with running() as proc:
        got = proc.admin("POST", "/_sqsim/realism", {"realism": spec}, status=400)
        assert named in got["error"], got
        assert proc.admin("GET", "/_sqsim/realism")["realism"] == "off"


def test_post_realism_for_unknown_queue_is_404():
    with running() as proc:
        url = proc.endpoint + "/000000000000/missing"
        proc.admin("POST", "/_sqsim/realism", {"realism": "aws", "queue_url": url}, status=404)


def test_seed_line_on_stdout_and_stats():
    with realism("aws", 42) as proc:
        assert read_stdout_line(proc) == f"sqsim realism {AWS_SPEC} seed 42\n"
        summary = proc.admin("GET", "/_sqsim/stats")["realism"]
        assert summary == {"realism": AWS_SPEC, "seed": 42, "queues": {}}


def test_environment_sets_realism_and_seed():
    with running(env={"SQSIM_REALISM": "order=3,count_lag=5", "SQSIM_SEED": "9"}) as proc:
        assert read_stdout_line(proc) == "sqsim realism order=3,count_lag=5 seed 9\n"
        assert proc.admin("GET", "/_sqsim/realism")["seed"] == 9


def test_bad_spec_on_the_command_line_stops_the_server():
    out = run_to_exit("--realism", "short_poll=1")
    assert out.returncode != 0
    assert "sqsim listening" not in out.stdout
    assert "short_poll" in out.stderr, out.stderr


def test_config_file_server_and_queue_realism():
    text = ('[server]\nrealism = "count_lag=30"\nseed = 11\n\n'
            '[queues.plain]\n\n[queues.own]\nrealism = "order=3"\n')
    with config_file(text) as path, running("--config", path) as proc:
        assert read_stdout_line(proc) == "sqsim realism count_lag=30 seed 11\n"
        got = proc.admin("GET", "/_sqsim/realism")
        assert (got["realism"], got["seed"]) == ("count_lag=30", 11)
        assert stats_queue(proc, "plain")["realism"] == "count_lag=30"
        assert stats_queue(proc, "own")["realism"] == "order=3"
        # The queue's own setting wins: its counts do not lag.
        freeze(proc)
        sqs = proc.client()
        own = sqs.get_queue_url(QueueName="own")["QueueUrl"]
        plain = sqs.get_queue_url(QueueName="plain")["QueueUrl"]
        for url in (own, plain):
            assert counts(sqs, url) == (0, 0, 0)
            sqs.send_message(QueueUrl=url, MessageBody="x")
        assert counts(sqs, own) == (1, 0, 0)
        assert counts(sqs, plain) == (0, 0, 0)


def test_config_file_bad_realism_names_the_key():
    with config_file('[queues.q]\nrealism = "sometimes"\n') as path:
        out = run_to_exit("--config", path)
    assert out.returncode != 0
    assert "queues.q.realism" in out.stderr and "sometimes" in out.stderr, out.stderr
