//! The two JetStream key-value buckets a cluster keeps its members and leases in: opening
//! them (and joining the cluster through them), and reading or purging a key at its
//! bucket's stream leader.

use std::time::Duration;

use async_nats::jetstream::{self, kv};
use bytes::Bytes;

use super::super::batch_read::is_deletion;
use super::super::Cluster;

pub(super) const MEMBERS: &str = "sqsim_members";
pub(super) const LEASES: &str = "sqsim_leases";

/// `f`, or an error once `limit` passed (a JetStream call can wait for seconds while its
/// stream elects a leader; the loop must go on renewing the other leases).
pub(super) async fn within<T, E: std::fmt::Display>(
    limit: Duration,
    f: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(limit, f).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err("timed out".into()),
    }
}

pub(super) fn key(shard: u32) -> String {
    format!("shard{shard}")
}

/// The value and revision of `key` in `bucket` as the bucket's stream leader has it
/// (`None`: no such key, or deleted). Not a direct get (`kv::Store::entry`): those go to
/// any replica through a queue group, and one handed to a server cut off from the others
/// without a reset (a network dropping packets) is lost — about 40% of them in a split of
/// three servers, so every control step failed on some lease and no shard of the cut-off
/// side was ever taken over. (A batched read is a direct get too, but fenced and given a
/// short time: a lost or stale one only sends the step here.)
pub(super) async fn leader_entry(
    bucket: &kv::Store,
    key: &str,
) -> Result<Option<(Bytes, u64)>, String> {
    Ok(match leader_last(bucket, key).await? {
        Last::Entry(value, revision) => Some((value, revision)),
        Last::Marker(_) | Last::Nothing => None,
    })
}

/// What a key's subject ends with, as its bucket's stream leader has it.
pub(super) enum Last {
    Nothing,
    /// A delete or purge marker (the key is absent), at this revision.
    Marker(u64),
    Entry(Bytes, u64),
}

pub(super) async fn leader_last(bucket: &kv::Store, key: &str) -> Result<Last, String> {
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
pub(super) async fn purge_through(
    bucket: &kv::Store,
    key: &str,
    revision: u64,
) -> Result<(), String> {
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
pub(super) fn beat_key_of(node: &str) -> String {
    format!("beat-{node}")
}

pub(super) async fn bucket(
    js: &jetstream::Context,
    name: &str,
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
pub(super) enum JoinError {
    NotReady(String),
    Refused(String),
}

/// The leases bucket's key for the secret nodes show each other.
pub(super) const PEER_SECRET: &str = "peer-secret";

/// How long a node waits between attempts to join a JetStream that is not ready.
pub(super) const JOIN_RETRY: Duration = Duration::from_secs(1);

/// Connects and joins: the buckets, the cluster's shard count, this node's membership.
pub(super) async fn join(
    cluster: &Cluster,
) -> Result<(async_nats::Client, kv::Store, kv::Store), JoinError> {
    use JoinError::{NotReady, Refused};
    let c = &cluster.config;
    let servers = crate::store::nats_io::servers(&c.nats).map_err(|e| Refused(e.to_string()))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::batch_read::{self, Keys};
    use crate::store::suite::{block_on, NatsServer};
    use futures_util::TryStreamExt;

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
