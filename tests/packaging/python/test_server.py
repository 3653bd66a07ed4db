# The rest of the packaged Python API, against the packaged binary: `Server` outside pytest,
# the plugin's reset between tests and its ini option, the binary lookup, `python -m sqsim`.
# Run in a fresh venv holding only the wheel, boto3 and pytest (tests/packaging/python/run.sh).
import os
import subprocess
import sys
import sysconfig
import textwrap

import pytest

import sqsim
from sqsim import Server, ServerError


def test_the_wheel_put_the_binary_beside_the_interpreter():
    assert "SQSIM_BINARY_PATH" not in os.environ
    path = sqsim.binary()
    assert os.path.dirname(path) == sysconfig.get_path("scripts")
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("sqsim ")


def test_python_dash_m_runs_the_binary():
    out = subprocess.run([sys.executable, "-m", "sqsim", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("sqsim ")


def test_server_as_a_context_manager_with_flags_and_controls():
    with Server("--account-id", "123456789012") as server:
        assert server.endpoint.startswith("http://127.0.0.1:")
        sqs = server.client()
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        assert "/123456789012/q" in url
        server.freeze()
        sqs.send_message(QueueUrl=url, MessageBody="a", DelaySeconds=5)
        assert [m["state"] for m in server.peek(url)] == ["delayed"]
        server.advance(5)
        assert [m["state"] for m in server.peek("q")] == ["visible"]
        server.unfreeze()
        server.reset()
        assert "QueueUrls" not in sqs.list_queues()
    assert server.endpoint is not None
    with pytest.raises(Exception):
        sqs.list_queues()  # stopped: nothing answers


def test_peek_walks_every_page():
    with Server() as server:
        sqs = server.client()
        url = sqs.create_queue(QueueName="many")["QueueUrl"]
        for i in range(0, 120, 10):
            entries = [{"Id": str(j), "MessageBody": f"m{i + j}"} for j in range(10)]
            sqs.send_message_batch(QueueUrl=url, Entries=entries)
        assert sorted(m["body"] for m in server.peek("many")) == sorted(f"m{i}" for i in range(120))


def test_a_control_error_names_the_call():
    with Server() as server:
        with pytest.raises(ServerError, match="404"):
            server.peek("nothing-here")


def test_a_server_that_cannot_start_says_why():
    with pytest.raises(ServerError, match="did not start"):
        Server("--no-such-flag").start()


def test_the_plugin_resets_between_tests_and_takes_ini_flags(pytester_dir):
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(pytester_dir)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout


@pytest.fixture
def pytester_dir(tmp_path):
    # A project of its own: the ini option gives the session server a flag, and the second
    # test sees none of the first test's queues.
    (tmp_path / "pytest.ini").write_text("[pytest]\nsqsim_args = --account-id 111122223333\n")
    (tmp_path / "test_two.py").write_text(
        textwrap.dedent(
            """
            def test_first(sqs):
                url = sqs.create_queue(QueueName="left-behind")["QueueUrl"]
                assert "/111122223333/" in url

            def test_second(sqs):
                assert "QueueUrls" not in sqs.list_queues()
            """
        )
    )
    return tmp_path
