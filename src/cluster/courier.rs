//! Cluster mode: what shards send one another through their nodes. Outbox parcels carry
//! dead letters and move-task messages to a queue another shard serves (see
//! `engine::moves::outbox`). A queue's settings are asked for when a RedrivePolicy or a move task
//! names a queue another shard serves.
//!
//! Each served shard has a courier: a task that takes each non-empty outbox's oldest
//! entries as a parcel and hands it to the engine serving the target — on this node
//! directly, on another through `POST /_sqsim/cluster/arrive`. The target answers only once
//! the arrival is durable, and only then are the entries removed from the outbox.

use crate::control::error::ControlError;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use serde_json::json;

use super::route::{route_to_shard, Link, Routed};
use crate::cluster::Place;
use crate::control::error::{read_body_up_to, read_json, reply};
use crate::engine::moves::outbox::{Outgoing, Parcel, Refusal};
use crate::engine::{Engine, Queue, QueueId, QueueSettings};
use crate::error::{ErrorCode, SqsError};
use crate::http::RequestBody;
use crate::store;

const ARRIVE: &str = "/_sqsim/cluster/arrive";
const DESCRIBE: &str = "/_sqsim/cluster/describe";
/// The largest parcel a node takes (a parcel holds at least one message of up to 1 MiB,
/// and stops adding them at 4 MiB).
const MAX_PARCEL: usize = 16 << 20;
/// How often an idle courier looks at its outboxes even without being told (a delivery
/// that failed is retried then).
const IDLE: Duration = Duration::from_millis(500);

/// Where a question about a queue was answered.
enum Answer {
    /// This node serves the queue's shard, with this engine.
    Here(Arc<Engine>),
    /// The owner answered this.
    There(StatusCode, Bytes),
}

/// Asks the node serving `id`'s shard: POSTs `body` to `path` there, routed as any request
/// about that queue is (following the shard if it moves); or the engine, when this node
/// serves it.
async fn ask_owner(link: &Link, id: &QueueId, path: &str, body: Bytes) -> Result<Answer, String> {
    let (parts, ()) = Request::post(path)
        .body(())
        .map_err(|e| e.to_string())?
        .into_parts();
    match route_to_shard(link, &parts, &body, link.cluster.shard_of(id)).await {
        Routed::Here(engine) => Ok(Answer::Here(engine)),
        Routed::There(resp) => Ok(Answer::There(resp.status(), resp.into_body())),
        Routed::Refused(err, _) => Err(err.message.into_owned()),
    }
}

/// The settings of queue `id` (`None`: no such queue), from the node serving it.
pub(crate) async fn settings_of(
    link: &Link,
    id: QueueId,
) -> Result<Option<QueueSettings>, SqsError> {
    let unavailable = |e: String| {
        tracing::warn!(error = %e, queue = %id.name, "a queue's settings could not be read");
        SqsError::new(
            ErrorCode::ServiceUnavailable,
            "The node serving the queue did not answer; retry.",
        )
    };
    let body = Bytes::from(serde_json::to_vec(&id).unwrap_or_default());
    match ask_owner(link, &id, DESCRIBE, body)
        .await
        .map_err(unavailable)?
    {
        Answer::Here(engine) => Ok(engine.queue_settings(&id)),
        Answer::There(StatusCode::OK, bytes) => {
            serde_json::from_slice(&bytes).map_err(|e| unavailable(format!("{DESCRIBE}: {e}")))
        }
        Answer::There(status, bytes) => Err(unavailable(format!(
            "{DESCRIBE}: {status} {}",
            String::from_utf8_lossy(&bytes)
        ))),
    }
}

/// The engine of this node serving `id`'s shard now, if any.
fn serving(link: &Link, id: &QueueId) -> Option<Arc<Engine>> {
    match link.cluster.place(link.cluster.shard_of(id)) {
        Some(Place::Here(engine)) => Some(engine),
        _ => None,
    }
}

fn not_serving() -> Response<Full<Bytes>> {
    reply(
        StatusCode::MISDIRECTED_REQUEST,
        json!({"error": "this node does not serve the queue's shard"}),
    )
}

/// `POST /_sqsim/cluster/describe` (a queue id): that queue's settings, or `null`.
pub(crate) async fn describe(link: &Link, req: Request<RequestBody>) -> Response<Full<Bytes>> {
    let id = match read_json::<QueueId>(req).await {
        Ok(id) => id,
        Err(e) => return e.reply(),
    };
    match serving(link, &id) {
        Some(engine) => reply(StatusCode::OK, json!(engine.queue_settings(&id))),
        None => not_serving(),
    }
}

/// `POST /_sqsim/cluster/arrive` (a parcel): takes it in, answering once that is durable.
pub(crate) async fn arrive(link: &Link, req: Request<RequestBody>) -> Response<Full<Bytes>> {
    let body = match read_body_up_to(req, MAX_PARCEL).await {
        Ok(b) => b,
        Err(e) => return e.reply(),
    };
    let parcel = match Parcel::decode(&body) {
        Ok(p) => p,
        Err(e) => return refused(e),
    };
    let Some(engine) = serving(link, &parcel.route.target) else {
        return not_serving();
    };
    match take(&engine, parcel).await {
        Ok(n) => reply(StatusCode::OK, json!({"taken": n})),
        Err(e) => refused(e),
    }
}

fn refused(e: Refusal) -> Response<Full<Bytes>> {
    match e {
        Refusal::Gone => ControlError::not_found("no such queue").reply(),
        Refusal::NotHere => not_serving(),
        Refusal::Invalid(e) => reply(StatusCode::BAD_REQUEST, json!({ "error": e })),
        Refusal::NotKept(e) => reply(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({ "error": format!("not kept: {e}") }),
        ),
    }
}

/// Takes in `parcel` on `engine`, once the arrival is durable: how many entries were new.
/// A parcel whose entries all arrived before appends nothing, but the arrival that set its
/// mark may still be on its way to the log: the answer waits for everything appended.
async fn take(engine: &Engine, parcel: Parcel<'_>) -> Result<usize, Refusal> {
    let taken = engine.take_parcel(parcel)?;
    all_kept(engine).await.map_err(Refusal::NotKept)?;
    Ok(taken)
}

/// Waits until everything `engine` appended so far is durable.
async fn all_kept(engine: &Engine) -> Result<(), String> {
    let Some(s) = engine.journal().store() else {
        return Ok(());
    };
    match s.next_lsn().checked_sub(1) {
        Some(last) => store::durable(s.as_ref(), last)
            .await
            .map_err(|e| e.to_string()),
        None => Ok(()),
    }
}

/// What became of a parcel.
enum Delivered {
    /// The target has it (or had it already).
    Taken,
    /// The target queue does not exist.
    Gone,
}

/// Hands `out` to the engine serving its target.
async fn deliver(link: &Link, out: &Outgoing) -> Result<Delivered, String> {
    let target = &out.route.target;
    let body = Bytes::from(out.body.clone());
    match ask_owner(link, target, ARRIVE, body).await? {
        Answer::Here(engine) => {
            let parcel = Parcel::decode(&out.body).map_err(|e| format!("{e:?}"))?;
            match take(&engine, parcel).await {
                Ok(_) => Ok(Delivered::Taken),
                Err(Refusal::Gone) => Ok(Delivered::Gone),
                Err(e) => Err(format!("{e:?}")),
            }
        }
        Answer::There(StatusCode::OK, _) => Ok(Delivered::Taken),
        Answer::There(StatusCode::NOT_FOUND, _) => Ok(Delivered::Gone),
        Answer::There(status, bytes) => Err(format!(
            "{ARRIVE}: {status} {}",
            String::from_utf8_lossy(&bytes)
        )),
    }
}

/// What one round did with one outbox.
enum Round {
    Sent,
    Empty,
    Failed,
}

/// Delivers the oldest entries of `outbox`, once they are durable here (an entry whose
/// record is not kept yet may vanish with a failover: it must not arrive anywhere).
async fn deliver_oldest(link: &Link, engine: &Engine, outbox: &Queue) -> Round {
    let Some(out) = engine.parcel_of(outbox) else {
        return Round::Empty;
    };
    let outcome = match all_kept(engine).await {
        Ok(()) => deliver(link, &out).await,
        Err(e) => Err(format!("not kept here: {e}")),
    };
    match outcome {
        Ok(Delivered::Taken) => {
            engine.parcel_delivered(outbox, &out);
            Round::Sent
        }
        Ok(Delivered::Gone) => {
            engine.return_outbox(outbox, &out.route);
            Round::Sent
        }
        Err(e) => {
            tracing::warn!(error = %e, target = %out.route.target.name, "outbox not delivered; retrying");
            Round::Failed
        }
    }
}

/// Starts the courier of `engine` (a shard this node took), once the node's link to the
/// cluster is set; it ends when the engine shuts down (the shard is given up). Outboxes are
/// delivered side by side: a target that does not answer holds up only its own.
pub(crate) fn spawn(link: Arc<OnceLock<Link>>, engine: Weak<Engine>) {
    tokio::spawn(async move {
        let link = loop {
            if let Some(l) = link.get() {
                break l.clone();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let mut backoff = Duration::from_millis(100);
        loop {
            let Some(engine) = engine.upgrade() else {
                return;
            };
            if engine.is_shutting_down() {
                return;
            }
            let outboxes = engine.outboxes();
            let rounds = futures_util::future::join_all(
                outboxes.iter().map(|o| deliver_oldest(&link, &engine, o)),
            )
            .await;
            let sent = rounds.iter().any(|r| matches!(r, Round::Sent));
            let failed = rounds.iter().any(|r| matches!(r, Round::Failed));
            if failed {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            } else {
                backoff = Duration::from_millis(100);
                if !sent {
                    engine.outbox_wait(IDLE).await;
                }
            }
        }
    });
}
