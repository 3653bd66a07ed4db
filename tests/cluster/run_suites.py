"""Runs the SDK suites against a 3-node cluster through a gateway node that serves no
shard, so every request is forwarded (`make cluster-suites`, part of `make test`), each
pointed at the gateway by SQSIM_TEST_ENDPOINT and run after a reset of the cluster:

- the boto3 suite (tests/python), with the JSON protocol and, from .venv-query, the query
  protocol;
- the aws CLI smoke script (tests/cli);
- the JavaScript SDK v2 and v3 suites (tests/node v2.test.mjs, v3.test.mjs);
- the Rust SDK suite (tests/it: sdk, fifo, redrive, visibility; one test at a time, each
  after a reset).

The suites run in two lanes at once, each on a cluster of its own (a suite moves the
cluster's clock and resets it, so two never share one), one suite after another in a lane;
each suite's output is printed whole when it ends. CLUSTER_SUITES_LANES=1 runs them all in
one lane, on one cluster.

Arguments go to pytest."""

import os
import subprocess
import sys
import threading
import time
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


# Which suites share a lane, balanced by how long each takes through a gateway here
# (boto3 JSON and query ~140 s each, the aws CLI ~60 s, the Rust suite ~80 s, Node ~30 s).
LANES = [["boto3, JSON", "Rust", "JavaScript v2 and v3"], ["botocore, query", "aws CLI"]]


def run_lane(suites, results):
    """Starts a cluster with a gateway and runs `suites` through it, each after a reset."""
    # 12 shards: every node serves some of each suite's queues, and the idle cluster costs
    # about half of what 48 do (its CPU is CI's time: the suites keep the cores busy).
    cluster = Cluster(shards=12)
    try:
        cluster.start()
        gateway = cluster.gateway()
        for name, cmd, extra, cwd in suites:
            reset = urllib.request.Request(f"{gateway.endpoint}/_sqsim/reset", data=b"{}", method="POST")
            urllib.request.urlopen(reset, timeout=30).read()
            env = {**os.environ, "SQSIM_TEST_ENDPOINT": gateway.endpoint, **extra}
            started = time.monotonic()
            done = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            sys.stdout.write(
                f"--- {name} suite through the gateway ({time.monotonic() - started:.0f} s)\n"
                + done.stdout.decode(errors="replace")
            )
            sys.stdout.flush()
            results.append((name, done.returncode))
    except Exception as e:  # a cluster that would not start fails its lane's suites
        results.extend((name, f"not run ({e})") for name, *_ in suites)
    finally:
        cluster.stop()


def main():
    every = suites(sys.argv[1:])
    if os.environ.get("CLUSTER_SUITES_LANES") == "1":
        lanes = [every]
    else:
        by_name = {s[0]: s for s in every}
        lanes = [[by_name[n] for n in lane] for lane in LANES]
        assert sum(map(len, lanes)) == len(every), "every suite is in a lane"
    results = []
    threads = [threading.Thread(target=run_lane, args=(lane, results)) for lane in lanes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("through the gateway: " + ", ".join(f"{n} exit {rc}" for n, rc in results))
    return 1 if any(rc for _, rc in results) else 0


if __name__ == "__main__":
    sys.exit(main())
