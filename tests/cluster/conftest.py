"""Each cluster test gets a fresh cluster (three JetStream servers, three sqsim nodes): the
tests kill and stall its processes."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from harness import Cluster  # noqa: E402


@pytest.fixture
def cluster(request):
    c = Cluster()
    try:
        c.start()
        yield c
    finally:
        failed = getattr(request.node, "rep_call", None)
        if failed is not None and failed.failed:
            print(c.logs())
        c.stop()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)
