//! A control step's reads: the members and the leases (with the heartbeats of their
//! holders and the cluster's settings), each bucket in one batched read fenced by this
//! step's heartbeat, or key by key from the bucket's leader when that read does not count.

use std::time::{Duration, Instant};

use async_nats::jetstream::kv;
use bytes::Bytes;
use futures_util::TryStreamExt;

use super::super::batch_read::{self, Fence, Keys, ReadError};
use super::buckets::{
    beat_key_of, key, leader_entry, leader_last, purge_through, within, Last, MEMBERS,
};
use super::{Beats, BeatsRead, Control, Leases, LeasesFrom, Members, Owner, SETTING_KEYS};

/// How long after a JetStream server turned batched reads down (older than 2.11) a node
/// tries them again (a rolling upgrade may have replaced it since).
const BATCHED_RETRY: Duration = Duration::from_secs(60);

/// Most delete markers (left in the members bucket by versions that deleted departed
/// nodes' names) purged per control step.
const MARKERS_PER_STEP: usize = 16;

impl Control {
    /// Reads both buckets, side by side: the members with their revisions, each shard's
    /// lease and (when read with them) the clock's entry. Each bucket in one batched read
    /// fenced by this step's heartbeat in it (`batch_read`); from the bucket's leader, key
    /// by key, when that read does not count (no heartbeat written, a replica behind, no
    /// answer).
    pub(super) async fn read(
        &self,
        beats: Beats,
    ) -> Result<(Members, Leases, BeatsRead, LeasesFrom), String> {
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
    pub(super) async fn read_members(&self, beat: Option<u64>) -> Result<Members, String> {
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
    pub(super) async fn read_leases(
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
    pub(super) async fn batched(
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
    pub(super) fn refused(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.batched_refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the leases bucket's leader shows this process holding shard `s`'s lease:
    /// its revision if so, `None` if another holds it or nobody does.
    pub(super) async fn leader_says_ours(&self, s: u32) -> Result<Option<u64>, String> {
        let entry = within(self.lease() / 4, leader_entry(&self.leases, &key(s))).await?;
        Ok(entry.and_then(|(value, revision)| {
            serde_json::from_slice::<Owner>(&value)
                .is_ok_and(|o| self.ours(&o))
                .then_some(revision)
        }))
    }

    /// The live members: every entry of the membership bucket. The subjects come from the
    /// stream's info and each entry from a direct read: neither creates a consumer (which
    /// in a clustered JetStream is a Raft group of its own, far too costly every step).
    pub(super) async fn live(&self) -> Result<Vec<(String, u64)>, String> {
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
}
