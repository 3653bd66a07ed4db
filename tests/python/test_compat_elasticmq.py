"""ElasticMQ users' configs, unchanged: `sqsim --config elasticmq.conf` reads ElasticMQ's HOCON
file (queues with durations, a dead-letter queue, a FIFO queue, tags, node-address, aws) and
every queue and attribute is checked through boto3; keys sqsim does not honour are named in
warnings; a broken file stops sqsim with the key named."""

import json
import re
from pathlib import Path

import boto3
import pytest

import sqsim_process

# A config as ElasticMQ's README and examples write it, include line and comments included.
ELASTICMQ_CONF = """
include classpath("application.conf")

# Queue URLs as ElasticMQ builds them from node-address.
node-address {
  protocol = http
  host = localhost
  port = 9324
  context-path = ""
}

rest-sqs {
  enabled = true
  bind-port = 9324
  bind-hostname = "0.0.0.0"
  // Possible values: relaxed, strict
  sqs-limits = strict
}

queues {
  orders {
    defaultVisibilityTimeout = 10 seconds
    delay = 5 seconds
    receiveMessageWait = 0 seconds
    deadLettersQueue {
      name = "orders-dead-letters"
      maxReceiveCount = 3 // from 1 to 1000
    }
    fifo = false
    contentBasedDeduplication = false
    tags {
      team = "core"
      cost-centre = 42
    }
  }
  orders-dead-letters { }
  payments {
    fifo = true
    contentBasedDeduplication = true
    defaultVisibilityTimeout = 1 minute
  }
  "audit.fifo" { fifo = true }
  slow { receiveMessageWait = 20 seconds, delay = 900 seconds }
}

aws {
  region = eu-west-1
  accountId = 000000000000
}
"""

UNKNOWN_KEYS_CONF = """
include classpath("application.conf")
rest-stats { enabled = true, bind-port = 9325, bind-hostname = "0.0.0.0" }
messages-storage { enabled = true, uri = "jdbc:h2:/data/elasticmq" }
queues {
  jobs {
    defaultVisibilityTimeout = 30 seconds
    copyTo = "jobs-audit"
    colour = blue
  }
  jobs-audit { }
  broken { deadLettersQueue { name = "missing-dlq", maxReceiveCount = 5 } }
}
flavour = vanilla
"""


def write(tmp_path, text, name="elasticmq.conf"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def attributes(sqs, url):
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]


@pytest.fixture
def elasticmq(tmp_path):
    with sqsim_process.running("--config", write(tmp_path, ELASTICMQ_CONF)) as proc:
        yield proc


def test_every_queue_and_attribute_of_a_realistic_config(elasticmq):
    sqs = elasticmq.client(region="eu-west-1")
    base = "http://localhost:9324/000000000000"
    urls = sqs.list_queues()["QueueUrls"]
    assert sorted(urls) == [
        f"{base}/audit.fifo",
        f"{base}/orders",
        f"{base}/orders-dead-letters",
        f"{base}/payments.fifo",  # fifo = true adds the suffix, as ElasticMQ does
        f"{base}/slow",
    ]

    orders = attributes(sqs, f"{base}/orders")
    assert orders["VisibilityTimeout"] == "10"
    assert orders["DelaySeconds"] == "5"
    assert orders["ReceiveMessageWaitTimeSeconds"] == "0"
    assert orders["QueueArn"] == "arn:aws:sqs:eu-west-1:000000000000:orders"
    assert "FifoQueue" not in orders
    assert json.loads(orders["RedrivePolicy"]) == {
        "deadLetterTargetArn": "arn:aws:sqs:eu-west-1:000000000000:orders-dead-letters",
        "maxReceiveCount": 3,
    }
    assert sqs.list_queue_tags(QueueUrl=f"{base}/orders")["Tags"] == {
        "team": "core",
        "cost-centre": "42",
    }
    assert sqs.list_dead_letter_source_queues(QueueUrl=f"{base}/orders-dead-letters")[
        "queueUrls"
    ] == [f"{base}/orders"]

    dlq = attributes(sqs, f"{base}/orders-dead-letters")
    assert (dlq["VisibilityTimeout"], dlq["DelaySeconds"]) == ("30", "0")
    assert "RedrivePolicy" not in dlq

    payments = attributes(sqs, f"{base}/payments.fifo")
    assert payments["FifoQueue"] == "true"
    assert payments["ContentBasedDeduplication"] == "true"
    assert payments["VisibilityTimeout"] == "60"

    audit = attributes(sqs, f"{base}/audit.fifo")
    assert (audit["FifoQueue"], audit["ContentBasedDeduplication"]) == ("true", "false")

    slow = attributes(sqs, f"{base}/slow")
    assert (slow["ReceiveMessageWaitTimeSeconds"], slow["DelaySeconds"]) == ("20", "900")


def test_the_queues_work_and_the_dead_letter_queue_catches(elasticmq):
    sqs = elasticmq.client(region="eu-west-1")
    base = "http://localhost:9324/000000000000"
    sqs.send_message(QueueUrl=f"{base}/orders", MessageBody="o1", DelaySeconds=0)
    for _ in range(3):
        got = sqs.receive_message(QueueUrl=f"{base}/orders", VisibilityTimeout=0)
        assert [m["Body"] for m in got["Messages"]] == ["o1"]
    # The fourth receive moves it (maxReceiveCount = 3).
    assert "Messages" not in sqs.receive_message(QueueUrl=f"{base}/orders")
    dead = sqs.receive_message(QueueUrl=f"{base}/orders-dead-letters")["Messages"]
    assert [m["Body"] for m in dead] == ["o1"]

    # Content-based deduplication on the FIFO queue: the second send is a duplicate.
    first = sqs.send_message(QueueUrl=f"{base}/payments.fifo", MessageBody="p", MessageGroupId="g")
    again = sqs.send_message(QueueUrl=f"{base}/payments.fifo", MessageBody="p", MessageGroupId="g")
    assert first["MessageId"] == again["MessageId"]


def test_one_namespace_whatever_region_clients_sign_with(elasticmq):
    # ElasticMQ ignores the region a client signs with; so does sqsim with its config.
    for region in ("us-east-1", "ap-southeast-2", "eu-west-1"):
        sqs = elasticmq.client(region=region)
        assert len(sqs.list_queues()["QueueUrls"]) == 5
        url = sqs.get_queue_url(QueueName="orders")["QueueUrl"]
        assert url == "http://localhost:9324/000000000000/orders"


def test_keys_sqsim_does_not_honour_are_named_in_warnings(tmp_path):
    with sqsim_process.running("--config", write(tmp_path, UNKNOWN_KEYS_CONF)) as proc:
        sqs = proc.client()
        names = sorted(u.rsplit("/", 1)[1] for u in sqs.list_queues()["QueueUrls"])
        assert names == ["broken", "jobs", "jobs-audit"]
        assert attributes(sqs, sqs.get_queue_url(QueueName="jobs")["QueueUrl"])[
            "VisibilityTimeout"
        ] == "30"
        assert "RedrivePolicy" not in attributes(
            sqs, sqs.get_queue_url(QueueName="broken")["QueueUrl"]
        )
        log = proc.log()
    warnings = [line for line in log.splitlines() if "WARN" in line]
    for key in (
        "rest-stats",
        "messages-storage",
        "queues.jobs.copyTo",
        "queues.jobs.colour",
        "queues.broken.deadLettersQueue.name",
        "flavour",
    ):
        assert any(key in w for w in warnings), f"{key} not named in: {warnings}"
    assert any("--data-dir" in w for w in warnings), warnings


@pytest.mark.parametrize(
    "text, named",
    [
        ("queues { q { delay = soon } }", "queues.q.delay"),
        ("queues { q { defaultVisibilityTimeout = 13 hours } }", "VisibilityTimeout"),
        ("rest-sqs { sqs-limits = loose }", "rest-sqs.sqs-limits"),
        ("queues { q { deadLettersQueue { name = x } } }", "maxReceiveCount"),
        ("queues { q { ", "not valid HOCON"),
    ],
)
def test_a_broken_config_stops_sqsim_naming_the_key(tmp_path, text, named):
    done = sqsim_process.run_to_exit("--config", write(tmp_path, text))
    assert done.returncode == 2, done
    assert named in done.stderr, done.stderr


def test_a_toml_file_is_still_toml(tmp_path):
    path = write(tmp_path, '[queues.plain]\nattributes = { DelaySeconds = 3 }\n', "sqsim.toml")
    with sqsim_process.running("--config", path) as proc:
        sqs = proc.client()
        url = sqs.get_queue_url(QueueName="plain")["QueueUrl"]
        assert attributes(sqs, url)["DelaySeconds"] == "3"
        # Regions stay separate namespaces outside ElasticMQ configs.
        other = proc.client(region="eu-west-1")
        assert "QueueUrls" not in other.list_queues()


def test_queue_urls_naming_another_region_reach_the_one_namespace(elasticmq):
    # ElasticMQ ignores the host of a queue URL; an AWS-style URL for any region works too.
    sqs = elasticmq.client(region="eu-west-1")
    aws_url = "https://sqs.ap-south-1.amazonaws.com/000000000000/orders-dead-letters"
    sqs.send_message(QueueUrl=aws_url, MessageBody="via an AWS URL")
    got = sqs.receive_message(QueueUrl=aws_url)["Messages"]
    assert [m["Body"] for m in got] == ["via an AWS URL"]


MOUNTED_CONF = "/opt/elasticmq.conf"


@pytest.fixture
def mounted_conf(machine_wide):
    """ElasticMQ's image path, as a compose file mounts it (root: `make test` runs as root);
    whatever was there before is put back."""
    path = Path(MOUNTED_CONF)
    before = path.read_bytes() if path.exists() else None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(ELASTICMQ_CONF)
    try:
        yield path
    finally:
        if before is None:
            path.unlink()
        else:
            path.write_bytes(before)


def banner(proc):
    """The start banner, the line after the listen line."""
    return proc.proc.stdout.readline().decode()


def test_compat_elasticmq_reads_the_mounted_conf_and_serves_a_second_port(mounted_conf):
    # As `docker run -v ./elasticmq.conf:/opt/elasticmq.conf -p 9324:9324 -p 9325:9325`
    # would start it, with --console-port 0 instead of 9325 so the test needs no fixed port.
    with sqsim_process.running("--compat", "elasticmq", "--console-port", "0") as proc:
        console = re.search(r"console (http://127\.0\.0\.1:(\d+))/", banner(proc))
        assert console and int(console.group(2)) != proc.port, "the console is on its own port"
        # The queues of the mounted file, in the one namespace whatever the signing region.
        for region in ("eu-west-1", "us-east-1"):
            urls = proc.client(region=region).list_queues()["QueueUrls"]
            assert {u.rsplit("/", 1)[1] for u in urls} >= {"orders", "payments.fifo"}
        # The second port is the same server: a browser is sent to the console, and the
        # SQS API answers there too.
        second = sqsim_process.Process(proc.proc, console.group(1), proc.log_path)
        # (urllib follows the redirect to /_sqsim/console.)
        status, _, page = second.http("GET", "/", headers={"Accept": "text/html"})
        assert status == 200 and b"<html" in page.lower() and b"sqsim" in page
        url = second.client(region="eu-west-1").get_queue_url(QueueName="orders")["QueueUrl"]
        assert url.endswith("/000000000000/orders")


def test_compat_elasticmq_serves_the_ui_port_9325_by_default(machine_wide):
    with sqsim_process.running("--compat", "elasticmq") as proc:
        assert "console http://127.0.0.1:9325/" in banner(proc)
        second = sqsim_process.Process(proc.proc, "http://127.0.0.1:9325", proc.log_path)
        assert second.admin("GET", "/_sqsim/health")["status"] == "ok"


def test_a_busy_console_port_is_named_with_its_flag():
    with sqsim_process.running() as other:
        out = sqsim_process.run_to_exit("--console-port", str(other.port))
    assert out.returncode != 0
    assert f"cannot listen on 127.0.0.1:{other.port}" in out.stderr
    assert "--console-port" in out.stderr
