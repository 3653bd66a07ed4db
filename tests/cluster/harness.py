"""A cluster on loopback for the cluster tests: three nats-server processes clustered with
JetStream (every stream and lease on all three: R3) and three sqsim nodes on them, each a
real process that the tests kill, stop and resume.

Environment:
  SQSIM_BIN        the sqsim binary (default: target/debug/sqsim in the repository)
  NATS_SERVER_BIN  nats-server, 2.10.23 or newer (default: found on PATH; `make nats` installs
                   one): every server runs with `sync_interval: always`
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from pathlib import Path

import boto3
from botocore.config import Config

REPO = Path(__file__).resolve().parents[2]
LEASE_MS = 2500


_given = set()


def free_port():
    """A free port on loopback, never one handed out before in this process (a port just
    released is often offered again, and two servers would then race for it)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _given:
            _given.add(port)
            return port


def get_json(url, timeout=5, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def wait_for(what, check, timeout=30, every=0.1):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except Exception as e:  # not up yet
            last = e
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}: {last!r}")


def stream_details(cluster):
    """(server, stream) for every stream each live JetStream server keeps, as its `/jsz`
    reports it (the stream's name, and its leader under `cluster`)."""
    for n in cluster.nats:
        if not n.alive():
            continue
        jsz = get_json(f"http://127.0.0.1:{n.monitor}/jsz?accounts=true&streams=true", timeout=10)
        for account in jsz.get("account_details") or []:
            for stream in account.get("stream_detail") or []:
                yield n, stream


def shard_streams(cluster):
    """How many shard streams each live JetStream server keeps, and how many it leads
    (`Counter`s by server name)."""
    kept, led = Counter(), Counter()
    for n, stream in stream_details(cluster):
        if not stream["name"].startswith("SQSIM_shard"):
            continue
        kept[f"nats{n.index}"] += 1
        if (stream.get("cluster") or {}).get("leader") == f"nats{n.index}":
            led[f"nats{n.index}"] += 1
    return kept, led


def js_request(cluster, subject, body):
    """Publishes `body` (bytes) to `subject` with a reply subject, through the first live
    JetStream server, over NATS's text protocol; the JSON answer (a JetStream API reply,
    or the ack of a publish to a stream)."""
    server = next(n for n in cluster.nats if n.alive())
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        reader = s.makefile("rb")
        reader.readline()  # INFO
        s.sendall(
            b'CONNECT {"verbose":false,"pedantic":false}\r\nSUB _sqsim_test.reply 1\r\n'
            + f"PUB {subject} _sqsim_test.reply {len(body)}\r\n".encode()
            + body
            + b"\r\n"
        )
        while True:
            line = reader.readline()
            assert line, "the JetStream server closed the connection"
            if line.startswith(b"PING"):
                s.sendall(b"PONG\r\n")
            elif line.startswith(b"MSG "):
                return json.loads(reader.read(int(line.split()[-1]) + 2)[:-2])


def bucket_keys(cluster, bucket):
    """The keys that still have messages in key-value bucket `bucket` (delete markers
    included), from its stream's info: one JetStream API request."""
    body = json.dumps({"subjects_filter": ">"}).encode()
    answer = js_request(cluster, f"$JS.API.STREAM.INFO.KV_{bucket}", body)
    assert "error" not in answer, answer
    prefix = f"$KV.{bucket}."
    return sorted(k[len(prefix):] for k in (answer["state"].get("subjects") or {}))


class Process:
    """What the harness does with any process it started (a JetStream server, a node);
    `proc` is None until it starts."""

    proc = None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        self.proc.send_signal(sig)

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


class Nats(Process):
    """One JetStream server of the cluster."""

    def __init__(
        self, index, ports, cluster_ports, workdir, sync="always", store_size=None, binary=None
    ):
        self.index = index
        # The nats-server to run: NATS_SERVER_BIN's unless a test names another.
        self.binary = binary
        # A tmpfs of this size (e.g. "24m") as the store: a disk to fill. JetStream takes at
        # most 75% of the room its store has when it starts.
        self.store_size = store_size
        self.mounted = False
        # `always` (what cluster mode's durability promise rests on), or `default`:
        # JetStream's own (every 2 minutes), for the benchmark's comparison.
        self.sync = sync
        self.port = ports[index]
        self.monitor = free_port()
        self.cluster_ports = cluster_ports
        self.dir = workdir / f"nats{index}"
        self.log = workdir / f"nats{index}.log"
        self.proc = None

    def start(self):
        # To each other server directly, or through the link a test put there (`Cluster.split`).
        links = getattr(self, "route_links", {})
        routes = ",".join(
            f"nats://127.0.0.1:{links[i].port if i in links else p}"
            for i, p in enumerate(self.cluster_ports)
            if i != self.index
        )
        binary = self.binary or os.environ.get("NATS_SERVER_BIN") or shutil.which("nats-server")
        assert binary, "nats-server is not installed (make nats installs it)"
        if self.store_size and not self.mounted:
            self.dir.mkdir(parents=True, exist_ok=True)
            mounted = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={self.store_size}", "tmpfs", str(self.dir)],
                capture_output=True,
                text=True,
            )
            assert mounted.returncode == 0, f"cannot mount a tmpfs (run as root): {mounted.stderr}"
            self.mounted = True
        conf = self.dir.with_suffix(".conf")
        # One server alone runs JetStream without a cluster (replicas 1). Clients are not
        # told the servers' addresses (`no_advertise`), nor are servers behind route links
        # given a second route to each other: pooled routes, and the implicit routes a
        # server opens to the peers others tell it of, dial the address a server gossips
        # (its own), around the link. Behind links, each gossips an address nothing
        # listens on (`advertise`). Before, an implicit route around the links stayed up
        # in 5 of 34 runs of the split test, and each of them failed: the server "cut off"
        # still reached one of the others, JetStream's leaders came and went on both sides,
        # and nothing was taken over within 30 s (old code and new alike).
        if links and not getattr(self, "dead_end", None):
            # Bound, never listening: a dial there is refused, and no other process can
            # take the port while the server runs.
            self.dead_end = socket.socket()
            self.dead_end.bind(("127.0.0.1", 0))
        dead = links and self.dead_end.getsockname()[1]
        pool = f"\n  pool_size: -1\n  advertise: 127.0.0.1:{dead}" if links else ""
        cluster = (
            f"""cluster {{
  name: sqsim-test
  listen: 127.0.0.1:{self.cluster_ports[self.index]}
  routes: [{routes}]
  no_advertise: true{pool}
}}"""
            if len(self.cluster_ports) > 1
            else ""
        )
        sync = ", sync_interval: always" if self.sync == "always" else ""
        conf.write_text(
            f"""
listen: 127.0.0.1:{self.port}
http: 127.0.0.1:{self.monitor}
server_name: nats{self.index}
max_payload: 8MB
jetstream {{ store_dir: "{self.dir}"{sync} }}
{cluster}
"""
        )
        self.proc = subprocess.Popen(
            [binary, "-c", str(conf)],
            stdout=open(self.log, "ab"),
            stderr=subprocess.STDOUT,
        )

    def resize(self, size):
        """Gives the store's tmpfs a new size (room again after a full disk)."""
        subprocess.run(["mount", "-o", f"remount,size={size}", str(self.dir)], check=True)

    def unmount(self):
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.dir)], check=False)
            self.mounted = False

    def jsz(self):
        return get_json(f"http://127.0.0.1:{self.monitor}/jsz", timeout=2)

    def varz(self):
        return get_json(f"http://127.0.0.1:{self.monitor}/varz", timeout=2)


class Link:
    """A TCP proxy on loopback in front of one JetStream server, through which a node
    reaches it, and that a test can cut: `cut()` stops carrying bytes either way and leaves
    every connection open (a network dropping packets, not one refusing them: no reset, no
    error, the client still thinks it is connected); connections made meanwhile are
    accepted and held. `heal()` carries on, with what was sent meanwhile."""

    def __init__(self, upstream_port):
        self.upstream = upstream_port
        self.port = free_port()
        self.open = threading.Event()
        self.open.set()
        self.closing = False
        self.sockets = []
        self.listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self):
        self.open.clear()

    def heal(self):
        self.open.set()

    def close(self):
        self.closing = True
        self.open.set()
        for s in [self.listener, *self.sockets]:
            try:
                s.close()
            except OSError:
                pass

    def _accept(self):
        while not self.closing:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client):
        self.open.wait()
        try:
            server = socket.create_connection(("127.0.0.1", self.upstream))
        except OSError:
            client.close()
            return
        self.sockets += [client, server]
        for a, b in ((client, server), (server, client)):
            threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src, dst):
        while True:
            try:
                data = src.recv(65536)
                # Held while cut: it goes once the link heals, as TCP resends it would.
                self.open.wait()
                if not data or self.closing:
                    break
                dst.sendall(data)
            except OSError:
                break
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Node(Process):
    """One sqsim node."""

    def __init__(self, index, nats_urls, workdir, lease_ms, extra=()):
        self.index = index
        self.extra = list(extra)
        self.name = f"n{index}"
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.nats_urls = nats_urls
        self.log = workdir / f"sqsim-{self.name}.log"
        self.lease_ms = lease_ms
        self.proc = None
        # RUST_LOG for this node alone (None: the default below).
        self.log_filter = None
        # The control plane's token, for a node started with `--admin-token` (None: open
        # on loopback, as by default).
        self.admin_token = None

    def start(self, wait=True):
        binary = os.environ.get("SQSIM_BIN") or str(REPO / "target" / "debug" / "sqsim")
        env = {k: v for k, v in os.environ.items() if not k.startswith("SQSIM_")}
        # The control loop's debug lines (gaps in its watch, replicas behind, leases not
        # taken) are few, and what a failed takeover test needs to be understood.
        env.setdefault("RUST_LOG", "info,async_nats=warn,sqsim::cluster::membership=debug")
        if self.log_filter:
            env["RUST_LOG"] = self.log_filter
        self.proc = subprocess.Popen(
            [
                binary,
                "--host", "127.0.0.1",
                "--port", str(self.port),
                "--cluster", self.nats_urls,
                "--node-id", self.name,
                "--cluster-lease", str(self.lease_ms),
                *self.extra,
            ],
            stdout=open(self.log, "ab"),
            stderr=subprocess.STDOUT,
            env=env,
        )
        if wait:
            wait_for(f"{self.name} to answer", self.status, timeout=30)

    def status(self):
        token = {"Authorization": f"Bearer {self.admin_token}"} if self.admin_token else {}
        return get_json(f"{self.endpoint}/_sqsim/cluster", timeout=2, headers=token)

    def health(self, timeout=5):
        """`/_sqsim/health`'s status and body; (None, b"") if the node does not answer."""
        try:
            with urllib.request.urlopen(f"{self.endpoint}/_sqsim/health", timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except OSError:
            return None, b""

    def client(self, attempts=3, read_timeout=60):
        """A boto3 client of this node: `attempts` retries after the first try (0: none)."""
        return boto3.client(
            "sqs",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
            config=Config(
                retries={"max_attempts": attempts, "mode": "standard"},
                read_timeout=read_timeout,
                connect_timeout=2,
            ),
        )


class Cluster:
    """`size` JetStream servers and `size` sqsim nodes on them (3 in the tests), each shard
    kept on `replicas` of the servers (default: all of them, at most 5)."""

    def __init__(
        self,
        lease_ms=LEASE_MS,
        size=3,
        replicas=None,
        sync="always",
        store_size=None,
        shards=None,
        nats_binary=None,
    ):
        self.workdir = Path(tempfile.mkdtemp(prefix="sqsim-cluster-"))
        ports = [free_port() for _ in range(size)]
        cluster_ports = [free_port() for _ in range(size)]
        self.nats = [
            Nats(i, ports, cluster_ports, self.workdir, sync, store_size, nats_binary)
            for i in range(size)
        ]
        self.nats_urls = ",".join(f"nats://127.0.0.1:{p}" for p in ports)
        replicas = ["--cluster-replicas", str(replicas or min(size, 5))]
        # Fewer shards than the default 48 (a suite's queues still spread over every node):
        # each is a Raft group (its stream) and a lease every step reads, which an idle
        # cluster pays for all the time.
        self.shard_args = ["--cluster-shards", str(shards)] if shards else []
        self.nodes = [
            Node(i, self.nats_urls, self.workdir, lease_ms, extra=replicas + self.shard_args)
            for i in range(size)
        ]
        self.lease_ms = lease_ms

    def start(self):
        try:
            return self._start()
        except BaseException:
            print(self.logs())
            self.stop()
            raise

    def _start(self):
        for n in self.nats:
            n.start()
        if len(self.nats) > 1:
            wait_for(
                "a JetStream meta leader on every server",
                lambda: all(
                    (n.jsz().get("meta_cluster") or {}).get("leader") for n in self.nats
                ),
                timeout=60,
            )
        else:
            wait_for("JetStream to answer", lambda: self.nats[0].jsz() is not None, timeout=30)
        # Cluster mode's durability promise rests on every write being fsynced before its
        # ack (docs/scale-out.md): the servers must run with it.
        for n in self.nats:
            config = n.varz()["jetstream"]["config"]
            synced = config.get("sync_always") is True
            assert synced == (n.sync == "always"), f"nats{n.index} sync is not {n.sync}: {config}"
        for node in self.nodes:
            node.start()
        self.wait_settled()
        return self

    def leaders_even(self, led=None):
        """Whether every live JetStream server leads shard streams and none leads two more
        than another (where the nodes move the leaders, a round or two after a change);
        `led`: the counts `shard_streams` read (read now if not given)."""
        if led is None:
            _, led = shard_streams(self)
        live = sum(1 for n in self.nats if n.alive())
        return len(led) == live and max(led.values()) - min(led.values()) <= 1

    def leader_of(self, stream):
        """The live JetStream server leading `stream`, as the servers report it (None while
        it has none)."""
        for _, s in stream_details(self):
            leader = (s.get("cluster") or {}).get("leader")
            if s["name"] == stream and leader:
                return next(x for x in self.nats if f"nats{x.index}" == leader)
        return None

    def live_nodes(self):
        return [n for n in self.nodes if n.alive()]

    def wait_settled(self, timeout=60):
        """Until every live node sees all live nodes and every shard has an owner that is
        live and serves it."""

        def settled():
            live = self.live_nodes()
            names = sorted(n.name for n in live)
            statuses = [n.status() for n in live]
            if any(sorted(s["members"]) != names or not s["complete"] for s in statuses):
                return False
            serving = {}
            for s in statuses:
                for shard in s["serving"]:
                    serving[shard] = s["node"]
            owners = statuses[0]["owners"]
            return all(serving.get(i) == o for i, o in enumerate(owners))

        wait_for("the cluster to settle", settled, timeout=timeout, every=0.2)

    def gateway(self, log_filter=None):
        """A fourth node that serves no shard and only routes (started on demand), logging
        with `log_filter` when given."""
        extra = ["--cluster-gateway", "--cluster-replicas", str(len(self.nats)), *self.shard_args]
        g = Node(9, self.nats_urls, self.workdir, self.lease_ms, extra=extra)
        g.log_filter = log_filter
        g.start()
        self.extra_nodes = getattr(self, "extra_nodes", []) + [g]
        wait_for("the gateway to see every owner", lambda: g.status()["complete"], timeout=30)
        return g

    def node(self, name):
        return next(n for n in self.nodes if n.name == name)

    def split_able(self):
        """Puts a cuttable link (`Link`) on every route between two JetStream servers; call
        before `start`. `split(i)` then cuts server i off from the others."""
        for a in self.nats:
            a.route_links = {b.index: Link(b.cluster_ports[b.index]) for b in self.nats if b is not a}
            self.links = getattr(self, "links", []) + list(a.route_links.values())

    def split(self, index, cut=True):
        """Cuts JetStream server `index` off from the other servers (both ways), or heals it."""
        for a in self.nats:
            for b, link in a.route_links.items():
                if index not in (a.index, b):
                    continue
                if cut:
                    link.cut()
                else:
                    link.heal()

    def linked(self, node):
        """Puts a cuttable link (`Link`) between `node` and each JetStream server; call
        before `start`. The links, in server order."""
        node.links = [Link(n.port) for n in self.nats]
        node.nats_urls = ",".join(f"nats://127.0.0.1:{link.port}" for link in node.links)
        self.links = getattr(self, "links", []) + node.links
        return node.links

    def locate(self, queue_url, via=None):
        """Where the queue is, as node `via` (default: the first live one) sees it: its
        `shard` and the `owner` serving it."""
        via = via or self.live_nodes()[0]
        q = urllib.parse.quote(queue_url, safe="")
        return get_json(f"{via.endpoint}/_sqsim/cluster/locate?queue_url={q}")

    def owner_of(self, queue_url, via=None):
        return self.locate(queue_url, via)["owner"]

    def stop(self):
        for n in self.nodes + getattr(self, "extra_nodes", []):
            if n.alive():
                n.signal(signal.SIGCONT)
                n.kill9()
        for n in self.nats:
            if n.alive():
                n.kill9()
        for link in getattr(self, "links", []):
            link.close()
        # The logs stay (small, read when a test fails); the JetStream stores go: a
        # benchmark's reach hundreds of MB each, and hundreds of runs filled the disk.
        for n in self.nats:
            n.unmount()
            shutil.rmtree(n.dir, ignore_errors=True)
            if getattr(n, "dead_end", None):
                n.dead_end.close()

    def logs(self):
        """Every live node's view of the cluster and the end of every process's log; the
        whole logs stay in the work directory."""
        out = [f"whole logs in {self.workdir}"]
        for n in self.nodes + getattr(self, "extra_nodes", []):
            try:
                s = n.status()
                out.append(f"{n.name}: members {s['members']}, serving {len(s['serving'])}, "
                           f"owners {dict(Counter(s['owners']))}, stats {s['stats']}")
            except Exception as e:  # a dead or stalled node
                out.append(f"{n.name}: no status ({e!r})")
        for p in sorted(self.workdir.glob("*.log")):
            out.append(f"==== {p.name}\n" + p.read_text(errors="replace")[-4000:])
        return "\n".join(out)

