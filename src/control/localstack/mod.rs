//! `--compat localstack`: what a setup written for LocalStack's SQS relies on besides SQS
//! itself — its health, info and init-status endpoints (`/_localstack/…`, in the JSON
//! spelling scripts grep for), its message-peeking developer endpoint (`messages`), and a
//! clear error for requests meant for another AWS service. Queue URLs in LocalStack's forms
//! are built by `Config::queue_base_url` and parsed by `api::queue_url`. Shapes follow
//! LocalStack's source (`services/internal.py`, `services/sqs/developer_api.py`,
//! `aws/handlers/service_plugin.py`).

mod messages;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::json;

use super::init_hooks::Script;
use crate::control::Plane;
use crate::http::RequestBody;
use crate::http::{credential_scope, respond};
use crate::protocol::{self, ForeignError, Render};

/// Paths LocalStack serves itself (no queue URL path starts with an underscore).
const INTERNAL_PREFIX: &str = "/_localstack/";
const DEVELOPER_PREFIX: &str = "/_aws/sqs/messages";

/// Whether this path is one of LocalStack's own endpoints.
pub(crate) fn is_internal(path: &str) -> bool {
    path.starts_with(INTERNAL_PREFIX)
        || path
            .strip_prefix(DEVELOPER_PREFIX)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Answers a request to one of LocalStack's own endpoints.
pub(crate) async fn handle(state: &Plane, req: Request<RequestBody>) -> Response<Full<Bytes>> {
    let path = req.uri().path().trim_end_matches('/').to_string();
    if path.starts_with(DEVELOPER_PREFIX) {
        return messages::handle(state, req).await;
    }
    match (req.method(), path.as_str()) {
        (&Method::HEAD, "/_localstack/health") => text(StatusCode::OK, "ok"),
        (&Method::GET, "/_localstack/health") => python_json(StatusCode::OK, &health()),
        (&Method::GET, "/_localstack/info") => python_json(StatusCode::OK, &info(state)),
        (&Method::GET, "/_localstack/init") => {
            let (scripts, ready) = state.init.snapshot();
            python_json(
                StatusCode::OK,
                &json!({
                    "completed": {"BOOT": true, "START": true, "READY": ready, "SHUTDOWN": false},
                    "scripts": scripts_json(&scripts),
                }),
            )
        }
        (&Method::GET, p) if p.starts_with("/_localstack/init/") => {
            let stage = p["/_localstack/init/".len()..].to_ascii_lowercase();
            let (scripts, ready) = state.init.snapshot();
            let (completed, scripts) = match stage.as_str() {
                "ready" => (ready, scripts_json(&scripts)),
                "boot" | "start" => (true, json!([])),
                "shutdown" => (false, json!([])),
                _ => return text(StatusCode::NOT_FOUND, &format!("no such stage {stage}")),
            };
            python_json(
                StatusCode::OK,
                &json!({"completed": completed, "scripts": scripts}),
            )
        }
        _ => python_json(StatusCode::NOT_FOUND, &json!({"message": "Not Found"})),
    }
}

/// `/_localstack/health`: SQS is the one service, loaded from the start.
fn health() -> serde_json::Value {
    json!({
        "services": {"sqs": "running"},
        "edition": "community",
        "version": concat!(env!("CARGO_PKG_VERSION"), "-sqsim"),
    })
}

fn info(state: &Plane) -> serde_json::Value {
    let in_container = std::path::Path::new("/.dockerenv").exists()
        || std::path::Path::new("/run/.containerenv").exists();
    json!({
        "version": concat!(env!("CARGO_PKG_VERSION"), "-sqsim"),
        "edition": "community",
        "is_license_activated": false,
        "session_id": state.started.session_id,
        "machine_id": "sqsim",
        "system": std::env::consts::OS,
        "is_docker": in_container,
        "server_time_utc": server_time(state),
        "uptime": state.started.at.elapsed().as_secs(),
    })
}

/// The server's time in LocalStack's format, from the engine's clock (the only reader of
/// the system time; a moved test clock shows here too).
fn server_time(state: &Plane) -> String {
    chrono::DateTime::from_timestamp_millis(state.engine.now_ms() as i64)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S").to_string())
        .unwrap_or_default()
}

fn scripts_json(scripts: &[Script]) -> serde_json::Value {
    scripts
        .iter()
        .map(|s| json!({"stage": "READY", "name": s.name, "state": s.state.name()}))
        .collect()
}

fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body.to_string())));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    resp
}

/// JSON spelled the way Python's `json.dumps` spells it (`", "` and `": "`), as every
/// LocalStack endpoint answers, and health checks in the wild grep for
/// (`grep '"completed": true'`).
pub(crate) fn python_json(status: StatusCode, value: &serde_json::Value) -> Response<Full<Bytes>> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PythonFormatter);
    // Serializing a Value into a Vec cannot fail.
    let _ = serde::Serialize::serialize(value, &mut ser);
    let mut resp = Response::new(Full::new(Bytes::from(out)));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// serde_json's compact output with a space after each `,` and `:`.
struct PythonFormatter;

impl PythonFormatter {
    /// `", "` before every element but the first.
    fn separator<W: ?Sized + std::io::Write>(w: &mut W, first: bool) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }
}

impl serde_json::ser::Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        Self::separator(w, first)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        Self::separator(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

/// The AWS service a request is for when it is not SQS: the SigV4 signing name (`s3`,
/// `dynamodb`…), else the `X-Amz-Target` prefix. `None` for SQS and for requests that say
/// nothing (they are taken as SQS).
pub(crate) fn other_service(headers: &HeaderMap, query: Option<&str>) -> Option<String> {
    if let Some(service) = credential_scope(headers, query).and_then(|s| s.service) {
        return (service != "sqs").then(|| service.to_string());
    }
    let target = headers.get("x-amz-target")?.to_str().ok()?;
    let prefix = target.split('.').next().unwrap_or(target);
    (prefix != "AmazonSQS").then(|| prefix.to_string())
}

/// The answer to a request for another service, in that service's protocol (JSON when it
/// sent `X-Amz-Target`, XML otherwise): 501 `InternalFailure`, as LocalStack answers for a
/// service that is not enabled, with a message that says why.
pub(crate) fn not_sqs(service: &str, headers: &HeaderMap) -> Response<Full<Bytes>> {
    let render = if headers.contains_key("x-amz-target") {
        Render::Json
    } else {
        Render::Xml
    };
    let message = format!(
        "Service '{service}' is not enabled: sqsim emulates Amazon SQS only (running with --compat localstack)."
    );
    let request_id = uuid::Uuid::new_v4().to_string();
    let encoded = protocol::encode_foreign_error(
        render,
        &request_id,
        ForeignError {
            status: 501,
            code: "InternalFailure",
            fault: "Receiver",
            message: Some(&message),
        },
    );
    respond(encoded, &request_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_spelled_as_python_spells_it() {
        let v = json!({"completed": true, "scripts": [1, 2]});
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut out, PythonFormatter);
        serde::Serialize::serialize(&v, &mut ser).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"completed": true, "scripts": [1, 2]}"#
        );
    }

    #[test]
    fn other_services_are_named() {
        let mut h = HeaderMap::new();
        assert_eq!(other_service(&h, None), None);
        h.insert(
            "x-amz-target",
            HeaderValue::from_static("DynamoDB_20120810.ListTables"),
        );
        assert_eq!(
            other_service(&h, None).as_deref(),
            Some("DynamoDB_20120810")
        );
        h.insert(
            "authorization",
            HeaderValue::from_static(
                "AWS4-HMAC-SHA256 Credential=test/20240101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=abc",
            ),
        );
        assert_eq!(other_service(&h, None).as_deref(), Some("dynamodb"));
        let mut h = HeaderMap::new();
        h.insert(
            "authorization",
            HeaderValue::from_static(
                "AWS4-HMAC-SHA256 Credential=test/20240101/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=abc",
            ),
        );
        h.insert(
            "x-amz-target",
            HeaderValue::from_static("AmazonSQS.ListQueues"),
        );
        assert_eq!(other_service(&h, None), None);
        assert_eq!(
            other_service(
                &HeaderMap::new(),
                Some("X-Amz-Credential=k%2F20240101%2Fus-east-1%2Fs3%2Faws4_request")
            )
            .as_deref(),
            Some("s3")
        );
    }
}
