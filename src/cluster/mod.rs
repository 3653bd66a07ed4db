//! Cluster mode (issue 17; design in `docs/scale-out.md`): queues are hashed into shards,
//! each shard is served by exactly one node at a time (the holder of its lease in a
//! JetStream key-value bucket), and each shard's changes go to its own replicated JetStream
//! stream through the durable store seam, so any node can take a shard over from its log.
//! This module keeps the membership, the leases and the shards this node serves; the server
//! routes each request to the shard's engine here or forwards it to the owner.
//!
//! - `placement`: queue → shard, shard → preferred node (rendezvous hashing).
//! - `membership`: the loop that heartbeats (which keeps the leases held alive), takes and
//!   gives back leases.
//! - `shard`: one served shard (an engine on its stream).
//! - `leaders`: each shard stream's leadership moved to an even share per JetStream server.

pub(crate) mod admin;
mod batch_read;
pub(crate) mod courier;
mod leaders;
mod membership;
pub(crate) mod peers;
pub(crate) mod placement;
mod realism;
mod reset;
pub(crate) mod route;
mod shard;
mod status;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::config;
use crate::engine::{Clock, Engine, EngineSettings, QueueId};

pub(crate) use shard::Shard;

/// Called with each shard's engine once it is recovered, before it serves (the server
/// starts its compactor and resumes its move tasks).
pub(crate) type OnOpen = Box<dyn Fn(&Arc<Engine>) + Send + Sync>;

/// Who holds a shard's lease.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Owner {
    pub node: String,
    pub url: String,
    /// The process that took the lease: a node restarted under the same name is another
    /// holder (its former process's leases are taken over only once silent).
    #[serde(default)]
    pub process: String,
    /// The log format its process writes (`store::LOG_FORMAT`); 0: a version from before
    /// formats were named, which cannot read compressed log messages.
    #[serde(default)]
    pub format: u32,
}

/// The lease holders whose process writes another log format than this one (`Owner::format`),
/// with that format, each once: a cluster must run one version (docs/scale-out.md), and an
/// older node may misread what a newer one wrote.
pub(crate) fn other_formats(owners: &[Option<Owner>]) -> BTreeMap<String, u32> {
    owners
        .iter()
        .flatten()
        .filter(|o| o.format != crate::store::LOG_FORMAT)
        .map(|o| (o.node.clone(), o.format))
        .collect()
}

/// Whether every live lease holder reads compressed log messages: only then may the
/// shards' stores write them.
pub(crate) fn all_read_compressed(owners: &[Option<Owner>]) -> bool {
    owners
        .iter()
        .flatten()
        .all(|o| o.format >= crate::store::COMPRESSED_SINCE)
}

/// Where a request for a shard goes.
#[derive(Debug, Clone)]
pub(crate) enum Place {
    /// This node serves it, with this engine.
    Here(Arc<Engine>),
    /// The owner is another node, at this URL.
    There(String),
}

/// Counters for `/_sqsim/cluster`.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub(crate) struct ClusterStats {
    /// Shards this node took over (including at start).
    pub acquired: u64,
    /// Shards this node gave back to their preferred node.
    pub released: u64,
    /// Shards this node lost (lease not extended in time, or taken).
    pub lost: u64,
    /// Shards that failed to open.
    pub open_failures: u64,
    /// The last takeover's time from lease to serving, ms.
    pub last_open_ms: u64,
    /// Stream leaderships this node moved to their target server (`leaders`).
    pub leader_moves: u64,
    /// Control steps' reads of a bucket done in one batched request (`batch_read`).
    pub batched_reads: u64,
    /// Batched reads answered by a replica behind the step's heartbeat (asked again).
    pub batched_behind: u64,
    /// Control steps' reads of a bucket done key by key from its leader instead.
    pub leader_reads: u64,
}

/// This node's view of the cluster.
pub(crate) struct Cluster {
    pub config: config::Cluster,
    /// The URL peers reach this node at.
    pub peer_url: String,
    /// This process, in the leases it takes.
    pub process: String,
    clock: Arc<Clock>,
    settings: EngineSettings,
    on_open: OnOpen,
    /// Shards this node serves now.
    serving: RwLock<BTreeMap<u32, Arc<Shard>>>,
    /// Each shard's lease holder, as last read.
    owners: RwLock<Vec<Option<Owner>>>,
    /// Live nodes, as last read.
    members: RwLock<Vec<String>>,
    stats: RwLock<ClusterStats>,
    /// Bumped whenever `serving` or `owners` change: requests waiting for an owner look again.
    changed: watch::Sender<u64>,
    /// The leases bucket, once joined: it also keeps the cluster's clock.
    leases: std::sync::OnceLock<async_nats::jetstream::kv::Store>,
    /// The bucket revision of the clock state this node applied last: an older one (a
    /// fan-out and the bucket read crossing) is never applied after it.
    clock_revision: std::sync::Mutex<u64>,
    /// Realism for every queue: the cluster's (`/_sqsim/realism` through any node; the
    /// leases bucket keeps it), with the bucket revision it was applied at (0: the start-up
    /// setting, `--realism`).
    realism: std::sync::Mutex<(crate::engine::Realism, u64)>,
    /// The secret nodes show each other (kept in the leases bucket: whoever can reach the
    /// cluster's JetStream is a peer; nobody else is).
    peer_secret: std::sync::OnceLock<String>,
    /// Since when this node's writes to the buckets (membership and lease heartbeats) have
    /// failed, if they do: its leases are not extended, so it is about to serve nothing.
    writes_failing_since: std::sync::Mutex<Option<Instant>>,
    /// Whether the shards' stores may compress what they write: not while a lease holder
    /// of an older log format that cannot read it is live (`Owner::format`), nor before
    /// the first read of the leases says so.
    compress: Arc<std::sync::atomic::AtomicBool>,
    /// Set to leave the cluster (shutdown); the loop answers on `left`.
    stop: watch::Sender<bool>,
    left: watch::Sender<bool>,
}

impl Cluster {
    /// The secret peers send each other (`None` until joined).
    pub(crate) fn peer_secret(&self) -> Option<&str> {
        self.peer_secret.get().map(String::as_str)
    }

    /// Sets the secret read from the cluster on joining.
    pub(super) fn set_peer_secret(&self, secret: String) {
        let _ = self.peer_secret.set(secret);
    }
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("node_id", &self.config.node_id)
            .field("peer_url", &self.peer_url)
            .finish_non_exhaustive()
    }
}

/// How long a request waits for its shard to get an owner (a failover under way) before it
/// is answered ServiceUnavailable (which SDKs retry).
pub(crate) const OWNER_WAIT: Duration = Duration::from_secs(15);

impl Cluster {
    /// Joins the cluster: connects to JetStream and starts the control loop. Shards are
    /// taken in the background; requests for a shard wait until someone serves it.
    pub(crate) async fn start(
        config: config::Cluster,
        peer_url: String,
        clock: Arc<Clock>,
        settings: EngineSettings,
        on_open: OnOpen,
    ) -> Result<Arc<Cluster>, String> {
        let shards = config.shards as usize;
        let realism = settings.realism.clone();
        let cluster = Arc::new(Cluster {
            config,
            peer_url,
            process: uuid::Uuid::new_v4().simple().to_string(),
            clock,
            settings,
            on_open,
            serving: RwLock::default(),
            owners: RwLock::new(vec![None; shards]),
            members: RwLock::default(),
            stats: RwLock::default(),
            changed: watch::Sender::new(0),
            leases: std::sync::OnceLock::new(),
            clock_revision: std::sync::Mutex::new(0),
            realism: std::sync::Mutex::new((realism, 0)),
            peer_secret: std::sync::OnceLock::new(),
            writes_failing_since: std::sync::Mutex::new(None),
            compress: Arc::default(),
            stop: watch::Sender::new(false),
            left: watch::Sender::new(false),
        });
        membership::start(Arc::clone(&cluster)).await?;
        Ok(cluster)
    }

    /// This node's name.
    pub(crate) fn node_id(&self) -> &str {
        &self.config.node_id
    }

    /// The shard queue `id` lives in.
    pub(crate) fn shard_of(&self, id: &QueueId) -> u32 {
        placement::shard_of(id, self.config.shards)
    }

    /// Where requests for `shard` go now, waiting (until `deadline`) while it has no owner
    /// or its owner is this node and is still opening it.
    pub(crate) async fn locate(&self, shard: u32, deadline: Instant) -> Option<Place> {
        let mut changed = self.changed.subscribe();
        loop {
            changed.borrow_and_update();
            if let Some(place) = self.place(shard) {
                return Some(place);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            // A timeout, too: a lease held by a node that died runs out without a change.
            let _ =
                tokio::time::timeout(left.min(Duration::from_millis(100)), changed.changed()).await;
        }
    }

    /// Returns once another node than the one at `url` holds `shard`'s lease, as far as
    /// this node knows: a request forwarded there is then abandoned and sent to the new
    /// owner (a stalled owner would hold it forever, and once resumed it no longer serves
    /// the shard, so it never carries the request out). A lease merely seen silent does not
    /// count: the request may still be answered.
    pub(crate) async fn moved_from(&self, shard: u32, url: &str) {
        let mut changed = self.changed.subscribe();
        loop {
            changed.borrow_and_update();
            let moved = self
                .owners
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(shard as usize)
                .is_some_and(|o| o.as_ref().is_some_and(|o| o.url != url));
            if moved {
                return;
            }
            if changed.changed().await.is_err() {
                return;
            }
        }
    }

    /// Returns once the node at `url` holds no shard any more as far as this node knows:
    /// its leases were taken over, or went silent (unlike [`Self::moved_from`], silence
    /// counts: a question to every node then stops waiting for that node's answer and asks
    /// whoever serves its shards next, which is harmless if the node was only slow).
    pub(crate) async fn no_longer_serving(&self, url: &str) {
        let mut changed = self.changed.subscribe();
        loop {
            changed.borrow_and_update();
            if !self.peers().iter().any(|p| p == url) || changed.changed().await.is_err() {
                return;
            }
        }
    }

    /// Where requests for `shard` go now, if it has an owner (without waiting).
    pub(crate) fn place(&self, shard: u32) -> Option<Place> {
        let owner = self
            .owners
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(shard as usize)?
            .clone();
        match owner {
            Some(o) if o.process == self.process => self.here(shard),
            // This node's former process (restarted): wait for its lease to lapse.
            Some(o) if o.url == self.peer_url => None,
            // The last read names another holder: never answer from this node's copy.
            Some(o) => Some(Place::There(o.url)),
            None => self.here(shard),
        }
    }

    fn here(&self, shard: u32) -> Option<Place> {
        self.serving_shard(shard)
            .map(|s| Place::Here(Arc::clone(&s.engine)))
    }

    fn serving_shard(&self, shard: u32) -> Option<Arc<Shard>> {
        self.serving
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&shard)
            .filter(|s| s.is_valid())
            .cloned()
    }

    /// The node holding `shard`'s lease, as last read.
    pub(crate) fn owner_of(&self, shard: u32) -> Option<String> {
        self.owners
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(shard as usize)?
            .as_ref()
            .map(|o| o.node.clone())
    }

    /// The engines of the shards this node serves now.
    pub(crate) fn engines(&self) -> Vec<Arc<Engine>> {
        self.served().into_iter().map(|(_, e)| e).collect()
    }

    /// The shards this node serves now, with their engines.
    pub(crate) fn served(&self) -> Vec<(u32, Arc<Engine>)> {
        self.serving
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|s| s.is_valid())
            .map(|s| (s.index, Arc::clone(&s.engine)))
            .collect()
    }

    /// The URLs of the other nodes that own shards, each once.
    pub(crate) fn peers(&self) -> Vec<String> {
        let owners = self.owners.read().unwrap_or_else(|p| p.into_inner());
        let mut urls: Vec<String> = owners
            .iter()
            .flatten()
            .filter(|o| o.process != self.process && o.url != self.peer_url)
            .map(|o| o.url.clone())
            .collect();
        urls.sort();
        urls.dedup();
        urls
    }

    /// Leaves the cluster: gives every shard back (what they appended written first) and
    /// removes this node from the membership, so others take over at once.
    pub(crate) async fn leave(&self) {
        let mut left = self.left.subscribe();
        self.stop.send_replace(true);
        let _ = tokio::time::timeout(Duration::from_secs(10), left.wait_for(|l| *l)).await;
    }

    fn stats_mut(&self) -> std::sync::RwLockWriteGuard<'_, ClusterStats> {
        self.stats.write().unwrap_or_else(|p| p.into_inner())
    }

    fn notify(&self) {
        self.changed.send_modify(|n| *n += 1);
    }
}

/// The log size past which a shard's snapshot is considered: small, because a node taking
/// the shard over reads the log since the last snapshot before it serves (a log of live
/// messages only is left as it is: a snapshot of them would be as long to read).
const COMPACT_AFTER: u64 = 4 << 20;

/// Joining is assembly: the cluster, each shard's compactor, move tasks and couriers, and
/// the client peers are reached with (here, above `route` and `courier`, which both use it).
impl route::Link {
    /// Joins the cluster described in `state.config`; each shard this node takes gets its
    /// compactor and resumes its move tasks.
    pub(crate) async fn join(state: &crate::control::Plane) -> Result<Option<route::Link>, String> {
        let Some(config) = state.config.cluster.clone() else {
            return Ok(None);
        };
        let peer_url = config
            .peer_url
            .clone()
            .unwrap_or_else(|| format!("http://127.0.0.1:{}", state.local_addr.port()));
        // Couriers need the link, which exists only once the cluster has started.
        let cell: Arc<std::sync::OnceLock<route::Link>> = Arc::default();
        let for_couriers = Arc::clone(&cell);
        let on_open = Box::new(move |engine: &Arc<Engine>| {
            crate::engine::spawn_compactor(Arc::downgrade(engine), COMPACT_AFTER);
            crate::engine::moves::task::resume(engine);
            courier::spawn(Arc::clone(&for_couriers), Arc::downgrade(engine));
        });
        let cluster = Cluster::start(
            config,
            peer_url.trim_end_matches('/').to_string(),
            Arc::clone(state.engine.clock()),
            state.config.engine.clone(),
            on_open,
        )
        .await?;
        let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(1)));
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(connector);
        let link = route::Link {
            cluster,
            client,
            local_port: state.local_addr.port(),
        };
        let _ = cell.set(link.clone());
        Ok(Some(link))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lease written by a version from before log formats were named has no `format`: it
    /// reads as 0 and is listed, as is a newer one's; this version's are not.
    #[test]
    fn holders_of_another_log_format_are_listed_once() {
        let old: Owner =
            serde_json::from_str(r#"{"node":"a","url":"http://a","process":"p1"}"#).unwrap();
        assert_eq!(old.format, 0);
        let ours = Owner {
            node: "b".into(),
            url: "http://b".into(),
            process: "p2".into(),
            format: crate::store::LOG_FORMAT,
        };
        let newer = Owner {
            node: "c".into(),
            format: crate::store::LOG_FORMAT + 1,
            ..ours.clone()
        };
        let again: Owner = serde_json::from_slice(&serde_json::to_vec(&ours).unwrap()).unwrap();
        assert_eq!(again, ours);
        let owners = [
            Some(old.clone()),
            None,
            Some(ours.clone()),
            Some(old),
            Some(newer),
        ];
        let listed: Vec<(String, u32)> = other_formats(&owners).into_iter().collect();
        assert_eq!(
            listed,
            [("a".into(), 0), ("c".into(), crate::store::LOG_FORMAT + 1)]
        );
        assert!(!all_read_compressed(&owners));
        assert!(other_formats(&[Some(ours.clone()), None]).is_empty());
        assert!(all_read_compressed(&[Some(ours), None]));
        assert!(all_read_compressed(&[]));
    }
}
