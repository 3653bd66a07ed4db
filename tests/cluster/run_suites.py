"""Runs the SDK suites against a 3-node cluster through a gateway node that serves no
shard, so every request is forwarded (`make cluster-suites`, part of `make test`), each
pointed at the gateway by SQSIM_TEST_ENDPOINT and run after a reset of the cluster:

- the boto3 suite (tests/python), with the JSON protocol and, from .venv-query, the query
  protocol;
- the aws CLI smoke script (tests/cli);
- the JavaScript SDK v2 and v3 suites (tests/node v2.test.mjs, v3.test.mjs);
- the Rust SDK suite (tests/it: sdk, fifo, redrive, visibility; one test at a time, each
  after a reset).

Arguments go to pytest."""

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from harness import REPO, Cluster  # noqa: E402


def suites(pytest_args):
    pytest = ["-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args, str(REPO / "tests" / "python")]
    venv_bin = REPO / ".venv" / "bin"
    return [
        ("boto3, JSON", [sys.executable, *pytest], {"SQSIM_EXPECT_PROTOCOL": "json"}, REPO),
        (
            "botocore, query",
            [str(REPO / ".venv-query" / "bin" / "python"), *pytest],
            {"SQSIM_EXPECT_PROTOCOL": "query"},
            REPO,
        ),
        (
            "aws CLI",
            ["bash", str(REPO / "tests" / "cli" / "smoke.sh")],
            {"PATH": f"{venv_bin}:{os.environ['PATH']}"},
            REPO,
        ),
        ("JavaScript v2 and v3", ["node", "--test", "v2.test.mjs", "v3.test.mjs"], {}, REPO / "tests" / "node"),
        (
            "Rust",
            ["cargo", "test", "--features", "tools", "--test", "it", "--", "--test-threads=1", "sdk::", "fifo::", "redrive::", "visibility::"],
            {},
            REPO,
        ),
    ]


def main():
    # 12 shards: every node serves some of each suite's queues, and the idle cluster keeps
    # 0.15 of a core busy instead of 0.22-0.27 with 48 (heartbeats, reads, Raft
    # traffic): CPU the suites, which keep both cores busy, would otherwise wait for.
    cluster = Cluster(shards=12).start()
    results = []
    try:
        gateway = cluster.gateway()
        for name, cmd, extra, cwd in suites(sys.argv[1:]):
            reset = urllib.request.Request(f"{gateway.endpoint}/_sqsim/reset", data=b"{}", method="POST")
            urllib.request.urlopen(reset, timeout=30).read()
            env = {**os.environ, "SQSIM_TEST_ENDPOINT": gateway.endpoint, **extra}
            print(f"--- {name} suite through the gateway", flush=True)
            results.append((name, subprocess.run(cmd, cwd=cwd, env=env).returncode))
    finally:
        cluster.stop()
    print("through the gateway: " + ", ".join(f"{n} exit {rc}" for n, rc in results))
    return 1 if any(rc for _, rc in results) else 0


if __name__ == "__main__":
    sys.exit(main())
