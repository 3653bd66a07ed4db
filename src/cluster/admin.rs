//! The admin endpoints in cluster mode (`/_sqsim/...`): the cluster's status and peer
//! endpoints, test controls across every node, and the console's actions run where their
//! queue is served.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::json;

use super::peers::{by_shards, local_queues, ClusterDirectory};
use super::route::{on_owner, on_owner_of, Link};
use crate::api::context::{Directory, QueueFilter};
use crate::control::error::{read_json, reply, ControlError};
use crate::control::Plane;
use crate::engine::Engine;
use crate::http::{RequestBody, FORWARDED};

/// The admin endpoints in cluster mode: `/_sqsim/cluster` (status),
/// `/_sqsim/cluster/queues` (a peer's listing), reset across every node, realism (the
/// cluster's, or one queue's where it is served), health (whether this node can write to
/// JetStream); faults and reading the clock act on this node as in one process (given back
/// as `Err`); the rest of the test controls act on one process's engine and are refused.
pub(crate) async fn admin(
    state: &Plane,
    link: &Link,
    req: Request<RequestBody>,
) -> Result<Response<Full<Bytes>>, Request<RequestBody>> {
    let forwarded = req.headers().contains_key(&FORWARDED);
    let path = req.uri().path().to_string();
    Ok(match (req.method().clone(), path.as_str()) {
        (Method::GET, "/_sqsim/cluster") => reply(StatusCode::OK, link.cluster.status()),
        (Method::GET, "/_sqsim/cluster/locate") => locate(state, link, req.uri().query()),
        (Method::POST, "/_sqsim/cluster/queues") => match read_json::<QueueFilter>(req).await {
            Ok(f) => reply(
                StatusCode::OK,
                by_shards(&link.cluster, |e| json!(local_queues(e, &f))),
            ),
            Err(e) => e.reply(),
        },
        (Method::POST, "/_sqsim/cluster/arrive") => super::courier::arrive(link, req).await,
        (Method::POST, "/_sqsim/cluster/describe") => super::courier::describe(link, req).await,
        (Method::POST, "/_sqsim/reset") => super::reset::reset(state, link, req, forwarded).await,
        (Method::POST, "/_sqsim/cluster/reset") => super::reset::reset_here(state, link, req).await,
        (Method::GET, "/_sqsim/peek") => {
            let query = req.uri().query().unwrap_or_default().to_string();
            // Without a queue, the one-process handler gives the error.
            let Some(id) = crate::control::peek::peek_target(state, &query) else {
                return Err(req);
            };
            let (parts, _) = req.into_parts();
            match on_owner(state, link, &parts, &Bytes::new(), &id).await {
                Ok(engine) => crate::control::peek::peek(state, &engine, &query),
                Err(resp) => resp,
            }
        }
        (Method::GET, "/_sqsim/stats") => stats(state, link).await,
        (Method::GET, "/_sqsim/realism") => super::realism::show(link).await,
        (Method::POST, "/_sqsim/realism") => super::realism::change(state, link, req).await,
        (Method::POST, "/_sqsim/cluster/realism") => super::realism::apply(link, req).await,
        (Method::POST, "/_sqsim/cluster/realism/queues") => {
            let local = |e: &[Arc<Engine>]| json!(super::realism::local_queues(e));
            reply(StatusCode::OK, by_shards(&link.cluster, local))
        }
        (Method::POST, p) if p.starts_with("/_sqsim/console/sqs/") => {
            let action = p["/_sqsim/console/sqs/".len()..].to_string();
            console_action(state, link, req, &action).await
        }
        (Method::POST, "/_sqsim/console/delete-message") => console_delete(state, link, req).await,
        (Method::POST, "/_sqsim/console/move-messages") => console_move(state, link, req).await,
        // The console's page, script and style.
        (Method::GET, p) if p.starts_with(crate::control::console::PREFIX) => return Err(req),
        (Method::POST, "/_sqsim/cluster/stats") => {
            reply(StatusCode::OK, by_shards(&link.cluster, local_stats))
        }
        // The clock is the cluster's: moved here, then on every node (and kept in JetStream
        // for nodes that join later).
        (Method::POST, "/_sqsim/clock") => {
            let resp = crate::control::admin::handle(state, req).await;
            if resp.status() == StatusCode::OK {
                if let Err(e) = spread_clock(link).await {
                    return Ok(reply(
                        StatusCode::SERVICE_UNAVAILABLE,
                        json!({"error": format!("the clock moved here but not on every node: {e}")}),
                    ));
                }
            }
            resp
        }
        (Method::POST, "/_sqsim/cluster/clock") => match read_json::<ClockState>(req).await {
            Ok(c) => {
                link.cluster
                    .apply_clock(c.offset_ms, c.frozen_at, c.revision);
                reply(StatusCode::OK, json!({}))
            }
            Err(e) => e.reply(),
        },
        (Method::GET, "/_sqsim/health") => {
            let (healthy, body) = link.cluster.health();
            let status = if healthy {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            reply(status, body)
        }
        (Method::GET, "/_sqsim/faults" | "/_sqsim/clock")
        | (Method::POST | Method::DELETE, "/_sqsim/faults") => return Err(req),
        (_, p) if p.starts_with("/_sqsim/faults/") => return Err(req),
        (_, p) => reply(
            StatusCode::NOT_IMPLEMENTED,
            json!({"error": format!("{p} is not available in cluster mode")}),
        ),
    })
}

/// `GET /_sqsim/cluster/locate?queue_url=URL`: the queue's shard and who serves it.
fn locate(state: &Plane, link: &Link, query: Option<&str>) -> Response<Full<Bytes>> {
    let url = query
        .and_then(|q| serde_urlencoded::from_str::<Vec<(String, String)>>(q).ok())
        .and_then(|pairs| pairs.into_iter().find(|(k, _)| k == "queue_url"))
        .map(|(_, v)| v);
    let Some(id) = url
        .as_deref()
        .and_then(|u| crate::control::queue_id_of(state, u, None))
    else {
        return ControlError::bad_request("give queue_url=<a queue URL>").reply();
    };
    let shard = link.cluster.shard_of(&id);
    reply(
        StatusCode::OK,
        json!({"shard": shard, "owner": link.cluster.owner_of(shard)}),
    )
}

/// The cluster's clock as nodes pass it on.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct ClockState {
    offset_ms: i64,
    frozen_at: Option<u64>,
    /// Its revision in the bucket: a node never goes back to an older state.
    revision: u64,
}

/// After this node's clock moved: its shards record it, the bucket keeps it, and every
/// other node applies it before the answer goes out.
async fn spread_clock(link: &Link) -> Result<(), String> {
    let (offset_ms, frozen_at, revision) = link.cluster.publish_clock().await?;
    let body = serde_json::to_value(ClockState {
        offset_ms,
        frozen_at,
        revision,
    })
    .unwrap_or_default();
    link.tell_peers("/_sqsim/cluster/clock", &body).await
}

/// A console's SQS action, run where its queue is served (a listing: here, asking every
/// node).
async fn console_action(
    state: &Plane,
    link: &Link,
    req: Request<RequestBody>,
    action: &str,
) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let call = match crate::control::console::Call::read(
        state,
        Request::from_parts(parts.clone(), body),
        action,
    )
    .await
    {
        Ok(c) => c,
        Err(refused) => return refused,
    };
    let probe = call.context(state, Arc::clone(&state.engine), None);
    let params = crate::protocol::Params::Json(call.body.clone());
    let target = crate::api::target::target(&probe, call.action, &params);
    match on_owner_of(state, link, &parts, &call.body, &target).await {
        Ok(engine) => {
            let directory: Arc<dyn Directory> = Arc::new(ClusterDirectory(link.clone()));
            let ctx = call.context(state, Arc::clone(&engine), Some(directory));
            crate::control::console::run(state, &ctx, call).await
        }
        Err(resp) => resp,
    }
}

/// The console's delete of one message by id, where its queue is served.
async fn console_delete(
    state: &Plane,
    link: &Link,
    req: Request<RequestBody>,
) -> Response<Full<Bytes>> {
    use crate::control::console::{delete_by_id, DeleteById};
    let queue: fn(&DeleteById) -> (&str, Option<&str>) = |d| (&d.queue_url, d.region.as_deref());
    console_on_queue(state, link, req, queue, delete_by_id).await
}

/// The console's "move selected", on the engine serving the source queue's shard; a
/// destination another shard serves is refused there (a move task carries messages across).
async fn console_move(
    state: &Plane,
    link: &Link,
    req: Request<RequestBody>,
) -> Response<Full<Bytes>> {
    use crate::control::console::{move_selected, MoveSelected};
    let queue: fn(&MoveSelected) -> (&str, Option<&str>) = |m| (&m.queue_url, m.region.as_deref());
    console_on_queue(state, link, req, queue, move_selected).await
}

/// A console request about messages of one queue (`queue` reads its URL and region off the
/// body), run by `act` on the engine serving that queue — here, or forwarded to its owner —
/// and answered once what it changed is kept.
async fn console_on_queue<T: serde::de::DeserializeOwned>(
    state: &Plane,
    link: &Link,
    req: Request<RequestBody>,
    queue: fn(&T) -> (&str, Option<&str>),
    act: fn(&Plane, &Engine, T) -> Response<Full<Bytes>>,
) -> Response<Full<Bytes>> {
    let (parts, bytes, body) = match crate::control::error::read_json_keeping::<T>(req).await {
        Ok(read) => read,
        Err(e) => return e.reply(),
    };
    let (url, region) = queue(&body);
    let Some(id) = crate::control::queue_id_of(state, url, region) else {
        return ControlError::not_found("no such queue").reply();
    };
    match on_owner(state, link, &parts, &bytes, &id).await {
        Ok(engine) => crate::control::kept_on(async { act(state, &engine, body) }).await,
        Err(resp) => resp,
    }
}

/// This node's shards' entries of `/_sqsim/stats`, and their stores.
fn local_stats(engines: &[Arc<Engine>]) -> serde_json::Value {
    let queues: Vec<serde_json::Value> = engines
        .iter()
        .flat_map(|e| crate::control::admin::queue_stats(e))
        .collect();
    let stores: Vec<_> = engines
        .iter()
        .filter_map(|e| e.journal().store().map(|s| s.stats()))
        .collect();
    json!({"queues": queues, "stores": stores, "realism": super::realism::local_queues(engines)})
}

/// `/_sqsim/stats` in cluster mode: every node's queues; the stores of every node's shards.
async fn stats(state: &Plane, link: &Link) -> Response<Full<Bytes>> {
    let mut queues = Vec::new();
    let mut stores = Vec::new();
    let mut realism = serde_json::Map::new();
    let answers = match link
        .gather("/_sqsim/cluster/stats", &json!({}), local_stats)
        .await
    {
        Ok(answers) => answers,
        Err(e) => {
            return reply(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"error": format!("a node did not answer: {e}")}),
            )
        }
    };
    for mut v in answers {
        if let serde_json::Value::Array(q) = v["queues"].take() {
            queues.extend(q);
        }
        if let serde_json::Value::Array(s) = v["stores"].take() {
            stores.extend(s);
        }
        if let serde_json::Value::Object(r) = v["realism"].take() {
            realism.extend(r);
        }
    }
    let realism = super::realism::summary(link, realism);
    crate::control::admin::stats_of(state, queues, Some((json!(stores), realism)))
}
