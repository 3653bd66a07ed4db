"""Fixtures for the boto3 tests: one sqsim process per session, a boto3 SQS client, the admin
clock, and a fresh queue per test.

Environment:
  SQSIM_BIN               the server binary (default: target/debug/sqsim in the repository)
  SQSIM_EXPECT_PROTOCOL   "json" or "query": the protocol the installed botocore must speak
"""

import json
import os
import re
import subprocess
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

REPO = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 20
LISTEN_LINE = re.compile(r"sqsim listening on (http://[^\s]+):(\d+)")


class Server:
    """A running sqsim process."""

    def __init__(self, proc, endpoint, log_path):
        self.proc = proc
        self.endpoint = endpoint
        self.log_path = log_path

    def admin(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.endpoint + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200, resp.status
            return json.loads(resp.read())


def _read_listen_line(proc):
    """Reads stdout lines until the listen line; gives up after STARTUP_TIMEOUT_S."""
    found = {}

    def reader():
        for raw in proc.stdout:
            m = LISTEN_LINE.search(raw.decode("utf-8", "replace"))
            if m:
                found["endpoint"] = f"{m.group(1)}:{m.group(2)}"
                return

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    t.join(STARTUP_TIMEOUT_S)
    return found.get("endpoint")


def _wait_healthy(endpoint, proc):
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    last = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sqsim exited with {proc.returncode} during startup")
        try:
            with urllib.request.urlopen(endpoint + "/_sqsim/health", timeout=2) as resp:
                if resp.status == 200 and json.loads(resp.read()).get("status") == "ok":
                    return
        except OSError as e:  # not accepting yet
            last = e
        time.sleep(0.05)
    raise RuntimeError(f"sqsim did not become healthy: {last}")


@pytest.fixture(scope="session")
def server():
    binary = os.environ.get("SQSIM_BIN") or str(REPO / "target" / "debug" / "sqsim")
    if not os.access(binary, os.X_OK):
        pytest.exit(f"SQSIM_BIN {binary!r} is not an executable; build sqsim first", 2)
    log = tempfile.NamedTemporaryFile(prefix="sqsim-", suffix=".log", delete=False)
    proc = subprocess.Popen(
        [binary, "--host", "127.0.0.1", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=log,
        stdin=subprocess.DEVNULL,
    )
    try:
        endpoint = _read_listen_line(proc)
        if endpoint is None:
            raise RuntimeError(f"sqsim printed no listen line (log: {log.name})")
        _wait_healthy(endpoint, proc)
        yield Server(proc, endpoint, log.name)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()
        log.close()
    # A clean shutdown on SIGTERM is part of the contract.
    assert proc.returncode == 0, f"sqsim exited with {proc.returncode} (log: {log.name})"


@pytest.fixture(scope="session")
def endpoint(server):
    return server.endpoint


@pytest.fixture(scope="session")
def make_client(endpoint):
    """Builds SQS clients against the test server; keyword arguments go to botocore Config."""

    def make(**config):
        config.setdefault("retries", {"max_attempts": 1, "mode": "standard"})
        config.setdefault("read_timeout", 60)
        return boto3.client(
            "sqs",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
            config=Config(**config),
        )

    return make


@pytest.fixture(scope="session")
def sqs(make_client):
    return make_client()


class Clock:
    """The server's virtual clock (POST /_sqsim/clock)."""

    def __init__(self, server):
        self._server = server

    def state(self):
        return self._server.admin("GET", "/_sqsim/clock")

    def now_ms(self):
        return self.state()["now_ms"]

    def advance(self, seconds):
        return self._server.admin("POST", "/_sqsim/clock", {"advance_seconds": seconds})

    def freeze(self):
        return self._server.admin("POST", "/_sqsim/clock", {"freeze": True})

    def unfreeze(self):
        return self._server.admin("POST", "/_sqsim/clock", {"freeze": False})


@pytest.fixture(scope="session")
def _clock(server):
    return Clock(server)


@pytest.fixture
def clock(_clock):
    """The server clock; always unfrozen again after the test."""
    try:
        yield _clock
    finally:
        _clock.unfreeze()


@pytest.fixture
def advance(clock):
    """advance(seconds): moves the server clock forward."""
    return clock.advance


def unique_name(request, prefix="t"):
    base = re.sub(r"[^A-Za-z0-9_-]", "-", request.node.name)[:40]
    return f"{prefix}-{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def queue_factory(sqs, request):
    """create(name=None, **CreateQueue kwargs) -> QueueUrl; queues are deleted afterwards."""
    created = []

    def create(name=None, **kwargs):
        name = name or unique_name(request)
        url = sqs.create_queue(QueueName=name, **kwargs)["QueueUrl"]
        created.append(url)
        return url

    yield create
    for url in created:
        try:
            sqs.delete_queue(QueueUrl=url)
        except sqs.exceptions.QueueDoesNotExist:
            pass


@pytest.fixture
def queue(queue_factory):
    """The URL of a new, uniquely named standard queue."""
    return queue_factory()
