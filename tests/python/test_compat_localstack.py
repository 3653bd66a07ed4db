"""`sqsim --compat localstack`: a LocalStack-style client setup, run unchanged.

boto3 and the aws CLI on `http://localhost.localstack.cloud:<port>` URLs (resolved to loopback
here, as LocalStack's public DNS record does: in-process by patching socket.getaddrinfo, in
the CLI's process by localstack_dns/sitecustomize.py), the queue URLs of every
SQS_ENDPOINT_STRATEGY and LOCALSTACK_HOST, /_localstack/health, /info and /init, ready.d-style
init hooks that create queues (and the `Ready.` line Testcontainers waits for), the developer
peek endpoint /_aws/sqs/messages, and the error for other AWS services.
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

import sqsim_process
from sqsim_helpers import ACCOUNT, counts, expect_error, receive, receive_one

LS_DOMAIN = "localhost.localstack.cloud"
DNS_DIR = Path(__file__).resolve().parent / "localstack_dns"
SQS_NS = "{http://queue.amazonaws.com/doc/2012-11-05/}"
BACKDOOR = "SQS/BACKDOOR/ACCESS"
WAIT_S = 30


def _is_localstack_name(host):
    name = host.decode() if isinstance(host, bytes) else host
    if not isinstance(name, str):
        return False
    name = name.rstrip(".").lower()
    return name == LS_DOMAIN or name.endswith("." + LS_DOMAIN)


@pytest.fixture
def ls_dns(monkeypatch):
    """*.localhost.localstack.cloud resolves to 127.0.0.1 in this process for the test."""
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        return real("127.0.0.1" if _is_localstack_name(host) else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def client(endpoint, region="us-east-1", service="sqs"):
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"total_max_attempts": 1}, read_timeout=30),
    )


def ls_endpoint(proc):
    return f"http://{LS_DOMAIN}:{proc.port}"


def new_name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def aws_cli():
    """The aws CLI of this venv (both requirements files install it)."""
    path = Path(sys.executable).parent / "aws"
    assert path.is_file(), f"no aws CLI at {path}: rebuild the venv"
    return path


def aws_env():
    """An environment for the aws CLI: dummy credentials, no profile, DNS shim on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_ACCESS_KEY_ID="test",
        AWS_SECRET_ACCESS_KEY="test",
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
        PYTHONPATH=os.pathsep.join(filter(None, [str(DNS_DIR), env.get("PYTHONPATH")])),
        SQSIM_TEST_LOCALSTACK_DNS="1",
    )
    return env


def until(what, check, timeout=WAIT_S):
    """Polls check() until it returns something truthy; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def stdout_lines_until(proc, wanted, on_match=None):
    """Starts reading the server's stdout (after the listen line) until the line `wanted`;
    returns (thread, result). on_match() runs as soon as the line arrives."""
    result = {"lines": []}

    def reader():
        for raw in proc.proc.stdout:
            result["lines"].append(raw)
            if raw.rstrip(b"\n").decode("utf-8", "replace") == wanted:
                if on_match:
                    result["at_match"] = on_match()
                return

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    return thread, result


def get_json(proc, path):
    status, headers, raw = proc.http("GET", path)
    assert status == 200, (path, status, raw)
    assert headers["Content-Type"].startswith("application/json"), headers["Content-Type"]
    return json.loads(raw)


@pytest.fixture(scope="module")
def ls():
    """A `--compat localstack` server with LocalStack's defaults."""
    with sqsim_process.running("--compat", "localstack") as proc:
        yield proc


# --- queue URLs: SQS_ENDPOINT_STRATEGY and LOCALSTACK_HOST -----------------------------


def expected_url(strategy, region, port, name):
    if strategy == "standard":
        return f"http://sqs.{region}.{LS_DOMAIN}:{port}/{ACCOUNT}/{name}"
    if strategy == "domain":
        prefix = "" if region == "us-east-1" else region + "."
        return f"http://{prefix}queue.{LS_DOMAIN}:{port}/{ACCOUNT}/{name}"
    if strategy in ("path", "dynamic"):  # dynamic: Host localhost.localstack.cloud -> path
        return f"http://{LS_DOMAIN}:{port}/queue/{region}/{ACCOUNT}/{name}"
    assert strategy == "off"
    return f"http://{LS_DOMAIN}:{port}/{ACCOUNT}/{name}"


@pytest.fixture(scope="module", params=["standard", "domain", "path", "off", "dynamic"])
def strategy_server(request):
    env = {"SQS_ENDPOINT_STRATEGY": request.param}
    with sqsim_process.running("--compat", "localstack", env=env) as proc:
        yield request.param, proc


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1"])
def test_queue_urls_per_endpoint_strategy(strategy_server, region, ls_dns):
    strategy, proc = strategy_server
    sqs = client(ls_endpoint(proc), region)
    name = new_name("strategy")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    assert url == expected_url(strategy, region, proc.port, name)
    assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == url
    assert sqs.list_queues(QueueNamePrefix=name)["QueueUrls"] == [url]

    sqs.send_message(QueueUrl=url, MessageBody="via-endpoint")
    # Older SDKs (and some apps) send to the queue URL itself: its host must route too.
    client(url, region).send_message(QueueUrl=url, MessageBody="via-queue-url")
    got = receive(sqs, url, MaxNumberOfMessages=10, VisibilityTimeout=30)
    assert {m["Body"] for m in got} == {"via-endpoint", "via-queue-url"}
    for m in got:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    assert counts(sqs, url) == (0, 0, 0)
    sqs.delete_queue(QueueUrl=url)
    expect_error(sqs.get_queue_url, "AWS.SimpleQueueService.NonExistentQueue", QueueName=name)


# The URL forms of every strategy, whatever the server's own strategy: (URL template, the
# region it names; None: the request's signing region decides, as LocalStack does).
URL_FORMS = [
    pytest.param("http://sqs.eu-west-1.{d}:{p}/{a}/{n}", "eu-west-1", id="standard"),
    pytest.param("http://sqs.us-east-1.{d}:{p}/{a}/{n}", "us-east-1", id="standard-us-east-1"),
    pytest.param("http://eu-west-1.queue.{d}:{p}/{a}/{n}", "eu-west-1", id="domain"),
    pytest.param("http://queue.{d}:{p}/{a}/{n}", "us-east-1", id="domain-us-east-1"),
    pytest.param("http://{d}:{p}/queue/eu-west-1/{a}/{n}", "eu-west-1", id="path"),
    pytest.param("http://{d}:{p}/queue/us-east-1/{a}/{n}", "us-east-1", id="path-us-east-1"),
    pytest.param("http://{d}:{p}/{a}/{n}", None, id="off"),
]


@pytest.mark.parametrize("template, region", URL_FORMS)
def test_url_forms_route_to_the_region_they_name(ls, template, region):
    name = new_name("route")
    url = template.format(d=LS_DOMAIN, p=ls.port, a=ACCOUNT, n=name)
    queues = {}
    for r in ("us-east-1", "eu-west-1", "ap-southeast-2"):
        sqs = client(ls.endpoint, r)
        queues[r] = (sqs, sqs.create_queue(QueueName=name)["QueueUrl"])
    # Signed for ap-southeast-2: only a URL without a region lands there.
    client(ls.endpoint, "ap-southeast-2").send_message(QueueUrl=url, MessageBody=url)
    landed = {r: len(receive(sqs, u)) for r, (sqs, u) in queues.items()}
    assert landed == {r: int(r == (region or "ap-southeast-2")) for r in queues}
    for sqs, u in queues.values():
        sqs.delete_queue(QueueUrl=u)


def test_dynamic_strategy_follows_the_request_host(ls_dns):
    with sqsim_process.running(
        "--compat", "localstack", env={"SQS_ENDPOINT_STRATEGY": "dynamic"}
    ) as proc:
        port = proc.port
        name = new_name("dynamic")
        standard = client(f"http://sqs.eu-west-1.{LS_DOMAIN}:{port}", "eu-west-1")
        url = standard.create_queue(QueueName=name)["QueueUrl"]
        assert url == f"http://sqs.eu-west-1.{LS_DOMAIN}:{port}/{ACCOUNT}/{name}"
        domain = client(f"http://queue.{LS_DOMAIN}:{port}", "eu-west-1")
        assert domain.get_queue_url(QueueName=name)["QueueUrl"] == (
            f"http://eu-west-1.queue.{LS_DOMAIN}:{port}/{ACCOUNT}/{name}"
        )
        plain = client(proc.endpoint, "eu-west-1")
        plain_url = plain.get_queue_url(QueueName=name)["QueueUrl"]
        assert plain_url == f"{proc.endpoint}/queue/eu-west-1/{ACCOUNT}/{name}"
        plain.send_message(QueueUrl=plain_url, MessageBody="one queue, three URLs")
        assert receive_one(domain, url)["Body"] == "one queue, three URLs"


@pytest.mark.parametrize(
    "strategy, localstack_host, template",
    [
        # With a port, LOCALSTACK_HOST is used as is; without, the listening port is added.
        ("path", "ls.internal:4510", "http://ls.internal:4510/queue/{r}/{a}/{n}"),
        ("standard", "ls.internal", "http://sqs.{r}.ls.internal:{p}/{a}/{n}"),
    ],
)
def test_localstack_host_replaces_the_url_host(strategy, localstack_host, template):
    env = {"SQS_ENDPOINT_STRATEGY": strategy, "LOCALSTACK_HOST": localstack_host}
    with sqsim_process.running("--compat", "localstack", env=env) as proc:
        sqs = client(proc.endpoint, "eu-west-1")
        name = new_name("lshost")
        url = sqs.create_queue(QueueName=name)["QueueUrl"]
        assert url == template.format(r="eu-west-1", a=ACCOUNT, n=name, p=proc.port)
        # The advertised URL names the queue even though its host is elsewhere.
        sqs.send_message(QueueUrl=url, MessageBody="advertised")
        assert receive_one(sqs, url)["Body"] == "advertised"


# --- the aws CLI -----------------------------------------------------------------------


def test_aws_cli_on_localstack_cloud_urls(ls):
    endpoint = ls_endpoint(ls)

    def aws(*args):
        done = subprocess.run(
            [str(aws_cli()), "--endpoint-url", endpoint, "--region", "eu-west-1",
             "--output", "json", "sqs", *args],
            env=aws_env(), capture_output=True, text=True, timeout=60,
        )
        assert done.returncode == 0, f"aws sqs {args}: {done.stderr}"
        return json.loads(done.stdout) if done.stdout.strip() else None

    name = new_name("cli")
    url = aws("create-queue", "--queue-name", name)["QueueUrl"]
    assert url == f"http://sqs.eu-west-1.{LS_DOMAIN}:{ls.port}/{ACCOUNT}/{name}"
    sent = aws("send-message", "--queue-url", url, "--message-body", "from the aws CLI")
    got = aws("receive-message", "--queue-url", url, "--attribute-names", "All")["Messages"]
    assert [(m["MessageId"], m["Body"]) for m in got] == [(sent["MessageId"], "from the aws CLI")]
    assert got[0]["Attributes"]["ApproximateReceiveCount"] == "1"
    aws("delete-message", "--queue-url", url, "--receipt-handle", got[0]["ReceiptHandle"])
    attrs = aws("get-queue-attributes", "--queue-url", url, "--attribute-names", "All")
    assert attrs["Attributes"]["QueueArn"] == f"arn:aws:sqs:eu-west-1:{ACCOUNT}:{name}"
    assert attrs["Attributes"]["ApproximateNumberOfMessages"] == "0"
    aws("delete-queue", "--queue-url", url)
    assert aws("list-queues", "--queue-name-prefix", name) in (None, {}, {"QueueUrls": []})


# --- /_localstack endpoints ------------------------------------------------------------


def test_health_info_and_unknown_paths(ls):
    status, headers, raw = ls.http("GET", "/_localstack/health")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    body = raw.decode()
    version = json.loads(body)["version"]
    assert version
    # Python json.dumps spacing: scripts grep for '"sqs": "running"'.
    assert body == (
        '{"edition": "community", "services": {"sqs": "running"}, "version": "%s"}' % version
    )
    status, headers, _ = ls.http("HEAD", "/_localstack/health")
    assert status == 200 and headers["Content-Length"] == "2"  # "ok"

    info = get_json(ls, "/_localstack/info")
    assert {
        "version", "edition", "is_license_activated", "session_id", "machine_id", "system",
        "is_docker", "server_time_utc", "uptime",
    } <= set(info)
    assert info["edition"] == "community" and info["version"] == version
    assert isinstance(info["uptime"], int)

    status, _, raw = ls.http("GET", "/_localstack/no-such-thing")
    assert (status, json.loads(raw)) == (404, {"message": "Not Found"})
    status, _, raw = ls.http("GET", "/_localstack/init/nope")
    assert (status, raw) == (404, b"no such stage nope")


def test_init_endpoints_without_hooks(ls):
    init = get_json(ls, "/_localstack/init")
    assert init["scripts"] == []
    assert {k: init["completed"][k] for k in ("BOOT", "START", "SHUTDOWN")} == {
        "BOOT": True, "START": True, "SHUTDOWN": False,
    }
    for stage in ("boot", "START"):  # stage names are case-insensitive
        assert get_json(ls, f"/_localstack/init/{stage}") == {"completed": True, "scripts": []}
    assert get_json(ls, "/_localstack/init/shutdown") == {"completed": False, "scripts": []}


def started_until_ready(on_ready=None):
    """A fresh `--compat localstack` server, once its `Ready.` line is out: (stdout lines after
    the listen line, what on_ready(proc) returned when `Ready.` arrived)."""
    with sqsim_process.running("--compat", "localstack") as proc:
        thread, seen = stdout_lines_until(proc, "Ready.", on_ready and (lambda: on_ready(proc)))
        thread.join(WAIT_S)
        return seen["lines"], seen.get("at_match")


def test_ready_line_without_hooks():
    lines, _ = started_until_ready()
    # What Testcontainers waits for: `.*Ready\.\n`; before it only sqsim's start banner.
    assert lines[-1] == b"Ready.\n" and len(lines) == 2, lines
    assert lines[0].startswith(b"sqsim ") and b"console" in lines[0], lines


def test_ready_stage_completes_without_hooks():
    # LocalStack marks READY completed once the (empty) ready.d stage has run, before
    # `Ready.`; scripts wait with `curl .../_localstack/init/ready | grep '"completed": true'`.
    _, init = started_until_ready(lambda proc: get_json(proc, "/_localstack/init"))
    assert init["completed"]["READY"] is True


def test_without_compat_localstack_paths_are_not_served(server):
    for path in (
        "/_localstack/health",
        "/_localstack/init",
        f"/_aws/sqs/messages/us-east-1/{ACCOUNT}/q",
    ):
        status, _, raw = server.http("GET", path)
        assert status == 404 and b"community" not in raw, (path, status, raw)


# --- init hooks ------------------------------------------------------------------------

HOOKS = {
    # name: (text, executable)
    "01-awslocal.sh": (
        "#!/bin/sh\nset -e\n"
        'echo "hook-env endpoint=$AWS_ENDPOINT_URL region=$AWS_DEFAULT_REGION/$AWS_REGION'
        ' key=$AWS_ACCESS_KEY_ID"\n'
        "awslocal sqs create-queue --queue-name init-orders --output text\n",
        True,
    ),
    # Not executable: a *.sh is run with sh.
    "02-fifo.sh": (
        'aws --endpoint-url "$AWS_ENDPOINT_URL" sqs create-queue --queue-name init-events.fifo'
        " --attributes FifoQueue=true,ContentBasedDeduplication=true --output text\n",
        False,
    ),
    "03-fail.sh": ("#!/bin/sh\necho 'failing on purpose' >&2\nexit 7\n", True),
    "04-after-failure": ("#!/bin/sh\necho 'still run after a failure'\n", True),
    "README.txt": ("neither executable nor *.sh: skipped\n", False),
}


def test_init_hooks_create_queues_then_ready(tmp_path, ls_dns):
    for name, (text, executable) in HOOKS.items():
        path = tmp_path / name
        path.write_text(text)
        path.chmod(0o755 if executable else 0o644)
    aws_dir = str(aws_cli().parent)
    # `aws` on PATH, and no real awslocal, so that the hooks get sqsim's awslocal shim.
    search_path = [aws_dir] + [
        d for d in os.environ.get("PATH", "").split(os.pathsep)
        if not (Path(d) / "awslocal").exists()
    ]
    env = {k: None for k in os.environ if k.startswith("AWS_")}
    env.update(
        PATH=os.pathsep.join(search_path),
        RUST_LOG="info",
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
    )
    flags = ("--compat", "localstack", "--init-dir", str(tmp_path), "--region", "eu-west-1",
             "--log-format", "json")
    with sqsim_process.running(*flags, env=env) as proc:
        ready_path = "/_localstack/init/ready"
        thread, seen = stdout_lines_until(proc, "Ready.", lambda: get_json(proc, ready_path))
        final = until(
            "the init hooks", lambda: (r := get_json(proc, ready_path))["completed"] and r
        )
        thread.join(WAIT_S)
        # `Ready.` (what Testcontainers waits for) comes once every hook has run.
        # Only sqsim's start banner comes before it.
        assert [l for l in seen["lines"] if not l.startswith(b"sqsim ")] == [b"Ready.\n"]
        assert seen["at_match"]["completed"] is True

        states = [(s["name"], s["stage"], s["state"]) for s in final["scripts"]]
        assert states == [
            ("01-awslocal.sh", "READY", "SUCCESSFUL"),
            ("02-fifo.sh", "READY", "SUCCESSFUL"),
            ("03-fail.sh", "READY", "ERROR"),
            ("04-after-failure", "READY", "SUCCESSFUL"),
        ]
        assert get_json(proc, "/_localstack/init")["completed"] == {
            "BOOT": True, "READY": True, "SHUTDOWN": False, "START": True,
        }

        sqs = client(ls_endpoint(proc), "eu-west-1")
        base = f"http://sqs.eu-west-1.{LS_DOMAIN}:{proc.port}/{ACCOUNT}"
        assert sorted(sqs.list_queues(QueueNamePrefix="init-")["QueueUrls"]) == [
            f"{base}/init-events.fifo", f"{base}/init-orders",
        ]
        fifo = sqs.get_queue_attributes(
            QueueUrl=f"{base}/init-events.fifo", AttributeNames=["All"]
        )["Attributes"]
        assert (fifo["FifoQueue"], fifo["ContentBasedDeduplication"]) == ("true", "true")

        events = [json.loads(line) for line in proc.log().splitlines() if line.startswith("{")]
        by_script = {}
        for e in events:
            if "script" in e:
                by_script.setdefault(e["script"], []).append((e["level"], e["message"]))
        assert ("INFO", f"hook-env endpoint=http://127.0.0.1:{proc.port} region=eu-west-1/eu-west-1"
                " key=test") in by_script["01-awslocal.sh"]
        assert ("INFO", f"{base}/init-orders") in by_script["01-awslocal.sh"]
        assert ("INFO", f"{base}/init-events.fifo") in by_script["02-fifo.sh"]
        assert ("WARN", "failing on purpose") in by_script["03-fail.sh"]
        failed = [e for e in events if e["message"] == "init hook failed"]
        assert [(e["level"], e["script"], e["status"]) for e in failed] == [
            ("ERROR", "03-fail.sh", "exit status: 7")
        ]
        assert ("INFO", "still run after a failure") in by_script["04-after-failure"]
        skipped = [e for e in events if e["message"].startswith("init hook skipped")]
        assert [Path(e["script"]).name for e in skipped] == ["README.txt"]


# --- the developer endpoint /_aws/sqs/messages -----------------------------------------


def peek(proc, url=None, path=None, accept=None, method="GET", **flags):
    """Lists a queue's messages; returns (status, content type, raw body)."""
    params = {"QueueUrl": url} if url else {}
    params.update(flags)
    target = path or "/_aws/sqs/messages"
    headers = {"Accept": accept} if accept else {}
    body = None
    if method == "POST":
        body = urllib.parse.urlencode(params).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    elif params:
        target += "?" + urllib.parse.urlencode(params)
    status, h, raw = proc.http(method, target, body=body, headers=headers)
    return status, h.get("Content-Type", ""), raw


def text(node, path):
    """The text at `path` (slash-separated names) under an SQS XML node."""
    return node.find("/".join(SQS_NS + p for p in path.split("/"))).text


def peek_xml(proc, url=None, **kw):
    """The messages of the XML reply, as boto3-shaped dicts."""
    status, ctype, raw = peek(proc, url, **kw)
    assert status == 200 and "xml" in ctype, (status, ctype, raw)
    root = ET.fromstring(raw)
    assert root.tag == SQS_NS + "ReceiveMessageResponse"
    assert root.find(f"{SQS_NS}ResponseMetadata/{SQS_NS}RequestId").text
    out = []
    for m in root.iter(SQS_NS + "Message"):
        attrs = {text(a, "Name"): text(a, "Value") for a in m.findall(SQS_NS + "Attribute")}
        mattrs = {
            text(a, "Name"): text(a, "Value/StringValue")
            for a in m.findall(SQS_NS + "MessageAttribute")
        }
        fields = {f: text(m, f) for f in ("MessageId", "Body", "ReceiptHandle", "MD5OfBody")}
        out.append({**fields, "Attributes": attrs, "MessageAttributes": mattrs})
    return out


def peek_bodies(proc, url, **flags):
    return [(m["Body"], m["Attributes"]) for m in peek_xml(proc, url, **flags)]


def test_peek_xml_and_json_shapes(ls):
    sqs = client(ls.endpoint)
    name = new_name("peek")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]

    empty = json.loads(peek(ls, url, accept="application/json")[2])
    assert empty["ReceiveMessageResponse"]["ReceiveMessageResult"] is None
    assert empty["ReceiveMessageResponse"]["ResponseMetadata"]["RequestId"]

    first = sqs.send_message(
        QueueUrl=url, MessageBody="one",
        MessageAttributes={"kind": {"DataType": "String", "StringValue": "order"}},
    )
    [msg] = peek_xml(ls, url)
    assert msg["MessageId"] == first["MessageId"] and msg["Body"] == "one"
    assert msg["ReceiptHandle"] == BACKDOOR and msg["MD5OfBody"] == first["MD5OfMessageBody"]
    assert msg["MessageAttributes"] == {"kind": "order"}
    assert {"SenderId", "SentTimestamp", "ApproximateReceiveCount",
            "ApproximateFirstReceiveTimestamp"} <= set(msg["Attributes"])
    assert msg["Attributes"]["ApproximateReceiveCount"] == "0"
    assert "IsVisible" not in msg["Attributes"] and "IsDelayed" not in msg["Attributes"]

    # xmltodict's shape: one message is an object, several are a list.
    status, ctype, raw = peek(ls, url, accept="application/json")
    assert status == 200 and ctype.startswith("application/json")
    one = json.loads(raw)["ReceiveMessageResponse"]["ReceiveMessageResult"]["Message"]
    assert isinstance(one, dict)
    assert (one["Body"], one["ReceiptHandle"]) == ("one", BACKDOOR)
    assert {"Name": "ApproximateReceiveCount", "Value": "0"} in one["Attribute"]
    sqs.send_message(QueueUrl=url, MessageBody="two")
    path = f"/_aws/sqs/messages/us-east-1/{ACCOUNT}/{name}"
    both = json.loads(peek(ls, path=path, accept="application/json")[2])
    listed = both["ReceiveMessageResponse"]["ReceiveMessageResult"]["Message"]
    assert [m["Body"] for m in listed] == ["one", "two"]
    # Both URL forms, GET or POST, XML by default.
    assert [m["Body"] for m in peek_xml(ls, path=path)] == ["one", "two"]
    assert [m["Body"] for m in peek_xml(ls, url, method="POST")] == ["one", "two"]


def test_peek_flags_and_no_side_effects(ls):
    sqs = client(ls.endpoint)
    url = sqs.create_queue(QueueName=new_name("flags"))["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="in-flight")
    assert receive_one(sqs, url, VisibilityTimeout=60)["Body"] == "in-flight"
    sqs.send_message(QueueUrl=url, MessageBody="delayed", DelaySeconds=60)
    sqs.send_message(QueueUrl=url, MessageBody="visible")
    assert counts(sqs, url) == (1, 1, 1)

    def shown(**flags):
        return [(body, a.get("IsVisible"), a.get("IsDelayed"), a["ApproximateReceiveCount"])
                for body, a in peek_bodies(ls, url, **flags)]

    for _ in range(2):  # listing twice changes nothing
        assert shown() == [("visible", None, None, "0")]
        assert shown(ShowInvisible="true") == [
            ("in-flight", "false", None, "1"), ("visible", "true", None, "0"),
        ]
        assert shown(ShowDelayed="1") == [
            ("visible", None, "false", "0"), ("delayed", None, "true", "0"),
        ]
        assert shown(ShowInvisible="1", ShowDelayed="true") == [
            ("in-flight", "false", "false", "1"),
            ("visible", "true", "false", "0"),
            # LocalStack's IsVisible: false only while received (so true when delayed).
            ("delayed", "true", "true", "0"),
        ]
    assert counts(sqs, url) == (1, 1, 1)
    got = receive_one(sqs, url, AttributeNames=["ApproximateReceiveCount"])
    assert (got["Body"], got["Attributes"]["ApproximateReceiveCount"]) == ("visible", "1")


def test_peek_fifo_shows_group_and_dedup(ls):
    sqs = client(ls.endpoint)
    url = sqs.create_queue(
        QueueName=new_name("peek") + ".fifo", Attributes={"FifoQueue": "true"}
    )["QueueUrl"]
    sent = [sqs.send_message(QueueUrl=url, MessageBody=f"m{i}", MessageGroupId="g1",
                             MessageDeduplicationId=f"d{i}") for i in range(2)]
    listed = peek_xml(ls, url)
    assert [(m["Body"], m["Attributes"]["MessageGroupId"],
             m["Attributes"]["MessageDeduplicationId"], m["Attributes"]["SequenceNumber"])
            for m in listed] == [
        ("m0", "g1", "d0", sent[0]["SequenceNumber"]),
        ("m1", "g1", "d1", sent[1]["SequenceNumber"]),
    ]


def test_peek_errors(ls):
    def error(status_expected, code, **kw):
        status, _, raw = peek(ls, **kw)
        err = ET.fromstring(raw).find(SQS_NS + "Error")
        got = (status, text(err, "Code"), text(err, "Type"))
        assert got == (status_expected, code, "Sender"), raw

    missing = "AWS.SimpleQueueService.NonExistentQueue"
    error(400, missing)  # no QueueUrl
    error(400, missing, url=f"{ls.endpoint}/{ACCOUNT}/{new_name('absent')}")
    error(400, missing, path=f"/_aws/sqs/messages/us-east-1/{ACCOUNT}/{new_name('absent')}")
    name = new_name("wrong-region")
    client(ls.endpoint).create_queue(QueueName=name)
    error(400, missing, path=f"/_aws/sqs/messages/eu-west-1/{ACCOUNT}/{name}")
    error(404, "InvalidAddress", url="http://localhost:4566/nonsense")
    status, _, raw = peek(ls, accept="application/json")
    assert status == 400
    assert json.loads(raw)["ErrorResponse"]["Error"]["Code"] == missing


def test_boto3_on_the_developer_endpoint(ls):
    sqs = client(ls.endpoint)
    url = sqs.create_queue(QueueName=new_name("dev-sdk"))["QueueUrl"]
    for body in ("a", "b"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    dev = client(ls.endpoint + "/_aws/sqs/messages")
    got = dev.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]
    # All messages, whatever the other parameters say, with the backdoor receipt handle.
    assert [(m["Body"], m["ReceiptHandle"]) for m in got] == [("a", BACKDOOR), ("b", BACKDOOR)]
    assert counts(sqs, url) == (2, 0, 0)
    err = expect_error(dev.send_message, "InvalidRequest", QueueUrl=url, MessageBody="x")
    assert "only accepts ReceiveMessage" in err.response["Error"]["Message"]


# --- other AWS services ----------------------------------------------------------------


@pytest.mark.parametrize("service, call", [("sns", "list_topics"), ("dynamodb", "list_tables")])
def test_other_services_are_refused_clearly(ls, ls_dns, service, call):
    with pytest.raises(ClientError) as info:
        getattr(client(ls_endpoint(ls), service=service), call)()
    err = info.value.response
    assert (err["Error"]["Code"], err["ResponseMetadata"]["HTTPStatusCode"]) == (
        "InternalFailure", 501
    )
    assert service in err["Error"]["Message"] and "SQS only" in err["Error"]["Message"]
    # SQS on the same port is unaffected.
    reply = client(ls_endpoint(ls)).list_queues(QueueNamePrefix="no-such-prefix")
    assert reply["ResponseMetadata"]["HTTPStatusCode"] == 200
