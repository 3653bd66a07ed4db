//! The control loop of one node: it heartbeats its membership, reads who is live and who
//! holds each shard's lease, takes the leases of shards it should own that nobody holds,
//! renews what it holds, gives a shard back when its preferred node is live and is not this
//! one, and drops a shard whose lease it could not renew in time.
//!
//! Leases and membership are entries of two JetStream key-value buckets whose entries live
//! `lease` long unless rewritten (the bucket's max age): a node that dies loses both within
//! one lease. Leases are taken with `create` (only if absent) and renewed with `update` on
//! the last revision, so two nodes can never both think they took one; a node that cannot
//! renew stops answering for the shard before its lease can have run out (a quarter of the
//! lease early), and the log itself fences it (see `store::jetstream`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use futures_util::TryStreamExt;
use tokio::task::JoinHandle;

use super::{placement, Cluster, Owner, Shard};
use crate::store::StoreError;

const MEMBERS: &str = "sqsim_members";
const LEASES: &str = "sqsim_leases";

/// A lease this node holds.
struct Held {
    revision: u64,
    /// When the last successful renewal (or the take) was sent.
    renewed: Instant,
    /// The shard being recovered, until it serves.
    opening: Option<JoinHandle<Result<Shard, StoreError>>>,
}

struct Control {
    cluster: Arc<Cluster>,
    members: kv::Store,
    leases: kv::Store,
    held: HashMap<u32, Held>,
    started: Instant,
    last_beat: Instant,
    /// Since when each shard has had no owner (any node takes one left too long).
    orphaned: HashMap<u32, Instant>,
    /// Shards that failed to open here, not retried before this time.
    backoff: HashMap<u32, Instant>,
}

fn key(shard: u32) -> String {
    format!("shard{shard}")
}

async fn bucket(
    js: &jetstream::Context,
    name: &str,
    max_age: Duration,
    replicas: usize,
) -> Result<kv::Store, String> {
    if let Ok(kv) = js.get_key_value(name).await {
        return Ok(kv);
    }
    // The bucket's stream, laid out as the client's `create_key_value` would (which first
    // asks for account details that nats-server 2.9 spells differently).
    let config = jetstream::stream::Config {
        name: format!("KV_{name}"),
        subjects: vec![format!("$KV.{name}.>")],
        max_messages_per_subject: 1,
        max_age,
        duplicate_window: max_age,
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

/// Connects, joins and starts the loop.
pub(super) async fn start(cluster: Arc<Cluster>) -> Result<(), String> {
    let c = &cluster.config;
    let client = async_nats::connect(c.nats.as_str())
        .await
        .map_err(|e| format!("cannot connect to NATS at {}: {e}", c.nats))?;
    let js = jetstream::new(client);
    let members = bucket(&js, MEMBERS, c.lease, c.replicas).await?;
    let leases = bucket(&js, LEASES, c.lease, c.replicas).await?;
    members
        .put(&c.node_id, Bytes::from(cluster.peer_url.clone()))
        .await
        .map_err(|e| format!("cannot join the cluster: {e}"))?;
    let mut control = Control {
        cluster: Arc::clone(&cluster),
        members,
        leases,
        held: HashMap::new(),
        started: Instant::now(),
        last_beat: Instant::now(),
        orphaned: HashMap::new(),
        backoff: HashMap::new(),
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

    fn owner_value(&self) -> Bytes {
        Bytes::from(
            serde_json::to_vec(&Owner {
                node: self.me().to_string(),
                url: self.cluster.peer_url.clone(),
            })
            .unwrap_or_default(),
        )
    }

    /// Until when a lease renewed at `at` lets this node answer: a quarter of the lease
    /// before it can run out in JetStream.
    fn valid_until(&self, at: Instant) -> Instant {
        at + self.lease() * 3 / 4
    }

    async fn tick(&mut self) -> Result<(), String> {
        let now = Instant::now();
        if now.duration_since(self.last_beat) >= self.lease() / 3 {
            self.members
                .put(self.me(), Bytes::from(self.cluster.peer_url.clone()))
                .await
                .map_err(|e| format!("heartbeat: {e}"))?;
            self.last_beat = now;
        }
        self.renew().await;
        self.finish_opens().await;
        self.drop_broken().await;
        let mut live: Vec<String> = self
            .members
            .keys()
            .await
            .map_err(|e| format!("members: {e}"))?
            .try_collect()
            .await
            .map_err(|e| format!("members: {e}"))?;
        if !live.iter().any(|m| m == self.me()) {
            live.push(self.me().to_string());
        }
        live.sort();
        let shards = self.cluster.config.shards;
        let mut owners: Vec<Option<Owner>> = Vec::with_capacity(shards as usize);
        for s in 0..shards {
            let entry = self
                .leases
                .entry(key(s))
                .await
                .map_err(|e| format!("lease of shard {s}: {e}"))?;
            owners.push(
                entry
                    .filter(|e| e.operation == kv::Operation::Put)
                    .and_then(|e| serde_json::from_slice(&e.value).ok()),
            );
        }
        // Nodes starting together see each other before anyone takes everything.
        let settled = now.duration_since(self.started) >= self.lease() / 2;
        for s in 0..shards {
            let preferred = placement::owner(s, &live);
            let mine = preferred == Some(self.me());
            if let Some(h) = self.held.get(&s) {
                if !mine && h.opening.is_none() {
                    self.release(s).await;
                    owners[s as usize] = None;
                }
                continue;
            }
            match &owners[s as usize] {
                Some(_) => {
                    self.orphaned.remove(&s);
                }
                None => {
                    let since = *self.orphaned.entry(s).or_insert(now);
                    let abandoned = now.duration_since(since) > self.lease() * 2;
                    let backing_off = self.backoff.get(&s).is_some_and(|t| now < *t);
                    if settled && (mine || abandoned) && !backing_off {
                        self.acquire(s).await;
                    }
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
            *current = owners;
            changed
        };
        if changed {
            self.cluster.notify();
        }
        Ok(())
    }

    async fn renew(&mut self) {
        let due: Vec<u32> = self
            .held
            .iter()
            .filter(|(_, h)| h.renewed.elapsed() >= self.lease() / 3)
            .map(|(s, _)| *s)
            .collect();
        for s in due {
            let sent = Instant::now();
            let revision = self.held[&s].revision;
            match self
                .leases
                .update(key(s), self.owner_value(), revision)
                .await
            {
                Ok(r) => {
                    let until = self.valid_until(sent);
                    if let Some(h) = self.held.get_mut(&s) {
                        h.revision = r;
                        h.renewed = sent;
                    }
                    if let Some(shard) = self.serving(s) {
                        shard.extend(until);
                    }
                }
                Err(e) => {
                    let taken = e.kind() == kv::UpdateErrorKind::WrongLastRevision;
                    let expired = Instant::now() >= self.valid_until(self.held[&s].renewed);
                    if taken || expired {
                        tracing::warn!(shard = s, error = %e, "lease lost; no longer serving the shard");
                        self.drop_shard(s);
                        self.cluster.stats_mut().lost += 1;
                    }
                }
            }
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
                let _ = self
                    .leases
                    .delete_expect_revision(key(s), Some(h.revision))
                    .await;
            }
            self.cluster.stats_mut().lost += 1;
        }
    }

    fn serving(&self, s: u32) -> Option<Arc<Shard>> {
        self.cluster
            .serving
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&s)
            .cloned()
    }

    /// Forgets shard `s` here and closes it in the background.
    fn drop_shard(&mut self, s: u32) -> Option<Held> {
        let held = self.held.remove(&s);
        let shard = self
            .cluster
            .serving
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&s);
        if let Some(shard) = shard {
            shard.extend(Instant::now());
            self.cluster.notify();
            tokio::task::spawn_blocking(move || shard.close());
        }
        if let Some(Held {
            opening: Some(handle),
            ..
        }) = &held
        {
            handle.abort();
        }
        held
    }

    async fn acquire(&mut self, s: u32) {
        let sent = Instant::now();
        let Ok(revision) = self.leases.create(key(s), self.owner_value()).await else {
            // Someone else took it first.
            return;
        };
        let c = &self.cluster;
        let (nats, replicas, clock, settings) = (
            c.config.nats.clone(),
            c.config.replicas,
            Arc::clone(&c.clock),
            c.settings.clone(),
        );
        let until = self.valid_until(sent);
        tracing::info!(shard = s, "lease taken; recovering the shard");
        let opening = tokio::task::spawn_blocking(move || {
            Shard::open(&nats, s, replicas, clock, settings, until)
        });
        self.held.insert(
            s,
            Held {
                revision,
                renewed: sent,
                opening: Some(opening),
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
                    self.cluster
                        .serving
                        .write()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(s, Arc::new(shard));
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
                        let _ = self
                            .leases
                            .delete_expect_revision(key(s), Some(h.revision))
                            .await;
                    }
                }
            }
        }
    }

    /// Gives shard `s` back: stops serving it, writes what it appended, then frees the lease
    /// for its preferred node.
    async fn release(&mut self, s: u32) {
        let shard = self
            .cluster
            .serving
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&s);
        if let Some(shard) = shard {
            shard.extend(Instant::now());
            self.cluster.notify();
            let _ = tokio::task::spawn_blocking(move || shard.close()).await;
        }
        if let Some(h) = self.held.remove(&s) {
            let _ = self
                .leases
                .delete_expect_revision(key(s), Some(h.revision))
                .await;
        }
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
                    let _ = self
                        .leases
                        .delete_expect_revision(key(s), Some(h.revision))
                        .await;
                }
            } else {
                self.release(s).await;
            }
        }
        let _ = self.members.delete(self.me()).await;
    }
}
