"""1 node vs 3 nodes on this machine (`make cluster-bench`): sqsim-bench's send scenario
(SendMessageBatch of 10 x 256 B over 32 connections; JSON) under three loads — 12 queues
through one node, one queue through one node (what a single queue can do), and 16 queues
per node through every node at once (one load generator per node) — against

- one sqsim process, in memory;
- a 1-node cluster on one JetStream server (R1);
- a 3-node cluster on three JetStream servers (R3), the load sent through one node;

in rounds that take turns, all in one run, so the shares of the in-memory process are
measured together. Besides msgs/s it reports the CPU microseconds per message of the sqsim
and the nats-server processes (from /proc): that figure predicts how more nodes and cores
would scale, and it can be measured on two cores. Release builds: SQSIM_BIN and SQSIM_BENCH_BIN. CLUSTER_BENCH_ROUNDS
rounds (default 2)."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from harness import REPO, Cluster, free_port, get_json, wait_for  # noqa: E402

SECONDS = 4
REPEATS = 3  # sqsim-bench's runs of the scenario; it reports their median
BENCH_ARGS = [
    "--only", "send", "--protocols", "json", "--no-floor",
    "--send-connections", "32", "--seconds", str(SECONDS), "--send-repeats", str(REPEATS),
]
TICK = os.sysconf("SC_CLK_TCK")
# Cores the load generators are pinned to (`taskset -c` list), when scale.py sets it.
PIN = None


def cpu_seconds(pids):
    """User + system CPU the processes `pids` used so far, in seconds (from /proc)."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            # Fields after the command (which may hold spaces): utime and stime are 14 and 15.
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / TICK


def bench(endpoints, queues):
    """The send scenario's msgs/s, summed over one load generator per endpoint run at once,
    each spreading its load over `queues` queues of its own."""
    binary = os.environ.get("SQSIM_BENCH_BIN") or str(REPO / "target" / "release" / "sqsim-bench")
    runs = []
    for i, endpoint in enumerate(endpoints):
        out = tempfile.NamedTemporaryFile(suffix=".json")
        pinned = ["taskset", "-c", PIN] if PIN else []
        proc = subprocess.Popen(
            [*pinned, binary, "--endpoint", endpoint, *BENCH_ARGS, "--send-queues", str(queues),
             "--queue-prefix", f"gen{i}", "--json", out.name],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        runs.append((proc, out))
    total = 0.0
    for proc, out in runs:
        assert proc.wait() == 0, "sqsim-bench failed"
        results = json.load(open(out.name))["results"]
        total += max(r["messages_per_s"] for r in results if r["scenario"] == "send")
        out.close()
    return total


def measured(endpoints, queues, sqsim_pids, nats_pids):
    """msgs/s and CPU microseconds per message of the sqsim and the nats-server processes:
    the figure that predicts how the setup scales, measurable on any number of cores."""
    before = (cpu_seconds(sqsim_pids), cpu_seconds(nats_pids))
    rate = bench(endpoints, queues)
    after = (cpu_seconds(sqsim_pids), cpu_seconds(nats_pids))
    # The CPU spans every run; the rate is their median: a close estimate of the messages.
    messages = max(rate * SECONDS * REPEATS, 1.0)
    per = [(a - b) * 1e6 / messages for a, b in zip(after, before)]
    return rate, per[0], per[1]


def in_memory(queues, _all_nodes):
    binary = os.environ.get("SQSIM_BIN") or str(REPO / "target" / "release" / "sqsim")
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--host", "127.0.0.1", "--port", str(port), "--log-level", "warn"],
        stdout=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        wait_for("sqsim to answer", lambda: get_json(f"{endpoint}/_sqsim/health"), timeout=30)
        return measured([endpoint], queues, [proc.pid], [])
    finally:
        proc.kill()
        proc.wait()


def clustered(size, queues, all_nodes):
    cluster = Cluster(size=size).start()
    try:
        nodes = cluster.nodes if all_nodes else cluster.nodes[:1]
        return measured(
            [n.endpoint for n in nodes],
            queues,
            [n.proc.pid for n in cluster.nodes],
            [n.proc.pid for n in cluster.nats],
        )
    finally:
        cluster.stop()


def main():
    rounds = int(os.environ.get("CLUSTER_BENCH_ROUNDS", "2"))
    setups = [
        ("one process, in memory", in_memory),
        ("1 node + 1 JetStream server (R1)", lambda q, a: clustered(1, q, a)),
        ("3 nodes + 3 JetStream servers (R3)", lambda q, a: clustered(3, q, a)),
    ]
    # (label, queues per load generator, one generator per node): 12 queues through one
    # node; one queue (what a single queue can do); 16 queues through every node at once
    # (48 on three nodes).
    loads = [
        ("12 queues, through one node", 12, False),
        ("1 queue, through one node", 1, False),
        ("16 queues per node, through every node", 16, True),
    ]
    got = {}
    for r in range(rounds):
        for load, queues, all_nodes in loads:
            for name, run in setups:
                rate, sqsim_us, nats_us = run(queues, all_nodes)
                got.setdefault((load, name), []).append((rate, sqsim_us, nats_us))
                print(
                    f"round {r + 1}: {load}: {name}: {rate:,.0f} msgs/s, CPU per message "
                    f"{sqsim_us:.1f} us sqsim + {nats_us:.1f} us nats-server",
                    flush=True,
                )
    print(
        "\n| load | setup | msgs/s by round | share of one process | CPU us/msg sqsim | "
        "CPU us/msg nats-server |\n|---|---|---:|---:|---:|---:|"
    )
    for load, _, _ in loads:
        base = [x[0] for x in got[(load, setups[0][0])]]
        for name, _ in setups:
            runs = got[(load, name)]
            rates = " / ".join(f"{x[0]:,.0f}" for x in runs)
            shares = " / ".join(f"{x[0] / b:.2f}" for x, b in zip(runs, base))
            sq = " / ".join(f"{x[1]:.1f}" for x in runs)
            na = " / ".join(f"{x[2]:.1f}" for x in runs)
            print(f"| {load} | {name} | {rates} | {shares} | {sq} | {na} |")


if __name__ == "__main__":
    main()
