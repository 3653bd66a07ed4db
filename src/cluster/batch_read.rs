//! The last entry of many keys of a key-value bucket in one request (JetStream's batched
//! direct get, `multi_last`, nats-server 2.11 or newer), instead of one read from the
//! bucket's stream leader per key: a control step (every twelfth of a lease, about five a
//! second) read 49 keys that way on every node — about a thousand JetStream API requests
//! a second for three nodes and a gateway, 0.36 to 0.66 of a core of an idle cluster.
//!
//! A direct get is answered by any replica of the bucket's stream (the one on the server
//! the node is connected to, when it keeps one), which may lag behind the leader, or sit
//! on a server cut off from the others. So a read is **fenced**: the step first writes
//! its heartbeat into the bucket and gets that write's sequence; the replica's answer ends
//! with how far its copy goes (`Nats-UpTo-Sequence`), and the read counts only if that
//! reaches the heartbeat. A replica stores only committed entries, in stream order, so a
//! copy that reaches the heartbeat holds every change committed before it: the read is as
//! current as a leader read made after the write. The server answers a `multi_last` read
//! from one state of its copy (no write it applies interleaves; each request of a read of
//! more than 999 keys from its own). One exception: a replica catching up after a split
//! stores what it missed without that isolation, so a key rewritten by the catch-up in
//! the middle of a read can be missing from it. The control loop therefore never drops a
//! shard it holds on a batched read alone (it asks the leader first).

use std::collections::HashMap;

use async_nats::jetstream::kv;
use async_nats::{Client, HeaderMap};
use bytes::Bytes;
use futures_util::StreamExt;

/// The most entries one request may answer with (nats-server refuses more than 1,024).
const MAX_PER_REQUEST: usize = 1000;

/// Which keys to read.
#[derive(Clone, Copy)]
pub(super) enum Keys<'a> {
    /// Every key of the bucket (at most [`MAX_PER_REQUEST`]).
    All,
    /// These keys (any number: asked for in requests of at most [`MAX_PER_REQUEST`]).
    These(&'a [String]),
}

/// The entries read.
#[derive(Debug, Default)]
pub(super) struct Entries {
    /// Each present key's value and revision (deleted keys are absent).
    pub by_key: HashMap<String, (Bytes, u64)>,
    /// Each key whose last entry is a delete or purge marker: the marker's revision.
    pub deleted: HashMap<String, u64>,
}

/// Whether a bucket entry with these headers is a delete or purge marker (the key is then
/// absent). One rule for every way a step reads a bucket: were two to differ, a held lease
/// would look present on one read and absent on the next, and the shard would be dropped.
pub(super) fn is_deletion(headers: Option<&HeaderMap>) -> bool {
    matches!(
        headers
            .and_then(|h| h.get("KV-Operation"))
            .map(|v| v.as_str()),
        Some("DEL" | "PURGE")
    )
}

/// Why a read does not count.
#[derive(Debug)]
pub(super) enum ReadError {
    /// The answering replica's copy does not reach the fence yet.
    Behind { upto: u64, fence: u64 },
    /// The server does not know batched reads (nats-server before 2.11).
    Unsupported(String),
    /// No answer, or an error.
    Failed(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Behind { upto, fence } => {
                write!(
                    f,
                    "the replica's copy ends at {upto}, before the fence {fence}"
                )
            }
            ReadError::Unsupported(e) => write!(f, "batched reads not supported: {e}"),
            ReadError::Failed(e) => write!(f, "{e}"),
        }
    }
}

/// A write the read must include.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fence<'a> {
    /// The key written.
    pub key: &'a str,
    /// The revision (stream sequence) the write returned.
    pub revision: u64,
}

/// The last entry of `keys` in `bucket`, from the replica that answers; with `fence`, only
/// if that replica's copy reaches it (every change committed before it is then in). It
/// waits as long as the answer takes: the caller bounds it.
pub(super) async fn last_entries(
    client: &Client,
    bucket: &kv::Store,
    keys: Keys<'_>,
    fence: Option<Fence<'_>>,
) -> Result<Entries, ReadError> {
    let subject = |k: &str| format!("{}{k}", bucket.prefix);
    let filters: Vec<Vec<String>> = match keys {
        Keys::All => vec![vec![format!("{}>", bucket.prefix)]],
        // The fence's key is asked for in every request, so that none finds nothing (a
        // replica answers an empty selection without saying how far its copy goes).
        Keys::These(keys) => keys
            .chunks(MAX_PER_REQUEST - 1)
            .map(|chunk| {
                let fenced = fence.filter(|f| !chunk.iter().any(|k| k == f.key));
                chunk
                    .iter()
                    .map(|k| subject(k))
                    .chain(fenced.map(|f| subject(f.key)))
                    .collect()
            })
            .collect(),
    };
    let mut entries = Entries::default();
    for filter in filters {
        let upto = request(client, bucket, &filter, &mut entries).await?;
        if let Some(f) = fence {
            if upto < f.revision {
                return Err(ReadError::Behind {
                    upto,
                    fence: f.revision,
                });
            }
        }
    }
    // The fence's key, when not asked for, stays out of what is returned.
    if let (Some(f), Keys::These(keys)) = (fence, keys) {
        if !keys.iter().any(|k| k == f.key) {
            entries.by_key.remove(f.key);
        }
    }
    Ok(entries)
}

/// One `multi_last` request for `filter`'s subjects; adds what it answers to `entries` and
/// returns how far the answering replica's copy goes (0 when it holds none of them).
async fn request(
    client: &Client,
    bucket: &kv::Store,
    filter: &[String],
    entries: &mut Entries,
) -> Result<u64, ReadError> {
    let failed = |e: &dyn std::fmt::Display| ReadError::Failed(e.to_string());
    let inbox = client.new_inbox();
    let mut answers = client
        .subscribe(inbox.clone())
        .await
        .map_err(|e| failed(&e))?;
    let body =
        serde_json::to_vec(&serde_json::json!({ "multi_last": filter })).map_err(|e| failed(&e))?;
    client
        .publish_with_reply(
            format!("$JS.API.DIRECT.GET.{}", bucket.stream_name),
            inbox,
            body.into(),
        )
        .await
        .map_err(|e| failed(&e))?;
    // The first entry says how many follow it (`Nats-Num-Pending`): an answer cut short
    // (the server stops at its byte limit and still ends the batch) does not count.
    let (mut received, mut expected) = (0u64, None);
    while let Some(m) = answers.next().await {
        let header = |name: &str| {
            m.headers
                .as_ref()
                .and_then(|h| h.get(name))
                .map(|v| v.as_str().to_string())
        };
        let number = |name: &str| header(name).and_then(|v| v.parse::<u64>().ok());
        match m.status.map(|s| s.as_u16()) {
            None => {
                let (Some(subject), Some(revision)) =
                    (header("Nats-Subject"), number("Nats-Sequence"))
                else {
                    return Err(ReadError::Failed(
                        "an entry without its subject or sequence".into(),
                    ));
                };
                if received == 0 {
                    expected = number("Nats-Num-Pending").map(|n| n + 1);
                }
                received += 1;
                let Some(key) = subject.strip_prefix(&bucket.prefix) else {
                    continue;
                };
                if is_deletion(m.headers.as_ref()) {
                    entries.by_key.remove(key);
                    entries.deleted.insert(key.to_string(), revision);
                } else {
                    entries.deleted.remove(key);
                    entries
                        .by_key
                        .insert(key.to_string(), (m.payload.clone(), revision));
                }
            }
            // End of the batch: how far the replica's copy went when it answered.
            Some(204) => {
                if expected.is_some_and(|n| n != received) {
                    return Err(ReadError::Failed(format!(
                        "an answer cut short: {received} of {expected:?} entries"
                    )));
                }
                return number("Nats-UpTo-Sequence").ok_or_else(|| {
                    ReadError::Failed("the end of the batch names no sequence".into())
                });
            }
            // None of the subjects has an entry. (A 404 after entries: one the server
            // chose could not be loaded, and the rest never came.)
            Some(404) if received == 0 => return Ok(0),
            // A request the server does not understand: `multi_last` unknown before 2.11.
            Some(408) => {
                return Err(ReadError::Unsupported(
                    m.description.unwrap_or_else(|| "bad request".into()),
                ))
            }
            Some(code) => {
                return Err(ReadError::Failed(format!(
                    "status {code} {}",
                    m.description.unwrap_or_default()
                )))
            }
        }
    }
    Err(ReadError::Failed("the answer ended early".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::suite::{block_on, NatsServer};
    use async_nats::jetstream;

    async fn bucket(url: &str, name: &str) -> (Client, kv::Store) {
        let client = async_nats::connect(url).await.unwrap();
        let kv = jetstream::new(client.clone())
            .create_key_value(kv::Config {
                bucket: name.into(),
                history: 1,
                ..Default::default()
            })
            .await
            .unwrap();
        (client, kv)
    }

    fn value(entries: &Entries, key: &str) -> Option<(String, u64)> {
        entries
            .by_key
            .get(key)
            .map(|(v, r)| (String::from_utf8_lossy(v).into_owned(), *r))
    }

    /// A fenced read holds every change before the fence, deletes included, with the
    /// revisions the writes returned; a fence past the copy is refused, not half-read.
    #[test]
    fn a_fenced_read_holds_every_change_before_the_fence() {
        let server = NatsServer::start();
        block_on(async {
            let (client, b) = bucket(&server.url, "changes").await;
            let a = b.put("a", "1".into()).await.unwrap();
            let kept = b.put("b", "2".into()).await.unwrap();
            b.delete("a").await.unwrap();
            let c = b.put("c", "3".into()).await.unwrap();
            let fence = b.put("beat", "x".into()).await.unwrap();
            assert!(a < kept && kept < c && c < fence);
            let at = |revision| {
                Some(Fence {
                    key: "beat",
                    revision,
                })
            };
            let read = last_entries(&client, &b, Keys::All, at(fence))
                .await
                .unwrap();
            assert_eq!(value(&read, "a"), None, "a deleted key is absent");
            assert_eq!(read.deleted.keys().collect::<Vec<_>>(), ["a"], "{read:?}");
            assert_eq!(value(&read, "b"), Some(("2".into(), kept)));
            assert_eq!(value(&read, "c"), Some(("3".into(), c)));
            assert_eq!(value(&read, "beat"), Some(("x".into(), fence)));
            assert_eq!(read.by_key.len(), 3);
            // Named keys: only those, a missing one absent.
            let named = ["c".to_string(), "a".to_string(), "nope".to_string()];
            let read = last_entries(&client, &b, Keys::These(&named), at(fence))
                .await
                .unwrap();
            assert_eq!(read.by_key.len(), 1);
            assert_eq!(value(&read, "c"), Some(("3".into(), c)));
            // A fence not written yet (a lagging replica looks the same): refused.
            match last_entries(&client, &b, Keys::All, at(fence + 1)).await {
                Err(ReadError::Behind { upto, fence: f }) => {
                    assert_eq!((upto, f), (fence, fence + 1))
                }
                other => panic!("a read behind its fence must be refused: {other:?}"),
            }
            // Unfenced, and an empty selection.
            let read = last_entries(&client, &b, Keys::All, None).await.unwrap();
            assert_eq!(read.by_key.len(), 3);
            let none = ["nope".to_string()];
            let read = last_entries(&client, &b, Keys::These(&none), None)
                .await
                .unwrap();
            assert!(read.by_key.is_empty());
            // Fenced, it is asked for with the fence's key, which it then leaves out.
            let read = last_entries(&client, &b, Keys::These(&none), at(fence))
                .await
                .unwrap();
            assert!(read.by_key.is_empty());
        });
    }

    /// More keys than one request may answer for are read in several, each fenced.
    #[test]
    fn many_keys_are_read_in_several_requests() {
        let server = NatsServer::start();
        block_on(async {
            let (client, b) = bucket(&server.url, "many").await;
            let keys: Vec<String> = (0..2100).map(|i| format!("shard{i}")).collect();
            // The first request's 999 keys are all absent, the other 1,101 present.
            let present = |i: usize| i >= 999;
            for (i, k) in keys.iter().enumerate().filter(|(i, _)| present(*i)) {
                b.put(k, i.to_string().into()).await.unwrap();
            }
            let fence = Fence {
                key: "beat",
                revision: b.put("beat", "x".into()).await.unwrap(),
            };
            let read = last_entries(&client, &b, Keys::These(&keys), Some(fence))
                .await
                .unwrap();
            assert_eq!(read.by_key.len(), 1101);
            for (i, k) in keys.iter().enumerate() {
                assert_eq!(
                    value(&read, k).map(|(v, _)| v),
                    present(i).then(|| i.to_string()),
                    "{k}"
                );
            }
            // The whole bucket is more than one request may answer: an error, not a part.
            assert!(matches!(
                last_entries(&client, &b, Keys::All, None).await,
                Err(ReadError::Failed(_))
            ));
        });
    }
}
