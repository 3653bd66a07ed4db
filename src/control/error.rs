//! The control plane's one error type and its JSON in and out: every `/_sqsim/` endpoint
//! (and the cluster's peer endpoints) answers `{"error": "..."}` with a status, never an SQS
//! error document; SQS errors stay in [`crate::error`].

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use serde_json::json;

use crate::http::{declared_too_large, RequestBody};

/// Why a control-plane request failed: the status and the sentence sent as `error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ControlError {
    pub status: StatusCode,
    pub message: String,
}

impl ControlError {
    /// An error with `status`.
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> ControlError {
        ControlError {
            status,
            message: message.into(),
        }
    }

    /// 400: the request says something the endpoint cannot do.
    pub(crate) fn bad_request(message: impl Into<String>) -> ControlError {
        ControlError::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404: what the request names does not exist.
    pub(crate) fn not_found(message: impl Into<String>) -> ControlError {
        ControlError::new(StatusCode::NOT_FOUND, message)
    }

    /// 500: a change that could not be kept (durable mode), with the store's error.
    pub(crate) fn not_kept(e: impl std::fmt::Display) -> ControlError {
        ControlError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the change could not be kept: {e}"),
        )
    }

    /// The answer: `{"error": message}` with the status.
    pub(crate) fn reply(&self) -> Response<Full<Bytes>> {
        reply(self.status, json!({"error": self.message}))
    }
}

impl std::fmt::Display for ControlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.status)
    }
}

/// A JSON answer of the control plane.
pub(crate) fn reply(status: StatusCode, body: serde_json::Value) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body.to_string())));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// Reads a JSON body (empty means `{}`), or the 400 reply to send instead.
pub(crate) async fn read_json<T: serde::de::DeserializeOwned>(
    req: Request<RequestBody>,
) -> Result<T, ControlError> {
    parse_json(&read_body(req).await?).map_err(bad_json)
}

/// [`read_json`], also keeping the request's head and raw body (cluster mode forwards them
/// to the node serving the queue the request is about).
pub(crate) async fn read_json_keeping<T: serde::de::DeserializeOwned>(
    req: Request<RequestBody>,
) -> Result<(hyper::http::request::Parts, Bytes, T), ControlError> {
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
pub(crate) async fn read_body(req: Request<RequestBody>) -> Result<Bytes, ControlError> {
    read_body_up_to(req, MAX_ADMIN_BODY).await
}

/// The request body if it holds at most `max` bytes, or the 4xx reply to send instead.
pub(crate) async fn read_body_up_to(
    req: Request<RequestBody>,
    max: usize,
) -> Result<Bytes, ControlError> {
    if declared_too_large(req.headers(), max) {
        return Err(ControlError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is larger than {max} bytes"),
        ));
    }
    Limited::new(req.into_body(), max)
        .collect()
        .await
        .map(|b| b.to_bytes())
        .map_err(|e| match e.downcast_ref::<crate::http::BodyRefused>() {
            Some(refused) => {
                ControlError::new(StatusCode::SERVICE_UNAVAILABLE, refused.to_string())
            }
            None => ControlError::bad_request("unreadable body"),
        })
}

/// The 400 answer to JSON that does not parse.
pub(crate) fn bad_json(e: serde_json::Error) -> ControlError {
    ControlError::bad_request(e.to_string())
}
