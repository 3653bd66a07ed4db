"""3 nodes vs 6 nodes, each process on cores of its own (`make cluster-scale`): the check of
docs/scale-out.md's claim that more nodes carry more load, for a machine with at least 12
cores (this project's CI machine has 2; there the model is built from `make cluster-bench`'s
CPU per message instead).

Each nats-server and each sqsim node is pinned with `taskset` to one core of its own (node i
and JetStream server i side by side), the load generators to the cores left over; shards are
kept on 3 JetStream servers (R3) in both setups, so 6 servers each hold half as many of the
replicas as 3 do. The load is sqsim-bench's send scenario (SendMessageBatch of 10 x 256 B)
with 16 queues per node through every node at once. Prints msgs/s and CPU microseconds per
message of the sqsim and nats-server processes for each setup, in alternating rounds.

CLUSTER_SCALE_ROUNDS rounds (default 2); CLUSTER_SCALE_FORCE=1 runs on fewer cores (cores
shared round-robin: a check that the script works, not a measurement)."""

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench  # noqa: E402
from harness import Cluster  # noqa: E402

SIZES = (3, 6)
REPLICAS = 3
QUEUES_PER_NODE = 16
CONNECTIONS_PER_NODE = 128


def cores():
    return sorted(os.sched_getaffinity(0))


def pin(pid, core):
    """Pins every thread of `pid` to `core`."""
    subprocess.run(["taskset", "-a", "-p", "-c", str(core), str(pid)],
                   check=True, stdout=subprocess.DEVNULL)


def run(size, available):
    cluster = Cluster(size=size, replicas=REPLICAS).start()
    try:
        # Node i and JetStream server i on cores 2i and 2i+1; the generators on the rest.
        for i, (node, nats) in enumerate(zip(cluster.nodes, cluster.nats)):
            pin(nats.proc.pid, available[(2 * i) % len(available)])
            pin(node.proc.pid, available[(2 * i + 1) % len(available)])
        left = available[2 * size:] or available
        bench.PIN = ",".join(str(c) for c in left)
        bench.CONNECTIONS = CONNECTIONS_PER_NODE
        return bench.measured(
            [n.endpoint for n in cluster.nodes],
            QUEUES_PER_NODE,
            [n.proc.pid for n in cluster.nodes],
            [n.proc.pid for n in cluster.nats],
        )
    finally:
        bench.PIN = None
        cluster.stop()


def main():
    available = cores()
    need = 2 * max(SIZES)
    if len(available) < need and os.environ.get("CLUSTER_SCALE_FORCE") != "1":
        sys.exit(
            f"cluster-scale needs {need} cores for the nodes and JetStream servers plus some for "
            f"the load (this machine offers {len(available)}); CLUSTER_SCALE_FORCE=1 runs it anyway "
            "with cores shared, which measures nothing"
        )
    rounds = int(os.environ.get("CLUSTER_SCALE_ROUNDS", "2"))
    got = {}
    for r in range(rounds):
        for size in SIZES:
            rate, sqsim_us, nats_us = run(size, available)
            got.setdefault(size, []).append((rate, sqsim_us, nats_us))
            print(f"round {r + 1}: {size} nodes + {size} JetStream servers (R{REPLICAS}): "
                  f"{rate:,.0f} msgs/s, CPU per message {sqsim_us:.1f} us sqsim + "
                  f"{nats_us:.1f} us nats-server", flush=True)
    print("\n| setup | msgs/s by round | share of 3 nodes | CPU us/msg sqsim | "
          "CPU us/msg nats-server |\n|---|---:|---:|---:|---:|")
    base = [x[0] for x in got[SIZES[0]]]
    for size in SIZES:
        runs = got[size]
        print(f"| {size} nodes + {size} JetStream servers (R{REPLICAS}) | "
              + " / ".join(f"{x[0]:,.0f}" for x in runs) + " | "
              + " / ".join(f"{x[0] / b:.2f}" for x, b in zip(runs, base)) + " | "
              + " / ".join(f"{x[1]:.1f}" for x in runs) + " | "
              + " / ".join(f"{x[2]:.1f}" for x in runs) + " |")


if __name__ == "__main__":
    main()
