//! The cluster-wide settings: the virtual clock and realism, applied on a node and kept in
//! the leases bucket for every node, which each control step follows besides the leases;
//! and the log format every lease holder can read.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::buckets::within;
use super::{Control, LeasesFrom, CLOCK_KEY, REALISM_KEY};
use crate::cluster::{Cluster, Owner, Shard};

impl Control {
    /// Lets the shards compress what they write only while every live lease holder can
    /// read it (`Owner::format`): a node of a version from before compression takes a
    /// compressed message for records. So during a rolling upgrade from such a version the
    /// upgraded nodes write as the old ones do, until the last old one's leases are gone.
    /// Set before this step takes any lease, so a shard opened now writes what its readers
    /// can read.
    pub(super) fn choose_encoding(&self, owners: &[Option<Owner>]) {
        let readable = crate::cluster::all_read_compressed(owners);
        let was = self.cluster.compress.swap(readable, Ordering::Relaxed);
        if was && !readable {
            tracing::warn!("a node of an older version holds shards: log messages are written uncompressed, which it can read");
        }
    }

    /// Says once, loudly, that a lease holder writes another log format: a node of an
    /// older version may misread what this one wrote (one from before formats were named
    /// takes a compressed message for records), so a cluster runs one version
    /// (`/_sqsim/cluster` lists them as `other_formats`).
    pub(super) fn tell_formats(&mut self, owners: &[Option<Owner>]) {
        for (node, format) in crate::cluster::other_formats(owners) {
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

    /// The cluster-wide setting under `key` (its JSON and bucket revision): as the step's
    /// batched read found it, or read from the leader.
    pub(super) async fn setting(
        &self,
        from: &LeasesFrom,
        key: &str,
    ) -> Option<(serde_json::Value, u64)> {
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
    pub(super) async fn follow_clock(&self, from: &LeasesFrom) {
        if let Some((v, revision)) = self.setting(from, CLOCK_KEY).await {
            let offset = v["offset_ms"].as_i64().unwrap_or(0);
            self.cluster
                .apply_clock(offset, v["frozen_at"].as_u64(), revision);
        }
    }

    /// Follows the cluster's realism as [`Self::follow_clock`] follows its clock.
    pub(super) async fn follow_realism(&self, from: &LeasesFrom) {
        if let Some((v, revision)) = self.setting(from, REALISM_KEY).await {
            if let Some(spec) = v["realism"].as_str() {
                self.cluster.apply_realism(spec, revision);
            }
        }
    }
}

impl Cluster {
    /// Sets this node's clock to the cluster's (`offset_ms` added to real time, frozen at
    /// `frozen_at`) as of bucket revision `revision`, unless a newer one was applied: every
    /// shard served here records it and its long polls look again.
    pub(crate) fn apply_clock(&self, offset_ms: i64, frozen_at: Option<u64>, revision: u64) {
        let mut applied = self
            .clock_revision
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if revision <= *applied {
            return;
        }
        *applied = revision;
        if self.clock.virtual_state() == (offset_ms, frozen_at) {
            return;
        }
        self.clock.restore_virtual(offset_ms, frozen_at);
        for engine in self.engines() {
            engine.clock_changed();
        }
    }

    /// This node's clock was moved (`/_sqsim/clock`): its shards record it, and the bucket
    /// keeps it for every node (a node joining later, or one a fan-out missed, reads it).
    /// The state, with its bucket revision, for the other nodes.
    pub(crate) async fn publish_clock(&self) -> Result<(i64, Option<u64>, u64), String> {
        for engine in self.engines() {
            engine.clock_changed();
        }
        let (offset_ms, frozen_at) = self.clock.virtual_state();
        let value = serde_json::json!({"offset_ms": offset_ms, "frozen_at": frozen_at});
        let revision = self.put_setting(CLOCK_KEY, value).await?;
        let mut applied = self
            .clock_revision
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        *applied = (*applied).max(revision);
        Ok((offset_ms, frozen_at, revision))
    }

    /// The realism every queue of the cluster has unless set on its own.
    pub(crate) fn realism(&self) -> crate::engine::Realism {
        self.realism
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .0
            .clone()
    }

    /// Sets the cluster's realism to `spec` as of bucket revision `revision`, unless a newer
    /// one was applied: every queue of every shard served here takes it (one set on its
    /// own included, as in one process), and so do shards opened later.
    pub(crate) fn apply_realism(&self, spec: &str, revision: u64) {
        let mut applied = self.realism.lock().unwrap_or_else(|p| p.into_inner());
        if revision <= applied.1 {
            return;
        }
        applied.1 = revision;
        let Ok(realism) = crate::engine::Realism::parse(spec) else {
            // Said once: the revision is taken, so the next steps skip it.
            tracing::warn!(
                spec,
                "the cluster's realism in JetStream does not parse (a newer version's?); ignored"
            );
            return;
        };
        applied.0 = realism.clone();
        // Under the lock (a shard starting to serve takes it too): two changes crossing, or
        // a change and a shard opening, leave every engine at the newer setting. Shards
        // whose lease lapsed are included: an extension makes them serve again unopened.
        let serving = self.serving.read().unwrap_or_else(|p| p.into_inner());
        for shard in serving.values() {
            shard.engine.set_realism(realism.clone());
        }
    }

    /// Starts serving `shard`, with the cluster's realism as it is now: set under the lock
    /// a change takes, so that no change crosses it.
    pub(in crate::cluster) fn serve(&self, index: u32, shard: Arc<Shard>) {
        let realism = self.realism.lock().unwrap_or_else(|p| p.into_inner());
        if shard.engine.realism() != realism.0 {
            shard.engine.set_realism(realism.0.clone());
        }
        self.serving
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(index, shard);
    }

    /// The seed every shard's realism draws from, when one was given (`--realism-seed`);
    /// otherwise each shard's engine picked its own.
    pub(crate) fn realism_seed(&self) -> Option<u64> {
        self.settings.seed
    }

    /// Keeps `realism` as the cluster's in the leases bucket and applies it here; its
    /// revision, for the other nodes.
    pub(crate) async fn publish_realism(
        &self,
        realism: &crate::engine::Realism,
    ) -> Result<u64, String> {
        let spec = realism.spec();
        let value = serde_json::json!({ "realism": spec });
        let revision = self.put_setting(REALISM_KEY, value).await?;
        self.apply_realism(&spec, revision);
        Ok(revision)
    }

    /// Keeps a cluster-wide setting (`key`: the clock, the realism) in the leases bucket,
    /// where every node's control step reads it; its revision.
    async fn put_setting(&self, key: &str, value: serde_json::Value) -> Result<u64, String> {
        let leases = self.leases.get().ok_or("not joined yet")?;
        tokio::time::timeout(self.config.lease, leases.put(key, value.to_string().into()))
            .await
            .map_err(|_| "timed out".to_string())?
            .map_err(|e| e.to_string())
    }
}
