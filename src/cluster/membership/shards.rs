//! The shards this node holds: taking a lease and opening its shard, giving one back,
//! dropping one that broke or was lost, and leaving the cluster.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::task::JoinHandle;

use super::buckets::{key, within};
use super::{Control, Held, MAX_OUTAGE};
use crate::cluster::Shard;

impl Control {
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
    pub(super) fn outage(&mut self, s: u32) {
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
    pub(super) async fn drop_broken(&mut self) {
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

    /// Stops answering for shard `s` at once; the shard, to close.
    pub(super) fn stop_serving(&self, s: u32) -> Option<Arc<Shard>> {
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
    pub(super) fn drop_shard(&mut self, s: u32) -> Option<Held> {
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
    pub(super) async fn acquire(&mut self, s: u32, silent: Option<u64>) {
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
    pub(super) async fn free(&self, s: u32, revision: u64) {
        let delete = self.leases.delete_expect_revision(key(s), Some(revision));
        if let Err(e) = within(self.lease() / 4, delete).await {
            tracing::debug!(shard = s, error = %e, "lease not given up; it runs out instead");
        }
    }

    /// Recovers shard `s` in the background, under the lease taken at `sent`.
    pub(super) fn open(&mut self, s: u32, revision: u64, sent: Instant) {
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

    pub(super) async fn finish_opens(&mut self) {
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
    pub(super) async fn release(&mut self, s: u32) {
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
    pub(super) async fn leave(&mut self) {
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
