//! Cluster mode in the server: a request for a queue goes to the engine of its shard when
//! this node serves it, else it is forwarded as it came (same method, path, headers and
//! body, so signatures and queue URLs hold) to the node that does; listings ask every node
//! (`peers`). Nodes talk over the same HTTP port, under `/_sqsim/cluster` (`admin`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::HeaderValue;
use hyper::http::request::Parts;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use serde_json::json;

use crate::api::target::Target;
use crate::cluster::{Cluster, Place, OWNER_WAIT};
use crate::control::error::reply;
use crate::control::Plane;
use crate::engine::{Engine, QueueId};
use crate::error::{ErrorCode, SqsError};
use crate::http::{FORWARDED, FORWARDED_PORT, PEER_SECRET};

/// How long a forwarded request may take: more than the longest long poll.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(40);

/// This node's part in a cluster: the membership and shards, and a client for its peers.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub cluster: Arc<Cluster>,
    pub(super) client: Client<HttpConnector, Full<Bytes>>,
    /// The port this node listens on: a forwarded request's port-less Host gets it, so the
    /// owner builds queue URLs that reach the node the client called.
    pub(super) local_port: u16,
}

impl Link {
    /// Sends `req` to `url` (a peer's base URL plus the request's path and query).
    async fn send(
        &self,
        url: &str,
        parts: &Parts,
        body: Bytes,
    ) -> Result<Response<Bytes>, hyper_util::client::legacy::Error> {
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let mut req = Request::new(Full::new(body));
        *req.method_mut() = parts.method.clone();
        *req.uri_mut() = format!("{url}{path}").parse().unwrap_or_default();
        *req.headers_mut() = forwarded_headers(&parts.headers, self.local_port);
        req.headers_mut().insert(
            FORWARDED,
            HeaderValue::from_str(self.cluster.node_id()).unwrap_or(HeaderValue::from_static("?")),
        );
        self.sign(req.headers_mut());
        let sent = tokio::time::timeout(FORWARD_TIMEOUT, self.client.request(req)).await;
        let resp = match sent {
            Ok(r) => r?,
            Err(_) => {
                return Ok(Response::builder()
                    .status(StatusCode::GATEWAY_TIMEOUT)
                    .body(Bytes::new())
                    .unwrap_or_default())
            }
        };
        let (mut parts, body) = resp.into_parts();
        let body = match body.collect().await {
            Ok(b) => b.to_bytes(),
            // The owner's answer broke off: not its status with half a body.
            Err(_) => {
                parts.status = StatusCode::BAD_GATEWAY;
                Bytes::new()
            }
        };
        Ok(Response::from_parts(parts, body))
    }

    /// Adds the cluster's peer secret, which the receiving node's guard asks of every
    /// node-to-node request.
    fn sign(&self, headers: &mut hyper::HeaderMap) {
        if let Some(v) = self
            .cluster
            .peer_secret()
            .and_then(|s| HeaderValue::from_str(s).ok())
        {
            headers.insert(PEER_SECRET, v);
        }
    }

    /// POSTs `body` to `path` on the node at `url`, as one node to another: its status and
    /// body, or why none came within `timeout`.
    pub(super) async fn post(
        &self,
        url: &str,
        path: &str,
        body: Bytes,
        timeout: Duration,
    ) -> Result<(StatusCode, Bytes), String> {
        let mut req = Request::new(Full::new(body));
        *req.method_mut() = Method::POST;
        *req.uri_mut() = format!("{url}{path}")
            .parse()
            .map_err(|e| format!("{url}: {e}"))?;
        req.headers_mut()
            .insert(FORWARDED, HeaderValue::from_static("1"));
        self.sign(req.headers_mut());
        let resp = tokio::time::timeout(timeout, self.client.request(req))
            .await
            .map_err(|_| format!("{url}: timed out"))?
            .map_err(|e| format!("{url}: {e}"))?;
        let status = resp.status();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("{url}: {e}"))?
            .to_bytes();
        Ok((status, bytes))
    }
}

/// The headers a forwarded request carries: the client's, less those of its connection
/// and its credentials for this node's control plane, with the port it reached this node
/// on beside its `Host` (which goes on as signed). The forwarding mark and the peer secret
/// are added after.
fn forwarded_headers(client: &hyper::HeaderMap, local_port: u16) -> hyper::HeaderMap {
    let mut headers = client.clone();
    // Hop-by-hop headers belong to the client's connection, not to this one.
    for name in [
        "connection",
        "keep-alive",
        "te",
        "transfer-encoding",
        "upgrade",
        "proxy-authorization",
        "proxy-connection",
    ] {
        headers.remove(name);
    }
    // The client's credentials for this node's control plane (its admin token, the
    // console's session) stay here: this node checked them, and the owner trusts the peer
    // secret instead. A SigV4 `Authorization` goes on: the owner checks it again.
    headers.remove(hyper::header::COOKIE);
    let bearer = crate::http::header(client, hyper::header::AUTHORIZATION)
        .is_some_and(|a| a.len() >= 7 && a[..7].eq_ignore_ascii_case("bearer "));
    if bearer {
        headers.remove(hyper::header::AUTHORIZATION);
    }
    headers.insert(FORWARDED_PORT, HeaderValue::from(local_port));
    headers
}

/// Where an SQS request is answered.
pub(crate) enum Routed {
    /// Here, by this engine.
    Here(Arc<Engine>),
    /// By another node: its answer.
    There(Response<Bytes>),
    /// Nowhere in time (the shard has no owner, or this node was asked as owner and is
    /// not): the error to answer.
    Refused(SqsError, StatusCode),
}

/// Routes a request about `target`: `body` is the raw body, for forwarding.
/// `node` is this node's own engine (no queues): it answers what addresses no queue.
pub(crate) async fn route(
    link: &Link,
    parts: &Parts,
    body: &Bytes,
    target: &Target,
    node: &Arc<Engine>,
) -> Routed {
    match target {
        Target::Queue(id) => route_to_shard(link, parts, body, link.cluster.shard_of(id)).await,
        // The action's error, or (with the directory) its listing.
        Target::Everywhere | Target::Nowhere => Routed::Here(Arc::clone(node)),
    }
}

/// Routes a request about a queue of `shard` (see [`route`]).
pub(crate) async fn route_to_shard(link: &Link, parts: &Parts, body: &Bytes, shard: u32) -> Routed {
    let forwarded = parts.headers.contains_key(&FORWARDED);
    let deadline = Instant::now() + OWNER_WAIT;
    loop {
        match link.cluster.locate(shard, deadline).await {
            Some(Place::Here(engine)) => return Routed::Here(engine),
            Some(Place::There(_)) if forwarded => {
                // The sender thinks this node serves the shard; it does not (any more).
                return Routed::Refused(not_owner(), StatusCode::MISDIRECTED_REQUEST);
            }
            Some(Place::There(url)) => match tokio::select! {
                sent = link.send(&url, parts, body.clone()) => Some(sent),
                () = link.cluster.moved_from(shard, &url) => None,
            } {
                // The owner lost the shard while the request waited there: send it again.
                None => {
                    tracing::debug!(shard, "owner changed during a forwarded request; resending")
                }
                Some(Ok(resp)) if resp.status() == StatusCode::MISDIRECTED_REQUEST => {}
                // No answer from the owner (timed out, or cut off): the client retries.
                Some(Ok(resp))
                    if resp.body().is_empty()
                        && matches!(
                            resp.status(),
                            StatusCode::BAD_GATEWAY | StatusCode::GATEWAY_TIMEOUT
                        ) =>
                {
                    return Routed::Refused(unavailable(), StatusCode::SERVICE_UNAVAILABLE);
                }
                Some(Ok(resp)) => return Routed::There(resp),
                // Not sent (the owner is down): wait for its lease to move.
                Some(Err(e)) if e.is_connect() => {
                    tracing::debug!(error = %e, shard, "owner unreachable; waiting");
                }
                Some(Err(e)) => {
                    tracing::warn!(error = %e, shard, "forwarding failed");
                    return Routed::Refused(unavailable(), StatusCode::SERVICE_UNAVAILABLE);
                }
            },
            None => return Routed::Refused(unavailable(), StatusCode::SERVICE_UNAVAILABLE),
        }
        if Instant::now() >= deadline {
            return Routed::Refused(unavailable(), StatusCode::SERVICE_UNAVAILABLE);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn unavailable() -> SqsError {
    SqsError::new(
        ErrorCode::ServiceUnavailable,
        "The queue's shard is moving to another node; retry.",
    )
}

fn not_owner() -> SqsError {
    SqsError::new(
        ErrorCode::ServiceUnavailable,
        "This node does not serve the queue's shard.",
    )
}

/// Where a request about queue `id` runs (see [`on_owner_of`]).
pub(super) async fn on_owner(
    state: &Plane,
    link: &Link,
    parts: &Parts,
    body: &Bytes,
    id: &QueueId,
) -> Result<Arc<Engine>, Response<Full<Bytes>>> {
    on_owner_of(state, link, parts, body, &Target::Queue(id.clone())).await
}

/// Where an admin request about `target` runs: `Ok` with the engine when this node serves
/// it, else the answer of the node that does (or the refusal when none does in time).
pub(super) async fn on_owner_of(
    state: &Plane,
    link: &Link,
    parts: &Parts,
    body: &Bytes,
    target: &Target,
) -> Result<Arc<Engine>, Response<Full<Bytes>>> {
    match route(link, parts, body, target, &state.engine).await {
        Routed::Here(engine) => Ok(engine),
        Routed::There(resp) => Err(resp.map(Full::new)),
        Routed::Refused(err, status) => Err(reply(status, json!({ "error": err.message }))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A forwarded request keeps what the owner checks (its signature, its `Host`) and
    /// drops what was for this node only: its connection's headers, a Bearer admin token,
    /// the console's cookie; a port the client slipped in is replaced by this node's.
    #[test]
    fn a_forwarded_request_keeps_its_signature_and_drops_this_nodes_credentials() {
        let mut client = hyper::HeaderMap::new();
        for (k, v) in [
            ("host", "localhost"),
            ("authorization", "AWS4-HMAC-SHA256 Credential=AK/20240101/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=00"),
            ("cookie", "sqsim_session_9324=abc"),
            ("connection", "keep-alive"),
            ("x-sqsim-forwarded-port", "1"),
            ("x-amz-target", "AmazonSQS.ListQueues"),
        ] {
            client.insert(k, HeaderValue::from_static(v));
        }
        let out = forwarded_headers(&client, 9324);
        assert_eq!(out["host"], "localhost");
        assert_eq!(out["authorization"], client["authorization"]);
        assert_eq!(out["x-amz-target"], "AmazonSQS.ListQueues");
        assert_eq!(out[&FORWARDED_PORT], "9324");
        assert!(!out.contains_key("cookie") && !out.contains_key("connection"));
        for bearer in [
            "Bearer admin-token-0123456789",
            "bearer admin-token-0123456789",
        ] {
            client.insert("authorization", HeaderValue::from_static(bearer));
            assert!(
                !forwarded_headers(&client, 9324).contains_key("authorization"),
                "{bearer}"
            );
        }
    }
}
