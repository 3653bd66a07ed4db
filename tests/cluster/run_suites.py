"""Runs the SDK suites against a 3-node cluster through a gateway node that serves no
shard, so every request is forwarded (`make cluster-suites`, part of `make test`): the boto3
suite (tests/python), the JavaScript SDK v2 and v3 suites (tests/node v2.test.mjs,
v3.test.mjs) and the Rust SDK suite (tests/it: sdk, fifo, redrive, visibility; one test at a
time, each after a reset), each pointed at the gateway by SQSIM_TEST_ENDPOINT. Arguments go
to pytest."""

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from harness import REPO, Cluster  # noqa: E402


def main():
    cluster = Cluster().start()
    try:
        gateway = cluster.gateway()
        env = {**os.environ, "SQSIM_TEST_ENDPOINT": gateway.endpoint}
        args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *sys.argv[1:]]
        python = subprocess.run(args + [str(REPO / "tests" / "python")], env=env).returncode
        node = subprocess.run(
            ["node", "--test", "v2.test.mjs", "v3.test.mjs"], cwd=REPO / "tests" / "node", env=env
        ).returncode
        rust = subprocess.run(
            ["cargo", "test", "--test", "it", "--", "--test-threads=1"]
            + ["sdk::", "fifo::", "redrive::", "visibility::"],
            cwd=REPO,
            env=env,
        ).returncode
        print(
            f"through the gateway: boto3 suite exit {python}, JavaScript SDK suites exit {node}, "
            f"Rust SDK suite exit {rust}"
        )
        return python or node or rust
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
