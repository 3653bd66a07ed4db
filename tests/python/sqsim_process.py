"""The one launcher of sqsim for the Python suites: the session server of conftest.py (no
flags), the servers tests start with flags of their own (--auth verify, --config,
--url-style, or a private server for tests that reset, inject faults or move the clock), the
durable servers the crash tests kill (spawn + wait_ready), startup errors (run_to_exit) and
the `sqsim worker` subcommand (spawn with host=None, port=None). Only the docs' examples
(test_readme_example.py, test_readme_realism.py) start sqsim themselves: they are code
blocks of docs/testing.md and docs/realism.md verbatim."""

import contextlib
import json
import os
import re
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import boto3
from botocore.config import Config

REPO = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 20
LISTEN_LINE = re.compile(r"sqsim listening on (http://\S+)")

# Settings sqsim reads from the environment, dropped so that a test's flags are the whole
# story: every SQSIM_* variable (a prefix, so a setting added later is covered too), and
# LocalStack's, which --compat localstack reads.
_LOCALSTACK_ENV = ("SQS_ENDPOINT_STRATEGY", "LOCALSTACK_HOST", "PERSISTENCE")


def _is_setting(name):
    return name.startswith("SQSIM_") or name in _LOCALSTACK_ENV


def binary():
    return os.environ.get("SQSIM_BIN") or str(REPO / "target" / "debug" / "sqsim")


def _env(extra=None):
    """The server's environment: ours without sqsim's settings, plus `extra` (a value of None
    removes that variable)."""
    env = {k: v for k, v in os.environ.items() if not _is_setting(k)}
    env.setdefault("RUST_LOG", "warn")
    for key, value in (extra or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


class Process:
    """A running sqsim started by `running()`."""

    def __init__(self, proc, endpoint, log_path, token=None):
        self.proc = proc
        self.endpoint = endpoint
        self.port = int(endpoint.rsplit(":", 1)[1])
        self.log_path = log_path
        # The admin token (--admin-token), sent with every control-plane call.
        self.token = token

    def http(self, method, path, body=None, headers=None):
        """Any request; returns (status, headers, body bytes) without raising on 4xx/5xx."""
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers = {"Content-Type": "application/json", **(headers or {})}
        if self.token and path.startswith(("/_sqsim", "/metrics", "/_localstack", "/_aws")):
            headers = {"Authorization": f"Bearer {self.token}", **(headers or {})}
        req = urllib.request.Request(
            self.endpoint + path, data=body, method=method, headers=headers or {}
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def admin(self, method, path, body=None, status=200):
        """An admin call; asserts the status and returns the parsed JSON reply."""
        got, _, raw = self.http(method, path, {} if body is None and method != "GET" else body)
        assert got == status, f"{method} {path} -> {got}: {raw!r}"
        return json.loads(raw)

    def advance(self, seconds):
        return self.admin("POST", "/_sqsim/clock", {"advance_seconds": seconds})

    def client(self, key="test", secret="test", region="us-east-1", **config):
        """A boto3 SQS client; no retries unless `retries=` says otherwise."""
        config.setdefault("retries", {"total_max_attempts": 1})
        config.setdefault("read_timeout", 60)
        return boto3.client(
            "sqs",
            endpoint_url=self.endpoint,
            region_name=region,
            aws_access_key_id=key,
            aws_secret_access_key=secret,
            config=Config(**config),
        )

    def log(self):
        return Path(self.log_path).read_text(errors="replace")


def _read_listen_line(proc):
    found = {}

    def reader():
        for raw in proc.stdout:
            m = LISTEN_LINE.search(raw.decode("utf-8", "replace"))
            if m:
                found["endpoint"] = m.group(1)
                return

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    t.join(STARTUP_TIMEOUT_S)
    return found.get("endpoint")


def _wait_healthy(endpoint, proc):
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sqsim exited with {proc.returncode} during startup")
        try:
            with urllib.request.urlopen(endpoint + "/_sqsim/health", timeout=2) as resp:
                if json.loads(resp.read()).get("status") == "ok":
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError("sqsim did not become healthy")


def wait_ready(proc):
    """Waits for a spawned server's listen line (on its stdout, which must be a pipe), then for
    /_sqsim/health to say ok; returns the endpoint, or None if no listen line came (sqsim
    exited or hung at startup: the caller decides what that means). Raises if it exits or
    stays unhealthy after announcing itself."""
    endpoint = _read_listen_line(proc)
    if endpoint is not None:
        _wait_healthy(endpoint, proc)
    return endpoint


def spawn(
    *flags,
    env=None,
    host="127.0.0.1",
    port=0,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    preexec=None,
):
    """Starts `sqsim --host HOST --port PORT FLAGS…` with `env` added to its environment (see
    _env), running `preexec` in the child first (a cgroup to join, a resource limit); returns
    the Popen. `host` is left out if the flags name a --host, and `host=None`
    or `port=None` leave out that flag (sqsim's default, or a subcommand: `spawn("worker",
    …, host=None, port=None)`). `stdout`/`stderr` are Popen's (None: this process's own);
    wait_ready needs stdout piped."""
    listen = []
    if host is not None and "--host" not in flags:
        listen += ["--host", host]
    if port is not None:
        listen += ["--port", str(port)]
    return subprocess.Popen(
        [binary(), *listen, *flags],
        stdout=stdout,
        stderr=stderr,
        stdin=subprocess.DEVNULL,
        env=_env(env),
        preexec_fn=preexec,
    )


@contextlib.contextmanager
def tmpfs(path, size):
    """A tmpfs of `size` (e.g. "256k") mounted on `path` (a small disk to fill; mounting
    needs root, which `make test` has on its Debian machines; without it the test fails
    rather than pass unseen)."""
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    assert mounted.returncode == 0, f"cannot mount a tmpfs (run as root): {mounted.stderr}"
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def resize(path, size):
    """Gives the tmpfs on `path` a new size (room again after a full disk)."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(path)], check=True)


@contextlib.contextmanager
def running(*flags, env=None, token=None, log_dir=None, preexec=None):
    """Starts `sqsim --host 127.0.0.1 --port 0 FLAGS…` (with `env` added to its environment,
    see _env), yields a Process, always stops it and asserts it shut down cleanly on SIGTERM.
    Its stderr goes to a file in `log_dir` (default: the temporary directory)."""
    log = tempfile.NamedTemporaryFile(prefix="sqsim-", suffix=".log", delete=False, dir=log_dir)
    proc = spawn(*flags, env=env, stderr=log, preexec=preexec)
    try:
        endpoint = wait_ready(proc)
        if endpoint is None:
            raise RuntimeError(
                f"sqsim {' '.join(flags)} printed no listen line: "
                f"{Path(log.name).read_text(errors='replace')}"
            )
        yield Process(proc, endpoint, log.name, token=token)
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
    assert proc.returncode == 0, f"sqsim exited with {proc.returncode} (log: {log.name})"


def send_until_refused(client, url, prefix, pad, limit, refused=Exception, churn=None):
    """Sends `prefix`0-, `prefix`1-, … (each padded with `pad` bytes) until one is refused
    (an exception of type `refused`) or `limit` were sent. Returns the acknowledged
    prefixes and the refusal (None if every send was acknowledged): what the durable-mode
    fault tests check was kept. With `churn` (another queue's URL), each send is followed by
    one twice its size to that queue, received and deleted there: records of messages no
    longer stored, which make the log worth compacting (a log of live messages only is
    not)."""
    acked = []
    for i in range(limit):
        tag = f"{prefix}{i:05d}-"
        try:
            client.send_message(QueueUrl=url, MessageBody=tag + "x" * pad)
            acked.append(tag)
            if churn:
                client.send_message(QueueUrl=churn, MessageBody="x" * (2 * pad))
                for m in client.receive_message(QueueUrl=churn).get("Messages", []):
                    client.delete_message(QueueUrl=churn, ReceiptHandle=m["ReceiptHandle"])
        except refused as e:  # noqa: BLE001 - the caller says what a refusal is
            return acked, e
    return acked, None


def run_to_exit(*flags, timeout=20, **spawn_args):
    """Runs sqsim expecting it to stop on its own (a startup error, or a subcommand such as
    `worker --help` with host=None, port=None); returns CompletedProcess with text output.
    `spawn_args` go to spawn. A server that starts anyway is killed and reported."""
    proc = spawn(*flags, **spawn_args)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"sqsim {flags} kept running: {out!r} {err!r}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out.decode(), err.decode())
