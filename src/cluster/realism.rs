//! `/_sqsim/realism` in cluster mode. The setting for every queue is the cluster's: kept in
//! the leases bucket beside the clock, applied on every node before the answer (and read by
//! each control step, so a node that joins later or that a fan-out missed follows), and
//! given to every shard a node opens. One queue's own setting is made where the queue is
//! served and lasts, as in one process, as long as that engine runs it (a takeover starts
//! the queue at the cluster's). `GET` shows the cluster's setting and every node's queues
//! with realism on.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use serde_json::json;

use super::route::{on_owner, Link};
use crate::control::error::{read_json, read_json_keeping, reply, ControlError};
use crate::control::realism::{queues_on, RealismRequest};
use crate::control::Plane;
use crate::engine::Engine;
use crate::engine::Realism;
use crate::http::RequestBody;

/// The cluster's realism as nodes pass it on.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct RealismState {
    realism: String,
    /// Its revision in the bucket: a node never goes back to an older setting.
    revision: u64,
}

/// `GET /_sqsim/realism`: the cluster's setting, the seed, and the queues with realism on,
/// from every node.
pub(super) async fn show(link: &Link) -> Response<Full<Bytes>> {
    let answers = link
        .gather("/_sqsim/cluster/realism/queues", &json!({}), |e| {
            serde_json::Value::Object(local_queues(e))
        })
        .await;
    let answers = match answers {
        Ok(answers) => answers,
        Err(e) => return unavailable(e),
    };
    let mut queues = serde_json::Map::new();
    for answer in answers {
        match answer {
            serde_json::Value::Object(theirs) => queues.extend(theirs),
            other => return unavailable(format!("a node answered {other}")),
        }
    }
    reply(StatusCode::OK, summary(link, queues))
}

/// What `GET /_sqsim/realism` and `/_sqsim/stats` show: the cluster's setting, the seed
/// given at start (`null`: each shard picked its own), and `queues` (every node's with
/// realism on).
pub(super) fn summary(
    link: &Link,
    queues: serde_json::Map<String, serde_json::Value>,
) -> serde_json::Value {
    json!({
        "realism": link.cluster.realism().spec(),
        "seed": link.cluster.realism_seed(),
        "queues": queues,
    })
}

/// `POST /_sqsim/realism`: for every queue of the cluster, or (`queue_url`) for one queue,
/// where it is served.
pub(super) async fn change(
    state: &Plane,
    link: &Link,
    req: Request<RequestBody>,
) -> Response<Full<Bytes>> {
    let (parts, bytes, r) = match read_json_keeping::<RealismRequest>(req).await {
        Ok(read) => read,
        Err(e) => return e.reply(),
    };
    let realism = match Realism::parse(&r.realism) {
        Ok(realism) => realism,
        Err(e) => return ControlError::bad_request(e).reply(),
    };
    if let Some(url) = &r.queue_url {
        let Some(id) = crate::control::queue_id_of(state, url, r.region.as_deref()) else {
            return ControlError::not_found("no such queue").reply();
        };
        return match on_owner(state, link, &parts, &bytes, &id).await {
            Ok(engine) => match engine.queue(&id) {
                Some(q) => {
                    engine.set_queue_realism(&q, realism, false);
                    show(link).await
                }
                None => ControlError::not_found("no such queue").reply(),
            },
            // The owner's answer: it showed the setting once made.
            Err(resp) => resp,
        };
    }
    let revision = match link.cluster.publish_realism(&realism).await {
        Ok(revision) => revision,
        Err(e) => return unavailable(format!("the realism could not be kept: {e}")),
    };
    let body = serde_json::to_value(RealismState {
        realism: realism.spec(),
        revision,
    })
    .unwrap_or_default();
    if let Err(e) = link.tell_peers("/_sqsim/cluster/realism", &body).await {
        return unavailable(format!(
            "the realism changed here but not on every node: {e}"
        ));
    }
    show(link).await
}

/// `POST /_sqsim/cluster/realism` (from a peer): the cluster's new setting.
pub(super) async fn apply(link: &Link, req: Request<RequestBody>) -> Response<Full<Bytes>> {
    match read_json::<RealismState>(req).await {
        Ok(r) => {
            link.cluster.apply_realism(&r.realism, r.revision);
            reply(StatusCode::OK, json!({}))
        }
        Err(e) => e.reply(),
    }
}

/// The queues with realism on in the shards this node serves, by ARN.
pub(super) fn local_queues(engines: &[Arc<Engine>]) -> serde_json::Map<String, serde_json::Value> {
    let mut queues = serde_json::Map::new();
    for engine in engines {
        queues.extend(queues_on(engine));
    }
    queues
}

fn unavailable(error: String) -> Response<Full<Bytes>> {
    reply(StatusCode::SERVICE_UNAVAILABLE, json!({ "error": error }))
}
