"""The worker with a small Python application: started by `sqsim worker`, and started by the
server itself from a `[[workers]]` config section (its counters in /_sqsim/stats)."""

import json
import signal
import threading
import time

import pytest

from sqsim_helpers import AppServer, config_file
from sqsim_process import running, spawn


class App(AppServer):
    """A tiny HTTP app that records what the worker POSTs and answers 200."""

    def __init__(self):
        self.seen = []
        self.lock = threading.Lock()
        super().__init__(self.answer)

    def answer(self, path, headers, body):
        with self.lock:
            self.seen.append((path, headers, body))
        return 200

    def wait_for(self, n, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                if len(self.seen) >= n:
                    return list(self.seen)
            time.sleep(0.02)
        raise AssertionError(f"the app saw {len(self.seen)} requests, wanted {n}")



@pytest.fixture
def app():
    a = App()
    yield a
    a.close()


def test_sqsim_worker_posts_to_a_python_app_and_stops_on_sigterm(app):
    with running() as server:
        sqs = server.client()
        url = sqs.create_queue(QueueName="work")["QueueUrl"]
        sqs.send_message(
            QueueUrl=url,
            MessageBody='{"job": 1}',
            MessageAttributes={"kind": {"DataType": "String", "StringValue": "resize"}},
        )
        # `sqsim worker` takes no --host/--port; its output goes where pytest's does.
        worker = spawn(
            "worker", "--queue-url", url, "--http-url", app.url, "--http-connections", "2",
            env={"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "RUST_LOG": "warn"},
            host=None, port=None, stdout=None, stderr=None,
        )
        try:
            path, headers, body = app.wait_for(1)[0]
            assert body == '{"job": 1}'
            assert headers["x-aws-sqsd-queue"] == "work"
            assert headers["x-aws-sqsd-attr-kind"] == "resize"
            assert headers["user-agent"].startswith("aws-sqsd/")
            deadline = time.time() + 10
            while time.time() < deadline:
                attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
                if attrs["ApproximateNumberOfMessages"] == "0" and attrs["ApproximateNumberOfMessagesNotVisible"] == "0":
                    break
                time.sleep(0.05)
            else:
                raise AssertionError("the message was not deleted after the 200")
        finally:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=30) == 0


def test_a_config_file_worker_runs_inside_the_server(app):
    config = f"""
[queues.orders]

[[workers]]
name = "orders-app"
queues = ["orders"]
http_url = "{app.url}"
http_connections = 4
"""
    with config_file(config) as path, running("--config", path) as server:
        sqs = server.client()
        url = sqs.get_queue_url(QueueName="orders")["QueueUrl"]
        for i in range(3):
            sqs.send_message(QueueUrl=url, MessageBody=f"order {i}")
        seen = app.wait_for(3)
        assert sorted(b for _, _, b in seen) == ["order 0", "order 1", "order 2"]
        deadline = time.time() + 10
        while time.time() < deadline:
            stats = server.admin("GET", "/_sqsim/stats")
            workers = {w["name"]: w for w in stats["workers"]}
            if workers["orders-app"]["delivered"] == 3:
                break
            time.sleep(0.05)
        assert workers["orders-app"]["delivered"] == 3
        assert workers["orders-app"]["failed"] == 0


def test_a_config_file_worker_signs_when_the_server_verifies(app):
    config = f"""
[server]
auth = "verify"

[[credentials]]
access_key = "AKIDWORKER"
secret_key = "worker-secret"

[queues.signed]

[[workers]]
queues = ["signed"]
http_url = "{app.url}"
"""
    with config_file(config) as path, running("--config", path) as server:
        sqs = server.client(key="AKIDWORKER", secret="worker-secret")
        url = sqs.get_queue_url(QueueName="signed")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="signed job")
        assert app.wait_for(1)[0][2] == "signed job"
