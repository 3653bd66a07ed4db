"""The compose files of docs/compose, brought up with podman-compose as a user would
(`compose up -d`), with the ports they publish: the in-memory and the durable service of
compose.yaml (the durable one keeps a message across `down` and `up` on its volume), and the
ElasticMQ service of elasticmq.yaml with a mounted elasticmq.conf and the console on 9325.
They publish fixed ports (9324, 9325, 9334) on 127.0.0.1, so this test needs them free."""

import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import boto3
import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "compose"
WAIT_S = 60
# podman-compose from this venv (tests/image/requirements.txt), whatever the PATH holds.
PODMAN_COMPOSE = str(Path(sys.executable).parent / "podman-compose")


def compose(env, workdir, *args, check=True):
    return subprocess.run(
        [PODMAN_COMPOSE, *args], cwd=workdir, env=env, check=check, capture_output=True,
        text=True, timeout=180,
    )


def sqs(port):
    return boto3.client(
        "sqs",
        endpoint_url=f"http://127.0.0.1:{port}",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def healthy(port):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_sqsim/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"nothing healthy on port {port}")


@pytest.fixture
def project(tmp_path, podman_env):
    """A compose project directory holding a copy of one of docs/compose's files; always
    taken down (with its volumes) afterwards."""
    used = []

    def up(name, extra_files=()):
        shutil.copy(DOCS / name, tmp_path / "compose.yaml")
        for f, text in extra_files:
            (tmp_path / f).write_text(text)
        used.append(tmp_path)
        compose(podman_env, tmp_path, "up", "-d")
        return tmp_path

    yield up
    for d in used:
        compose(podman_env, d, "down", "-v", check=False)


def test_compose_in_memory_and_durable(project, podman_env):
    d = project("compose.yaml")
    healthy(9324)
    healthy(9334)
    memory, durable = sqs(9324), sqs(9334)
    for client in (memory, durable):
        url = client.create_queue(QueueName="jobs")["QueueUrl"]
        client.send_message(QueueUrl=url, MessageBody="kept?")
    compose(podman_env, d, "down")  # the named volume stays
    compose(podman_env, d, "up", "-d")
    healthy(9324)
    healthy(9334)
    assert "QueueUrls" not in memory.list_queues()
    url = durable.get_queue_url(QueueName="jobs")["QueueUrl"]
    assert durable.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "kept?"


ELASTICMQ_CONF = """include classpath("application.conf")
queues {
  orders { defaultVisibilityTimeout = 10 seconds }
}
"""


def test_compose_for_elasticmq_users(project):
    project("elasticmq.yaml", [("elasticmq.conf", ELASTICMQ_CONF)])
    healthy(9324)
    healthy(9325)
    url = sqs(9324).get_queue_url(QueueName="orders")["QueueUrl"]
    attrs = sqs(9324).get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])
    assert attrs["Attributes"]["VisibilityTimeout"] == "10"
    req = urllib.request.Request("http://127.0.0.1:9325/", headers={"Accept": "text/html"})
    with urllib.request.urlopen(req, timeout=5) as page:
        assert b"sqsim" in page.read()
