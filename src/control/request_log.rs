//! One log line per answered SQS request: at `debug` for every request (request id, action,
//! queue, status, duration), at `warn` for errors with their AWS error code and for requests
//! whose connection an injected fault dropped. The queue is worked out only when a line is
//! written.

use std::time::Duration;

use bytes::Bytes;

use crate::protocol::{form, Encoded, Params, Protocol};

/// What names a request's queue: the request's body, kept (a reference count, no copy)
/// and read again only when a log line is written.
#[derive(Debug, Default)]
pub(crate) struct QueueSource {
    body: Bytes,
    json: bool,
}

impl QueueSource {
    /// Keeps the body of a request decoded as `protocol`.
    pub(crate) fn of(body: &Bytes, protocol: Protocol) -> QueueSource {
        QueueSource {
            body: body.clone(),
            json: protocol == Protocol::Json,
        }
    }

    /// The queue's name: from its QueueUrl, else the request path, else QueueName (the
    /// query protocol's members may also be in the URI's query string).
    fn name(self, path: &str, uri_query: Option<&str>) -> Option<String> {
        let given = if self.json {
            let p = Params::Json(self.body);
            p.queue_url_hint().or_else(|| p.string_member("QueueName"))
        } else {
            let mut pairs = form::parse(uri_query.unwrap_or_default().as_bytes());
            pairs.extend(form::parse(&self.body));
            let find = |k: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| key == k)
                    .map(|(_, v)| v.to_string())
            };
            find("QueueUrl").or_else(|| find("QueueName"))
        };
        let parsed = |u: &str| crate::api::queue_url::parse(u).map(|r| r.name.to_string());
        match given {
            Some(g) if g.contains('/') => parsed(&g),
            Some(name) => Some(name),
            None => (path.len() > 1).then(|| parsed(path)).flatten(),
        }
    }
}

/// One answered request, as the log shows it.
pub(crate) struct Answered<'a> {
    pub request_id: &'a str,
    pub action: &'a str,
    pub queue: QueueSource,
    pub path: &'a str,
    pub uri_query: Option<&'a str>,
    pub took: Duration,
}

/// Writes the request's line: `warn` for an error (with its AWS code), else `debug`.
pub(crate) fn write(a: Answered<'_>, encoded: &Encoded) {
    let failed = encoded.error.is_some();
    let wanted = tracing::enabled!(tracing::Level::DEBUG)
        || (failed && tracing::enabled!(tracing::Level::WARN));
    if !wanted {
        return;
    }
    let queue = a.queue.name(a.path, a.uri_query);
    let queue = queue.as_deref().unwrap_or("");
    let duration_ms = a.took.as_micros() as f64 / 1000.0;
    match encoded.error {
        Some(code) => tracing::warn!(
            request_id = a.request_id,
            action = a.action,
            queue,
            status = encoded.status,
            duration_ms,
            code,
            "request failed"
        ),
        None => tracing::debug!(
            request_id = a.request_id,
            action = a.action,
            queue,
            status = encoded.status,
            duration_ms,
            "request"
        ),
    }
}

/// Writes the line of a request left unanswered because an injected fault dropped its
/// connection: `warn`, like an error, with `fault = "drop_connection"` in place of a status.
pub(crate) fn dropped(a: Answered<'_>) {
    if !tracing::enabled!(tracing::Level::WARN) {
        return;
    }
    let queue = a.queue.name(a.path, a.uri_query);
    tracing::warn!(
        request_id = a.request_id,
        action = a.action,
        queue = queue.as_deref().unwrap_or(""),
        duration_ms = a.took.as_micros() as f64 / 1000.0,
        fault = "drop_connection",
        "connection dropped"
    );
}
