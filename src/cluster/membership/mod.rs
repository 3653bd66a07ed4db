//! The control loop of one node: it heartbeats its membership, reads who is live and who
//! holds each shard's lease, takes the leases of shards it should own that nobody holds (or
//! whose holder stopped heartbeating), gives a shard back when its preferred node is live
//! and is not this one, and drops a shard it no longer holds.
//!
//! Leases and membership are entries of two JetStream key-value buckets. An entry's expiry
//! is **observed**, not kept by the server. A lease names its holder's process, and lives
//! as long as that process's heartbeat in the leases bucket (rewritten every step) changes:
//! another node takes it over only after it watched the lease and the heartbeat both stay
//! the same for a whole lease, reading without a gap (a failed read starts every watch
//! again). The holder extends each shard it holds once a step's heartbeat was written and
//! the read after it shows the lease still its own; nothing is written per lease, so an
//! idle cluster writes two heartbeats a step per node whatever its shards. A holder that
//! cannot reach JetStream while the buckets elect a new leader (seconds, in NATS) loses
//! nothing: nobody can have watched it go silent, and it goes on once the bucket answers.
//! Leases are taken with `create` (only if absent) or `update` on the silent revision: two
//! nodes never both take one. A holder that was stalled (its loop did not run) stops
//! answering before anyone can take over, and the log itself fences it (see
//! `store::jetstream`).
//!
//! A step reads each bucket in one batched request (`batch_read`), fenced by its own
//! heartbeat in that bucket: the answering replica must hold that write, so the read is as
//! current as one from the bucket's leader. Where that does not work (a replica behind, no
//! answer, a nats-server before 2.11, a node whose heartbeat failed) it reads every key
//! from the bucket's leader, as all steps once did.

mod buckets;
mod read;
mod settings;
mod shards;
mod step;

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::kv;
use bytes::Bytes;
use tokio::task::JoinHandle;

use self::buckets::{beat_key_of, join, key, within, JoinError, JOIN_RETRY};
use super::{placement, Cluster, Owner, Shard};
use crate::store::StoreError;

/// How long a holder keeps a shard (engine and lease, not serving) without renewing while
/// JetStream does not answer: longer than NATS takes to elect a bucket's new leader
/// (seconds), so that the shard is served again at once when it has one.
const MAX_OUTAGE: Duration = Duration::from_secs(10);

/// The key of the cluster's clock in the leases bucket.
pub(super) const CLOCK_KEY: &str = "clock";
/// The key under which the leases bucket keeps the cluster's realism.
pub(super) const REALISM_KEY: &str = "realism";
/// The cluster-wide settings the leases bucket keeps beside the leases, read every step.
const SETTING_KEYS: [&str; 2] = [CLOCK_KEY, REALISM_KEY];

/// A lease this node holds.
struct Held {
    revision: u64,
    /// When the heartbeat that last extended the lease (or the take) was sent.
    renewed: Instant,
    /// The shard being recovered, until it serves.
    opening: Option<JoinHandle<Result<Shard, StoreError>>>,
    /// Calls the recovery off (a running blocking task cannot be aborted).
    cancel: Arc<AtomicBool>,
}

/// The revisions of a step's heartbeats (`None`: not written), and when they were sent.
#[derive(Clone, Copy)]
struct Beats {
    members: Option<u64>,
    leases: Option<u64>,
    sent: Instant,
}

/// An entry as watched: its revision (for a lease, with its holder's heartbeat's) and
/// since when it has not changed.
#[derive(Clone, Copy)]
struct Seen {
    revision: (u64, u64),
    since: Instant,
}

/// The members a control step read, with their revisions.
type Members = Vec<(String, u64)>;
/// Each shard's lease as a control step read it: its holder (`None` if unreadable) and
/// revision; `None` if there is none.
type Leases = Vec<Option<(Option<Owner>, u64)>>;
/// The heartbeats a step read in the leases bucket, by node: the process it names (`None`
/// if unreadable: a version that wrote its URL there) and its revision; `None` if absent.
/// A node not in the map was not asked for.
type BeatsRead = HashMap<String, Option<(Option<Owner>, u64)>>;

/// Where a step's leases came from.
enum LeasesFrom {
    /// A batched read, with the settings' entries read alongside (by key; absent: not
    /// set).
    Batched {
        settings: HashMap<&'static str, (Bytes, u64)>,
    },
    /// The leader, key by key.
    Leader,
}

struct Control {
    cluster: Arc<Cluster>,
    client: async_nats::Client,
    members: kv::Store,
    leases: kv::Store,
    /// The leases bucket's keys a step reads: every shard's, then the clock's.
    lease_keys: Vec<String>,
    /// The nodes whose heartbeats a step reads: the holders the last read named, and this
    /// node.
    beat_nodes: Vec<String>,
    /// Set when a JetStream server turned batched reads down (older than 2.11): until
    /// [`BATCHED_RETRY`] after it, every step reads from the leaders, key by key.
    batched_refused: std::sync::Mutex<Option<Instant>>,
    held: HashMap<u32, Held>,
    started: Instant,
    /// Each bucket entry's revision as watched, by bucket key ("m.<node>" / "l.<shard>").
    seen: HashMap<String, Seen>,
    /// When this node last read both buckets whole.
    last_read: Instant,
    /// Since when each shard has had no owner (any node takes one left too long).
    orphaned: HashMap<u32, Instant>,
    /// Shards that failed to open here, not retried before this time.
    backoff: HashMap<u32, Instant>,
    /// Lease holders of another log format already told of in the log (node, format).
    told_formats: std::collections::BTreeSet<(String, u32)>,
}

/// Connects, joins (retrying until JetStream is ready, never giving up on a cluster that
/// is still forming) and starts the loop.
pub(super) async fn start(cluster: Arc<Cluster>) -> Result<(), String> {
    let mut attempts = 0u32;
    let (client, members, leases) = loop {
        match join(&cluster).await {
            Ok(joined) => break joined,
            Err(JoinError::Refused(e)) => return Err(e),
            Err(JoinError::NotReady(e)) => {
                attempts += 1;
                if attempts == 1 || attempts.is_multiple_of(10) {
                    tracing::warn!(error = %e, attempts, "JetStream is not ready for this node yet; retrying every second");
                }
                if *cluster.stop.borrow() {
                    return Err(e);
                }
                tokio::time::sleep(JOIN_RETRY).await;
            }
        }
    };
    if attempts > 0 {
        tracing::info!(attempts, "joined the cluster once JetStream was ready");
    }
    let _ = cluster.leases.set(leases.clone());
    super::leaders::spawn(Arc::clone(&cluster), client.clone());
    let lease_keys = (0..cluster.config.shards)
        .map(key)
        .chain(SETTING_KEYS.map(str::to_string))
        .collect();
    let mut control = Control {
        cluster: Arc::clone(&cluster),
        client,
        members,
        leases,
        lease_keys,
        beat_nodes: vec![cluster.config.node_id.clone()],
        batched_refused: std::sync::Mutex::new(None),
        held: HashMap::new(),
        started: Instant::now(),
        seen: HashMap::new(),
        last_read: Instant::now(),
        orphaned: HashMap::new(),
        backoff: HashMap::new(),
        told_formats: Default::default(),
    };
    let mut stop = cluster.stop.subscribe();
    tokio::spawn(async move {
        let tick = control.cluster.config.lease / 12;
        loop {
            if *stop.borrow_and_update() {
                control.leave().await;
                control.cluster.left.send_replace(true);
                return;
            }
            if let Err(e) = control.tick().await {
                tracing::warn!(error = %e, "cluster control step failed; retrying");
            }
            let _ = tokio::time::timeout(tick, stop.changed()).await;
        }
    });
    Ok(())
}

impl Control {
    fn lease(&self) -> Duration {
        self.cluster.config.lease
    }

    fn me(&self) -> &str {
        &self.cluster.config.node_id
    }

    fn owner(&self) -> Owner {
        Owner {
            node: self.me().to_string(),
            url: self.cluster.peer_url.clone(),
            process: self.cluster.process.clone(),
            format: crate::store::LOG_FORMAT,
        }
    }

    fn owner_value(&self) -> Bytes {
        Bytes::from(serde_json::to_vec(&self.owner()).unwrap_or_default())
    }

    /// Until when a lease renewed at `at` lets this node answer: a quarter of the lease
    /// before anyone else can have watched it go silent.
    fn valid_until(&self, at: Instant) -> Instant {
        at + self.lease() * 3 / 4
    }

    fn ours(&self, o: &Owner) -> bool {
        o.process == self.cluster.process
    }

    /// Writes this node's heartbeats: its membership, and a key of its own in the leases
    /// bucket naming this process, which keeps every lease it holds alive. A step counts as
    /// watching a bucket only if this node could write to it in that step: reads alone can
    /// succeed while the bucket elects a leader (any replica answers them), when no holder
    /// can heartbeat.
    ///
    /// Returns the revisions written (`None`: not written), which fence the step's reads,
    /// and when they were sent, from which the leases held are extended.
    async fn beat(&mut self) -> Beats {
        let limit = self.lease() / 4;
        let url = Bytes::from(self.cluster.peer_url.clone());
        let sent = Instant::now();
        let (members, leases) = tokio::join!(
            within(limit, self.members.put(self.me(), url)),
            within(limit, self.leases.put(self.beat_key(), self.owner_value())),
        );
        Beats {
            members: members.ok(),
            leases: leases.ok(),
            sent,
        }
    }

    /// This node's heartbeat key in the leases bucket.
    fn beat_key(&self) -> String {
        beat_key_of(self.me())
    }
}
