//! One POST to the application, the way Elastic Beanstalk's `sqsd` makes it: the body as is,
//! and the `X-Aws-Sqsd-*` headers describing the message.

use std::time::Duration;

use aws_sdk_sqs::types::{Message, MessageSystemAttributeName};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// The HTTP client the worker posts with.
pub type AppClient = Client<HttpConnector, Full<Bytes>>;

/// A client whose connections time out after `connect_timeout`.
pub fn app_client(connect_timeout: Duration, max_connections: usize) -> AppClient {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(connect_timeout));
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(max_connections)
        .build(connector)
}

/// How one delivery ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// 2xx: the message is done.
    Ok,
    /// Any other status; `retry_after` from the app's `Retry-After` header, in seconds.
    Failed {
        status: u16,
        retry_after: Option<u32>,
    },
    /// No answer within the inactivity timeout.
    TimedOut,
    /// The connection was refused or broke.
    Unreachable(String),
}

fn header_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii() && !c.is_ascii_control() {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// POSTs `msg` to `url` and waits up to `inactivity` for the answer.
pub async fn post(
    client: &AppClient,
    url: &str,
    mime_type: &str,
    queue_name: &str,
    msg: &Message,
    inactivity: Duration,
) -> Outcome {
    let attrs = msg.attributes();
    let attr = |n: MessageSystemAttributeName| attrs.and_then(|a| a.get(&n)).map(String::as_str);
    let first_received = attr(MessageSystemAttributeName::ApproximateFirstReceiveTimestamp)
        .and_then(|ms| ms.parse::<i64>().ok())
        .and_then(|ms| chrono::DateTime::from_timestamp(ms.div_euclid(1000), 0))
        .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default();
    let mut req = Request::post(url)
        .header("user-agent", USER_AGENT)
        .header("content-type", mime_type)
        .header("x-aws-sqsd-msgid", msg.message_id().unwrap_or_default())
        .header("x-aws-sqsd-queue", queue_name)
        .header("x-aws-sqsd-first-received-at", first_received)
        .header(
            "x-aws-sqsd-receive-count",
            attr(MessageSystemAttributeName::ApproximateReceiveCount).unwrap_or("1"),
        )
        .header(
            "x-aws-sqsd-sender-id",
            attr(MessageSystemAttributeName::SenderId).unwrap_or_default(),
        );
    for (name, value) in msg.message_attributes().into_iter().flatten() {
        if let Some((_, text)) = attribute_text(value) {
            req = req.header(format!("x-aws-sqsd-attr-{name}"), header_safe(&text));
        }
    }
    let body = Bytes::from(msg.body().unwrap_or_default().to_string());
    let req = match req.body(Full::new(body)) {
        Ok(r) => r,
        Err(e) => return Outcome::Unreachable(e.to_string()),
    };
    match exchange(client, req, inactivity).await {
        Answer::Replied { status, .. } if (200..300).contains(&status) => Outcome::Ok,
        Answer::Replied {
            status,
            retry_after,
            ..
        } => Outcome::Failed {
            status,
            retry_after,
        },
        Answer::TimedOut => Outcome::TimedOut,
        Answer::Unreachable(e) => Outcome::Unreachable(e),
    }
}

/// What the application said to one POST.
#[derive(Debug)]
pub enum Answer {
    Replied {
        status: u16,
        retry_after: Option<u32>,
        body: Bytes,
    },
    TimedOut,
    Unreachable(String),
}

/// Sends `req` and waits up to `inactivity` for the whole answer.
pub async fn exchange(
    client: &AppClient,
    req: Request<Full<Bytes>>,
    inactivity: Duration,
) -> Answer {
    let call = async {
        let resp = client.request(req).await?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u32>().ok());
        // Read the whole body: batch answers carry per-message results, and a drained
        // connection can be reused.
        let body = resp
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        Ok::<_, hyper_util::client::legacy::Error>((status, retry_after, body))
    };
    match tokio::time::timeout(inactivity, call).await {
        Err(_) => Answer::TimedOut,
        Ok(Err(e)) => Answer::Unreachable(e.to_string()),
        Ok(Ok((status, retry_after, body))) => Answer::Replied {
            status,
            retry_after,
            body,
        },
    }
}

/// The user agent sqsd sends, with ours beside it.
pub const USER_AGENT: &str = concat!("aws-sqsd/3.0.4 (sqsim ", env!("CARGO_PKG_VERSION"), ")");

/// A message attribute's value as text, with the member it came from: the string, or
/// base64 of the binary value. `None` when it has neither.
pub(super) fn attribute_text(
    v: &aws_sdk_sqs::types::MessageAttributeValue,
) -> Option<(&'static str, String)> {
    use base64::Engine as _;
    match (v.string_value(), v.binary_value()) {
        (Some(s), _) => Some(("StringValue", s.to_string())),
        (None, Some(b)) => Some((
            "BinaryValue",
            base64::engine::general_purpose::STANDARD.encode(b.as_ref()),
        )),
        _ => None,
    }
}
