//! sqsim's own endpoints under `/_sqsim/`: readiness and the test clock. JSON in and out.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use serde::Deserialize;
use serde_json::json;

use super::AppState;

fn reply(status: StatusCode, body: serde_json::Value) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body.to_string())));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
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

/// Handles a request under the admin prefix.
pub async fn handle(state: &AppState, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path().trim_end_matches('/').to_string();
    match (req.method().clone(), path.as_str()) {
        (Method::GET, "/_sqsim/health") => reply(StatusCode::OK, json!({"status": "ok"})),
        (Method::GET, "/_sqsim/clock") => reply(StatusCode::OK, clock_state(state)),
        (Method::POST, "/_sqsim/clock") => {
            let body = match Limited::new(req.into_body(), 64 * 1024).collect().await {
                Ok(b) => b.to_bytes(),
                Err(_) => {
                    return reply(StatusCode::BAD_REQUEST, json!({"error": "unreadable body"}))
                }
            };
            let change: ClockChange = match serde_json::from_slice(&body) {
                Ok(c) => c,
                Err(e) => return reply(StatusCode::BAD_REQUEST, json!({"error": e.to_string()})),
            };
            let clock = state.engine.clock();
            match change.freeze {
                Some(true) => clock.freeze(),
                Some(false) => clock.unfreeze(),
                None => {}
            }
            if let Some(s) = change.advance_seconds {
                if !(s.is_finite() && s >= 0.0) {
                    return reply(
                        StatusCode::BAD_REQUEST,
                        json!({"error": "advance_seconds must be a non-negative number"}),
                    );
                }
                state.engine.advance_clock(Duration::from_secs_f64(s));
            }
            reply(StatusCode::OK, clock_state(state))
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            json!({"error": "no such admin endpoint"}),
        ),
    }
}
