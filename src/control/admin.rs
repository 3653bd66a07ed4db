//! sqsim's own endpoints under `/_sqsim/`: readiness, the test clock, reset, stats and
//! fault injection. JSON in and out; documented in docs/testing.md, "Test controls".

use std::time::Duration;

/// The reserved path prefix of sqsim's own endpoints (a queue path starts with 12 digits).
pub(crate) const PREFIX: &str = "/_sqsim/";

use crate::http::RequestBody;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode};
use serde::Deserialize;
use serde_json::json;

use super::error::{bad_json, read_body, read_json, reply, ControlError};
use super::faults::{FaultEffect, FaultRule};
use crate::control::{queue_of, Plane};
use crate::engine::Engine;
use crate::error::SqsError;

/// What to reset: everything, one (account, region) namespace, or one queue.
#[derive(Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResetRequest {
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
    pub(crate) fn namespace(&self, state: &Plane) -> Option<(String, String)> {
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

fn reset(state: &Plane, r: ResetRequest) -> Response<Full<Bytes>> {
    let resp = reset_memory(state, r);
    // Durable mode: a snapshot of what is left replaces the log, so the disk lets go of the
    // reset state now rather than at the next compaction.
    match state.engine.compact() {
        Ok(()) => resp,
        Err(e) => ControlError::not_kept(e).reply(),
    }
}

fn reset_memory(state: &Plane, r: ResetRequest) -> Response<Full<Bytes>> {
    if let Some(url) = &r.queue_url {
        return match queue_of(state, url, r.region.as_deref()) {
            Some(q) => {
                state.engine.reset_queue(&q.id);
                reply(StatusCode::OK, json!({"reset": "queue", "queue_url": url}))
            }
            None => ControlError::not_found("no such queue").reply(),
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

fn stats(state: &Plane) -> Response<Full<Bytes>> {
    stats_of(state, queue_stats(&state.engine), None)
}

/// `/_sqsim/stats`'s entry for each queue of `engine`.
pub(crate) fn queue_stats(engine: &Engine) -> Vec<serde_json::Value> {
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
                "arrived": snap.traffic.arrived,
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
/// workers, store and realism (`cluster`: the shards' stores and the cluster's realism).
pub(crate) fn stats_of(
    state: &Plane,
    mut queues: Vec<serde_json::Value>,
    cluster: Option<(serde_json::Value, serde_json::Value)>,
) -> Response<Full<Bytes>> {
    let (stores, realism) = match cluster {
        Some((stores, realism)) => (Some(stores), realism),
        None => (None, super::realism::summary(state)),
    };
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
            "realism": realism,
            "memory": memory_json(state),
        }),
    )
}

/// `/_sqsim/stats`'s `memory`: what the process holds for its clients as
/// `--max-stored-bytes` counts it, the cap, and the limit the default cap was taken from.
fn memory_json(state: &Plane) -> serde_json::Value {
    use crate::engine::memory;
    let limit = memory::process_limit();
    json!({
        "held_bytes": memory::held(),
        "max_stored_bytes": state.engine.settings().max_stored_bytes,
        "process_limit_bytes": limit.map(|(b, _)| b),
        "process_limit_source": limit.map(|(_, s)| s),
    })
}

/// Up, and (in durable mode) whether the store takes writes: 503 while it does not.
fn health(state: &Plane) -> Response<Full<Bytes>> {
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

/// A fault to inject; see docs/testing.md, "Test controls".
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

fn faults(state: &Plane) -> Response<Full<Bytes>> {
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
fn remove_fault(state: &Plane, id: u64) -> Response<Full<Bytes>> {
    if state.faults.remove(id) {
        faults(state)
    } else {
        ControlError::not_found(format!("no fault rule with id {id}")).reply()
    }
}

/// The longest injected latency: an hour, far beyond any client timeout.
const MAX_LATENCY_MS: u64 = 3_600_000;

fn add_fault(state: &Plane, f: FaultRequest) -> Response<Full<Bytes>> {
    let bad = |m: &str| ControlError::bad_request(m).reply();
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

fn clock_state(state: &Plane) -> serde_json::Value {
    let clock = state.engine.clock();
    json!({"now_ms": clock.now_ms(), "frozen": clock.is_frozen()})
}

/// The longest advance one call may ask for (a thousand years), well short of where the
/// clock stops; anything else a finite, non-negative number of seconds.
const MAX_ADVANCE_SECONDS: f64 = 1000.0 * 365.25 * 86_400.0;

/// Applies a clock change only when all of it is valid, so a refused call changes nothing.
fn change_clock(state: &Plane, change: ClockChange) -> Response<Full<Bytes>> {
    let advance = match change.advance_seconds {
        None => None,
        Some(s) if s.is_finite() && (0.0..=MAX_ADVANCE_SECONDS).contains(&s) => {
            Some(Duration::from_secs_f64(s))
        }
        Some(_) => {
            return ControlError::bad_request(format!(
                "advance_seconds must be a number from 0 to {MAX_ADVANCE_SECONDS}"
            ))
            .reply()
        }
    };
    if let Some(by) = advance {
        if !state.engine.try_advance_clock(by) {
            return ControlError::bad_request(
                "advancing that far would pass the clock's last reading, 9999-12-31T23:59:59.999Z",
            )
            .reply();
        }
    }
    if let Some(frozen) = change.freeze {
        state.engine.set_clock_frozen(frozen);
    }
    reply(StatusCode::OK, clock_state(state))
}

/// Handles a request under the admin prefix.
pub(crate) async fn handle(state: &Plane, req: Request<RequestBody>) -> Response<Full<Bytes>> {
    let path = req.uri().path().trim_end_matches('/').to_string();
    if path.starts_with(super::console::PREFIX) {
        return super::console::handle(state, req).await;
    }
    match (req.method().clone(), path.as_str()) {
        (Method::GET, "/_sqsim/health") => health(state),
        (Method::POST, "/_sqsim/reset") => match read_json::<ResetRequest>(req).await {
            Ok(r) => reset(state, r),
            Err(e) => e.reply(),
        },
        (Method::GET, "/_sqsim/stats") => stats(state),
        (Method::GET, "/_sqsim/peek") => {
            super::peek::peek(state, &state.engine, req.uri().query().unwrap_or_default())
        }
        (Method::GET, "/_sqsim/faults") => faults(state),
        (Method::POST, "/_sqsim/faults") => match read_json::<FaultRequest>(req).await {
            Ok(f) => add_fault(state, f),
            Err(e) => e.reply(),
        },
        (Method::DELETE, "/_sqsim/faults") => match read_json::<FaultRemoval>(req).await {
            Ok(FaultRemoval { id: Some(id) }) => remove_fault(state, id),
            Ok(FaultRemoval { id: None }) => {
                state.faults.clear();
                state.engine.clear_redelivery();
                faults(state)
            }
            Err(e) => e.reply(),
        },
        (Method::DELETE, p) if p.starts_with("/_sqsim/faults/") => {
            match p["/_sqsim/faults/".len()..].parse() {
                Ok(id) => remove_fault(state, id),
                Err(_) => {
                    ControlError::bad_request("give the rule's id as /_sqsim/faults/<id>").reply()
                }
            }
        }
        (Method::GET, "/_sqsim/realism") => super::realism::show(state),
        (Method::POST, "/_sqsim/realism") => {
            match read_json::<super::realism::RealismRequest>(req).await {
                Ok(r) => super::realism::change(state, r),
                Err(e) => e.reply(),
            }
        }
        (Method::GET, "/_sqsim/clock") => reply(StatusCode::OK, clock_state(state)),
        (Method::POST, "/_sqsim/clock") => {
            // Unlike the other endpoints, an empty body is an error here: it says nothing.
            let body = match read_body(req).await {
                Ok(b) => b,
                Err(e) => return e.reply(),
            };
            let change: ClockChange = match serde_json::from_slice(&body) {
                Ok(c) => c,
                Err(e) => return bad_json(e).reply(),
            };
            change_clock(state, change)
        }
        _ => ControlError::not_found("no such admin endpoint").reply(),
    }
}
