//! The HTTP pieces every room shares, below all of them: the request body with its read
//! deadline and its share of the bodies' memory budget (`budget`), header lookup, a
//! request's credential scope, JSON in and out of the control plane's endpoints, and an
//! encoded SQS answer turned into a response.

mod budget;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{
    AsHeaderName, HeaderMap, HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE,
};
use hyper::{Response, StatusCode};

use crate::protocol::Encoded;
pub(crate) use budget::{BodyBudget, BodyRefused};

/// The header a node sends its peers, carrying the cluster's secret.
pub(crate) const PEER_SECRET: HeaderName = HeaderName::from_static("x-sqsim-cluster-secret");
/// Marks a request one node sent another: the receiver answers it itself or says it does
/// not serve the shard (421), never forwards it again.
pub(crate) const FORWARDED: HeaderName = HeaderName::from_static("x-sqsim-forwarded");
/// On a forwarded request: the port it reached the first node on. The `Host` header goes
/// on as the client sent it (a SigV4 signature covers it), so the owner spells queue URLs
/// from this port where that node would have used its own.
pub(crate) const FORWARDED_PORT: HeaderName = HeaderName::from_static("x-sqsim-forwarded-port");
/// The AWS JSON protocol's operation (`AmazonSQS.SendMessage`).
pub(crate) const X_AMZ_TARGET: HeaderName = HeaderName::from_static("x-amz-target");
/// AWS X-Ray's trace header, kept as a message's `AWSTraceHeader`.
pub(crate) const X_AMZN_TRACE_ID: HeaderName = HeaderName::from_static("x-amzn-trace-id");
/// Sent by browsers only (with `Origin` on every cross-origin request but a GET).
pub(crate) const SEC_FETCH_SITE: HeaderName = HeaderName::from_static("sec-fetch-site");
/// Where a browser's request is going (`document`, `image`, `empty`…): only browsers send it.
pub(crate) const SEC_FETCH_DEST: HeaderName = HeaderName::from_static("sec-fetch-dest");

/// A request body that must arrive whole by a deadline (`read_timeout` after it first makes
/// the reader wait): a client sending a byte a second gets an error instead of holding a
/// request open. The timer is only set once the body makes the reader wait; an SDK's body
/// arrives with its head, so a request usually costs no timer and no clock read at all.
/// What arrives is held against the server's [`BodyBudget`]; a body that finds no room is
/// refused ([`BodyRefused`]).
#[derive(Debug)]
pub(crate) struct RequestBody {
    inner: Source,
    /// How long the body may keep the reader waiting, counted from the first wait (no
    /// clock read for a body that came with its head).
    read_timeout: std::time::Duration,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// What the body holds of the budget, given back when it is dropped; `None` for a body
    /// read already.
    hold: Option<budget::Hold>,
}

/// Where a body's bytes come from.
#[derive(Debug)]
enum Source {
    /// Still arriving from the connection.
    Stream(Incoming),
    /// Already read whole (a control request whose signature covered it).
    Ready(Option<Bytes>),
}

impl RequestBody {
    /// A body arriving on a connection of `version`, held against `budget`.
    pub(crate) fn new(
        inner: Incoming,
        read_timeout: std::time::Duration,
        budget: &Arc<BodyBudget>,
        version: hyper::Version,
    ) -> RequestBody {
        // An HTTP/1.1 body waiting for room leaves its connection unread; an HTTP/2 stream
        // left unread would hold the window its connection's other streams need.
        let may_wait = version != hyper::Version::HTTP_2;
        let hold = budget.hold(inner.size_hint().exact(), may_wait);
        RequestBody {
            inner: Source::Stream(inner),
            read_timeout,
            timer: None,
            hold: Some(hold),
        }
    }

    /// A body already read.
    pub(crate) fn ready(bytes: Bytes) -> RequestBody {
        RequestBody {
            inner: Source::Ready(Some(bytes)),
            read_timeout: std::time::Duration::ZERO,
            timer: None,
            hold: None,
        }
    }
}

/// Whether a body's read deadline (`limit` after it first made the reader wait: `timer` is
/// set then) has passed.
fn deadline_passed(
    timer: &mut Option<Pin<Box<tokio::time::Sleep>>>,
    limit: std::time::Duration,
    cx: &mut Context<'_>,
) -> bool {
    let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
    timer.as_mut().poll(cx).is_ready()
}

/// The body did not arrive in time.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within the read timeout")]
pub(crate) struct BodyTimedOut;

impl Body for RequestBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        let stream = match &mut this.inner {
            Source::Stream(s) => s,
            Source::Ready(b) => return Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
        };
        if let Some(hold) = &mut this.hold {
            match hold.poll_admit(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(refused)) => return Poll::Ready(Some(Err(Box::new(refused)))),
                // Waiting for room counts against the read deadline; past it the body is
                // refused (503: the want of room is the server's), not timed out (400).
                Poll::Pending => {
                    return match deadline_passed(&mut this.timer, this.read_timeout, cx) {
                        true => Poll::Ready(Some(Err(Box::new(hold.gave_up())))),
                        false => Poll::Pending,
                    };
                }
            }
        }
        if let Poll::Ready(frame) = Pin::new(stream).poll_frame(cx) {
            let data = frame.as_ref().and_then(|f| f.as_ref().ok()?.data_ref());
            if let (Some(hold), Some(data)) = (&mut this.hold, data) {
                if let Err(refused) = hold.arrived(data.len()) {
                    return Poll::Ready(Some(Err(Box::new(refused))));
                }
            }
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        match deadline_passed(&mut this.timer, this.read_timeout, cx) {
            true => Poll::Ready(Some(Err(Box::new(BodyTimedOut)))),
            false => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Source::Stream(s) => s.is_end_stream(),
            Source::Ready(b) => b.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Source::Stream(s) => s.size_hint(),
            Source::Ready(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
        }
    }
}

/// A header's value, when it is text.
///
/// Every request looks up a dozen headers: the hot path names them by [`HeaderName`]
/// (hyper's standard ones and the constants above), which skips parsing the name each time.
pub(crate) fn header(headers: &HeaderMap, name: impl AsHeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The address a request reached, for spelling queue URLs: this server's `local`, or for a
/// request another node forwarded (which the guard let through with the peer secret) the
/// port it reached that node on ([`FORWARDED_PORT`]).
pub(crate) fn reached(headers: &HeaderMap, local: SocketAddr) -> SocketAddr {
    match headers.contains_key(&FORWARDED) {
        true => header(headers, &FORWARDED_PORT)
            .and_then(|p| p.parse().ok())
            .map_or(local, |port| SocketAddr::new(local.ip(), port)),
        false => local,
    }
}

/// What a SigV4 credential scope (`AKID/date/region/service/aws4_request`) names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Scope<'a> {
    pub access_key: &'a str,
    pub region: &'a str,
    /// The signing name: `sqs` for every SQS client.
    pub service: Option<&'a str>,
}

/// The credential scope of a SigV4-signed request, from the `Authorization` header or a
/// presigned URL's `X-Amz-Credential`.
pub(crate) fn credential_scope<'a>(
    headers: &'a HeaderMap,
    query: Option<&'a str>,
) -> Option<Scope<'a>> {
    let credential = match header(headers, hyper::header::AUTHORIZATION) {
        // Every SDK writes the algorithm and then the credential first.
        Some(a) => match a.strip_prefix("AWS4-HMAC-SHA256 Credential=") {
            Some(rest) => rest,
            None => &a[a.find("Credential=")? + "Credential=".len()..],
        },
        None => {
            let q = query?;
            &q[q.find("X-Amz-Credential=")? + "X-Amz-Credential=".len()..]
        }
    };
    let credential = credential.split([',', '&', ' ']).next()?;
    // In a query string the slashes are usually percent-encoded.
    let separator = if credential.contains('/') { "/" } else { "%2F" };
    let mut parts = credential.split(separator);
    let access_key = parts.next()?;
    let _date = parts.next()?;
    let region = parts.next().filter(|r| !r.is_empty())?;
    let service = parts.next().filter(|s| !s.is_empty());
    Some(Scope {
        access_key,
        region,
        service,
    })
}

/// Whether the request announces a body above `max` bytes, so it can be refused before any
/// of the body is read.
pub(crate) fn declared_too_large(headers: &HeaderMap, max: usize) -> bool {
    header(headers, CONTENT_LENGTH)
        .and_then(|v| v.trim().parse::<u64>().ok())
        .is_some_and(|len| len > max as u64)
}

/// The base URL a local client reaches this server on (loopback when bound to all addresses).
pub(crate) fn loopback_url(addr: SocketAddr) -> String {
    let ip = if addr.ip().is_unspecified() {
        std::net::IpAddr::from([127, 0, 0, 1])
    } else {
        addr.ip()
    };
    format!("http://{}", SocketAddr::new(ip, addr.port()))
}

/// Turns an encoded reply into an HTTP response with SQS's headers.
pub(crate) fn respond(e: Encoded, request_id: &str) -> Response<Full<Bytes>> {
    let len = e.body.len();
    let mut resp = Response::new(Full::new(Bytes::from(e.body)));
    *resp.status_mut() = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST);
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(e.content_type));
    h.insert(CONTENT_LENGTH, HeaderValue::from(len));
    if let Ok(v) = HeaderValue::from_str(request_id) {
        h.insert("x-amzn-requestid", v);
    }
    if let Some(q) = e.query_error.and_then(|q| HeaderValue::from_str(&q).ok()) {
        h.insert("x-amzn-query-error", q);
    }
    resp
}
