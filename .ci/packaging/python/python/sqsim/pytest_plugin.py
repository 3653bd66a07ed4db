"""The pytest plugin `pip install sqsim` registers (entry point `pytest11`):

- `sqsim`: one `Server` for the whole session (extra flags from the ini option `sqsim_args`
  or `--sqsim-args`);
- `sqs`: a boto3 SQS client on that server, which is reset before each test that uses it.
"""

import shlex

import pytest

from ._server import Server


def pytest_addoption(parser):
    help_text = "extra flags for the sqsim server the `sqsim` fixture starts, e.g. --realism aws"
    parser.addini("sqsim_args", help_text, default="")
    parser.addoption("--sqsim-args", default=None, help=help_text)


@pytest.fixture(scope="session")
def sqsim(pytestconfig):
    """One sqsim server for the session: `.endpoint`, `.client()`, `.reset()`,
    `.advance(seconds)`, `.freeze()`, `.unfreeze()`, `.peek(queue)`."""
    args = pytestconfig.getoption("--sqsim-args")
    if args is None:
        args = pytestconfig.getini("sqsim_args")
    with Server(*shlex.split(args or "")) as server:
        yield server


@pytest.fixture(scope="session")
def _sqsim_client(sqsim):
    # One boto3 client for the session: making one costs tens of milliseconds.
    return sqsim.client()


@pytest.fixture
def sqs(sqsim, _sqsim_client):
    """A boto3 SQS client on an empty server: every queue is gone when the test starts."""
    sqsim.reset()
    return _sqsim_client
