//! sqsim's own endpoints under `/_sqsim/`: readiness, the test clock, reset, peek, stats and
//! fault injection. JSON in and out; documented in the README's "Test controls".

use std::time::Duration;

use super::limits::RequestBody;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use serde::Deserialize;
use serde_json::json;

use std::sync::Arc;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

use super::faults::{FaultEffect, FaultRule};
use super::AppState;
use crate::engine::message::Delivery;
use crate::engine::{AttributeData, Engine, Queue, QueueId};
use crate::error::SqsError;

pub(super) fn reply(status: StatusCode, body: serde_json::Value) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body.to_string())));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// Reads a JSON body (empty means `{}`), or the 400 reply to send instead.
pub(super) async fn read_json<T: serde::de::DeserializeOwned>(
    req: Request<RequestBody>,
) -> Result<T, Response<Full<Bytes>>> {
    parse_json(&read_body(req).await?).map_err(bad_json)
}

/// [`read_json`], also keeping the request's head and raw body (cluster mode forwards them
/// to the node serving the queue the request is about).
pub(super) async fn read_json_keeping<T: serde::de::DeserializeOwned>(
    req: Request<RequestBody>,
) -> Result<(hyper::http::request::Parts, Bytes, T), Response<Full<Bytes>>> {
    let (parts, body) = req.into_parts();
    let bytes = read_body(Request::from_parts(parts.clone(), body)).await?;
    let value = parse_json(&bytes).map_err(bad_json)?;
    Ok((parts, bytes, value))
}

/// A JSON body; empty means `{}`.
fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> serde_json::Result<T> {
    let body: &[u8] = if body.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        body
    };
    serde_json::from_slice(body)
}

/// The most an admin request body may hold.
const MAX_ADMIN_BODY: usize = 64 * 1024;

/// The request body (at most [`MAX_ADMIN_BODY`]), or the 4xx reply to send instead: a body
/// announced as larger is refused with 413 before any of it is read.
async fn read_body(req: Request<RequestBody>) -> Result<Bytes, Response<Full<Bytes>>> {
    read_body_up_to(req, MAX_ADMIN_BODY).await
}

/// The request body if it holds at most `max` bytes, or the 4xx reply to send instead.
pub(super) async fn read_body_up_to(
    req: Request<RequestBody>,
    max: usize,
) -> Result<Bytes, Response<Full<Bytes>>> {
    if super::service::declared_too_large(req.headers(), max) {
        return Err(reply(
            StatusCode::PAYLOAD_TOO_LARGE,
            json!({"error": format!("the body is larger than {max} bytes")}),
        ));
    }
    Limited::new(req.into_body(), max)
        .collect()
        .await
        .map(|b| b.to_bytes())
        .map_err(|_| reply(StatusCode::BAD_REQUEST, json!({"error": "unreadable body"})))
}

/// The 400 reply to JSON that does not parse.
fn bad_json(e: serde_json::Error) -> Response<Full<Bytes>> {
    reply(StatusCode::BAD_REQUEST, json!({"error": e.to_string()}))
}

/// What to reset: everything, one (account, region) namespace, or one queue.
#[derive(Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ResetRequest {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
}

impl ResetRequest {
    /// The (region, account) namespace to reset, the server's default filling in the one
    /// not given; `None`: every namespace.
    pub(super) fn namespace(&self, state: &AppState) -> Option<(String, String)> {
        match (&self.account, &self.region) {
            (None, None) => None,
            (account, region) => Some((
                region
                    .as_deref()
                    .unwrap_or(&state.config.region)
                    .to_string(),
                account
                    .as_deref()
                    .unwrap_or(&state.config.account_id)
                    .to_string(),
            )),
        }
    }
}

/// The id a queue URL names, the way the SQS API would read it for the default namespace.
pub(super) fn queue_id_of(state: &AppState, url: &str, region: Option<&str>) -> Option<QueueId> {
    let r = crate::api::queue_url::parse(url)?;
    Some(QueueId {
        region: r
            .region
            .or(region)
            .unwrap_or(&state.config.region)
            .to_string(),
        account: r.account.unwrap_or(&state.config.account_id).to_string(),
        name: r.name.to_string(),
    })
}

/// Finds a queue from a URL, the way the SQS API would for the default namespace.
pub(super) fn queue_of(state: &AppState, url: &str, region: Option<&str>) -> Option<Arc<Queue>> {
    state.engine.queue(&queue_id_of(state, url, region)?)
}

/// A change that could not be kept (durable mode): 500, with the store's error.
pub(super) fn store_failed(e: &crate::store::StoreError) -> Response<Full<Bytes>> {
    reply(
        StatusCode::INTERNAL_SERVER_ERROR,
        json!({"error": format!("the change could not be kept: {e}")}),
    )
}

fn reset(state: &AppState, r: ResetRequest) -> Response<Full<Bytes>> {
    let resp = reset_memory(state, r);
    // Durable mode: a snapshot of what is left replaces the log, so the disk lets go of the
    // reset state now rather than at the next compaction.
    match state.engine.compact() {
        Ok(()) => resp,
        Err(e) => store_failed(&e),
    }
}

fn reset_memory(state: &AppState, r: ResetRequest) -> Response<Full<Bytes>> {
    if let Some(url) = &r.queue_url {
        return match queue_of(state, url, r.region.as_deref()) {
            Some(q) => {
                state.engine.reset_queue(&q.id);
                reply(StatusCode::OK, json!({"reset": "queue", "queue_url": url}))
            }
            None => reply(StatusCode::NOT_FOUND, json!({"error": "no such queue"})),
        };
    }
    match r.namespace(state) {
        None => {
            state.reset_all();
            reply(StatusCode::OK, json!({"reset": "all"}))
        }
        Some((region, account)) => {
            state.engine.reset(Some((&region, &account)));
            reply(
                StatusCode::OK,
                json!({"reset": "namespace", "account": account, "region": region}),
            )
        }
    }
}

fn stats(state: &AppState) -> Response<Full<Bytes>> {
    stats_of(state, queue_stats(&state.engine), None)
}

/// `/_sqsim/stats`'s entry for each queue of `engine`.
pub(super) fn queue_stats(engine: &Engine) -> Vec<serde_json::Value> {
    let now = engine.now_ms();
    engine
        .all_queues()
        .iter()
        .map(|q| {
            let snap = q.snapshot(now);
            json!({
                "name": q.id.name,
                "account": q.id.account,
                "region": q.id.region,
                "arn": q.arn,
                "visible": snap.counts.visible,
                "in_flight": snap.counts.in_flight,
                "delayed": snap.counts.delayed,
                "sent": snap.traffic.sent,
                "received": snap.traffic.received,
                "deleted": snap.traffic.deleted,
                "dead_lettered": snap.traffic.dead_lettered,
                "expired": snap.traffic.expired,
                "purged": snap.traffic.purged,
                "oldest_age_s": snap.oldest_sent_ms.map(|t| now.saturating_sub(t) as f64 / 1000.0),
                "waiting": q.waiting(),
                "realism": q.realism().spec(),
            })
        })
        .collect()
}

/// `/_sqsim/stats`: `queues` (from every node, in cluster mode) with this node's faults,
/// workers, store and realism (`store`: the shards' stores in cluster mode).
pub(super) fn stats_of(
    state: &AppState,
    mut queues: Vec<serde_json::Value>,
    stores: Option<serde_json::Value>,
) -> Response<Full<Bytes>> {
    queues.sort_by(|a, b| {
        let key = |v: &serde_json::Value| {
            ["region", "account", "name"].map(|k| v[k].as_str().unwrap_or_default().to_string())
        };
        key(a).cmp(&key(b))
    });
    let faults: Vec<_> = state.faults.list().iter().map(fault_json).collect();
    let workers: Vec<_> = state
        .workers
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|(name, w)| {
            use std::sync::atomic::Ordering::Relaxed;
            json!({
                "name": name,
                "delivered": w.delivered.load(Relaxed),
                "failed": w.failed.load(Relaxed),
                "retried": w.retried.load(Relaxed),
                "in_flight": w.in_flight.load(Relaxed),
                "released": w.released.load(Relaxed),
            })
        })
        .collect();
    let store = match stores {
        Some(s) => s,
        None => json!(state.engine.journal().store().map(|s| s.stats())),
    };
    reply(
        StatusCode::OK,
        json!({
            "queues": queues,
            "faults": faults,
            "workers": workers,
            "store": store,
            "realism": super::realism::summary(state),
        }),
    )
}

/// Up, and (in durable mode) whether the store takes writes: 503 while it does not.
fn health(state: &AppState) -> Response<Full<Bytes>> {
    match state.engine.journal().store().map(|s| s.stats()) {
        None => reply(StatusCode::OK, json!({"status": "ok"})),
        Some(s) if s.writable => reply(
            StatusCode::OK,
            json!({"status": "ok", "store": {"writable": true}}),
        ),
        Some(s) => reply(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "degraded", "store": {"writable": false, "error": s.last_error}}),
        ),
    }
}

/// The queue `/_sqsim/peek?queue_url=…[&region=…]` names, if it names one.
pub(super) fn peek_target(state: &AppState, query: &str) -> Option<QueueId> {
    let params: Vec<(String, String)> = serde_urlencoded::from_str(query).unwrap_or_default();
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    queue_id_of(state, get("queue_url")?, get("region"))
}

/// `/_sqsim/peek`, on `engine` (in cluster mode, the engine serving the queue's shard).
pub(super) fn peek(state: &AppState, engine: &Engine, query: &str) -> Response<Full<Bytes>> {
    let params: Vec<(String, String)> = serde_urlencoded::from_str(query).unwrap_or_default();
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    if get("queue_url").is_none() {
        return reply(
            StatusCode::BAD_REQUEST,
            json!({"error": "give the queue as ?queue_url=…"}),
        );
    }
    let Some(q) = peek_target(state, query).and_then(|id| engine.queue(&id)) else {
        return reply(StatusCode::NOT_FOUND, json!({"error": "no such queue"}));
    };
    let number = |k: &str, default: usize| get(k).and_then(|v| v.parse().ok()).unwrap_or(default);
    let offset = number("offset", 0);
    let limit = number("limit", PEEK_PAGE).min(PEEK_MAX_PAGE);
    let (page, total) = q.peek_page(engine.now_ms(), offset, limit, PEEK_MAX_BYTES);
    let next = offset + page.len();
    let next_offset = (next < total).then_some(next);
    let messages: Vec<_> = page
        .iter()
        .map(|m| {
            let p = &m.payload;
            let (state, until) = match m.delivery {
                Delivery::Visible => ("visible", None),
                Delivery::InFlight { until_ms } => ("in_flight", Some(until_ms)),
                Delivery::Delayed { until_ms } => ("delayed", Some(until_ms)),
            };
            let attributes: serde_json::Map<String, serde_json::Value> = p
                .attributes()
                .iter()
                .map(|(n, v)| {
                    let value = match &v.data {
                        AttributeData::String(s) => {
                            json!({"DataType": v.data_type, "StringValue": s})
                        }
                        AttributeData::Binary(b) => {
                            json!({"DataType": v.data_type, "BinaryValue": STANDARD.encode(b)})
                        }
                    };
                    (n.clone(), value)
                })
                .collect();
            json!({
                "message_id": p.message_id.to_string(),
                "body": p.body,
                "state": state,
                "until_ms": until,
                "receive_count": m.receive_count,
                "sent_timestamp": p.sent_ms,
                "first_receive_timestamp": m.first_receive_ms,
                "message_group_id": p.group_id.as_deref(),
                "message_deduplication_id": p.deduplication_id(),
                "sequence_number": p.sequence_number(),
                "dead_letter_source_arn": p.dead_letter_source_arn(),
                "sender_id": &*p.sender_id,
                "aws_trace_header": p.aws_trace_header(),
                "message_attributes": attributes,
            })
        })
        .collect();
    reply(
        StatusCode::OK,
        json!({"queue": q.arn, "messages": messages, "total": total, "offset": offset, "next_offset": next_offset}),
    )
}

/// Messages a peek returns when it gives no `limit`.
const PEEK_PAGE: usize = 1000;
/// The most a peek returns, whatever its `limit`.
const PEEK_MAX_PAGE: usize = 10_000;
/// A peek page stops once its messages pass this many bytes (at least one is returned), so
/// paging a queue of large messages never holds more than about this much at once.
const PEEK_MAX_BYTES: u64 = 16 << 20;

/// A fault to inject; see the README's "Test controls".
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultRequest {
    action: Option<String>,
    queue: Option<String>,
    error: Option<String>,
    latency_ms: Option<u64>,
    #[serde(default)]
    drop_connection: bool,
    count: Option<u64>,
    probability: Option<f64>,
    /// At-least-once mode for `queue` (standard queues): chance that a delete is lost once.
    redeliver_probability: Option<f64>,
}

fn fault_json(r: &FaultRule) -> serde_json::Value {
    let effect = match &r.effect {
        FaultEffect::Error(e) => json!({"error": e}),
        FaultEffect::Latency { ms } => json!({"latency_ms": ms}),
        FaultEffect::Drop => json!({"drop_connection": true}),
    };
    json!({
        "id": r.id,
        "action": r.action,
        "queue": r.queue,
        "effect": effect,
        "remaining": r.remaining,
        "probability": r.probability,
        "hits": r.hits,
    })
}

fn faults(state: &AppState) -> Response<Full<Bytes>> {
    let rules: Vec<_> = state.faults.list().iter().map(fault_json).collect();
    reply(StatusCode::OK, json!({"faults": rules}))
}

/// Which fault rules `DELETE /_sqsim/faults` removes: the one with `id`, or (no id, or an
/// empty body) every rule and every queue's at-least-once mode.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FaultRemoval {
    id: Option<u64>,
}

/// Removes one rule: the rules left, or 404 when no rule has that id.
fn remove_fault(state: &AppState, id: u64) -> Response<Full<Bytes>> {
    if state.faults.remove(id) {
        faults(state)
    } else {
        reply(
            StatusCode::NOT_FOUND,
            json!({"error": format!("no fault rule with id {id}")}),
        )
    }
}

/// The longest injected latency: an hour, far beyond any client timeout.
const MAX_LATENCY_MS: u64 = 3_600_000;

fn add_fault(state: &AppState, f: FaultRequest) -> Response<Full<Bytes>> {
    let bad = |m: &str| reply(StatusCode::BAD_REQUEST, json!({"error": m}));
    let probability = f.probability.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&probability) {
        return bad("probability must be between 0 and 1");
    }
    if let Some(p) = f.redeliver_probability {
        let Some(name) = &f.queue else {
            return bad("redeliver_probability needs a queue (a name in the default namespace, or a queue URL)");
        };
        let Some(q) = queue_of(state, name, None) else {
            return bad("no such queue");
        };
        if !(0.0..=1.0).contains(&p) {
            return bad("redeliver_probability must be between 0 and 1");
        }
        q.set_redelivery(p);
        return reply(
            StatusCode::OK,
            json!({"queue": q.arn, "redeliver_probability": p}),
        );
    }
    let effect = match (&f.error, f.latency_ms, f.drop_connection) {
        (Some(e), None, false) => {
            if SqsError::injected(e).is_none() {
                return bad("unknown error; use ThrottlingException, RequestThrottled, InternalError, ServiceUnavailable, OverLimit or KmsThrottled");
            }
            FaultEffect::Error(e.clone())
        }
        (None, Some(ms), false) if ms <= MAX_LATENCY_MS => FaultEffect::Latency { ms },
        (None, Some(_), false) => {
            return bad("latency_ms must be at most 3600000 (an hour)");
        }
        (None, None, true) => FaultEffect::Drop,
        _ => return bad("give exactly one of error, latency_ms, drop_connection"),
    };
    let id = state.faults.add(FaultRule {
        id: 0,
        action: f.action,
        queue: f.queue,
        effect,
        remaining: f.count,
        probability,
        hits: 0,
    });
    reply(StatusCode::OK, json!({"id": id}))
}

/// A change to the clock: advance by some seconds, and/or freeze or unfreeze it.
#[derive(Debug, Deserialize)]
struct ClockChange {
    advance_seconds: Option<f64>,
    freeze: Option<bool>,
}

fn clock_state(state: &AppState) -> serde_json::Value {
    let clock = state.engine.clock();
    json!({"now_ms": clock.now_ms(), "frozen": clock.is_frozen()})
}

/// The longest advance one call may ask for (a thousand years), well short of where the
/// clock stops; anything else a finite, non-negative number of seconds.
const MAX_ADVANCE_SECONDS: f64 = 1000.0 * 365.25 * 86_400.0;

/// Applies a clock change only when all of it is valid, so a refused call changes nothing.
fn change_clock(state: &AppState, change: ClockChange) -> Response<Full<Bytes>> {
    let advance = match change.advance_seconds {
        None => None,
        Some(s) if s.is_finite() && (0.0..=MAX_ADVANCE_SECONDS).contains(&s) => {
            Some(Duration::from_secs_f64(s))
        }
        Some(_) => {
            return reply(
                StatusCode::BAD_REQUEST,
                json!({"error": format!(
                    "advance_seconds must be a number from 0 to {MAX_ADVANCE_SECONDS}"
                )}),
            )
        }
    };
    if let Some(by) = advance {
        if !state.engine.try_advance_clock(by) {
            return reply(
                StatusCode::BAD_REQUEST,
                json!({"error": "advancing that far would pass the clock's last reading, 9999-12-31T23:59:59.999Z"}),
            );
        }
    }
    if let Some(frozen) = change.freeze {
        state.engine.set_clock_frozen(frozen);
    }
    reply(StatusCode::OK, clock_state(state))
}

/// Handles a request under the admin prefix.
pub(super) async fn handle(state: &AppState, req: Request<RequestBody>) -> Response<Full<Bytes>> {
    let path = req.uri().path().trim_end_matches('/').to_string();
    if path.starts_with(super::console::PREFIX) {
        return super::console::handle(state, req).await;
    }
    match (req.method().clone(), path.as_str()) {
        (Method::GET, "/_sqsim/health") => health(state),
        (Method::POST, "/_sqsim/reset") => match read_json::<ResetRequest>(req).await {
            Ok(r) => reset(state, r),
            Err(resp) => resp,
        },
        (Method::GET, "/_sqsim/stats") => stats(state),
        (Method::GET, "/_sqsim/peek") => {
            peek(state, &state.engine, req.uri().query().unwrap_or_default())
        }
        (Method::GET, "/_sqsim/faults") => faults(state),
        (Method::POST, "/_sqsim/faults") => match read_json::<FaultRequest>(req).await {
            Ok(f) => add_fault(state, f),
            Err(resp) => resp,
        },
        (Method::DELETE, "/_sqsim/faults") => match read_json::<FaultRemoval>(req).await {
            Ok(FaultRemoval { id: Some(id) }) => remove_fault(state, id),
            Ok(FaultRemoval { id: None }) => {
                state.faults.clear();
                state.engine.clear_redelivery();
                faults(state)
            }
            Err(resp) => resp,
        },
        (Method::DELETE, p) if p.starts_with("/_sqsim/faults/") => {
            match p["/_sqsim/faults/".len()..].parse() {
                Ok(id) => remove_fault(state, id),
                Err(_) => reply(
                    StatusCode::BAD_REQUEST,
                    json!({"error": "give the rule's id as /_sqsim/faults/<id>"}),
                ),
            }
        }
        (Method::GET, "/_sqsim/realism") => super::realism::show(state),
        (Method::POST, "/_sqsim/realism") => {
            match read_json::<super::realism::RealismRequest>(req).await {
                Ok(r) => super::realism::change(state, r),
                Err(resp) => resp,
            }
        }
        (Method::GET, "/_sqsim/clock") => reply(StatusCode::OK, clock_state(state)),
        (Method::POST, "/_sqsim/clock") => {
            // Unlike the other endpoints, an empty body is an error here: it says nothing.
            let body = match read_body(req).await {
                Ok(b) => b,
                Err(resp) => return resp,
            };
            let change: ClockChange = match serde_json::from_slice(&body) {
                Ok(c) => c,
                Err(e) => return bad_json(e),
            };
            change_clock(state, change)
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            json!({"error": "no such admin endpoint"}),
        ),
    }
}
