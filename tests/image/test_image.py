"""The container image (`make image-test`): the image .ci/image.sh assembles from the built
binary, run with podman the way users run it — a port mapping, SQSIM_* variables, a volume,
LocalStack's ready.d mount and entrypoint — and driven with boto3.

Environment: SQSIM_IMAGE (default localhost/sqsim:latest); PODMAN_RUNTIME (default runc:
this sandbox's hybrid cgroups stop crun)."""

import json
import os
import resource
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import boto3
import pytest
from botocore.config import Config

IMAGE = os.environ.get("SQSIM_IMAGE", "localhost/sqsim:latest")
RUNTIME = os.environ.get("PODMAN_RUNTIME", "runc")
WAIT_S = 30


def podman(*args, check=True):
    return subprocess.run(
        ["podman", *args], check=check, capture_output=True, text=True, timeout=120
    )


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ulimits():
    # podman's default open-file limit is above what an unprivileged sandbox may set.
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    n = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    return ["--ulimit", f"nofile={n}:{n}", "--ulimit", "nproc=4096:4096"]


class Container:
    def __init__(self, cid, port):
        self.id = cid
        self.port = port
        self.endpoint = f"http://127.0.0.1:{port}"

    def logs(self):
        got = podman("logs", self.id)
        return got.stdout + got.stderr

    def get(self, path):
        try:
            with urllib.request.urlopen(self.endpoint + path, timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def sqs(self, region="us-east-1"):
        return boto3.client(
            "sqs",
            endpoint_url=self.endpoint,
            region_name=region,
            aws_access_key_id="test",
            aws_secret_access_key="test",
            config=Config(retries={"total_max_attempts": 1}),
        )


def until(what, check, timeout=WAIT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got = check()
        except OSError:
            got = None
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def run():
    """Starts containers of the image; removes them (and named volumes) afterwards."""
    started, volumes = [], []

    def start(container_port=9324, env=None, mounts=(), entrypoint=None, health_path="/_sqsim/health"):
        port = free_port()
        args = ["run", "-d", "--runtime", RUNTIME, *ulimits(), "-p", f"127.0.0.1:{port}:{container_port}"]
        for k, v in (env or {}).items():
            args += ["-e", f"{k}={v}"]
        for m in mounts:
            args += ["-v", m]
            if not m.startswith("/"):
                volumes.append(m.split(":", 1)[0])
        if entrypoint:
            args += ["--entrypoint", entrypoint]
        cid = podman(*args, IMAGE).stdout.strip()
        started.append(cid)
        c = Container(cid, port)
        until(f"{health_path} of {IMAGE}", lambda: c.get(health_path)[0] == 200)
        return c

    yield start
    for cid in started:
        podman("rm", "-f", "-v", "-t", "5", cid, check=False)  # -v: the image's anonymous volume too
    for v in set(volumes):
        podman("volume", "rm", "-f", v, check=False)


def test_configuration_matches_the_dockerfile():
    image = json.loads(podman("image", "inspect", IMAGE).stdout)[0]
    config = image["Config"]
    assert config["User"] == "sqsim"
    assert config["Entrypoint"] == ["/usr/local/bin/sqsim"]
    assert image["Healthcheck"]["Test"] == ["CMD", "/usr/local/bin/sqsim", "health"]
    assert set(config["ExposedPorts"]) == {"9324/tcp", "9325/tcp", "4566/tcp"}
    assert list(config["Volumes"]) == ["/var/lib/sqsim"]


def test_serves_sqs_as_a_non_root_user_and_reports_healthy(run):
    c = run()
    sqs = c.sqs()
    url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    # Queue URLs follow the Host the client used, so they work through the port mapping.
    assert url == f"http://127.0.0.1:{c.port}/000000000000/jobs"
    sqs.send_message(QueueUrl=url, MessageBody="from the host")
    got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert [m["Body"] for m in got] == ["from the host"]
    assert podman("exec", c.id, "id", "-u").stdout.strip() == "10001"
    # The image's HEALTHCHECK (sqsim health, no curl needed).
    assert podman("healthcheck", "run", c.id, check=False).returncode == 0
    assert podman("exec", c.id, "curl", "-fsS", "http://127.0.0.1:9324/_sqsim/health").stdout == '{"status":"ok"}'


def test_localstack_compatibility_with_a_ready_d_mount(run, tmp_path):
    hooks = tmp_path / "ready.d"
    hooks.mkdir()
    hook = hooks / "10-create-queue.sh"
    # No aws CLI in the image: the hook speaks the JSON protocol with curl.
    hook.write_text(
        "#!/bin/sh\nset -e\n"
        'curl -fsS "$AWS_ENDPOINT_URL/" -H "Content-Type: application/x-amz-json-1.0" '
        "-H 'X-Amz-Target: AmazonSQS.CreateQueue' -d '{\"QueueName\":\"from-hook\"}'\n"
    )
    hook.chmod(0o755)
    for d in (tmp_path, hooks):
        d.chmod(0o755)
    c = run(
        container_port=4566,
        env={"SQSIM_COMPAT": "localstack", "SQS_ENDPOINT_STRATEGY": "path"},
        mounts=[f"{hooks}:/etc/localstack/init/ready.d:ro"],
        health_path="/_localstack/health",
    )
    until("Ready.", lambda: "\nReady.\n" in "\n" + c.logs())
    status, body = c.get("/_localstack/health")
    assert (status, json.loads(body)["services"]) == (200, {"sqs": "running"})
    status, body = c.get("/_localstack/init/ready")
    init = json.loads(body)
    assert init["completed"] is True
    assert [(s["name"], s["state"]) for s in init["scripts"]] == [("10-create-queue.sh", "SUCCESSFUL")]
    urls = c.sqs().list_queues()["QueueUrls"]
    assert urls == ["http://localhost.localstack.cloud:4566/queue/us-east-1/000000000000/from-hook"]


def test_localstacks_entrypoint_path_starts_compat_mode(run):
    # Testcontainers' LocalStack module runs /usr/local/bin/docker-entrypoint.sh.
    c = run(container_port=4566, entrypoint="/usr/local/bin/docker-entrypoint.sh",
            health_path="/_localstack/health")
    until("Ready.", lambda: "\nReady.\n" in "\n" + c.logs())
    url = c.sqs().create_queue(QueueName="tc")["QueueUrl"]
    assert url == "http://sqs.us-east-1.localhost.localstack.cloud:4566/000000000000/tc"


def test_durable_mode_on_the_volume_survives_a_new_container(run):
    volume = f"sqsim-test-{uuid.uuid4().hex[:8]}"
    env = {"SQSIM_DATA_DIR": "/var/lib/sqsim/data"}
    first = run(env=env, mounts=[f"{volume}:/var/lib/sqsim"])
    sqs = first.sqs()
    url = sqs.create_queue(QueueName="kept")["QueueUrl"]
    sent = sqs.send_message(QueueUrl=url, MessageBody="survives")["MessageId"]
    podman("stop", "-t", "10", first.id)
    second = run(env=env, mounts=[f"{volume}:/var/lib/sqsim"])
    again = second.sqs()
    url = again.get_queue_url(QueueName="kept")["QueueUrl"]
    got = again.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert [(m["MessageId"], m["Body"]) for m in got] == [(sent, "survives")]
