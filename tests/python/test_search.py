"""The search over a queue's messages (`/_sqsim/peek` with a filter, what the console's search
box runs): by body, MessageId, attribute, group and state, on a queue of 12,000 messages,
without receiving anything or changing any count; a bounded scan per page (`scan`) that says
how far it got and pages on from there; bad filters answered 400."""

import base64
import urllib.parse

import pytest

from sqsim_helpers import counts
from sqsim_process import running

N = 12_000


@pytest.fixture(scope="module")
def srv():
    with running() as p:
        yield p


def search(srv, url, status=200, **params):
    query = urllib.parse.urlencode({"queue_url": url, **params})
    return srv.admin("GET", f"/_sqsim/peek?{query}", status=status)


def all_pages(srv, url, **params):
    """Every match, following next_offset; the pages' scanned counts add up to the queue."""
    found, offset, scanned = [], 0, 0
    while offset is not None:
        page = search(srv, url, offset=offset, **params)
        found += page["messages"]
        scanned += page["scanned"]
        offset = page["next_offset"]
    return found, scanned


@pytest.fixture(scope="module")
def big(srv):
    """A standard queue of N messages: bodies `order-<i>` ({"order": i} for every 1000th),
    attribute kind=bulk on all but every 1000th (kind=special, a Number weight, a Binary
    blob), and one message in flight."""
    sqs = srv.client()
    url = sqs.create_queue(QueueName="search-big")["QueueUrl"]
    for start in range(0, N, 10):
        entries = []
        for i in range(start, start + 10):
            special = i % 1000 == 999
            attrs = {"kind": {"DataType": "String", "StringValue": "special" if special else "bulk"}}
            if special:
                attrs["weight"] = {"DataType": "Number", "StringValue": str(i)}
                attrs["blob"] = {"DataType": "Binary", "BinaryValue": b"\x00\xffsqsim"}
            body = f'{{"order": {i}}}' if special else f"order-{i}"
            entries.append({"Id": str(i - start), "MessageBody": body, "MessageAttributes": attrs})
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    taken = sqs.receive_message(QueueUrl=url, VisibilityTimeout=600)["Messages"][0]
    return sqs, url, taken


def test_every_filter_finds_its_messages_and_nothing_changes(srv, big):
    sqs, url, taken = big
    before = counts(sqs, url)

    by_body = search(srv, url, q="order-11998")
    assert [m["body"] for m in by_body["messages"]] == ["order-11998"]
    assert by_body["total"] == N and by_body["scanned"] == N and by_body["next_offset"] is None

    specials = search(srv, url, q='"order"')["messages"]
    assert [m["body"] for m in specials] == [f'{{"order": {i}}}' for i in range(999, N, 1000)]
    one = specials[3]
    types = {n: a["DataType"] for n, a in one["message_attributes"].items()}
    assert types == {"kind": "String", "weight": "Number", "blob": "Binary"}

    by_id = search(srv, url, id=one["message_id"][:13].upper())["messages"]
    assert one["message_id"] in [m["message_id"] for m in by_id]
    assert [m["body"] for m in search(srv, url, id=one["message_id"])["messages"]] == [one["body"]]

    assert len(search(srv, url, attribute="kind=special")["messages"]) == N // 1000
    assert len(search(srv, url, attribute="weight")["messages"]) == N // 1000
    assert [m["body"] for m in search(srv, url, attribute="weight=3999")["messages"]] == ['{"order": 3999}']
    blob = base64.b64encode(b"\x00\xffsqsim").decode()
    assert len(search(srv, url, attribute=f"blob={blob}")["messages"]) == N // 1000
    assert search(srv, url, attribute="kind=nothing")["messages"] == []

    [in_flight] = search(srv, url, state="in_flight")["messages"]
    assert in_flight["message_id"] == taken["MessageId"] and in_flight["receive_count"] == 1
    both = search(srv, url, state="visible", attribute="kind=special", q="order")
    assert len(both["messages"]) == N // 1000 - (taken["Body"].startswith("{") and 1 or 0)

    # Nothing was received: the counts and every receive count are as they were.
    assert counts(sqs, url) == before
    assert sum(m["receive_count"] for m in search(srv, url, q="order", limit=10_000)["messages"]) <= 1


def test_a_page_scans_at_most_its_budget_and_the_next_goes_on(srv, big):
    _, url, _ = big
    page = search(srv, url, q='"order"', scan=1000)
    assert page["scanned"] == 1000 and page["next_offset"] == 1000
    assert [m["body"] for m in page["messages"]] == ['{"order": 999}']
    found, scanned = all_pages(srv, url, q='"order"', scan=1000)
    assert scanned == N
    assert len(found) == N // 1000
    # A page also ends when it is full; the next one starts right after its last match.
    page = search(srv, url, attribute="kind=special", limit=2)
    assert len(page["messages"]) == 2 and page["next_offset"] == 2000
    found, _ = all_pages(srv, url, attribute="kind=special", limit=5)
    assert [m["body"] for m in found] == [f'{{"order": {i}}}' for i in range(999, N, 1000)]


def test_fifo_messages_are_found_by_group(srv):
    sqs = srv.client()
    url = sqs.create_queue(QueueName="search.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    for i in range(30):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}", MessageGroupId=f"g{i % 3}",
                         MessageDeduplicationId=str(i))
    found = search(srv, url, group="g1")["messages"]
    assert [m["body"] for m in found] == [f"m{i}" for i in range(1, 30, 3)]
    assert {m["message_group_id"] for m in found} == {"g1"}
    assert search(srv, url, group="g9")["messages"] == []


def test_bad_filters_and_numbers_are_400(srv, big):
    _, url, _ = big
    for params, words in [
        ({"state": "gone"}, "state must be visible, in_flight or delayed"),
        ({"offset": "x"}, "offset must be a whole number"),
        ({"limit": "-1"}, "limit must be a whole number"),
        ({"q": "a", "scan": "lots"}, "scan must be a whole number"),
    ]:
        reply = search(srv, url, status=400, **params)
        assert words in str(reply), reply
