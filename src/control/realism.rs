//! `/_sqsim/realism`: AWS-realism mode at run time. `GET` shows the server's setting, the
//! seed and every queue with realism on; `POST {"realism": SPEC}` sets it for every queue
//! (and new ones), `POST {"realism": SPEC, "queue_url": URL}` for one queue.

use crate::control::error::ControlError;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};
use serde::Deserialize;
use serde_json::json;

use super::error::reply;
use super::queue_of;
use crate::control::Plane;
use crate::engine::{Engine, Realism};

/// A realism change.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RealismRequest {
    pub(crate) realism: String,
    pub(crate) queue_url: Option<String>,
    pub(crate) region: Option<String>,
}

/// The setting, the seed and the queues with realism on (by ARN).
pub(crate) fn show(state: &Plane) -> Response<Full<Bytes>> {
    reply(StatusCode::OK, summary(state))
}

/// What `/_sqsim/stats` and `GET /_sqsim/realism` report.
pub(crate) fn summary(state: &Plane) -> serde_json::Value {
    json!({
        "realism": state.engine.realism().spec(),
        "seed": state.engine.seed(),
        "queues": queues_on(&state.engine),
    })
}

/// The queues of `engine` with realism on, by ARN, each with its setting.
pub(crate) fn queues_on(engine: &Engine) -> serde_json::Map<String, serde_json::Value> {
    engine
        .all_queues()
        .iter()
        .filter_map(|q| {
            let r = q.realism();
            r.is_on().then(|| (q.arn.clone(), json!(r.spec())))
        })
        .collect()
}

pub(crate) fn change(state: &Plane, r: RealismRequest) -> Response<Full<Bytes>> {
    let realism = match Realism::parse(&r.realism) {
        Ok(realism) => realism,
        Err(e) => return ControlError::bad_request(e).reply(),
    };
    match &r.queue_url {
        Some(url) => match queue_of(state, url, r.region.as_deref()) {
            Some(q) => state.engine.set_queue_realism(&q, realism, false),
            None => return ControlError::not_found("no such queue").reply(),
        },
        None => state.engine.set_realism(realism),
    }
    show(state)
}
