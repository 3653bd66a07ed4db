"""1 node vs 3 nodes on this machine (`make cluster-bench`): sqsim-bench's send scenario
(SendMessageBatch of 10 x 256 B; JSON) under five loads — 12 queues through one node with
32 connections (latency-bound) and with 256 (as much as the machine takes), one queue through
one node with 32 and with 256 connections (what a single queue can do), and 16 queues per
node through every node at once (one load generator per node, 128 connections each) —
against

- one sqsim process, in memory;
- a 1-node cluster on one JetStream server (R1);
- a 3-node cluster on three JetStream servers (R3), the load sent through one node;
- the same with JetStream's default `sync_interval` (2 minutes) instead of `always`;

in rounds that take turns, all in one run, so the shares of the in-memory process are
measured together. Besides msgs/s it reports the CPU microseconds per message of the sqsim
and the nats-server processes (from /proc): that figure predicts how more nodes and cores
would scale, and it can be measured on two cores. Release builds: SQSIM_BIN and SQSIM_BENCH_BIN. CLUSTER_BENCH_ROUNDS
rounds (default 2); CLUSTER_BENCH_ONLY=a,b keeps the loads and setups whose labels contain
one of the words (for a quick look at one line while working on it). CLUSTER_BENCH_BODIES
(padded, the default; random; json) chooses what the bodies hold after their send time:
cluster mode compresses its log, so what it saves depends on them (docs/scale-out.md)."""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from harness import REPO, Cluster, free_port, get_json, wait_for  # noqa: E402

SECONDS = 4
REPEATS = 3  # sqsim-bench's runs of the scenario; it reports their median
# The share of `--seconds` each send run lasts (sqsim-bench's `send_dur`).
SEND_SHARE = 0.6
BENCH_ARGS = [
    "--only", "send", "--protocols", "json", "--no-floor",
    "--seconds", str(SECONDS), "--send-repeats", str(REPEATS),
    "--bodies", os.environ.get("CLUSTER_BENCH_BODIES", "padded"),
]
# Connections per load generator (the loads set it).
CONNECTIONS = 32
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
             "--send-connections", str(CONNECTIONS),
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


# CPU microseconds per message of each process of the last measurement, by name (the model
# in docs/scale-out.md reads how the work spreads over the processes).
LAST_PER_PROCESS = {}
# Records per JetStream message of the last clustered measurement (from `/_sqsim/stats`):
# how far the stores' grouping amortizes JetStream's per-message cost.
LAST_GROUPING = [None]


def measured(endpoints, queues, sqsim_pids, nats_pids):
    """msgs/s and CPU microseconds per message of the sqsim and the nats-server processes:
    the figure that predicts how the setup scales, measurable on any number of cores."""
    pids = [(f"sqsim{i}", p) for i, p in enumerate(sqsim_pids)]
    pids += [(f"nats{i}", p) for i, p in enumerate(nats_pids)]
    before = {name: cpu_seconds([pid]) for name, pid in pids}
    rate = bench(endpoints, queues)
    after = {name: cpu_seconds([pid]) for name, pid in pids}
    # The CPU spans every run; the rate is their median: a close estimate of the messages.
    # (Until 2026-11-28 the runs were taken to last `--seconds` each, which counted 1.67x
    # the messages and so gave 0.6 of the true CPU per message.)
    messages = max(rate * SECONDS * SEND_SHARE * REPEATS, 1.0)
    LAST_PER_PROCESS.clear()
    LAST_PER_PROCESS.update({n: (after[n] - before[n]) * 1e6 / messages for n, _ in pids})
    sqsim = sum(v for n, v in LAST_PER_PROCESS.items() if n.startswith("sqsim"))
    nats = sum(v for n, v in LAST_PER_PROCESS.items() if n.startswith("nats"))
    return rate, sqsim, nats


def store_counts(endpoint):
    """Records appended, JetStream messages acknowledged, and the log's bytes before and
    after compression, over every shard's store."""
    stores = get_json(f"{endpoint}/_sqsim/stats", timeout=30)["store"]
    keys = ("appended_records", "syncs", "appended_bytes", "stored_bytes")
    return tuple(sum(s[k] for s in stores) for k in keys)


def in_memory(queues, _all_nodes):
    LAST_GROUPING[0] = None
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


def settled(cluster, timeout=60):
    """Waits until the nodes have spread the shard streams' leaders evenly over the
    JetStream servers (a round or two after start): measured at rest, not during moves."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not cluster.leaders_even():
        time.sleep(1)


def clustered(size, queues, all_nodes, sync="always"):
    cluster = Cluster(size=size, sync=sync).start()
    try:
        if size > 1:
            settled(cluster)
        nodes = cluster.nodes if all_nodes else cluster.nodes[:1]
        before = store_counts(nodes[0].endpoint)
        got = measured(
            [n.endpoint for n in nodes],
            queues,
            [n.proc.pid for n in cluster.nodes],
            [n.proc.pid for n in cluster.nats],
        )
        after = store_counts(nodes[0].endpoint)
        records, messages, raw, stored = (a - b for a, b in zip(after, before))
        LAST_GROUPING[0] = (records / max(messages, 1), stored / max(raw, 1))
        return got
    finally:
        cluster.stop()


def main():
    global CONNECTIONS
    rounds = int(os.environ.get("CLUSTER_BENCH_ROUNDS", "2"))
    setups = [
        ("one process, in memory", in_memory),
        ("1 node + 1 JetStream server (R1)", lambda q, a: clustered(1, q, a)),
        ("3 nodes + 3 JetStream servers (R3)", lambda q, a: clustered(3, q, a)),
        ("3 nodes + 3 JetStream servers (R3), sync_interval default",
         lambda q, a: clustered(3, q, a, sync="default")),
    ]
    # (label, queues per load generator, connections per generator, one generator per node).
    loads = [
        ("12 queues, 32 connections, through one node", 12, 32, False),
        ("12 queues, 256 connections, through one node", 12, 256, False),
        ("1 queue, 32 connections, through one node", 1, 32, False),
        ("1 queue, 256 connections, through one node", 1, 256, False),
        ("16 queues and 128 connections per node, through every node", 16, 128, True),
    ]
    only = [w for w in os.environ.get("CLUSTER_BENCH_ONLY", "").split(",") if w]
    if only:
        keep = lambda label: any(w in label for w in only)  # noqa: E731
        loads = [x for x in loads if keep(x[0])] or loads
        setups = [setups[0]] + [x for x in setups[1:] if keep(x[0])]
    got = {}
    for r in range(rounds):
        for load, queues, connections, all_nodes in loads:
            CONNECTIONS = connections
            for name, run in setups:
                rate, sqsim_us, nats_us = run(queues, all_nodes)
                got.setdefault((load, name), []).append((rate, sqsim_us, nats_us))
                each = ", ".join(f"{n} {v:.1f}" for n, v in LAST_PER_PROCESS.items())
                if LAST_GROUPING[0] is not None:
                    grouped, packed = LAST_GROUPING[0]
                    each += (
                        f"; {grouped:.1f} records per JetStream message, "
                        f"compressed to {packed:.0%}"
                    )
                print(
                    f"round {r + 1}: {load}: {name}: {rate:,.0f} msgs/s, CPU per message "
                    f"{sqsim_us:.1f} us sqsim + {nats_us:.1f} us nats-server ({each})",
                    flush=True,
                )
    print(
        "\n| load | setup | msgs/s by round | share of one process | CPU us/msg sqsim | "
        "CPU us/msg nats-server | CPU per message, share of one process |"
        "\n|---|---|---:|---:|---:|---:|---:|"
    )
    for load, _, _, _ in loads:
        base = got[(load, setups[0][0])]
        for name, _ in setups:
            runs = got[(load, name)]
            rates = " / ".join(f"{x[0]:,.0f}" for x in runs)
            shares = " / ".join(f"{x[0] / b[0]:.2f}" for x, b in zip(runs, base))
            sq = " / ".join(f"{x[1]:.1f}" for x in runs)
            na = " / ".join(f"{x[2]:.1f}" for x in runs)
            cost = " / ".join(f"{(x[1] + x[2]) / b[1]:.1f}x" for x, b in zip(runs, base))
            print(f"| {load} | {name} | {rates} | {shares} | {sq} | {na} | {cost} |")


if __name__ == "__main__":
    main()
