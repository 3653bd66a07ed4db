//! Cluster mode in the server: a request for a queue goes to the engine of its shard when
//! this node serves it, else it is forwarded as it came (same method, path, headers and
//! body, so signatures and queue URLs hold) to the node that does; listings ask every node.
//! Nodes talk over the same HTTP port, under `/_sqsim/cluster`.

use crate::control::error::ControlError;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::HeaderValue;
use hyper::http::request::Parts;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde_json::json;

use crate::api::context::{Directory, Listing, Lookup, QueueFilter};
use crate::api::target::Target;
use crate::cluster::{Cluster, Place, OWNER_WAIT};
use crate::control::error::{read_json, reply};
use crate::control::Plane;
use crate::engine::{Engine, QueueId};
use crate::error::{ErrorCode, SqsError};
use crate::http::{RequestBody, FORWARDED, PEER_SECRET};

/// How long a forwarded request may take: more than the longest long poll.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(40);

/// This node's part in a cluster: the membership and shards, and a client for its peers.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub cluster: Arc<Cluster>,
    client: Client<HttpConnector, Full<Bytes>>,
    /// The port this node listens on: a forwarded request's port-less Host gets it, so the
    /// owner builds queue URLs that reach the node the client called.
    local_port: u16,
}

impl Link {
    /// Joins the cluster described in `state.config`; each shard this node takes gets its
    /// compactor and resumes its move tasks.
    pub(crate) async fn join(state: &Plane) -> Result<Option<Link>, String> {
        let Some(config) = state.config.cluster.clone() else {
            return Ok(None);
        };
        let peer_url = config
            .peer_url
            .clone()
            .unwrap_or_else(|| format!("http://127.0.0.1:{}", state.local_addr.port()));
        // Couriers need the link, which exists only once the cluster has started.
        let cell: Arc<std::sync::OnceLock<Link>> = Arc::default();
        let for_couriers = Arc::clone(&cell);
        let on_open = Box::new(move |engine: &Arc<Engine>| {
            crate::engine::spawn_compactor(Arc::downgrade(engine), COMPACT_AFTER);
            crate::engine::moves::task::resume(engine);
            super::courier::spawn(Arc::clone(&for_couriers), Arc::downgrade(engine));
        });
        let cluster = Cluster::start(
            config,
            peer_url.trim_end_matches('/').to_string(),
            Arc::clone(state.engine.clock()),
            state.config.engine.clone(),
            on_open,
        )
        .await?;
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(1)));
        let client = Client::builder(TokioExecutor::new()).build(connector);
        let link = Link {
            cluster,
            client,
            local_port: state.local_addr.port(),
        };
        let _ = cell.set(link.clone());
        Ok(Some(link))
    }

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
        *req.headers_mut() = parts.headers.clone();
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
            req.headers_mut().remove(name);
        }
        let filled = crate::http::header(&parts.headers, hyper::header::HOST)
            .and_then(|h| crate::config::host_with_port(h, self.local_port))
            .and_then(|h| HeaderValue::from_str(&h).ok());
        if let Some(host) = filled {
            req.headers_mut().insert(hyper::header::HOST, host);
        }
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
    async fn post(
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

    /// Gathers what every node serving shards says to `path` (JSON `body`) with what this
    /// node says (`local`), for a question about every queue (a listing, stats). A node that
    /// cannot be reached — dead, stalled, cut off — is waited for as a request for one of
    /// its queues waits: until its shards have moved (then every node is asked again, since
    /// their new holders may have answered before they took them), at most [`OWNER_WAIT`].
    /// An answer that is an error ends it at once.
    ///
    /// Each node answers with the shards it serves ([`by_shards`]): the answers count only
    /// if together they cover every shard, so a shard being recovered by its new owner (or
    /// between owners) is waited for too, rather than its queues left out.
    pub(super) async fn gather(
        &self,
        path: &str,
        body: &serde_json::Value,
        local: impl Fn(&[Arc<Engine>]) -> serde_json::Value,
    ) -> Result<Vec<serde_json::Value>, String> {
        let deadline = Instant::now() + OWNER_WAIT;
        let body = Bytes::from(body.to_string());
        loop {
            let mine = by_shards(&self.cluster, &local);
            let (theirs, unreached) = self.ask_round(path, &body, PEER_ANSWER).await?;
            let mut covered = vec![false; self.cluster.config.shards as usize];
            let mut values = Vec::with_capacity(theirs.len() + 1);
            for mut a in std::iter::once(mine).chain(theirs) {
                for s in a["serving"].as_array().into_iter().flatten() {
                    if let Some(c) = s.as_u64().and_then(|s| covered.get_mut(s as usize)) {
                        *c = true;
                    }
                }
                values.push(a["answer"].take());
            }
            let missing = covered.iter().filter(|c| !**c).count();
            if unreached.is_empty() && missing == 0 {
                return Ok(values);
            }
            let why = match unreached.first() {
                Some((_, e)) => e.clone(),
                None => format!("{missing} shards are not served yet"),
            };
            tracing::debug!(error = %why, "waiting for every shard to be served");
            if Instant::now() >= deadline {
                return Err(why);
            }
            self.until_moved(&unreached).await;
        }
    }

    /// Tells every other node of a change to a setting the leases bucket keeps (the clock,
    /// the realism): POSTs JSON `body` to `path` on each. A node that cannot be reached is
    /// waited for until its shards have moved — whoever serves them now was told, or reads
    /// the bucket before it serves — at most [`OWNER_WAIT`]. An answer that is an error ends
    /// it. Telling a node twice does no harm: it applies a setting's revision once.
    pub(super) async fn tell_peers(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<(), String> {
        let deadline = Instant::now() + OWNER_WAIT;
        let body = Bytes::from(body.to_string());
        loop {
            let (_, unreached) = self.ask_round(path, &body, PEER_ANSWER).await?;
            match unreached.first() {
                None => return Ok(()),
                Some((_, e)) if Instant::now() >= deadline => return Err(e.clone()),
                Some(_) => self.until_moved(&unreached).await,
            }
        }
    }

    /// One round of [`Self::gather`], [`Self::tell_peers`] and a reset of every shard
    /// (`cluster::reset`): POSTs `body` to `path` on every node that serves shards now,
    /// side by side, each given `timeout` to answer. The answers, and the nodes that gave
    /// none (with why); an answer that is an error ends it.
    pub(super) async fn ask_round(
        &self,
        path: &str,
        body: &Bytes,
        timeout: Duration,
    ) -> Result<(Vec<serde_json::Value>, Vec<(String, String)>), String> {
        let peers = self.cluster.peers();
        let asks = peers
            .iter()
            .map(|peer| self.ask(peer, path, body.clone(), timeout));
        let mut answers = Vec::with_capacity(peers.len());
        let mut unreached = Vec::new();
        for (peer, answer) in peers.iter().zip(futures_util::future::join_all(asks).await) {
            match answer {
                Ok(v) => answers.push(v),
                Err(Unanswered::Refused(e)) => return Err(e),
                Err(Unanswered::Unreached(e)) => unreached.push((peer.clone(), e)),
            }
        }
        Ok((answers, unreached))
    }

    /// Waits until the shards of the nodes in `unreached` have moved to others, or a second
    /// passed (a node only slow is asked again; shards still opening are looked at again
    /// sooner: with nobody unreached, 50 ms).
    pub(super) async fn until_moved(&self, unreached: &[(String, String)]) {
        let again = Instant::now() + Duration::from_secs(1);
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let now = self.cluster.peers();
            if unreached.iter().all(|(p, _)| !now.contains(p)) || Instant::now() >= again {
                return;
            }
        }
    }

    /// POSTs JSON to `path` on `peer`: the JSON of its answer if it succeeded.
    async fn ask(
        &self,
        peer: &str,
        path: &str,
        body: Bytes,
        timeout: Duration,
    ) -> Result<serde_json::Value, Unanswered> {
        let (status, bytes) = self
            .post(peer, path, body, timeout)
            .await
            .map_err(Unanswered::Unreached)?;
        let v: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| Unanswered::Refused(format!("{peer}: {e}")))?;
        if status.is_success() {
            Ok(v)
        } else {
            Err(Unanswered::Refused(format!("{peer}: {v}")))
        }
    }
}

/// What a node answers to [`Link::gather`]: the shards it serves, and `f` of their engines
/// (taken together, so the answer covers exactly those shards).
pub(super) fn by_shards(
    cluster: &Cluster,
    f: impl FnOnce(&[Arc<Engine>]) -> serde_json::Value,
) -> serde_json::Value {
    let (serving, engines): (Vec<u32>, Vec<Arc<Engine>>) = cluster.served().into_iter().unzip();
    json!({"serving": serving, "answer": f(&engines)})
}

/// How long [`Link::gather`] waits for one node's answer before it counts the node
/// unreachable (a stalled node's shards move to others within a lease).
const PEER_ANSWER: Duration = Duration::from_secs(5);

/// Why a node's answer is missing.
enum Unanswered {
    /// None came: the node is down, stalled or cut off (or its answer broke off).
    Unreached(String),
    /// It answered with an error, or with what is not JSON.
    Refused(String),
}

/// The log size past which a shard's snapshot is considered: small, because a node taking
/// the shard over reads the log since the last snapshot before it serves (a log of live
/// messages only is left as it is: a snapshot of them would be as long to read).
const COMPACT_AFTER: u64 = 4 << 20;

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

/// Lists queues across the cluster: this node's shards, then every peer's.
#[derive(Debug)]
pub(crate) struct ClusterDirectory(pub Link);

impl Directory for ClusterDirectory {
    fn queues(&self, filter: QueueFilter) -> Listing<'_> {
        Box::pin(async move {
            let unavailable = |e: String| {
                tracing::warn!(error = %e, "a node did not list its queues");
                SqsError::new(
                    ErrorCode::ServiceUnavailable,
                    "A node of the cluster did not answer; retry.",
                )
            };
            let body = serde_json::to_value(&filter).unwrap_or_default();
            let local = |engines: &[Arc<Engine>]| json!(local_queues(engines, &filter));
            let answers = self
                .0
                .gather("/_sqsim/cluster/queues", &body, local)
                .await
                .map_err(unavailable)?;
            let mut ids = Vec::new();
            for answer in answers {
                let found: Vec<QueueId> =
                    serde_json::from_value(answer).map_err(|e| unavailable(e.to_string()))?;
                ids.extend(found);
            }
            // A shard that moved while the nodes answered may be in two answers.
            ids.sort_by(|a, b| {
                (&a.region, &a.account, &a.name).cmp(&(&b.region, &b.account, &b.name))
            });
            ids.dedup();
            Ok(ids)
        })
    }

    fn settings_of(&self, id: QueueId) -> Lookup<'_> {
        Box::pin(super::courier::settings_of(&self.0, id))
    }
}

fn local_queues(engines: &[Arc<Engine>], filter: &QueueFilter) -> Vec<QueueId> {
    engines.iter().flat_map(|e| filter.apply(e)).collect()
}

/// The admin endpoints in cluster mode: `/_sqsim/cluster` (status),
/// `/_sqsim/cluster/queues` (a peer's listing), reset across every node, realism (the
/// cluster's, or one queue's where it is served), health (whether this node can write to
/// JetStream); faults and reading the clock act on this node as in one process (given back
/// as `Err`); the rest of the test controls act on one process's engine and are refused.
pub(crate) async fn admin(
    state: &Plane,
    link: &Link,
    req: Request<RequestBody>,
) -> Result<Response<Full<Bytes>>, Request<RequestBody>> {
    let forwarded = req.headers().contains_key(&FORWARDED);
    let path = req.uri().path().to_string();
    Ok(match (req.method().clone(), path.as_str()) {
        (Method::GET, "/_sqsim/cluster") => reply(StatusCode::OK, link.cluster.status()),
        (Method::GET, "/_sqsim/cluster/locate") => locate(state, link, req.uri().query()),
        (Method::POST, "/_sqsim/cluster/queues") => match read_json::<QueueFilter>(req).await {
            Ok(f) => reply(
                StatusCode::OK,
                by_shards(&link.cluster, |e| json!(local_queues(e, &f))),
            ),
            Err(e) => e.reply(),
        },
        (Method::POST, "/_sqsim/cluster/arrive") => super::courier::arrive(link, req).await,
        (Method::POST, "/_sqsim/cluster/describe") => super::courier::describe(link, req).await,
        (Method::POST, "/_sqsim/reset") => super::reset::reset(state, link, req, forwarded).await,
        (Method::POST, "/_sqsim/cluster/reset") => super::reset::reset_here(state, link, req).await,
        (Method::GET, "/_sqsim/peek") => {
            let query = req.uri().query().unwrap_or_default().to_string();
            // Without a queue, the one-process handler gives the error.
            let Some(id) = crate::control::peek::peek_target(state, &query) else {
                return Err(req);
            };
            let (parts, _) = req.into_parts();
            match on_owner(state, link, &parts, &Bytes::new(), &id).await {
                Ok(engine) => crate::control::peek::peek(state, &engine, &query),
                Err(resp) => resp,
            }
        }
        (Method::GET, "/_sqsim/stats") => stats(state, link).await,
        (Method::GET, "/_sqsim/realism") => super::realism::show(link).await,
        (Method::POST, "/_sqsim/realism") => super::realism::change(state, link, req).await,
        (Method::POST, "/_sqsim/cluster/realism") => super::realism::apply(link, req).await,
        (Method::POST, "/_sqsim/cluster/realism/queues") => {
            let local = |e: &[Arc<Engine>]| json!(super::realism::local_queues(e));
            reply(StatusCode::OK, by_shards(&link.cluster, local))
        }
        (Method::POST, p) if p.starts_with("/_sqsim/console/sqs/") => {
            let action = p["/_sqsim/console/sqs/".len()..].to_string();
            console_action(state, link, req, &action).await
        }
        (Method::POST, "/_sqsim/console/delete-message") => console_delete(state, link, req).await,
        (Method::POST, "/_sqsim/console/move-messages") => console_move(state, link, req).await,
        // The console's page, script and style.
        (Method::GET, p) if p.starts_with(crate::control::console::PREFIX) => return Err(req),
        (Method::POST, "/_sqsim/cluster/stats") => {
            reply(StatusCode::OK, by_shards(&link.cluster, local_stats))
        }
        // The clock is the cluster's: moved here, then on every node (and kept in JetStream
        // for nodes that join later).
        (Method::POST, "/_sqsim/clock") => {
            let resp = crate::control::admin::handle(state, req).await;
            if resp.status() == StatusCode::OK {
                if let Err(e) = spread_clock(link).await {
                    return Ok(reply(
                        StatusCode::SERVICE_UNAVAILABLE,
                        json!({"error": format!("the clock moved here but not on every node: {e}")}),
                    ));
                }
            }
            resp
        }
        (Method::POST, "/_sqsim/cluster/clock") => match read_json::<ClockState>(req).await {
            Ok(c) => {
                link.cluster
                    .apply_clock(c.offset_ms, c.frozen_at, c.revision);
                reply(StatusCode::OK, json!({}))
            }
            Err(e) => e.reply(),
        },
        (Method::GET, "/_sqsim/health") => {
            let (healthy, body) = link.cluster.health();
            let status = if healthy {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            reply(status, body)
        }
        (Method::GET, "/_sqsim/faults" | "/_sqsim/clock")
        | (Method::POST | Method::DELETE, "/_sqsim/faults") => return Err(req),
        (_, p) if p.starts_with("/_sqsim/faults/") => return Err(req),
        (_, p) => reply(
            StatusCode::NOT_IMPLEMENTED,
            json!({"error": format!("{p} is not available in cluster mode")}),
        ),
    })
}

/// `GET /_sqsim/cluster/locate?queue_url=URL`: the queue's shard and who serves it.
fn locate(state: &Plane, link: &Link, query: Option<&str>) -> Response<Full<Bytes>> {
    let url = query
        .and_then(|q| serde_urlencoded::from_str::<Vec<(String, String)>>(q).ok())
        .and_then(|pairs| pairs.into_iter().find(|(k, _)| k == "queue_url"))
        .map(|(_, v)| v);
    let Some(id) = url
        .as_deref()
        .and_then(|u| crate::control::admin::queue_id_of(state, u, None))
    else {
        return ControlError::bad_request("give queue_url=<a queue URL>").reply();
    };
    let shard = link.cluster.shard_of(&id);
    reply(
        StatusCode::OK,
        json!({"shard": shard, "owner": link.cluster.owner_of(shard)}),
    )
}

/// The cluster's clock as nodes pass it on.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct ClockState {
    offset_ms: i64,
    frozen_at: Option<u64>,
    /// Its revision in the bucket: a node never goes back to an older state.
    revision: u64,
}

/// After this node's clock moved: its shards record it, the bucket keeps it, and every
/// other node applies it before the answer goes out.
async fn spread_clock(link: &Link) -> Result<(), String> {
    let (offset_ms, frozen_at, revision) = link.cluster.publish_clock().await?;
    let body = serde_json::to_value(ClockState {
        offset_ms,
        frozen_at,
        revision,
    })
    .unwrap_or_default();
    link.tell_peers("/_sqsim/cluster/clock", &body).await
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
async fn on_owner_of(
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

/// A console's SQS action, run where its queue is served (a listing: here, asking every
/// node).
async fn console_action(
    state: &Plane,
    link: &Link,
    req: Request<RequestBody>,
    action: &str,
) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let call = match crate::control::console::Call::read(
        state,
        Request::from_parts(parts.clone(), body),
        action,
    )
    .await
    {
        Ok(c) => c,
        Err(refused) => return refused,
    };
    let probe = call.context(state, Arc::clone(&state.engine), None);
    let params = crate::protocol::Params::Json(call.body.clone());
    let target = crate::api::target::target(&probe, call.action, &params);
    match on_owner_of(state, link, &parts, &call.body, &target).await {
        Ok(engine) => {
            let directory: Arc<dyn Directory> = Arc::new(ClusterDirectory(link.clone()));
            let ctx = call.context(state, Arc::clone(&engine), Some(directory));
            crate::control::console::run(state, &ctx, call).await
        }
        Err(resp) => resp,
    }
}

/// The console's delete of one message by id, where its queue is served.
async fn console_delete(
    state: &Plane,
    link: &Link,
    req: Request<RequestBody>,
) -> Response<Full<Bytes>> {
    use crate::control::console::{delete_by_id, DeleteById};
    let queue: fn(&DeleteById) -> (&str, Option<&str>) = |d| (&d.queue_url, d.region.as_deref());
    console_on_queue(state, link, req, queue, delete_by_id).await
}

/// The console's "move selected", on the engine serving the source queue's shard; a
/// destination another shard serves is refused there (a move task carries messages across).
async fn console_move(
    state: &Plane,
    link: &Link,
    req: Request<RequestBody>,
) -> Response<Full<Bytes>> {
    use crate::control::console::{move_selected, MoveSelected};
    let queue: fn(&MoveSelected) -> (&str, Option<&str>) = |m| (&m.queue_url, m.region.as_deref());
    console_on_queue(state, link, req, queue, move_selected).await
}

/// A console request about messages of one queue (`queue` reads its URL and region off the
/// body), run by `act` on the engine serving that queue — here, or forwarded to its owner —
/// and answered once what it changed is kept.
async fn console_on_queue<T: serde::de::DeserializeOwned>(
    state: &Plane,
    link: &Link,
    req: Request<RequestBody>,
    queue: fn(&T) -> (&str, Option<&str>),
    act: fn(&Plane, &Engine, T) -> Response<Full<Bytes>>,
) -> Response<Full<Bytes>> {
    let (parts, bytes, body) = match crate::control::error::read_json_keeping::<T>(req).await {
        Ok(read) => read,
        Err(e) => return e.reply(),
    };
    let (url, region) = queue(&body);
    let Some(id) = crate::control::admin::queue_id_of(state, url, region) else {
        return ControlError::not_found("no such queue").reply();
    };
    match on_owner(state, link, &parts, &bytes, &id).await {
        Ok(engine) => crate::control::kept_on(async { act(state, &engine, body) }).await,
        Err(resp) => resp,
    }
}

/// This node's shards' entries of `/_sqsim/stats`, and their stores.
fn local_stats(engines: &[Arc<Engine>]) -> serde_json::Value {
    let queues: Vec<serde_json::Value> = engines
        .iter()
        .flat_map(|e| crate::control::admin::queue_stats(e))
        .collect();
    let stores: Vec<_> = engines
        .iter()
        .filter_map(|e| e.journal().store().map(|s| s.stats()))
        .collect();
    json!({"queues": queues, "stores": stores, "realism": super::realism::local_queues(engines)})
}

/// `/_sqsim/stats` in cluster mode: every node's queues; the stores of every node's shards.
async fn stats(state: &Plane, link: &Link) -> Response<Full<Bytes>> {
    let mut queues = Vec::new();
    let mut stores = Vec::new();
    let mut realism = serde_json::Map::new();
    let answers = match link
        .gather("/_sqsim/cluster/stats", &json!({}), local_stats)
        .await
    {
        Ok(answers) => answers,
        Err(e) => {
            return reply(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"error": format!("a node did not answer: {e}")}),
            )
        }
    };
    for mut v in answers {
        if let serde_json::Value::Array(q) = v["queues"].take() {
            queues.extend(q);
        }
        if let serde_json::Value::Array(s) = v["stores"].take() {
            stores.extend(s);
        }
        if let serde_json::Value::Object(r) = v["realism"].take() {
            realism.extend(r);
        }
    }
    let realism = super::realism::summary(link, realism);
    crate::control::admin::stats_of(state, queues, Some((json!(stores), realism)))
}
