//! `/_sqsim/reset` in cluster mode: one queue where it is served, or every queue (of one
//! namespace) on whichever node serves each shard — including the shards of a node that
//! died or stalled a moment ago, once their new owners serve them. A reset is done when every shard
//! was reset and its snapshot written, so a shard that moves afterwards moves reset.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use serde::Deserialize;
use serde_json::json;

use super::route::{on_owner, Link};
use super::OWNER_WAIT;
use crate::control::admin::ResetRequest;
use crate::control::error::{read_json, read_json_keeping, reply, ControlError};
use crate::control::queue_id_of;
use crate::control::Plane;
use crate::http::RequestBody;

/// `POST /_sqsim/reset` from a client (or, `forwarded`, a reset of one queue routed here).
pub(super) async fn reset(
    state: &Plane,
    link: &Link,
    req: Request<RequestBody>,
    forwarded: bool,
) -> Response<Full<Bytes>> {
    let (parts, bytes, r) = match read_json_keeping::<ResetRequest>(req).await {
        Ok(read) => read,
        Err(e) => return e.reply(),
    };
    if let Some(url) = &r.queue_url {
        let Some(id) = queue_id_of(state, url, r.region.as_deref()) else {
            return ControlError::not_found("no such queue").reply();
        };
        return match on_owner(state, link, &parts, &bytes, &id).await {
            Ok(engine) if engine.reset_queue(&id) => {
                let compacted = tokio::task::spawn_blocking(move || engine.compact()).await;
                if let Ok(Err(e)) = compacted {
                    return ControlError::not_kept(e).reply();
                }
                reply(StatusCode::OK, json!({"reset": "queue", "queue_url": url}))
            }
            Ok(_) => ControlError::not_found("no such queue").reply(),
            Err(resp) => resp,
        };
    }
    if forwarded {
        // Only a node of an older version forwards a reset of everything: its shards here.
        return match reset_served(state, link, &r, None).await {
            Ok(_) => reply(StatusCode::OK, json!({"reset": "cluster"})),
            Err(resp) => resp,
        };
    }
    reset_every_shard(state, link, &r).await
}

/// What one node asks another to reset: the request, and the shards not reset yet.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShardsToReset {
    reset: ResetRequest,
    shards: Vec<u32>,
}

/// `POST /_sqsim/cluster/reset` (from a node): resets the asked shards this node serves;
/// answers with those it reset.
pub(super) async fn reset_here(
    state: &Plane,
    link: &Link,
    req: Request<RequestBody>,
) -> Response<Full<Bytes>> {
    match read_json::<ShardsToReset>(req).await {
        Ok(ask) => match reset_served(state, link, &ask.reset, Some(&ask.shards)).await {
            Ok(done) => reply(StatusCode::OK, json!({ "reset": done })),
            Err(resp) => resp,
        },
        Err(e) => e.reply(),
    }
}

/// Resets every shard: this node's, then asks the nodes serving the others, round after
/// round, for the shards not reset yet. A node that cannot be reached, or a shard its new
/// owner is still recovering, is waited for as a request for one of its queues waits (at
/// most [`OWNER_WAIT`]); each shard is reset once (unless the node resetting it stalls,
/// dies or gives its shards up before it answers: their new owners reset them again), so a round after a failover does not
/// reset again what the first one did (and traffic since).
async fn reset_every_shard(state: &Plane, link: &Link, r: &ResetRequest) -> Response<Full<Bytes>> {
    let deadline = Instant::now() + OWNER_WAIT;
    let mut missing: BTreeSet<u32> = (0..link.cluster.config.shards).collect();
    loop {
        let wanted: Vec<u32> = missing.iter().copied().collect();
        match reset_served(state, link, r, Some(&wanted)).await {
            Ok(done) => {
                for s in done {
                    missing.remove(&s);
                }
            }
            Err(resp) => return resp,
        }
        if missing.is_empty() {
            return reply(StatusCode::OK, json!({"reset": "cluster"}));
        }
        // A [`ShardsToReset`] (`r` has no queue URL: that reset went to the queue's node).
        let ask = json!({"reset": r, "shards": missing});
        let body = Bytes::from(ask.to_string());
        let round = link.ask_round("/_sqsim/cluster/reset", &body, RESET_ANSWER);
        let (answers, unreached) = match round.await {
            Ok(round) => round,
            Err(e) => return not_reset(&e),
        };
        for answer in answers {
            for s in answer["reset"].as_array().into_iter().flatten() {
                if let Some(s) = s.as_u64() {
                    missing.remove(&(s as u32));
                }
            }
        }
        if missing.is_empty() {
            return reply(StatusCode::OK, json!({"reset": "cluster"}));
        }
        let why = match unreached.first() {
            Some((_, e)) => e.clone(),
            None => format!("{} shards are not served yet", missing.len()),
        };
        if Instant::now() >= deadline {
            return not_reset(&why);
        }
        tracing::debug!(error = %why, "waiting for every shard to be served to reset it");
        link.until_moved(&unreached).await;
    }
}

/// How long a node is given to reset its shards and write their snapshots (each waits for
/// JetStream to store it) before it counts as unreachable.
const RESET_ANSWER: Duration = Duration::from_secs(10);

/// Resets the shards this node serves (of `only`, when given) and writes their snapshots,
/// side by side; with no namespace, clears this node's faults too. The shards reset.
async fn reset_served(
    state: &Plane,
    link: &Link,
    r: &ResetRequest,
    only: Option<&[u32]>,
) -> Result<Vec<u32>, Response<Full<Bytes>>> {
    let namespace = r.namespace(state);
    let shards: Vec<_> = link
        .cluster
        .served()
        .into_iter()
        .filter(|(shard, _)| only.is_none_or(|o| o.contains(shard)))
        .collect();
    let compactions = shards.iter().map(|(_, engine)| {
        engine.reset(namespace.as_ref().map(|(g, a)| (g.as_str(), a.as_str())));
        // The snapshot waits for JetStream: off the runtime's async threads.
        let engine = Arc::clone(engine);
        tokio::task::spawn_blocking(move || engine.compact())
    });
    for compacted in futures_util::future::join_all(compactions).await {
        if let Ok(Err(e)) = compacted {
            return Err(ControlError::not_kept(e).reply());
        }
    }
    if namespace.is_none() {
        state.faults.clear();
    }
    Ok(shards.into_iter().map(|(shard, _)| shard).collect())
}

fn not_reset(why: &str) -> Response<Full<Bytes>> {
    reply(
        StatusCode::SERVICE_UNAVAILABLE,
        json!({"error": format!("not every shard was reset: {why}")}),
    )
}
