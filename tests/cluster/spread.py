"""How the load spreads (`make cluster-spread`): for 3 and 6 nodes on as many JetStream
servers (R3), the shards each node serves, the queues of `make cluster-scale`'s load (16 per
node) each node owns, and the shard streams each JetStream server keeps and leads. These are
the shares the model in docs/scale-out.md multiplies by the CPU per message that
`make cluster-bench` measures; no load is sent, so it runs on any machine."""

import sys
import time
import urllib.parse
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from harness import Cluster, get_json, shard_streams  # noqa: E402

SIZES = (3, 6)
QUEUES_PER_NODE = 16


def spread(size):
    cluster = Cluster(size=size, replicas=3).start()
    try:
        node = cluster.nodes[0]
        status = {n.name: n.status() for n in cluster.nodes}
        shards = {name: len(s["serving"]) for name, s in status.items()}
        # The queues sqsim-bench creates for one load generator per node (--queue-prefix gen<i>).
        sqs = node.client()
        owners = Counter()
        for g in range(size):
            for i in range(QUEUES_PER_NODE):
                url = sqs.create_queue(QueueName=f"gen{g}-send-json-{i}")["QueueUrl"]
                q = urllib.parse.quote(url, safe="")
                owners[get_json(f"{node.endpoint}/_sqsim/cluster/locate?queue_url={q}")["owner"]] += 1
        # The nodes move the streams' leaders to an even share per server within a round or
        # two (every four leases); read them once that is done, or as they are after 60 s.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not cluster.leaders_even():
            time.sleep(1)
        kept, led = shard_streams(cluster)
        return shards, owners, kept, led
    finally:
        cluster.stop()


def main():
    for size in SIZES:
        shards, owners, kept, led = spread(size)
        total = size * QUEUES_PER_NODE
        print(f"{size} nodes + {size} JetStream servers (R3):")
        print("  shards served per node:  " + ", ".join(f"{k} {v}" for k, v in sorted(shards.items())))
        print(f"  queues owned per node ({total}): "
              + ", ".join(f"{k} {owners.get(k, 0)}" for k in sorted(shards)))
        print("  shard streams kept per server: " + ", ".join(f"{k} {v}" for k, v in sorted(kept.items())))
        print("  shard streams led per server:  " + ", ".join(f"{k} {led.get(k, 0)}" for k in sorted(kept)))
        busiest = max(owners.values()) / (total / size)
        print(f"  busiest node's queues / even share: {busiest:.2f}", flush=True)


if __name__ == "__main__":
    main()
