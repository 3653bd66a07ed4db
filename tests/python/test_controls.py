"""sqsim as a test double, driven from boto3: the admin clock (visibility timeouts, long polls,
the FIFO deduplication window), reset, peek, stats, fault injection seen through botocore's
retry logic, at-least-once mode, per-credential and per-region isolation, region-host queue
URLs and the TOML config file.

Every test here runs against a private sqsim (sqsim_process.running), so resetting it,
injecting faults and moving its clock cannot disturb the shared session server."""

import json
import threading
import time
import urllib.parse

import pytest
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    EndpointConnectionError,
    HTTPClientError,
)

from sqsim_helpers import ACCOUNT, check_error, expect_error, queue_attrs, receive, receive_one
from sqsim_process import running, run_to_exit

QUERY_ERRORS = {
    "nonexistent": "AWS.SimpleQueueService.NonExistentQueue",
    "deleted_recently": "AWS.SimpleQueueService.QueueDeletedRecently",
}


@pytest.fixture(scope="module")
def srv():
    with running() as p:
        yield p


@pytest.fixture
def fresh(srv):
    """The module's server, reset to nothing: no queues, no faults, a running clock."""
    assert srv.admin("POST", "/_sqsim/reset", {}) == {"reset": "all"}
    srv.admin("POST", "/_sqsim/clock", {"freeze": False})
    return srv


@pytest.fixture
def sqs(fresh):
    """A client that never retries, so every call is exactly one request."""
    return fresh.client()


def peek(srv, url):
    return srv.admin("GET", "/_sqsim/peek?queue_url=" + urllib.parse.quote(url, safe=""))


def faults(srv):
    return srv.admin("GET", "/_sqsim/faults")["faults"]


def inject(srv, **rule):
    reply = srv.admin("POST", "/_sqsim/faults", rule)
    assert isinstance(reply.get("id"), int), reply
    return reply["id"]


def fault(srv, rule_id):
    [rule] = [f for f in faults(srv) if f["id"] == rule_id]
    return rule


def stats_of(srv, name, account=ACCOUNT, region="us-east-1"):
    rows = [
        q
        for q in srv.admin("GET", "/_sqsim/stats")["queues"]
        if (q["name"], q["account"], q["region"]) == (name, account, region)
    ]
    assert len(rows) == 1, rows
    return rows[0]


def names(client, **kwargs):
    return sorted(u.rsplit("/", 1)[1] for u in client.list_queues(**kwargs).get("QueueUrls", []))


# --- the clock ------------------------------------------------------------------------------


def test_an_hour_long_visibility_timeout_passes_through_the_clock(fresh, sqs):
    url = sqs.create_queue(QueueName="hour")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m")
    first = receive_one(sqs, url, VisibilityTimeout=3600, AttributeNames=["ApproximateReceiveCount"])
    assert first["Attributes"]["ApproximateReceiveCount"] == "1"
    assert receive(sqs, url) == []

    started = time.monotonic()
    fresh.advance(3599)
    assert receive(sqs, url) == [], "still invisible one second before the hour is up"
    fresh.advance(1)
    again = receive_one(sqs, url, AttributeNames=["ApproximateReceiveCount"])
    assert again["MessageId"] == first["MessageId"]
    assert again["Body"] == "m"
    assert again["Attributes"]["ApproximateReceiveCount"] == "2"
    assert again["ReceiptHandle"] != first["ReceiptHandle"]
    assert time.monotonic() - started < 5, "an hour of server time took real time"


def test_clock_advance_wakes_a_waiting_long_poll(fresh, sqs):
    url = sqs.create_queue(QueueName="wake")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m")
    receive_one(sqs, url, VisibilityTimeout=3600)

    poller = fresh.client(read_timeout=60)
    result = {}

    def long_poll():
        try:
            result["messages"] = receive(poller, url, WaitTimeSeconds=20)
        except Exception as e:  # reported by the main thread
            result["error"] = e
        result["returned_at"] = time.monotonic()

    t = threading.Thread(target=long_poll, daemon=True)
    t.start()
    time.sleep(0.5)  # let the receive reach the server and start waiting
    assert t.is_alive(), f"the long poll returned before the advance: {result}"

    advanced_at = time.monotonic()
    fresh.advance(3600)
    t.join(10)
    assert not t.is_alive(), "the long poll did not wake at the clock advance"
    assert "error" not in result, result.get("error")
    assert [m["Body"] for m in result["messages"]] == ["m"]
    assert result["returned_at"] - advanced_at < 2, "woke long after the advance"


def test_a_five_minute_fifo_dedup_window_passes_in_milliseconds(fresh, sqs):
    url = sqs.create_queue(QueueName="d.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]

    def send():
        return sqs.send_message(
            QueueUrl=url, MessageBody="x", MessageGroupId="g", MessageDeduplicationId="same"
        )["MessageId"]

    started = time.monotonic()
    first = send()
    assert send() == first, "a duplicate inside the window is accepted but not enqueued"
    fresh.advance(290)
    assert send() == first, "still inside the 5-minute window"
    fresh.advance(10)
    later = send()
    assert later != first, "300 s after the first send the id is new again"
    assert [m["message_id"] for m in peek(fresh, url)["messages"]] == [first, later]
    assert time.monotonic() - started < 5


def test_clock_reports_advances_and_freezes(fresh):
    before = fresh.admin("GET", "/_sqsim/clock")
    assert before["frozen"] is False
    frozen = fresh.admin("POST", "/_sqsim/clock", {"freeze": True})
    assert frozen["frozen"] is True
    after = fresh.advance(90)
    assert after["now_ms"] == frozen["now_ms"] + 90_000, "a frozen clock moves only by advances"
    assert fresh.admin("GET", "/_sqsim/clock")["now_ms"] == after["now_ms"]
    fresh.admin("POST", "/_sqsim/clock", {"advance_seconds": -1}, status=400)
    assert fresh.admin("POST", "/_sqsim/clock", {"freeze": False})["frozen"] is False


# --- reset ----------------------------------------------------------------------------------


def test_reset_leaves_a_fresh_server(fresh, sqs):
    url = sqs.create_queue(QueueName="gone")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="old")
    doomed = sqs.create_queue(QueueName="deleted")["QueueUrl"]
    sqs.delete_queue(QueueUrl=doomed)
    expect_error(sqs.create_queue, QUERY_ERRORS["deleted_recently"], QueueName="deleted")
    inject(fresh, action="ListQueues", error="ThrottlingException")
    expect_error(sqs.list_queues, "ThrottlingException")

    assert fresh.admin("POST", "/_sqsim/reset", {}) == {"reset": "all"}

    assert faults(fresh) == [], "reset clears faults"
    assert sqs.list_queues().get("QueueUrls", []) == [], "no queues, and ListQueues works again"
    stats = fresh.admin("GET", "/_sqsim/stats")
    # Realism is the server's setting (off here), not state: a reset keeps it.
    assert stats.pop("realism")["realism"] == "off"
    # Nothing is held for clients any more: every queue's and message's memory came back.
    assert stats.pop("memory")["held_bytes"] == 0
    assert stats == {
        "queues": [],
        "faults": [],
        "workers": [],
        "store": None,
    }
    expect_error(sqs.get_queue_url, QUERY_ERRORS["nonexistent"], QueueName="gone")
    # A deleted name is usable at once, and a re-created queue starts empty.
    assert sqs.create_queue(QueueName="deleted")["QueueUrl"] == doomed
    assert sqs.create_queue(QueueName="gone")["QueueUrl"] == url
    assert receive(sqs, url) == []
    assert peek(fresh, url)["messages"] == []


def test_reset_of_one_namespace(fresh):
    a = fresh.client(key="111111111111")
    b = fresh.client(key="222222222222")
    a_west = fresh.client(key="111111111111", region="eu-west-1")
    for c in (a, b, a_west):
        c.create_queue(QueueName="ns")
    a.delete_queue(QueueUrl=a.create_queue(QueueName="cool")["QueueUrl"])
    b.delete_queue(QueueUrl=b.create_queue(QueueName="cool")["QueueUrl"])
    keep = inject(fresh, action="GetQueueUrl", queue="nothing-here", error="InternalError")

    reply = fresh.admin(
        "POST", "/_sqsim/reset", {"account": "111111111111", "region": "us-east-1"}
    )
    assert reply == {"reset": "namespace", "account": "111111111111", "region": "us-east-1"}

    assert names(a) == []
    assert names(b) == ["ns"]
    assert names(a_west) == ["ns"]
    # The reset namespace forgets its deleted names; the others still remember theirs.
    a.create_queue(QueueName="cool")
    expect_error(b.create_queue, QUERY_ERRORS["deleted_recently"], QueueName="cool")
    assert [f["id"] for f in faults(fresh)] == [keep], "a namespace reset keeps the faults"


def test_reset_of_one_queue(fresh, sqs):
    one = sqs.create_queue(QueueName="one")["QueueUrl"]
    two = sqs.create_queue(QueueName="two")["QueueUrl"]
    sqs.send_message(QueueUrl=two, MessageBody="stays")
    assert fresh.admin("POST", "/_sqsim/reset", {"queue_url": one}) == {
        "reset": "queue",
        "queue_url": one,
    }
    assert names(sqs) == ["two"]
    assert receive_one(sqs, two)["Body"] == "stays"
    fresh.admin("POST", "/_sqsim/reset", {"queue_url": one}, status=404)
    # Re-creating it right away is allowed.
    assert sqs.create_queue(QueueName="one")["QueueUrl"] == one


# --- peek and stats -------------------------------------------------------------------------


def test_peek_changes_nothing_and_shows_every_state(fresh, sqs):
    url = sqs.create_queue(QueueName="peeked")["QueueUrl"]
    sent_a = sqs.send_message(
        QueueUrl=url,
        MessageBody="a",
        MessageAttributes={"k": {"DataType": "String", "StringValue": "v"}},
    )["MessageId"]
    sqs.send_message(QueueUrl=url, MessageBody="b", DelaySeconds=60)
    sqs.send_message(QueueUrl=url, MessageBody="c")
    taken = receive_one(sqs, url, VisibilityTimeout=100)

    first = peek(fresh, url)
    second = peek(fresh, url)
    assert first == second, "peeking twice sees the same thing"
    assert first["queue"] == f"arn:aws:sqs:us-east-1:{ACCOUNT}:peeked"
    by_body = {m["body"]: m for m in first["messages"]}
    assert sorted(by_body) == ["a", "b", "c"]
    states = {body: m["state"] for body, m in by_body.items()}
    assert sorted(states.values()) == ["delayed", "in_flight", "visible"]
    assert states["b"] == "delayed"
    assert states[taken["Body"]] == "in_flight"
    assert by_body["b"]["until_ms"] == by_body["b"]["sent_timestamp"] + 60_000
    assert by_body[taken["Body"]]["receive_count"] == 1
    assert sum(m["receive_count"] for m in first["messages"]) == 1
    assert by_body["a"]["message_id"] == sent_a
    assert by_body["a"]["message_attributes"] == {"k": {"DataType": "String", "StringValue": "v"}}

    # Nothing moved: the visible message's next receive is its first, and the counts hold.
    visible_body = next(b for b, s in states.items() if s == "visible")
    nxt = receive_one(sqs, url, AttributeNames=["ApproximateReceiveCount"])
    assert nxt["Body"] == visible_body
    assert nxt["Attributes"]["ApproximateReceiveCount"] == "1"

    fresh.admin("GET", "/_sqsim/peek", status=400)
    fresh.admin(
        "GET",
        "/_sqsim/peek?queue_url=" + urllib.parse.quote(url + "-missing", safe=""),
        status=404,
    )


def test_stats_count_sent_received_and_deleted(fresh, sqs):
    url = sqs.create_queue(QueueName="counted")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="a")
    sqs.send_message_batch(
        QueueUrl=url,
        Entries=[{"Id": "b", "MessageBody": "b"}, {"Id": "c", "MessageBody": "c", "DelaySeconds": 30}],
    )
    got = receive(sqs, url, MaxNumberOfMessages=10)
    assert len(got) == 2
    sqs.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])

    row = stats_of(fresh, "counted")
    assert row["arn"] == f"arn:aws:sqs:us-east-1:{ACCOUNT}:counted"
    assert (row["sent"], row["received"], row["deleted"]) == (3, 2, 1)
    assert (row["visible"], row["in_flight"], row["delayed"]) == (0, 1, 1)
    assert (row["dead_lettered"], row["expired"], row["purged"], row["waiting"]) == (0, 0, 0, 0)
    assert row["arrived"] == 0
    assert row["oldest_age_s"] >= 0
    # Stats are only read: asking again changes nothing (but the oldest message's age).
    again = stats_of(fresh, "counted")
    assert again.pop("oldest_age_s") >= row.pop("oldest_age_s")
    assert again == row


def test_a_dead_letter_queue_counts_what_arrived_not_what_was_sent(fresh, sqs):
    dlq = sqs.create_queue(QueueName="arrivals-dlq")["QueueUrl"]
    arn = queue_attrs(sqs, dlq, "QueueArn")["QueueArn"]
    src = sqs.create_queue(
        QueueName="arrivals",
        Attributes={"RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 1})},
    )["QueueUrl"]
    for body in ("a", "b"):
        sqs.send_message(QueueUrl=src, MessageBody=body)
    for _ in range(2):
        receive(sqs, src, MaxNumberOfMessages=10, VisibilityTimeout=0)
    # The second receive of each went over maxReceiveCount: both moved, none sent to the DLQ.
    assert "Messages" not in sqs.receive_message(QueueUrl=src)
    deadline = time.monotonic() + 5
    while stats_of(fresh, "arrivals-dlq")["arrived"] < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    row = stats_of(fresh, "arrivals-dlq")
    assert (row["sent"], row["arrived"], row["visible"]) == (0, 2, 2)
    assert stats_of(fresh, "arrivals")["dead_lettered"] == 2


def test_console_moves_selected_messages_and_says_why_not(fresh, sqs):
    a = sqs.create_queue(QueueName="pick-a")["QueueUrl"]
    b = sqs.create_queue(QueueName="pick-b")["QueueUrl"]
    ids = [sqs.send_message(QueueUrl=a, MessageBody=f"m{i}")["MessageId"] for i in range(3)]
    held = receive_one(sqs, a, VisibilityTimeout=60)  # in flight: it stays

    def move(body, status=200):
        return fresh.admin("POST", "/_sqsim/console/move-messages", body, status=status)

    done = move({"queue_url": a, "message_ids": ids, "to_queue_url": b})
    assert done == {"moved": 2, "stayed": 1}
    assert sorted(m["body"] for m in peek(fresh, b)["messages"]) == sorted(
        f"m{i}" for i in range(3) if ids[i] != held["MessageId"]
    )
    assert [m["message_id"] for m in peek(fresh, a)["messages"]] == [held["MessageId"]]
    assert move({"queue_url": a, "message_ids": [], "to_queue_url": b}) == {"moved": 0, "stayed": 0}
    move({"queue_url": a, "message_ids": ids, "to_queue_url": a}, status=400)
    move({"queue_url": a, "message_ids": ids, "to_queue_url": b + "-missing"}, status=404)
    move({"queue_url": a, "message_ids": ["not-an-id"], "to_queue_url": b}, status=400)


# --- faults ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["standard", "legacy"])
def test_botocore_retries_an_injected_throttle_then_succeeds(fresh, sqs, mode):
    url = sqs.create_queue(QueueName="flaky")["QueueUrl"]
    calm = sqs.create_queue(QueueName="calm")["QueueUrl"]
    rule = inject(fresh, action="SendMessage", queue="flaky", error="ThrottlingException", count=2)
    retrying = fresh.client(retries={"mode": mode, "total_max_attempts": 3})

    sqs.send_message(QueueUrl=calm, MessageBody="another queue is not throttled")
    assert fault(fresh, rule)["hits"] == 0

    out = retrying.send_message(QueueUrl=url, MessageBody="eventually")
    assert out["ResponseMetadata"]["RetryAttempts"] == 2, "two throttled attempts, then success"
    assert out["ResponseMetadata"]["HTTPStatusCode"] == 200
    got = fault(fresh, rule)
    assert (got["hits"], got["remaining"]) == (2, 0)
    assert got["effect"] == {"error": "ThrottlingException"}
    assert [m["body"] for m in peek(fresh, url)["messages"]] == ["eventually"], "sent once"
    assert [f["hits"] for f in fresh.admin("GET", "/_sqsim/stats")["faults"]] == [2]


def test_without_retries_the_throttle_is_the_error(fresh, sqs):
    url = sqs.create_queue(QueueName="flaky")["QueueUrl"]
    rule = inject(fresh, action="SendMessage", queue="flaky", error="ThrottlingException", count=2)
    with pytest.raises(ClientError) as info:
        sqs.send_message(QueueUrl=url, MessageBody="x")
    check_error(info.value, "ThrottlingException", 400)
    assert info.value.response["Error"]["Message"] == "Rate exceeded"
    assert info.value.response["ResponseMetadata"]["RetryAttempts"] == 0
    assert fault(fresh, rule)["hits"] == 1, "exactly one request"
    assert peek(fresh, url)["messages"] == []


def test_service_unavailable_is_a_503_that_botocore_retries(fresh, sqs):
    sqs.create_queue(QueueName="svc")
    rule = inject(fresh, action="GetQueueUrl", error="ServiceUnavailable", count=1)
    with pytest.raises(ClientError) as info:
        sqs.get_queue_url(QueueName="svc")
    err = info.value.response
    assert (err["Error"]["Code"], err["ResponseMetadata"]["HTTPStatusCode"]) == (
        "ServiceUnavailable",
        503,
    )
    assert fault(fresh, rule)["hits"] == 1

    rule = inject(fresh, action="GetQueueUrl", error="ServiceUnavailable", count=1)
    retrying = fresh.client(retries={"mode": "standard", "total_max_attempts": 3})
    out = retrying.get_queue_url(QueueName="svc")
    assert out["QueueUrl"].endswith(f"/{ACCOUNT}/svc")
    assert out["ResponseMetadata"]["RetryAttempts"] == 1
    assert fault(fresh, rule)["hits"] == 1


def test_injected_latency_delays_the_reply(fresh, sqs):
    rule = inject(fresh, action="ListQueues", latency_ms=300, count=1)
    started = time.monotonic()
    sqs.list_queues()
    assert time.monotonic() - started >= 0.3
    assert fault(fresh, rule)["effect"] == {"latency_ms": 300}
    assert (fault(fresh, rule)["hits"], fault(fresh, rule)["remaining"]) == (1, 0)


def test_a_dropped_connection_is_a_connection_error_without_retries(fresh, sqs):
    rule = inject(fresh, action="ListQueues", drop_connection=True, count=1)
    with pytest.raises((ConnectionClosedError, EndpointConnectionError, HTTPClientError)) as info:
        sqs.list_queues()
    assert not isinstance(info.value, ClientError), "no HTTP response at all"
    assert fault(fresh, rule)["hits"] == 1, "the client made one attempt"
    assert fault(fresh, rule)["effect"] == {"drop_connection": True}
    assert sqs.list_queues().get("QueueUrls", []) == [], "the next call gets through"

    # A retrying client reconnects and succeeds.
    rule = inject(fresh, action="ListQueues", drop_connection=True, count=1)
    out = fresh.client(retries={"mode": "standard", "total_max_attempts": 3}).list_queues()
    assert out["ResponseMetadata"]["RetryAttempts"] == 1
    assert fault(fresh, rule)["hits"] == 1


def test_fault_probability(fresh, sqs):
    never = inject(fresh, action="ListQueues", error="InternalError", probability=0.0)
    for _ in range(20):
        sqs.list_queues()
    assert fault(fresh, never)["hits"] == 0
    fresh.admin("DELETE", "/_sqsim/faults")

    always = inject(fresh, action="ListQueues", error="InternalError", probability=1.0)
    for _ in range(3):
        with pytest.raises(ClientError) as info:
            sqs.list_queues()
        assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    assert fault(fresh, always)["hits"] == 3
    assert fault(fresh, always)["remaining"] is None
    fresh.admin("DELETE", "/_sqsim/faults")

    half = inject(fresh, action="ListQueues", error="InternalError", probability=0.5)
    failed = 0
    for _ in range(200):
        try:
            sqs.list_queues()
        except ClientError:
            failed += 1
    assert 50 <= failed <= 150, failed
    assert fault(fresh, half)["hits"] == failed


def test_a_rule_that_does_not_fire_does_not_shadow_a_later_one(fresh, sqs):
    """Two rules for the same action: the first never fires (probability 0), so the second,
    which always fires (probability 1), decides."""
    never = inject(fresh, action="ListQueues", error="InternalError", probability=0.0)
    always = inject(fresh, action="ListQueues", error="ServiceUnavailable", probability=1.0)
    with pytest.raises(ClientError) as info:
        sqs.list_queues()
    assert info.value.response["Error"]["Code"] == "ServiceUnavailable"
    assert (fault(fresh, never)["hits"], fault(fresh, always)["hits"]) == (0, 1)


def test_fault_validation_and_clearing(fresh, sqs):
    fresh.admin("POST", "/_sqsim/faults", {"error": "InternalError", "probability": 1.5}, status=400)
    fresh.admin("POST", "/_sqsim/faults", {"error": "NoSuchError"}, status=400)
    fresh.admin("POST", "/_sqsim/faults", {"error": "InternalError", "latency_ms": 5}, status=400)
    fresh.admin("POST", "/_sqsim/faults", {"colour": "red"}, status=400)
    assert faults(fresh) == []
    inject(fresh, error="InternalError")
    with pytest.raises(ClientError):
        sqs.list_queues()
    assert fresh.admin("DELETE", "/_sqsim/faults") == {"faults": []}
    assert sqs.list_queues().get("QueueUrls", []) == []


# --- at-least-once mode ---------------------------------------------------------------------


def test_at_least_once_mode_redelivers_a_deleted_message_once(fresh, sqs):
    url = sqs.create_queue(QueueName="alo")["QueueUrl"]
    reply = fresh.admin("POST", "/_sqsim/faults", {"queue": "alo", "redeliver_probability": 1.0})
    assert reply["redeliver_probability"] == 1.0
    sent = sqs.send_message(QueueUrl=url, MessageBody="twice")["MessageId"]
    for round_ in range(2):
        got = receive(sqs, url)
        assert [(m["MessageId"], m["Body"]) for m in got] == [(sent, "twice")], f"round {round_}"
        sqs.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])
    assert receive(sqs, url) == [], "redelivered once, not forever"

    # Clearing faults ends at-least-once mode.
    fresh.admin("DELETE", "/_sqsim/faults")
    sqs.send_message(QueueUrl=url, MessageBody="once")
    m = receive_one(sqs, url)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    assert receive(sqs, url) == []
    fresh.admin(
        "POST", "/_sqsim/faults", {"queue": "no-such-queue", "redeliver_probability": 1.0}, status=400
    )


# --- isolation ------------------------------------------------------------------------------


def test_access_keys_and_regions_are_separate_namespaces(fresh):
    alice = fresh.client(key="111111111111")
    bob = fresh.client(key="222222222222")
    alice_west = fresh.client(key="111111111111", region="eu-west-1")
    alice_url = alice.create_queue(QueueName="shared-name")["QueueUrl"]
    bob_url = bob.create_queue(QueueName="shared-name")["QueueUrl"]
    assert alice_url == f"{fresh.endpoint}/111111111111/shared-name"
    assert bob_url == f"{fresh.endpoint}/222222222222/shared-name"
    assert queue_attrs(alice, alice_url, "QueueArn")["QueueArn"] == (
        "arn:aws:sqs:us-east-1:111111111111:shared-name"
    )

    alice.send_message(QueueUrl=alice_url, MessageBody="alice's")
    assert receive(bob, bob_url) == []
    assert alice.list_queues()["QueueUrls"] == [alice_url]
    assert bob.list_queues()["QueueUrls"] == [bob_url]
    assert alice_west.list_queues().get("QueueUrls", []) == []
    expect_error(alice_west.get_queue_url, QUERY_ERRORS["nonexistent"], QueueName="shared-name")

    # GetQueueUrl can name another account.
    found = bob.get_queue_url(QueueName="shared-name", QueueOwnerAWSAccountId="111111111111")
    assert found["QueueUrl"] == alice_url
    assert receive_one(bob, found["QueueUrl"])["Body"] == "alice's"

    # A key that is not 12 digits acts as the default account, which has no such queue.
    expect_error(fresh.client().get_queue_url, QUERY_ERRORS["nonexistent"], QueueName="shared-name")


# --- region-host URLs -----------------------------------------------------------------------


def test_region_host_urls_work_with_the_endpoint_at_127_0_0_1():
    with running("--url-style", "region-host") as p:
        east = p.client()
        west = p.client(region="eu-west-1")
        e = east.create_queue(QueueName="q")["QueueUrl"]
        w = west.create_queue(QueueName="q")["QueueUrl"]
        assert e == f"http://sqs.us-east-1.localhost:{p.port}/{ACCOUNT}/q"
        assert w == f"http://sqs.eu-west-1.localhost:{p.port}/{ACCOUNT}/q"
        assert east.get_queue_url(QueueName="q")["QueueUrl"] == e
        assert west.list_queues()["QueueUrls"] == [w]

        # The URL alone picks the queue, whatever region the client signs for.
        east.send_message(QueueUrl=w, MessageBody="to the west")
        assert receive_one(west, w)["Body"] == "to the west"
        assert receive(east, e) == []
        east.send_message(QueueUrl=e, MessageBody="east")
        assert receive_one(east, e)["Body"] == "east"
        assert queue_attrs(east, w, "QueueArn")["QueueArn"] == f"arn:aws:sqs:eu-west-1:{ACCOUNT}:q"


# --- the config file ------------------------------------------------------------------------

CONFIG = """\
[server]
account_id = "123456789012"

# The DLQ is declared after the queue that uses it: order does not matter.
[queues.orders]
attributes = { VisibilityTimeout = 60, DelaySeconds = "0" }
tags = { team = "core", tier = "1" }
dead_letter = { queue = "orders-dlq", max_receive_count = 1 }

[queues.orders-dlq]
attributes = { MessageRetentionPeriod = 1209600 }

[queues."events.fifo"]
attributes = { ContentBasedDeduplication = true }

[queues.elsewhere]
region = "eu-west-1"
account_id = "111111111111"
"""


def test_config_file_queues_exist_at_start(tmp_path):
    path = tmp_path / "sqsim.toml"
    path.write_text(CONFIG)
    with running("--config", str(path)) as p:
        sqs = p.client()
        acct = "123456789012"
        assert names(sqs) == ["events.fifo", "orders", "orders-dlq"]
        orders = sqs.get_queue_url(QueueName="orders")["QueueUrl"]
        assert orders == f"{p.endpoint}/{acct}/orders"
        dlq = sqs.get_queue_url(QueueName="orders-dlq")["QueueUrl"]
        a = queue_attrs(sqs, orders)
        assert a["VisibilityTimeout"] == "60"
        assert a["DelaySeconds"] == "0"
        assert json.loads(a["RedrivePolicy"]) == {
            "deadLetterTargetArn": f"arn:aws:sqs:us-east-1:{acct}:orders-dlq",
            "maxReceiveCount": 1,
        }
        assert sqs.list_queue_tags(QueueUrl=orders)["Tags"] == {"team": "core", "tier": "1"}
        assert queue_attrs(sqs, dlq, "MessageRetentionPeriod")["MessageRetentionPeriod"] == "1209600"
        fifo = sqs.get_queue_url(QueueName="events.fifo")["QueueUrl"]
        f = queue_attrs(sqs, fifo, "FifoQueue", "ContentBasedDeduplication")
        assert f == {"FifoQueue": "true", "ContentBasedDeduplication": "true"}
        elsewhere = p.client(key="111111111111", region="eu-west-1")
        assert elsewhere.list_queues()["QueueUrls"] == [f"{p.endpoint}/111111111111/elsewhere"]

        # The wiring works: with maxReceiveCount 1 the second receive moves the message.
        sqs.send_message(QueueUrl=orders, MessageBody="m")
        receive_one(sqs, orders)
        p.advance(60)
        assert receive(sqs, orders) == []
        moved = receive_one(sqs, dlq, AttributeNames=["DeadLetterQueueSourceArn"])
        assert moved["Body"] == "m"
        assert moved["Attributes"]["DeadLetterQueueSourceArn"] == (
            f"arn:aws:sqs:us-east-1:{acct}:orders"
        )


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "[queues.orders]\nattributes = { DelaySeconds = 901 }\n",
            "line 2: queues.orders.attributes.DelaySeconds",
        ),
        (
            "[queues.orders]\ndead_letter = { queue = \"missing\", max_receive_count = 3 }\n",
            'line 2: queues.orders.dead_letter: no queue named "missing"',
        ),
        ("\n[queues.orders]\natributes = { VisibilityTimeout = 1 }\n", "line 3"),
        ("[queues.orders\n", "line 1"),
        ('[server]\nport = 0\nurl_style = "sideways"\n', "line 3: server.url_style"),
    ],
    ids=["bad-attribute", "missing-dlq", "unknown-key", "syntax", "bad-url-style"],
)
def test_a_bad_config_stops_the_binary_naming_the_line(tmp_path, text, expected):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    out = run_to_exit("--config", str(path))
    assert out.returncode != 0, out
    assert "sqsim listening" not in out.stdout
    assert expected in out.stderr, out.stderr
    assert str(path) in out.stderr, "the message names the file"
