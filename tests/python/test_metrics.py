"""`GET /metrics` read with Prometheus's own text-format parser, against a private server
whose traffic the test knows exactly; and the request log lines (`--log-format json`)."""

import json
import os
import shutil
import subprocess
import threading
import time

import pytest
from botocore.exceptions import ClientError
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

import sqsim_process
from sqsim_helpers import ACCOUNT, AppServer, config_file


def scrape(srv):
    status, headers, raw = srv.http("GET", "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    samples = {}
    types = {}
    for family in text_string_to_metric_families(raw.decode()):
        types[family.name] = family.type
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples, types


def q(name, region="us-east-1"):
    return (("account", ACCOUNT), ("queue", name), ("region", region))


def test_counters_and_gauges_match_the_traffic():
    with sqsim_process.running() as srv:
        sqs = srv.client()
        dlq = sqs.create_queue(QueueName="m-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        src = sqs.create_queue(
            QueueName="m-src",
            Attributes={
                "RedrivePolicy": json.dumps(
                    {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "1"}
                ),
                "VisibilityTimeout": "0",
            },
        )["QueueUrl"]
        other = sqs.create_queue(QueueName="m-other")["QueueUrl"]
        sqs.send_message_batch(
            QueueUrl=src,
            Entries=[{"Id": str(i), "MessageBody": f"b{i}"} for i in range(5)],
        )
        sqs.send_message(QueueUrl=src, MessageBody="single", DelaySeconds=0)
        got = sqs.receive_message(QueueUrl=src, MaxNumberOfMessages=10)["Messages"]
        assert len(got) == 6
        # Two deleted; the other four were received once (maxReceiveCount 1) and move to
        # the dead-letter queue on the next receive.
        for m in got[:2]:
            sqs.delete_message(QueueUrl=src, ReceiptHandle=m["ReceiptHandle"])
        assert "Messages" not in sqs.receive_message(QueueUrl=src, MaxNumberOfMessages=10)
        for i in range(3):
            sqs.send_message(QueueUrl=other, MessageBody=f"o{i}")
        sqs.send_message(QueueUrl=other, MessageBody="later", DelaySeconds=60)
        sqs.purge_queue(QueueUrl=other)
        with pytest.raises(ClientError):
            sqs.get_queue_url(QueueName="m-missing")
        sqs.send_message(QueueUrl=other, MessageBody="old")
        srv.advance(30)
        samples, types = scrape(srv)

        assert types["sqsim_messages_sent"] == "counter"
        assert types["sqsim_queue_messages_visible"] == "gauge"
        assert types["sqsim_request_duration_seconds"] == "histogram"
        assert samples[("sqsim_messages_sent_total", q("m-src"))] == 6
        assert samples[("sqsim_messages_received_total", q("m-src"))] == 6
        assert samples[("sqsim_messages_deleted_total", q("m-src"))] == 2
        assert samples[("sqsim_messages_dead_lettered_total", q("m-src"))] == 4
        assert samples[("sqsim_queue_messages_visible", q("m-dlq"))] == 4
        assert samples[("sqsim_queue_messages_visible", q("m-src"))] == 0
        assert samples[("sqsim_messages_sent_total", q("m-other"))] == 5
        assert samples[("sqsim_messages_purged_total", q("m-other"))] == 4
        assert samples[("sqsim_queue_messages_visible", q("m-other"))] == 1
        age = samples[("sqsim_queue_oldest_message_age_seconds", q("m-other"))]
        assert 30 <= age < 40
        assert samples[("sqsim_queue_oldest_message_age_seconds", q("m-src"))] == 0
        assert samples[("sqsim_queues", ())] == 3

        def requests(action, status):
            return samples.get(
                ("sqsim_requests_total", (("action", action), ("status", status))), 0
            )

        assert requests("SendMessage", "200") == 6
        assert requests("SendMessageBatch", "200") == 1
        assert requests("DeleteMessage", "200") == 2
        assert requests("ReceiveMessage", "200") == 2
        assert requests("CreateQueue", "200") == 3
        assert requests("GetQueueUrl", "400") == 1
        assert requests("PurgeQueue", "200") == 1
        count = samples[("sqsim_request_duration_seconds_count", (("action", "SendMessage"),))]
        assert count == 6
        inf = samples[
            ("sqsim_request_duration_seconds_bucket", (("action", "SendMessage"), ("le", "+Inf")))
        ]
        assert inf == 6
        assert samples[("sqsim_connections_open", ())] >= 1

        # Retention expiry (the minimum retention is 60 s): the message sent 30 s ago goes.
        sqs.set_queue_attributes(QueueUrl=other, Attributes={"MessageRetentionPeriod": "60"})
        srv.advance(31)
        samples, _ = scrape(srv)
        assert samples[("sqsim_messages_expired_total", q("m-other"))] == 1
        assert samples[("sqsim_queue_messages_visible", q("m-other"))] == 0


# What Prometheus itself sends when it scrapes (its default scrape protocols).
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)


def promtool():
    tool = os.environ.get("PROMTOOL") or shutil.which("promtool")
    assert tool and os.path.exists(tool), "promtool is missing: `make promtool` installs it"
    return tool


def test_each_format_reads_whole_and_typed_by_its_own_parser_and_promtool():
    """A scraper gets the format it asks for, each valid on its own terms: OpenMetrics for
    Prometheus (read here by the strict OpenMetrics parser), the Prometheus text format for
    everyone else (Python's parser, promtool) — with every counter typed as a counter and no
    family split in two, which the OpenMetrics body under the old content type caused."""
    with sqsim_process.running() as srv:
        c = srv.client()
        url = c.create_queue(QueueName="m-formats")["QueueUrl"]
        c.send_message(QueueUrl=url, MessageBody="x")
        c.receive_message(QueueUrl=url)
        # A region is whatever a client's credential scope names: a quote or a backslash in
        # one is escaped in the labels, or every scrape would be unreadable.
        odd = 'eu"we\\st-1'
        status, _, body = srv.http(
            "POST", "/", b'{"QueueName": "m-odd-region"}',
            {
                "Content-Type": "application/x-amz-json-1.0",
                "X-Amz-Target": "AmazonSQS.CreateQueue",
                "Authorization": f"AWS4-HMAC-SHA256 Credential=test/20240101/{odd}/sqs/aws4_request, SignedHeaders=host, Signature=0",
            },
        )
        assert status == 200, body

        status, headers, om = srv.http("GET", "/metrics", headers={"Accept": PROMETHEUS_ACCEPT})
        assert status == 200
        assert headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
        om = om.decode()
        assert om.endswith("# EOF\n")
        om_types = {f.name: f.type for f in openmetrics_families(om)}

        status, headers, text = srv.http("GET", "/metrics")
        assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = text.decode()
        assert "# EOF" not in text
        families = list(text_string_to_metric_families(text))
        types = {f.name: f.type for f in families}

        # The same families in both (the text format has no info type: a gauge there);
        # nothing untyped; counters are counters.
        assert om_types.pop("sqsim_build") == "info"
        om_types["sqsim_build_info"] = "gauge"
        assert len(types) >= 25 and types == om_types, (sorted(types), sorted(om_types))
        assert "unknown" not in types.values() and "untyped" not in types.values()
        for name in ("sqsim_messages_sent", "sqsim_requests", "process_cpu_seconds"):
            assert types[name] == "counter", name
        assert odd in {s.labels.get("region") for f in families for s in f.samples}
        assert odd in {s.labels.get("region") for f in openmetrics_families(om) for s in f.samples}
        samples = {s.name: s for f in families for s in f.samples}
        assert samples["sqsim_build_info"].labels["version"]
        assert samples["process_resident_memory_bytes"].value > 1 << 20
        assert samples["process_open_fds"].value >= 3
        assert time.time() - 3600 < samples["process_start_time_seconds"].value <= time.time()

        checked = subprocess.run(
            [promtool(), "check", "metrics"], input=text.encode(), capture_output=True
        )
        assert checked.returncode == 0, checked.stderr.decode() + checked.stdout.decode()


def test_long_polls_waiting_are_counted():
    with sqsim_process.running() as srv:
        sqs = srv.client()
        url = sqs.create_queue(QueueName="m-wait")["QueueUrl"]

        t = threading.Thread(
            target=lambda: srv.client().receive_message(QueueUrl=url, WaitTimeSeconds=3)
        )
        t.start()
        try:
            deadline = time.monotonic() + 3
            waiting = 0
            while time.monotonic() < deadline and waiting < 1:
                samples, _ = scrape(srv)
                waiting = samples[("sqsim_queue_long_polls_waiting", q("m-wait"))]
                time.sleep(0.05)
            assert waiting == 1
        finally:
            sqs.send_message(QueueUrl=url, MessageBody="wake")
            t.join()
        samples, _ = scrape(srv)
        assert samples[("sqsim_queue_long_polls_waiting", q("m-wait"))] == 0


def test_queues_past_the_label_limit_are_summed():
    with sqsim_process.running("--metrics-queue-limit", "2") as srv:
        sqs = srv.client()
        for name in ["lim-a", "lim-b", "lim-c", "lim-d"]:
            url = sqs.create_queue(QueueName=name)["QueueUrl"]
            sqs.send_message(QueueUrl=url, MessageBody="x")
        samples, _ = scrape(srv)
        labelled = {
            dict(labels)["queue"]
            for (name, labels) in samples
            if name == "sqsim_queue_messages_visible"
        }
        assert labelled == {"lim-a", "lim-b", "_other"}
        other = (("account", ""), ("queue", "_other"), ("region", ""))
        assert samples[("sqsim_queue_messages_visible", other)] == 2
        assert samples[("sqsim_messages_sent_total", other)] == 2
        assert samples[("sqsim_queues", ())] == 4


def test_durable_store_figures(tmp_path):
    with sqsim_process.running("--data-dir", str(tmp_path / "data")) as srv:
        sqs = srv.client()
        url = sqs.create_queue(QueueName="m-durable")["QueueUrl"]
        for i in range(5):
            sqs.send_message(QueueUrl=url, MessageBody=str(i))
        samples, _ = scrape(srv)
        assert samples[("sqsim_store_writable", ())] == 1
        assert samples[("sqsim_store_records_appended_total", ())] >= 6
        assert samples[("sqsim_store_syncs_total", ())] >= 1
        assert samples[("sqsim_store_sync_seconds_total", ())] > 0
        assert samples[("sqsim_store_log_bytes", ())] > 0
        assert samples[("sqsim_store_snapshots_total", ())] >= 1


def test_no_store_figures_in_memory():
    with sqsim_process.running() as srv:
        samples, _ = scrape(srv)
        assert not [k for k in samples if k[0].startswith("sqsim_store_")]


def test_a_query_request_to_the_metrics_path_is_still_sqs():
    with sqsim_process.running() as srv:
        status, _, body = srv.http("GET", "/metrics?Action=ListQueues&Version=2012-11-05")
        assert status == 200
        assert b"<ListQueuesResponse" in body


def test_request_log_lines_in_json(monkeypatch):
    monkeypatch.setenv("RUST_LOG", "sqsim=debug")
    with sqsim_process.running("--log-format", "json") as srv:
        sqs = srv.client()
        url = sqs.create_queue(QueueName="logged")["QueueUrl"]
        sent = sqs.send_message(QueueUrl=url, MessageBody="x")
        request_id = sent["ResponseMetadata"]["RequestId"]
        with pytest.raises(ClientError):
            sqs.send_message(QueueUrl=url.replace("logged", "nope"), MessageBody="x")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and "nope" not in srv.log():
            time.sleep(0.05)
        lines = [json.loads(line) for line in srv.log().splitlines() if line.strip()]
    ok = [line for line in lines if line.get("request_id") == request_id]
    assert len(ok) == 1, lines
    assert ok[0]["level"] == "DEBUG"
    assert ok[0]["action"] == "SendMessage"
    assert ok[0]["queue"] == "logged"
    assert ok[0]["status"] == 200
    assert ok[0]["duration_ms"] >= 0
    created = [line for line in lines if line.get("action") == "CreateQueue"]
    assert created and created[0]["queue"] == "logged"
    failed = [line for line in lines if line.get("queue") == "nope"]
    assert len(failed) == 1, lines
    assert failed[0]["level"] == "WARN"
    assert failed[0]["status"] == 400
    assert failed[0]["code"] == "AWS.SimpleQueueService.NonExistentQueue"


def test_errors_are_logged_at_warn_by_default():
    with sqsim_process.running() as srv:
        sqs = srv.client()
        with pytest.raises(ClientError):
            sqs.get_queue_url(QueueName="absent-queue")
        sqs.list_queues()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and "absent-queue" not in srv.log():
            time.sleep(0.05)
        log = srv.log()
    assert "request failed" in log and "NonExistentQueue" in log and "absent-queue" in log
    assert "ListQueues" not in log


class FlakyApp(AppServer):
    """A worker's application: answers 500 the first time it sees a body starting with
    "flaky", 200 to everything else; counts what it answered."""

    def __init__(self):
        self.lock = threading.Lock()
        self.answers = {200: 0, 500: 0}
        self.failed_once = set()
        super().__init__(self.answer)

    def answer(self, path, headers, body):
        with self.lock:
            fail = body.startswith("flaky") and body not in self.failed_once
            if fail:
                self.failed_once.add(body)
            status = 500 if fail else 200
            self.answers[status] += 1
        return status

    def counts(self):
        with self.lock:
            return dict(self.answers)


def test_worker_counters_match_what_a_config_file_worker_delivered():
    app = FlakyApp()
    # error_visibility_timeout 0: a failed message is made visible again at once (a retry).
    config = f"""
[queues.m-jobs]

[queues.m-idle]

[[workers]]
name = "m-app"
queues = ["m-jobs"]
http_url = "{app.url}"
http_connections = 4
error_visibility_timeout = 0

[[workers]]
name = "m-idle-app"
queues = ["m-idle"]
http_url = "{app.url}"
"""
    try:
        with config_file(config) as path, sqsim_process.running("--config", path) as srv:
            sqs = srv.client()
            url = sqs.get_queue_url(QueueName="m-jobs")["QueueUrl"]
            for i in range(5):
                sqs.send_message(QueueUrl=url, MessageBody=f"job {i}")
            for i in range(2):
                sqs.send_message(QueueUrl=url, MessageBody=f"flaky {i}")

            def worker(name, samples):
                return {
                    figure: samples.get((f"sqsim_worker_{figure}{suffix}", (("worker", name),)))
                    for figure, suffix in (
                        ("delivered", "_total"),
                        ("failed", "_total"),
                        ("retried", "_total"),
                        ("released", "_total"),
                        ("in_flight", ""),
                    )
                }

            deadline = time.monotonic() + 20
            while True:
                samples, types = scrape(srv)
                got = worker("m-app", samples)
                if got["delivered"] == 7 and got["in_flight"] == 0:
                    break
                assert time.monotonic() < deadline, got
                time.sleep(0.05)
            # Seven messages delivered (the two flaky ones on their second try), two
            # deliveries failed and were retried at once; the app agrees.
            assert got == {"delivered": 7, "failed": 2, "retried": 2, "released": 0, "in_flight": 0}
            assert app.counts() == {200: 7, 500: 2}
            assert worker("m-idle-app", samples) == {
                "delivered": 0, "failed": 0, "retried": 0, "released": 0, "in_flight": 0,
            }
            assert types["sqsim_worker_delivered"] == "counter"
            assert types["sqsim_worker_in_flight"] == "gauge"
            # The same figures as /_sqsim/stats shows.
            stats = {w["name"]: w for w in srv.admin("GET", "/_sqsim/stats")["workers"]}
            assert {k: stats["m-app"][k] for k in got} == got
            # And the worker's own SQS traffic is counted like any client's.
            assert samples[("sqsim_messages_deleted_total", q("m-jobs"))] == 7
    finally:
        app.close()


def requests_total(samples, action, status):
    return samples.get(("sqsim_requests_total", (("action", action), ("status", status))), 0)


def test_console_actions_and_dropped_connections_are_counted_and_logged(monkeypatch):
    monkeypatch.setenv("RUST_LOG", "sqsim=debug")
    with sqsim_process.running("--log-format", "json") as srv:
        sqs = srv.client()
        url = sqs.create_queue(QueueName="m-console")["QueueUrl"]
        # Two sends through the console's endpoint, one of them to a missing queue.
        status, _, _ = srv.http(
            "POST", "/_sqsim/console/sqs/SendMessage", {"QueueUrl": url, "MessageBody": "c"}
        )
        assert status == 200
        status, _, _ = srv.http(
            "POST",
            "/_sqsim/console/sqs/SendMessage",
            {"QueueUrl": url.replace("m-console", "m-missing"), "MessageBody": "c"},
        )
        assert status == 400
        # One send whose connection an injected fault drops.
        srv.admin(
            "POST",
            "/_sqsim/faults",
            {"action": "SendMessage", "drop_connection": True, "count": 1},
        )
        with pytest.raises(Exception):
            sqs.send_message(QueueUrl=url, MessageBody="dropped")
        sqs.send_message(QueueUrl=url, MessageBody="through")
        samples, _ = scrape(srv)
        assert requests_total(samples, "SendMessage", "200") == 2
        assert requests_total(samples, "SendMessage", "400") == 1
        assert requests_total(samples, "SendMessage", "dropped") == 1
        count = samples[("sqsim_request_duration_seconds_count", (("action", "SendMessage"),))]
        assert count == 4
        assert samples[("sqsim_messages_sent_total", q("m-console"))] == 2

        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and "connection dropped" not in srv.log():
            time.sleep(0.05)
        lines = [json.loads(line) for line in srv.log().splitlines() if line.strip()]
    sends = [line for line in lines if line.get("action") == "SendMessage"]
    assert [(line["level"], line.get("status")) for line in sends] == [
        ("DEBUG", 200),
        ("WARN", 400),
        ("WARN", None),
        ("DEBUG", 200),
    ], sends
    assert sends[0]["queue"] == "m-console"
    assert sends[1]["queue"] == "m-missing"
    assert sends[1]["code"] == "AWS.SimpleQueueService.NonExistentQueue"
    assert sends[2]["message"] == "connection dropped"
    assert sends[2]["fault"] == "drop_connection"
    assert sends[2]["queue"] == "m-console"
