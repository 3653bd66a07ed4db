//! What a control step follows besides the leases: the cluster's clock and realism kept in
//! the leases bucket, and the log format every lease holder can read.

use std::sync::atomic::Ordering;

use super::buckets::within;
use super::{Control, LeasesFrom, CLOCK_KEY, REALISM_KEY};
use crate::cluster::Owner;

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
