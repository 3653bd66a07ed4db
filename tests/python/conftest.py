"""Fixtures for the boto3 tests: one sqsim process per session, a boto3 SQS client, the admin
clock, and a fresh queue per test.

Environment:
  SQSIM_BIN               the server binary (default: target/debug/sqsim in the repository)
  SQSIM_EXPECT_PROTOCOL   "json" or "query": the protocol the installed botocore must speak
  SQSIM_TEST_ENDPOINT     a running sqsim to test instead of starting one (make cluster-suites
                          points it at a cluster's gateway node); tests that start servers
                          of their own with flags still do
"""

import fcntl
import os
import re
import uuid

import boto3
import pytest
from botocore.config import Config

import sqsim_process


@pytest.fixture
def machine_wide():
    """Taken by a test that uses something of the machine's own (a fixed port, a file outside
    its temporary directory): suites running side by side (`make test-suites`) take turns
    at it."""
    with open("/tmp/sqsim-tests.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def server():
    """The session's sqsim (started by sqsim_process, the one launcher of the suite)."""
    external = os.environ.get("SQSIM_TEST_ENDPOINT")
    if external:
        yield sqsim_process.Process(None, external.rstrip("/"), os.devnull)
        return
    binary = sqsim_process.binary()
    if not os.access(binary, os.X_OK):
        pytest.exit(f"SQSIM_BIN {binary!r} is not an executable; build sqsim first", 2)
    with sqsim_process.running() as proc:
        yield proc


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
