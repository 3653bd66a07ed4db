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

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use futures_util::TryStreamExt;
use tokio::task::JoinHandle;

use super::batch_read::{self, is_deletion, Fence, Keys, ReadError};
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

const MEMBERS: &str = "sqsim_members";
const LEASES: &str = "sqsim_leases";

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

/// How long after a JetStream server turned batched reads down (older than 2.11) a node
/// tries them again (a rolling upgrade may have replaced it since).
const BATCHED_RETRY: Duration = Duration::from_secs(60);

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

/// `f`, or an error once `limit` passed (a JetStream call can wait for seconds while its
/// stream elects a leader; the loop must go on renewing the other leases).
async fn within<T, E: std::fmt::Display>(
    limit: Duration,
    f: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(limit, f).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err("timed out".into()),
    }
}

fn key(shard: u32) -> String {
    format!("shard{shard}")
}

/// The value and revision of `key` in `bucket` as the bucket's stream leader has it
/// (`None`: no such key, or deleted). Not a direct get (`kv::Store::entry`): those go to
/// any replica through a queue group, and one handed to a server cut off from the others
/// without a reset (a network dropping packets) is lost — about 40% of them in a split of
/// three servers, so every control step failed on some lease and no shard of the cut-off
/// side was ever taken over. (A batched read is a direct get too, but fenced and given a
/// short time: a lost or stale one only sends the step here.)
async fn leader_entry(bucket: &kv::Store, key: &str) -> Result<Option<(Bytes, u64)>, String> {
    Ok(match leader_last(bucket, key).await? {
        Last::Entry(value, revision) => Some((value, revision)),
        Last::Marker(_) | Last::Nothing => None,
    })
}

/// What a key's subject ends with, as its bucket's stream leader has it.
enum Last {
    Nothing,
    /// A delete or purge marker (the key is absent), at this revision.
    Marker(u64),
    Entry(Bytes, u64),
}

async fn leader_last(bucket: &kv::Store, key: &str) -> Result<Last, String> {
    let subject = format!("{}{key}", bucket.prefix);
    match bucket
        .stream
        .get_last_raw_message_by_subject(&subject)
        .await
    {
        Ok(m) if is_deletion(Some(&m.headers)) => Ok(Last::Marker(m.sequence)),
        Ok(m) => Ok(Last::Entry(m.payload, m.sequence)),
        Err(e) if e.kind() == jetstream::stream::LastRawMessageErrorKind::NoMessageFound => {
            Ok(Last::Nothing)
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Removes `key` from `bucket` for good as it stood at `revision` (an entry or a delete
/// marker): its subject's messages up to that revision are purged, so nothing stays
/// behind. A delete would leave a marker — one per node name that ever left, for good —
/// and a batched read of the members (at most 1,000 entries, markers included) stops
/// working once they pile up: every step would then read each name from the leader. What
/// was written after `revision` (a node back under its name) stays.
async fn purge_through(bucket: &kv::Store, key: &str, revision: u64) -> Result<(), String> {
    bucket
        .stream
        .purge()
        .filter(format!("{}{key}", bucket.prefix))
        .sequence(revision + 1)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// A node's heartbeat key in the leases bucket.
fn beat_key_of(node: &str) -> String {
    format!("beat-{node}")
}

/// Most delete markers (left in the members bucket by versions that deleted departed
/// nodes' names) purged per control step.
const MARKERS_PER_STEP: usize = 16;

async fn bucket(js: &jetstream::Context, name: &str, replicas: usize) -> Result<kv::Store, String> {
    if let Ok(kv) = js.get_key_value(name).await {
        return Ok(kv);
    }
    // The bucket's stream, laid out as the client's `create_key_value` would (which first
    // asks for account details that nats-server 2.9 spells differently).
    let config = jetstream::stream::Config {
        name: format!("KV_{name}"),
        subjects: vec![format!("$KV.{name}.>")],
        max_messages_per_subject: 1,
        num_replicas: replicas,
        storage: jetstream::stream::StorageType::File,
        discard: jetstream::stream::DiscardPolicy::New,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        ..Default::default()
    };
    js.get_or_create_stream(config)
        .await
        .map_err(|e| format!("cannot create the JetStream bucket {name}: {e}"))?;
    js.get_key_value(name)
        .await
        .map_err(|e| format!("cannot open the JetStream bucket {name}: {e}"))
}

/// Why joining did not work: worth retrying (JetStream is not ready yet: servers still
/// starting or electing, containers started in any order) or not (the configuration
/// contradicts the cluster's).
enum JoinError {
    NotReady(String),
    Refused(String),
}

/// The leases bucket's key for the secret nodes show each other.
const PEER_SECRET: &str = "peer-secret";

/// How long a node waits between attempts to join a JetStream that is not ready.
const JOIN_RETRY: Duration = Duration::from_secs(1);

/// Connects and joins: the buckets, the cluster's shard count, this node's membership.
async fn join(cluster: &Cluster) -> Result<(async_nats::Client, kv::Store, kv::Store), JoinError> {
    use JoinError::{NotReady, Refused};
    let c = &cluster.config;
    let servers = crate::store::jetstream::servers(&c.nats).map_err(|e| Refused(e.to_string()))?;
    let client = async_nats::connect(servers)
        .await
        .map_err(|e| NotReady(format!("cannot connect to NATS at {}: {e}", c.nats)))?;
    let js = jetstream::new(client.clone());
    let members = bucket(&js, MEMBERS, c.replicas).await.map_err(NotReady)?;
    let leases = bucket(&js, LEASES, c.replicas).await.map_err(NotReady)?;
    // Every node must hash queues into the same shards: the first one sets the number.
    let shards = Bytes::from(c.shards.to_string());
    if leases.create("shards", shards.clone()).await.is_err() {
        let set = leases
            .get("shards")
            .await
            .map_err(|e| NotReady(format!("cannot read the cluster's shard count: {e}")))?;
        if set.as_ref() != Some(&shards) {
            return Err(Refused(format!(
                "this cluster hashes queues into {} shards; --cluster-shards says {}",
                set.map(|v| String::from_utf8_lossy(&v).into_owned())
                    .unwrap_or_default(),
                c.shards
            )));
        }
    }
    // The first node makes up the peer secret; every node reads the one that won.
    let made = crate::config::new_secret();
    let _ = leases.create(PEER_SECRET, Bytes::from(made)).await;
    let secret = leases
        .get(PEER_SECRET)
        .await
        .map_err(|e| NotReady(format!("cannot read the cluster's peer secret: {e}")))?
        .ok_or_else(|| NotReady("the cluster's peer secret is not there yet".into()))?;
    cluster.set_peer_secret(String::from_utf8_lossy(&secret).into_owned());
    if !c.gateway {
        members
            .put(&c.node_id, Bytes::from(cluster.peer_url.clone()))
            .await
            .map_err(|e| NotReady(format!("cannot join the cluster: {e}")))?;
    }
    Ok((client, members, leases))
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

    /// Watches entry `key` at `revision`: whether it has stayed the same for a whole lease.
    fn silent(&mut self, key: String, revision: (u64, u64), now: Instant) -> bool {
        let seen = self.seen.entry(key).or_insert(Seen {
            revision,
            since: now,
        });
        if seen.revision != revision {
            *seen = Seen {
                revision,
                since: now,
            };
        }
        now.duration_since(seen.since) > self.lease()
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

    /// Lets the shards compress what they write only while every live lease holder can
    /// read it (`Owner::format`): a node of a version from before compression takes a
    /// compressed message for records. So during a rolling upgrade from such a version the
    /// upgraded nodes write as the old ones do, until the last old one's leases are gone.
    /// Set before this step takes any lease, so a shard opened now writes what its readers
    /// can read.
    fn choose_encoding(&self, owners: &[Option<Owner>]) {
        let readable = super::all_read_compressed(owners);
        let was = self.cluster.compress.swap(readable, Ordering::Relaxed);
        if was && !readable {
            tracing::warn!("a node of an older version holds shards: log messages are written uncompressed, which it can read");
        }
    }

    /// Says once, loudly, that a lease holder writes another log format: a node of an
    /// older version may misread what this one wrote (one from before formats were named
    /// takes a compressed message for records), so a cluster runs one version
    /// (`/_sqsim/cluster` lists them as `other_formats`).
    fn tell_formats(&mut self, owners: &[Option<Owner>]) {
        for (node, format) in super::other_formats(owners) {
            if self.told_formats.insert((node.clone(), format)) {
                tracing::error!(
                    node,
                    format,
                    ours = crate::store::LOG_FORMAT,
                    "a node of another sqsim version (another log format) holds shards: every node of a cluster must run the same version; stop them all and start them on one"
                );
            }
        }
    }

    /// This node's heartbeat key in the leases bucket.
    fn beat_key(&self) -> String {
        beat_key_of(self.me())
    }

    /// Forgets a departed node for good: its heartbeat in the leases bucket as it stands
    /// now, then its name in the members bucket as it stood at `revision`. The heartbeat
    /// goes first so that a step that fails between the two leaves the name, and the next
    /// step forgets both again; the other way round a failed purge left a heartbeat of a
    /// node no longer named anywhere. Should the node come back under its name in between,
    /// its new heartbeat may go too: its next step's fenced read then finds no heartbeat,
    /// reads from the leader once, and writes another (its new name, later than
    /// `revision`, stays).
    async fn forget(&self, name: &str, revision: u64) -> Result<(), String> {
        let beat = beat_key_of(name);
        match leader_last(&self.leases, &beat).await? {
            Last::Entry(_, at) | Last::Marker(at) => purge_through(&self.leases, &beat, at).await?,
            Last::Nothing => {}
        }
        purge_through(&self.members, name, revision).await
    }

    /// Forgets what was watched in one bucket (`"m."` or `"l."` keys): a gap.
    fn unwatch(&mut self, prefix: &str) {
        self.seen.retain(|k, _| !k.starts_with(prefix));
    }

    /// The cluster-wide setting under `key` (its JSON and bucket revision): as the step's
    /// batched read found it, or read from the leader.
    async fn setting(&self, from: &LeasesFrom, key: &str) -> Option<(serde_json::Value, u64)> {
        let (value, revision) = match from {
            LeasesFrom::Batched { settings } => settings.get(key).cloned()?,
            LeasesFrom::Leader => within(self.lease() / 4, self.leases.entry(key))
                .await
                .ok()
                .flatten()
                .map(|e| (e.value, e.revision))?,
        };
        Some((serde_json::from_slice(&value).ok()?, revision))
    }

    /// Follows the cluster's clock: applied when it changed in the bucket (a fan-out this
    /// node missed, or it joined after the change).
    async fn follow_clock(&self, from: &LeasesFrom) {
        if let Some((v, revision)) = self.setting(from, CLOCK_KEY).await {
            let offset = v["offset_ms"].as_i64().unwrap_or(0);
            self.cluster
                .apply_clock(offset, v["frozen_at"].as_u64(), revision);
        }
    }

    /// Follows the cluster's realism as [`Self::follow_clock`] follows its clock.
    async fn follow_realism(&self, from: &LeasesFrom) {
        if let Some((v, revision)) = self.setting(from, REALISM_KEY).await {
            if let Some(spec) = v["realism"].as_str() {
                self.cluster.apply_realism(spec, revision);
            }
        }
    }

    async fn tick(&mut self) -> Result<(), String> {
        // A gateway is no member and watches no lease: it only routes.
        let gateway = self.cluster.config.gateway;
        let beats = if gateway {
            Beats {
                members: None,
                leases: None,
                sent: Instant::now(),
            }
        } else {
            let beats = self.beat().await;
            self.cluster
                .note_writes(beats.members.is_some() && beats.leases.is_some());
            beats
        };
        let (members_written, leases_written) = (beats.members.is_some(), beats.leases.is_some());
        self.finish_opens().await;
        self.drop_broken().await;
        let now = Instant::now();
        // A step that came late is a gap too: a holder may have renewed unseen.
        let late = now.duration_since(self.last_read) > self.lease() / 2;
        let read = self.read(beats).await;
        self.last_read = Instant::now();
        if (!members_written || !leases_written || late || read.is_err()) && !gateway {
            tracing::debug!(
                members_written,
                leases_written,
                late,
                read_failed = read.is_err(),
                "a gap in watching the buckets"
            );
        }
        if !members_written || late || read.is_err() {
            self.unwatch("m.");
        }
        if !leases_written || late || read.is_err() {
            self.unwatch("l.");
        }
        if !leases_written || read.is_err() {
            // Nothing shows this step that the leases held are still this node's: none is
            // extended, and one kept too long without is dropped.
            let held: Vec<u32> = self.held.keys().copied().collect();
            for s in held {
                self.outage(s);
            }
        }
        let (mut live, leases, beats_read, from) = read?;
        // Side by side: on the leader path each is a read of its own.
        tokio::join!(self.follow_clock(&from), self.follow_realism(&from));
        let now = Instant::now();
        let mut gone = Vec::new();
        let watching_members = members_written && !late;
        live.retain(|(name, revision)| {
            if name == self.me() || !watching_members {
                return true;
            }
            let key = format!("m.{name}");
            let silent = self.silent(key.clone(), (*revision, 0), now);
            if silent
                && self
                    .seen
                    .get(&key)
                    .is_some_and(|s| now.duration_since(s.since) > self.lease() * 10)
            {
                gone.push((name.clone(), *revision));
            }
            !silent
        });
        // A node silent for ten leases is gone for good (its name would be listed forever).
        for (name, revision) in gone {
            if let Err(e) = within(self.lease() / 4, self.forget(&name, revision)).await {
                tracing::debug!(node = name, error = %e, "could not forget a departed node");
            }
        }
        let mut live: Vec<String> = live.into_iter().map(|(n, _)| n).collect();
        if !gateway && !live.iter().any(|m| m == self.me()) {
            live.push(self.me().to_string());
        }
        live.sort();
        let watching_leases = leases_written && !late;
        let shards = self.cluster.config.shards;
        let mut owners: Vec<Option<Owner>> = Vec::with_capacity(shards as usize);
        // Each lease as read: its revision and whether it went silent.
        let mut state: Vec<Option<(u64, bool)>> = Vec::with_capacity(shards as usize);
        // The holders whose heartbeats the next step reads.
        let mut holders = std::collections::BTreeSet::from([self.me().to_string()]);
        // Leases naming this process that it does not hold.
        let mut strays = std::collections::HashSet::new();
        for (s, lease) in leases.into_iter().enumerate() {
            let s = s as u32;
            match lease {
                Some((owner, revision)) => {
                    // A lease lives while the heartbeat of the process it names changes:
                    // watched as the pair (lease, heartbeat). A heartbeat naming another
                    // process (the node restarted under its name), absent or unreadable
                    // counts as one that does not change, so the lease goes silent once
                    // neither has changed for a whole lease. A heartbeat this read did not
                    // ask for (a holder new since the last step) is no sign of anything:
                    // the watch starts again next step.
                    let beat = match &owner {
                        Some(o) => {
                            holders.insert(o.node.clone());
                            match beats_read.get(&o.node) {
                                Some(Some((Some(b), at))) if b.process == o.process => Some(*at),
                                Some(_) => Some(0),
                                None => None,
                            }
                        }
                        None => Some(0),
                    };
                    let watch = format!("l.{s}");
                    // A lease of this process's that it no longer holds (dropped after an
                    // outage): its heartbeat keeps it alive for everyone else, so it is
                    // this node's to take again, or to give up.
                    let stray =
                        owner.as_ref().is_some_and(|o| self.ours(o)) && !self.held.contains_key(&s);
                    if stray {
                        strays.insert(s);
                    }
                    let silent = match beat {
                        _ if stray => true,
                        Some(b) => {
                            watching_leases
                                && !self.held.contains_key(&s)
                                && self.silent(watch, (revision, b), now)
                        }
                        None => {
                            self.seen.remove(&watch);
                            false
                        }
                    };
                    state.push(Some((revision, silent)));
                    // An unreadable value is an unknown holder: taken over once silent.
                    owners.push(owner.filter(|_| !silent));
                }
                None => {
                    state.push(None);
                    owners.push(None);
                }
            }
        }
        self.choose_encoding(&owners);
        // A lease this node holds that the read shows taken (or gone): lost, at once.
        let held: Vec<u32> = self.held.keys().copied().collect();
        for s in held {
            match &owners[s as usize] {
                Some(o) if self.ours(o) => {
                    let revision = state[s as usize].map_or(0, |(r, _)| r);
                    if let Some(h) = self.held.get_mut(&s) {
                        h.revision = h.revision.max(revision);
                    }
                }
                _ => {
                    // A batched read can miss a key (a replica catching up, see
                    // `batch_read`): the leader confirms before the shard goes.
                    if matches!(from, LeasesFrom::Batched { .. }) {
                        let ours = match self.leader_says_ours(s).await {
                            Ok(ours) => ours,
                            // Unknown: kept, as when a whole read fails.
                            Err(_) => self.held.get(&s).map(|h| h.revision),
                        };
                        if let Some(revision) = ours {
                            tracing::debug!(shard = s, "a batched read missed a held lease");
                            if let Some(h) = self.held.get_mut(&s) {
                                h.revision = h.revision.max(revision);
                            }
                            owners[s as usize] = Some(self.owner());
                            continue;
                        }
                    }
                    tracing::warn!(
                        shard = s,
                        "the lease shows another holder; no longer serving the shard"
                    );
                    self.drop_shard(s);
                    self.cluster.stats_mut().lost += 1;
                }
            }
        }
        self.beat_nodes = holders.into_iter().collect();
        // The step's heartbeat was written and the read after it (fenced by it, or from the
        // leader) shows these leases still this node's: each is extended from when the
        // heartbeat was sent. Anyone taking one over first watched that heartbeat stay the
        // same for a whole lease, so not before a quarter of a lease after this runs out.
        if leases_written {
            let until = self.valid_until(beats.sent);
            let serving = self
                .cluster
                .serving
                .read()
                .unwrap_or_else(|p| p.into_inner());
            for (s, h) in self.held.iter_mut() {
                h.renewed = h.renewed.max(beats.sent);
                if let Some(shard) = serving.get(s) {
                    shard.extend(until);
                }
            }
        }
        // Nodes starting together see each other before anyone takes everything.
        let settled = now.duration_since(self.started) >= self.lease() / 2;
        let preferred = placement::owners(shards, &live);
        for s in 0..shards {
            let mine = preferred[s as usize] == Some(self.me());
            if let Some(h) = self.held.get(&s) {
                self.orphaned.remove(&s);
                if !mine && h.opening.is_none() {
                    self.release(s).await;
                    owners[s as usize] = None;
                }
                continue;
            }
            let take = match (&owners[s as usize], state[s as usize]) {
                (Some(_), _) => {
                    self.orphaned.remove(&s);
                    continue;
                }
                // Ours but no longer held, and another node's to serve: given up at once.
                (None, Some((revision, true))) if !mine && strays.contains(&s) => {
                    self.free(s, revision).await;
                    continue;
                }
                // Silent (or unreadable and silent): taken on its revision.
                (None, Some((revision, true))) => Some(revision),
                // Present, not yet silent (an unreadable value being watched).
                (None, Some((_, false))) => continue,
                (None, None) => None,
            };
            let since = *self.orphaned.entry(s).or_insert(now);
            let abandoned = now.duration_since(since) > self.lease() * 2;
            let backing_off = self.backoff.get(&s).is_some_and(|t| now < *t);
            if settled && (mine || abandoned) && !backing_off && !gateway {
                self.acquire(s, take).await;
                if self.held.contains_key(&s) {
                    self.orphaned.remove(&s);
                }
            }
        }
        *self
            .cluster
            .members
            .write()
            .unwrap_or_else(|p| p.into_inner()) = live;
        let changed = {
            let mut current = self
                .cluster
                .owners
                .write()
                .unwrap_or_else(|p| p.into_inner());
            let changed = *current != owners;
            if changed {
                *current = owners.clone();
            }
            changed
        };
        if changed {
            self.tell_formats(&owners);
            self.cluster.notify();
        }
        Ok(())
    }

    /// Reads both buckets, side by side: the members with their revisions, each shard's
    /// lease and (when read with them) the clock's entry. Each bucket in one batched read
    /// fenced by this step's heartbeat in it (`batch_read`); from the bucket's leader, key
    /// by key, when that read does not count (no heartbeat written, a replica behind, no
    /// answer).
    async fn read(&self, beats: Beats) -> Result<(Members, Leases, BeatsRead, LeasesFrom), String> {
        let (members, leases) = futures_util::future::join(
            self.read_members(beats.members),
            self.read_leases(beats.leases),
        )
        .await;
        let (leases, beats, from) = leases?;
        Ok((members?, leases, beats, from))
    }

    /// The members bucket's live entries (see [`Self::read`]); `beat`: the revision of this
    /// step's heartbeat in it, if written.
    async fn read_members(&self, beat: Option<u64>) -> Result<Members, String> {
        let fence = beat.map(|revision| Fence {
            key: self.me(),
            revision,
        });
        match self.batched(&self.members, Keys::All, fence).await {
            Some(read) => {
                let markers = read.deleted.iter().take(MARKERS_PER_STEP);
                futures_util::future::join_all(markers.map(|(name, revision)| {
                    within(
                        self.lease() / 4,
                        purge_through(&self.members, name, *revision),
                    )
                }))
                .await;
                Ok(read
                    .by_key
                    .into_iter()
                    .map(|(name, (_, revision))| (name, revision))
                    .collect())
            }
            None => {
                self.cluster.stats_mut().leader_reads += 1;
                self.live().await.map_err(|e| format!("members: {e}"))
            }
        }
    }

    /// Every shard's lease and the heartbeats of the nodes in `beat_nodes` (see
    /// [`Self::read`]); `beat`: the revision of this step's heartbeat in the leases bucket,
    /// if written.
    async fn read_leases(
        &self,
        beat: Option<u64>,
    ) -> Result<(Leases, BeatsRead, LeasesFrom), String> {
        let beat_key = self.beat_key();
        let fence = beat.map(|revision| Fence {
            key: &beat_key,
            revision,
        });
        let owner = |(value, revision): (Bytes, u64)| {
            (serde_json::from_slice::<Owner>(&value).ok(), revision)
        };
        let beat_keys: Vec<String> = self.beat_nodes.iter().map(|n| beat_key_of(n)).collect();
        let keys: Vec<String> = self.lease_keys.iter().chain(&beat_keys).cloned().collect();
        if let Some(mut read) = self.batched(&self.leases, Keys::These(&keys), fence).await {
            let leases = (0..self.cluster.config.shards)
                .map(|s| read.by_key.remove(&key(s)).map(owner))
                .collect();
            let beats = self
                .beat_nodes
                .iter()
                .zip(&beat_keys)
                .map(|(n, k)| (n.clone(), read.by_key.remove(k).map(owner)))
                .collect();
            let settings = SETTING_KEYS
                .into_iter()
                .filter_map(|k| Some((k, read.by_key.remove(k)?)))
                .collect();
            return Ok((leases, beats, LeasesFrom::Batched { settings }));
        }
        self.cluster.stats_mut().leader_reads += 1;
        // The clock's and the realism's keys (last of `lease_keys`) are not read here:
        // `follow_clock` and `follow_realism` read them.
        let reads = self.lease_keys[..self.cluster.config.shards as usize]
            .iter()
            .chain(&beat_keys)
            .map(|k| async move { within(self.lease() / 4, leader_entry(&self.leases, k)).await });
        let mut entries = futures_util::future::join_all(reads).await.into_iter();
        let mut leases = Vec::with_capacity(self.cluster.config.shards as usize);
        for s in 0..self.cluster.config.shards {
            let entry = entries.next().expect("one read a shard");
            let entry = entry.map_err(|e| format!("lease of shard {s}: {e}"))?;
            leases.push(entry.map(owner));
        }
        let mut beats = BeatsRead::new();
        for (n, entry) in self.beat_nodes.iter().zip(entries) {
            let entry = entry.map_err(|e| format!("heartbeat of {n}: {e}"))?;
            beats.insert(n.clone(), entry.map(owner));
        }
        Ok((leases, beats, LeasesFrom::Leader))
    }

    /// `keys` of `bucket` in one batched read that counts: fenced by this step's heartbeat
    /// (unfenced only on a gateway, which takes nothing over: a late view only sends a
    /// request to a former holder, which refuses it). A replica behind the fence is asked
    /// again twice, a moment later (it learns that an entry is committed from the leader's
    /// next message); `None`: read from the leader instead.
    async fn batched(
        &self,
        bucket: &kv::Store,
        keys: Keys<'_>,
        fence: Option<Fence<'_>>,
    ) -> Option<batch_read::Entries> {
        if self
            .refused()
            .is_some_and(|at| at.elapsed() < BATCHED_RETRY)
            || (fence.is_none() && !self.cluster.config.gateway)
        {
            return None;
        }
        for attempt in 0..3u32 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(5 << attempt)).await;
            }
            let read = batch_read::last_entries(&self.client, bucket, keys, fence);
            let answer = match tokio::time::timeout(self.lease() / 10, read).await {
                Ok(answer) => answer,
                Err(_) => Err(ReadError::Failed("timed out".into())),
            };
            match answer {
                Ok(read) => {
                    // Under the lock: the two buckets' reads run side by side, and the
                    // change is told once.
                    if self.refused().take().is_some() {
                        tracing::info!(
                            "batched reads work again; the leaders are no longer read key by key"
                        );
                    }
                    self.cluster.stats_mut().batched_reads += 1;
                    return Some(read);
                }
                Err(e @ ReadError::Behind { .. }) => {
                    tracing::debug!(bucket = %bucket.name, error = %e, attempt, "batched read behind");
                    self.cluster.stats_mut().batched_behind += 1
                }
                Err(ReadError::Unsupported(e)) => {
                    if self.refused().replace(Instant::now()).is_none() {
                        tracing::warn!(error = %e, "a JetStream server does not take batched reads (nats-server 2.11 or newer does); reading every key from its bucket's leader, and trying again every minute");
                    }
                    break;
                }
                Err(ReadError::Failed(e)) => {
                    tracing::debug!(bucket = %bucket.name, error = %e, "batched read failed; reading from the leader");
                    break;
                }
            }
        }
        None
    }

    /// When a JetStream server last turned batched reads down, if it did.
    fn refused(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.batched_refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the leases bucket's leader shows this process holding shard `s`'s lease:
    /// its revision if so, `None` if another holds it or nobody does.
    async fn leader_says_ours(&self, s: u32) -> Result<Option<u64>, String> {
        let entry = within(self.lease() / 4, leader_entry(&self.leases, &key(s))).await?;
        Ok(entry.and_then(|(value, revision)| {
            serde_json::from_slice::<Owner>(&value)
                .is_ok_and(|o| self.ours(&o))
                .then_some(revision)
        }))
    }

    /// The lease on `s` could not be renewed because JetStream did not answer. The shard is
    /// served only until three quarters of a lease after its last renewal, as the lease
    /// says, whatever the reason: others may be watching the lease go silent. It is kept
    /// (engine and lease) for up to [`MAX_OUTAGE`], so that a renewal that goes through
    /// again (the bucket elected a leader) lets it serve at once, with no takeover; past
    /// that it is dropped.
    ///
    /// A first version served on while a read of the bucket still answered (which it does
    /// while the bucket elects its leader, when no one can take a lease over). But a node
    /// whose only JetStream server is split from the others also gets answers, from that
    /// server's copy, while the others take its shards over: it answered from a stale copy
    /// for up to 11 s, and acknowledged deletes that the new owner never saw (the message
    /// came back). Requests now wait out an election of the leases bucket instead.
    fn outage(&mut self, s: u32) {
        let Some(h) = self.held.get(&s) else {
            return;
        };
        if h.renewed.elapsed() > MAX_OUTAGE {
            tracing::warn!(
                shard = s,
                "lease not renewed for too long; no longer serving the shard"
            );
            self.drop_shard(s);
            self.cluster.stats_mut().lost += 1;
        }
    }

    /// Drops the shards whose store stopped taking writes (JetStream refused a write: another
    /// owner; or a write failed: the records in memory may be ahead of the log). The lease
    /// is freed, and the shard is recovered afresh from its log, here or elsewhere.
    async fn drop_broken(&mut self) {
        let broken: Vec<u32> = self
            .cluster
            .serving
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(_, sh)| {
                sh.engine
                    .journal()
                    .store()
                    .is_some_and(|st| !st.stats().writable)
            })
            .map(|(s, _)| *s)
            .collect();
        for s in broken {
            tracing::warn!(
                shard = s,
                "the shard's log stopped taking writes; recovering it again"
            );
            if let Some(h) = self.drop_shard(s) {
                self.free(s, h.revision).await;
            }
            self.cluster.stats_mut().lost += 1;
        }
    }

    /// The live members: every entry of the membership bucket. The subjects come from the
    /// stream's info and each entry from a direct read: neither creates a consumer (which
    /// in a clustered JetStream is a Raft group of its own, far too costly every step).
    async fn live(&self) -> Result<Vec<(String, u64)>, String> {
        let read = async {
            let prefix = format!("$KV.{MEMBERS}.");
            let subjects: Vec<(String, usize)> = self
                .members
                .stream
                .info_with_subjects(format!("{prefix}>"))
                .await
                .map_err(|e| e.to_string())?
                .try_collect()
                .await
                .map_err(|e| e.to_string())?;
            let mut live = Vec::new();
            let mut purged = 0;
            for (subject, _) in subjects {
                let Some(name) = subject.strip_prefix(&prefix) else {
                    continue;
                };
                match leader_last(&self.members, name).await? {
                    Last::Entry(_, revision) => live.push((name.to_string(), revision)),
                    // Markers past the batched read's limit make every step come here:
                    // purged as they are found, a few a step, until a batched read works.
                    Last::Marker(revision) if purged < MARKERS_PER_STEP => {
                        purged += 1;
                        // Failing, it is tried again next step; the read does not fail.
                        let _ = purge_through(&self.members, name, revision).await;
                    }
                    Last::Marker(_) | Last::Nothing => {}
                }
            }
            Ok::<_, String>(live)
        };
        within(self.lease() / 4, read).await
    }

    /// Stops answering for shard `s` at once; the shard, to close.
    fn stop_serving(&self, s: u32) -> Option<Arc<Shard>> {
        let shard = self
            .cluster
            .serving
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&s)?;
        shard.extend(Instant::now());
        self.cluster.notify();
        Some(shard)
    }

    /// Forgets shard `s` here and closes it in the background.
    fn drop_shard(&mut self, s: u32) -> Option<Held> {
        let held = self.held.remove(&s);
        if let Some(shard) = self.stop_serving(s) {
            tokio::task::spawn_blocking(move || shard.close());
        }
        if let Some(Held {
            opening: Some(handle),
            cancel,
            ..
        }) = &held
        {
            cancel.store(true, Ordering::Release);
            handle.abort();
        }
        held
    }

    /// Takes the lease on `s`: absent (`None`), or silent at `revision`.
    async fn acquire(&mut self, s: u32, silent: Option<u64>) {
        let sent = Instant::now();
        let taken = match silent {
            None => {
                within(
                    self.lease() / 4,
                    self.leases.create(key(s), self.owner_value()),
                )
                .await
            }
            Some(revision) => {
                let take = self.leases.update(key(s), self.owner_value(), revision);
                within(self.lease() / 4, take).await
            }
        };
        // Someone else took it first, or JetStream did not answer (the next step looks again).
        match taken {
            Ok(revision) => self.open(s, revision, sent),
            Err(e) => tracing::debug!(shard = s, ?silent, error = %e, "lease not taken"),
        }
    }

    /// Gives the lease on `s` up, if it is still at `revision`.
    async fn free(&self, s: u32, revision: u64) {
        let delete = self.leases.delete_expect_revision(key(s), Some(revision));
        if let Err(e) = within(self.lease() / 4, delete).await {
            tracing::debug!(shard = s, error = %e, "lease not given up; it runs out instead");
        }
    }

    /// Recovers shard `s` in the background, under the lease taken at `sent`.
    fn open(&mut self, s: u32, revision: u64, sent: Instant) {
        let c = &self.cluster;
        let (config, clock, mut settings) =
            (c.config.clone(), Arc::clone(&c.clock), c.settings.clone());
        // The cluster's realism now (a change while the shard opens is applied as it
        // starts serving: `Cluster::serve`).
        settings.realism = c.realism();
        let until = self.valid_until(sent);
        let compress = Arc::clone(&c.compress);
        tracing::info!(shard = s, "lease taken; recovering the shard");
        let cancel = Arc::new(AtomicBool::new(false));
        let cancelled = Arc::clone(&cancel);
        let opening = tokio::task::spawn_blocking(move || {
            Shard::open(&config, s, clock, settings, until, cancelled, compress)
        });
        self.held.insert(
            s,
            Held {
                revision,
                renewed: sent,
                opening: Some(opening),
                cancel,
            },
        );
    }

    async fn finish_opens(&mut self) {
        let done: Vec<u32> = self
            .held
            .iter()
            .filter(|(_, h)| h.opening.as_ref().is_some_and(JoinHandle::is_finished))
            .map(|(s, _)| *s)
            .collect();
        for s in done {
            let Some(h) = self.held.get_mut(&s) else {
                continue;
            };
            let renewed = h.renewed;
            let handle = h.opening.take().expect("finished opening");
            let opened = handle
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r.map_err(|e| e.to_string()));
            match opened {
                Ok(shard) => {
                    (self.cluster.on_open)(&shard.engine);
                    shard.extend(self.valid_until(renewed));
                    // With the realism as it is now: a change applied while it opened
                    // missed it.
                    self.cluster.serve(s, Arc::new(shard));
                    let mut stats = self.cluster.stats_mut();
                    stats.acquired += 1;
                    stats.last_open_ms = renewed.elapsed().as_millis() as u64;
                    drop(stats);
                    tracing::info!(shard = s, "serving the shard");
                    self.cluster.notify();
                }
                Err(e) => {
                    tracing::error!(shard = s, error = %e, "cannot open the shard; giving its lease back");
                    self.cluster.stats_mut().open_failures += 1;
                    self.backoff.insert(s, Instant::now() + self.lease());
                    if let Some(h) = self.held.remove(&s) {
                        self.free(s, h.revision).await;
                    }
                }
            }
        }
    }

    /// Gives shard `s` back: stops serving it, writes what it appended, then frees the lease
    /// for its preferred node.
    async fn release(&mut self, s: u32) {
        if let Some(shard) = self.stop_serving(s) {
            // What it appended is written first, for a bounded time (the loop must go on
            // renewing the other leases); after that the new holder's fence settles it.
            let closing = tokio::task::spawn_blocking(move || shard.close());
            let _ = tokio::time::timeout(self.lease() / 4, closing).await;
        }
        if let Some(h) = self.held.remove(&s) {
            self.free(s, h.revision).await;
        }
        self.orphaned.remove(&s);
        self.cluster.stats_mut().released += 1;
        tracing::info!(shard = s, "shard given back to its preferred node");
    }

    /// Leaves on shutdown: every shard given back at once (no one waits out a lease), and
    /// the membership removed.
    async fn leave(&mut self) {
        let held: Vec<u32> = self.held.keys().copied().collect();
        for s in held {
            if self.held.get(&s).is_some_and(|h| h.opening.is_some()) {
                if let Some(h) = self.drop_shard(s) {
                    self.free(s, h.revision).await;
                }
            } else {
                self.release(s).await;
            }
        }
        let _ = within(self.lease(), self.members.delete(self.me())).await;
        let beat = self.leases.delete(self.beat_key());
        let _ = within(self.lease(), beat).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::suite::{block_on, NatsServer};

    /// Forgetting a departed node purges its name at the revision watched: nothing stays
    /// (no delete marker to pile up), a delete marker left by an older version goes the
    /// same way, and a name written again since (a node back) is kept.
    #[test]
    fn a_forgotten_name_leaves_nothing_behind() {
        let server = NatsServer::start();
        block_on(async {
            let client = async_nats::connect(&server.url).await.unwrap();
            let js = jetstream::new(client.clone());
            let b = bucket(&js, "forget", 1).await.unwrap();
            let subjects = || async {
                let listed: Vec<(String, usize)> = b
                    .stream
                    .info_with_subjects("$KV.forget.>")
                    .await
                    .unwrap()
                    .try_collect()
                    .await
                    .unwrap();
                let mut names: Vec<String> = listed
                    .into_iter()
                    .map(|(s, _)| s.trim_start_matches("$KV.forget.").to_string())
                    .collect();
                names.sort();
                names
            };
            let gone = b.put("gone", "u".into()).await.unwrap();
            let old = b.put("back", "u".into()).await.unwrap();
            let again = b.put("back", "u2".into()).await.unwrap();
            b.put("left", "u".into()).await.unwrap();
            b.delete("left").await.unwrap();
            b.put("beat", "x".into()).await.unwrap();
            let Last::Marker(marker) = leader_last(&b, "left").await.unwrap() else {
                panic!("a deleted key ends with a marker");
            };
            let read = batch_read::last_entries(&client, &b, Keys::All, None)
                .await
                .unwrap();
            assert_eq!(read.deleted.get("left"), Some(&marker));

            purge_through(&b, "gone", gone).await.unwrap();
            purge_through(&b, "left", marker).await.unwrap();
            // Watched at `old`, written again since: stays.
            purge_through(&b, "back", old).await.unwrap();
            assert_eq!(subjects().await, ["back", "beat"]);
            assert!(matches!(
                leader_last(&b, "gone").await.unwrap(),
                Last::Nothing
            ));
            assert!(matches!(
                leader_last(&b, "left").await.unwrap(),
                Last::Nothing
            ));
            assert_eq!(
                leader_entry(&b, "back").await.unwrap(),
                Some((Bytes::from("u2"), again))
            );
            let read = batch_read::last_entries(&client, &b, Keys::All, None)
                .await
                .unwrap();
            assert!(read.deleted.is_empty(), "{read:?}");
            assert_eq!(read.by_key.len(), 2);
        });
    }
}
