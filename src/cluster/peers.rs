//! Questions to every node: a listing or stats gathered from the nodes serving shards
//! (waiting for the shards of a node that does not answer to move), a setting told to every
//! node, and the cluster's directory of queues that SQS listings read.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::json;

use super::route::Link;
use crate::api::context::{Directory, Listing, Lookup, QueueFilter};
use crate::cluster::{Cluster, OWNER_WAIT};
use crate::engine::{Engine, QueueId};
use crate::error::{ErrorCode, SqsError};

impl Link {
    /// Gathers what every node serving shards says to `path` (JSON `body`) with what this
    /// node says (`local`), for a question about every queue (a listing, stats). A node that
    /// cannot be reached — dead, stalled, cut off — is waited for as a request for one of
    /// its queues waits: until its shards have moved (then every node is asked again, since
    /// their new holders may have answered before they took them), at most [`OWNER_WAIT`].
    /// An answer that is an error ends it at once.
    ///
    /// Each node answers with the shards it serves ([`by_shards`]): the answers count only
    /// if together they cover every shard, so a shard being recovered by its new owner (or
    /// between owners) is waited for too, rather than its queues left out.
    pub(super) async fn gather(
        &self,
        path: &str,
        body: &serde_json::Value,
        local: impl Fn(&[Arc<Engine>]) -> serde_json::Value,
    ) -> Result<Vec<serde_json::Value>, String> {
        let deadline = Instant::now() + OWNER_WAIT;
        let body = Bytes::from(body.to_string());
        loop {
            let mine = by_shards(&self.cluster, &local);
            let (theirs, unreached) = self.ask_round(path, &body, PEER_ANSWER).await?;
            let mut covered = vec![false; self.cluster.config.shards as usize];
            let mut values = Vec::with_capacity(theirs.len() + 1);
            for mut a in std::iter::once(mine).chain(theirs) {
                for s in a["serving"].as_array().into_iter().flatten() {
                    if let Some(c) = s.as_u64().and_then(|s| covered.get_mut(s as usize)) {
                        *c = true;
                    }
                }
                values.push(a["answer"].take());
            }
            let missing = covered.iter().filter(|c| !**c).count();
            if unreached.is_empty() && missing == 0 {
                return Ok(values);
            }
            let why = match unreached.first() {
                Some((_, e)) => e.clone(),
                None => format!("{missing} shards are not served yet"),
            };
            tracing::debug!(error = %why, "waiting for every shard to be served");
            if Instant::now() >= deadline {
                return Err(why);
            }
            self.until_moved(&unreached).await;
        }
    }

    /// Tells every other node of a change to a setting the leases bucket keeps (the clock,
    /// the realism): POSTs JSON `body` to `path` on each. A node that cannot be reached is
    /// waited for until its shards have moved — whoever serves them now was told, or reads
    /// the bucket before it serves — at most [`OWNER_WAIT`]. An answer that is an error ends
    /// it. Telling a node twice does no harm: it applies a setting's revision once.
    pub(super) async fn tell_peers(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<(), String> {
        let deadline = Instant::now() + OWNER_WAIT;
        let body = Bytes::from(body.to_string());
        loop {
            let (_, unreached) = self.ask_round(path, &body, PEER_ANSWER).await?;
            match unreached.first() {
                None => return Ok(()),
                Some((_, e)) if Instant::now() >= deadline => return Err(e.clone()),
                Some(_) => self.until_moved(&unreached).await,
            }
        }
    }

    /// One round of [`Self::gather`], [`Self::tell_peers`] and a reset of every shard
    /// (`cluster::reset`): POSTs `body` to `path` on every node that serves shards now,
    /// side by side, each given `timeout` to answer — or until its shards have moved to
    /// other nodes (a stalled node, whose shards move within a lease: the next round asks
    /// their new owners instead of waiting out the timeout). The answers, and the nodes
    /// that gave none (with why); an answer that is an error ends it.
    pub(super) async fn ask_round(
        &self,
        path: &str,
        body: &Bytes,
        timeout: Duration,
    ) -> Result<(Vec<serde_json::Value>, Vec<(String, String)>), String> {
        let peers = self.cluster.peers();
        let asks = peers.iter().map(|peer| async move {
            tokio::select! {
                answer = self.ask(peer, path, body.clone(), timeout) => answer,
                () = self.cluster.no_longer_serving(peer) => Err(Unanswered::Unreached(
                    format!("{peer}: its shards moved to other nodes before it answered"),
                )),
            }
        });
        let mut answers = Vec::with_capacity(peers.len());
        let mut unreached = Vec::new();
        for (peer, answer) in peers.iter().zip(futures_util::future::join_all(asks).await) {
            match answer {
                Ok(v) => answers.push(v),
                Err(Unanswered::Refused(e)) => return Err(e),
                Err(Unanswered::Unreached(e)) => unreached.push((peer.clone(), e)),
            }
        }
        Ok((answers, unreached))
    }

    /// Waits until the shards of the nodes in `unreached` have moved to others, or a second
    /// passed (a node only slow is asked again; shards still opening are looked at again
    /// sooner: with nobody unreached, 50 ms).
    pub(super) async fn until_moved(&self, unreached: &[(String, String)]) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let moved = unreached
            .iter()
            .map(|(peer, _)| self.cluster.no_longer_serving(peer));
        let _ = tokio::time::timeout(
            Duration::from_secs(1),
            futures_util::future::join_all(moved),
        )
        .await;
    }

    /// POSTs JSON to `path` on `peer`: the JSON of its answer if it succeeded.
    async fn ask(
        &self,
        peer: &str,
        path: &str,
        body: Bytes,
        timeout: Duration,
    ) -> Result<serde_json::Value, Unanswered> {
        let (status, bytes) = self
            .post(peer, path, body, timeout)
            .await
            .map_err(Unanswered::Unreached)?;
        let v: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| Unanswered::Refused(format!("{peer}: {e}")))?;
        if status.is_success() {
            Ok(v)
        } else {
            Err(Unanswered::Refused(format!("{peer}: {v}")))
        }
    }
}

/// What a node answers to [`Link::gather`]: the shards it serves, and `f` of their engines
/// (taken together, so the answer covers exactly those shards).
pub(super) fn by_shards(
    cluster: &Cluster,
    f: impl FnOnce(&[Arc<Engine>]) -> serde_json::Value,
) -> serde_json::Value {
    let (serving, engines): (Vec<u32>, Vec<Arc<Engine>>) = cluster.served().into_iter().unzip();
    json!({"serving": serving, "answer": f(&engines)})
}

/// How long [`Link::gather`] waits for one node's answer before it counts the node
/// unreachable (a stalled node's shards move to others within a lease).
const PEER_ANSWER: Duration = Duration::from_secs(5);

/// Why a node's answer is missing.
enum Unanswered {
    /// None came: the node is down, stalled or cut off (or its answer broke off).
    Unreached(String),
    /// It answered with an error, or with what is not JSON.
    Refused(String),
}

/// Lists queues across the cluster: this node's shards, then every peer's.
#[derive(Debug)]
pub(crate) struct ClusterDirectory(pub Link);

impl Directory for ClusterDirectory {
    fn queues(&self, filter: QueueFilter) -> Listing<'_> {
        Box::pin(async move {
            let unavailable = |e: String| {
                tracing::warn!(error = %e, "a node did not list its queues");
                SqsError::new(
                    ErrorCode::ServiceUnavailable,
                    "A node of the cluster did not answer; retry.",
                )
            };
            let body = serde_json::to_value(&filter).unwrap_or_default();
            let local = |engines: &[Arc<Engine>]| json!(local_queues(engines, &filter));
            let answers = self
                .0
                .gather("/_sqsim/cluster/queues", &body, local)
                .await
                .map_err(unavailable)?;
            let mut ids = Vec::new();
            for answer in answers {
                let found: Vec<QueueId> =
                    serde_json::from_value(answer).map_err(|e| unavailable(e.to_string()))?;
                ids.extend(found);
            }
            // A shard that moved while the nodes answered may be in two answers.
            ids.sort_by(|a, b| {
                (&a.region, &a.account, &a.name).cmp(&(&b.region, &b.account, &b.name))
            });
            ids.dedup();
            Ok(ids)
        })
    }

    fn settings_of(&self, id: QueueId) -> Lookup<'_> {
        Box::pin(super::courier::settings_of(&self.0, id))
    }
}

pub(super) fn local_queues(engines: &[Arc<Engine>], filter: &QueueFilter) -> Vec<QueueId> {
    engines.iter().flat_map(|e| filter.apply(e)).collect()
}
