"""1 node vs 3 nodes on this machine (`make cluster-bench`): sqsim-bench's send scenario
(SendMessageBatch of 10 x 256 B over 32 connections, spread over 12 queues and so over the
shards; JSON; the median of 3 runs) against

- one sqsim process, in memory;
- a 1-node cluster on one JetStream server (R1);
- a 3-node cluster on three JetStream servers (R3), the load sent through one node;

in rounds that take turns, all in one run, so the shares of the in-memory process are
measured together. Release builds: SQSIM_BIN and SQSIM_BENCH_BIN. CLUSTER_BENCH_ROUNDS
rounds (default 2)."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from harness import REPO, Cluster, free_port, get_json, wait_for  # noqa: E402

BENCH_ARGS = [
    "--only", "send", "--protocols", "json", "--no-floor",
    "--send-connections", "32", "--send-queues", "12", "--seconds", "4",
]


def bench(endpoint):
    """The send scenario's msgs/s against `endpoint`."""
    binary = os.environ.get("SQSIM_BENCH_BIN") or str(REPO / "target" / "release" / "sqsim-bench")
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run(
            [binary, "--endpoint", endpoint, *BENCH_ARGS, "--json", out.name],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        results = json.load(open(out.name))["results"]
    return max(r["messages_per_s"] for r in results if r["scenario"] == "send")


def in_memory():
    binary = os.environ.get("SQSIM_BIN") or str(REPO / "target" / "release" / "sqsim")
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--host", "127.0.0.1", "--port", str(port), "--log-level", "warn"],
        stdout=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        wait_for("sqsim to answer", lambda: get_json(f"{endpoint}/_sqsim/health"), timeout=30)
        return bench(endpoint)
    finally:
        proc.kill()
        proc.wait()


def clustered(size):
    cluster = Cluster(size=size).start()
    try:
        return bench(cluster.nodes[0].endpoint)
    finally:
        cluster.stop()


def main():
    rounds = int(os.environ.get("CLUSTER_BENCH_ROUNDS", "2"))
    setups = [
        ("one process, in memory", in_memory),
        ("1 node + 1 JetStream server (R1)", lambda: clustered(1)),
        ("3 nodes + 3 JetStream servers (R3), load through one node", lambda: clustered(3)),
    ]
    got = {name: [] for name, _ in setups}
    for r in range(rounds):
        for name, run in setups:
            rate = run()
            got[name].append(rate)
            print(f"round {r + 1}: {name}: {rate:,.0f} msgs/s", flush=True)
    base = got[setups[0][0]]
    print("\n| setup | msgs/s by round | share of one process |\n|---|---:|---:|")
    for name, rates in got.items():
        shares = [f"{x / b:.2f}" for x, b in zip(rates, base)]
        print(f"| {name} | {' / '.join(f'{x:,.0f}' for x in rates)} | {' / '.join(shares)} |")


if __name__ == "__main__":
    main()
