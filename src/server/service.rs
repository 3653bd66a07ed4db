//! The SQS request path, in stages: read the body (within its limit), authenticate, decode,
//! apply fault rules, build the context, route to the shard (cluster mode), dispatch, and
//! encode. Every outcome, including undecodable input, becomes a proper SQS response.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderMap, ACCEPT, CONTENT_TYPE, HOST};
use hyper::http::request::Parts;
use hyper::{Method, Request, Response};

use crate::api::{self, Context};
#[cfg(feature = "cluster")]
use crate::cluster::peers::ClusterDirectory;
#[cfg(feature = "cluster")]
use crate::cluster::route::{self, Link, Routed};
use crate::control::faults::FaultEffect;
use crate::control::metrics::{self, count_and_log, RequestMetrics};
use crate::control::request_log::{Answered, QueueSource};
#[cfg(feature = "cluster")]
use crate::engine::Engine;
use crate::error::{ErrorCode, SqsError};
use crate::http::{
    credential_scope, declared_too_large, header, respond, X_AMZN_TRACE_ID, X_AMZ_TARGET,
};
use crate::protocol::{self, DecodeError, Decoded, Encoded, RawRequest, Render};

use super::auth::{self, SignedRequest};
use super::AppState;
use crate::config::AuthMode;

/// The caller's account: a 12-digit access key id is taken as the account id, so tests using
/// different keys get separate namespaces.
fn account_of_key(access_key: &str) -> Option<&str> {
    crate::config::is_account_id(access_key).then_some(access_key)
}

/// The account a key without one of its own acts in: a 12-digit key's own, else the
/// server's default.
fn account_for_key<'a>(state: &'a AppState, access_key: &'a str) -> &'a str {
    account_of_key(access_key).unwrap_or(&state.config.account_id)
}

/// A request that must lose its connection (fault injection).
#[derive(Debug)]
pub(super) struct DroppedConnection;

impl std::fmt::Display for DroppedConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped by an injected fault")
    }
}

impl std::error::Error for DroppedConnection {}

/// How to answer a request, from its headers and query string alone (for errors sent
/// before its body is decoded).
pub(super) fn render_of(headers: &HeaderMap, query: Option<&str>) -> Render {
    if headers.contains_key(X_AMZ_TARGET) {
        return Render::Json;
    }
    let content_type_param = query.and_then(|q| {
        q.split('&')
            .find_map(|pair| pair.strip_prefix("ContentType="))
    });
    Render::of_query(header(headers, ACCEPT), content_type_param)
}

fn too_large(state: &AppState) -> SqsError {
    SqsError::new(
        ErrorCode::RequestEntityTooLarge,
        format!(
            "Request body is larger than {} bytes.",
            state.config.max_body_bytes
        ),
    )
}

/// Why a request stops before reaching its action: an answer to send now, or (an injected
/// fault) no answer at all.
enum Stop {
    Reply(Encoded),
    /// Another node's answer (cluster mode), sent on with its request id.
    Relayed(Encoded, String),
    Drop,
}

/// The answer another node gave, as this node sends it on.
fn encoded_of(head: &hyper::http::response::Parts, body: Bytes) -> Encoded {
    let content_type = match header(&head.headers, CONTENT_TYPE) {
        Some(t) if t.starts_with("application/x-amz-json-1.0") => "application/x-amz-json-1.0",
        Some(t) if t.starts_with("application/json") => "application/json",
        _ => "text/xml",
    };
    Encoded {
        status: head.status.as_u16(),
        content_type,
        query_error: header(&head.headers, "x-amzn-query-error").map(str::to_string),
        error: None,
        body: body.to_vec(),
    }
}

impl Stop {
    fn error(render: Render, request_id: &str, err: &SqsError) -> Stop {
        Stop::Reply(protocol::encode_error(render, request_id, err))
    }
}

/// Answers an SQS request (anything not under sqsim's own paths), whatever carries its body:
/// the server passes hyper's, the in-process fuzzer a buffer.
pub(super) async fn answer<B>(
    state: Arc<AppState>,
    req: Request<B>,
) -> Result<Response<Full<Bytes>>, DroppedConnection>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let started = std::time::Instant::now();
    let request_id = uuid::Uuid::new_v4()
        .hyphenated()
        .encode_lower(&mut uuid::Uuid::encode_buffer())
        .to_owned();
    let (parts, body) = req.into_parts();
    // Filled in once the request is decoded, for the metrics and the log line (unless
    // `SQSIM_NO_METRICS` switched both off, for the bench's ablation).
    let counted = metrics::per_request();
    let mut slot = RequestMetrics::slot_of(None);
    let mut queue = QueueSource::default();
    let stages = async {
        let body = read_body(&state, &parts, body, &request_id).await?;
        let signer = authenticate(&state, &parts, &body, &request_id)?;
        let kept_body = counted.then(|| body.clone());
        // Cluster mode forwards the request as it came, so its body is kept.
        #[cfg(feature = "cluster")]
        let raw_body = state.link.is_some().then(|| body.clone());
        let decoded = decode(&parts, body, &request_id)?;
        if let Some(kept_body) = kept_body {
            slot = RequestMetrics::slot_of(Some(decoded.action));
            queue = QueueSource::of(&kept_body, decoded.protocol);
        }
        if state.faults.is_active() {
            // Boxed: rarely on, and inline its future would grow every request's.
            Box::pin(apply_faults(&state, &parts, &decoded, &request_id)).await?;
        }
        #[cfg_attr(not(feature = "cluster"), allow(unused_mut))]
        let mut ctx = context(&state, &parts, &decoded, signer, &request_id);
        #[cfg(feature = "cluster")]
        if let (Some(link), Some(raw)) = (&state.link, raw_body) {
            // Boxed: forwarding holds an HTTP client's future.
            Box::pin(route(link, &mut ctx, &parts, raw, &decoded, &state.engine)).await?;
        }
        Ok::<_, Stop>(dispatch(&ctx, decoded).await)
    };
    let outcome = stages.await;
    if counted {
        let took = started.elapsed();
        // One request, one id in every node's log: a relayed answer's is the owner's.
        let logged_id = match &outcome {
            Err(Stop::Relayed(_, id)) => id.as_str(),
            _ => request_id.as_str(),
        };
        let answered = Answered {
            request_id: logged_id,
            action: RequestMetrics::action_label(slot),
            queue,
            path: parts.uri.path(),
            uri_query: parts.uri.query(),
            took,
        };
        let encoded = match &outcome {
            Ok(encoded) | Err(Stop::Reply(encoded) | Stop::Relayed(encoded, _)) => Some(encoded),
            Err(Stop::Drop) => None,
        };
        // A forwarded request (its peer secret checked by the guard) was counted by the node
        // the client reached; counting it here too would make the nodes' sums overstate
        // what clients asked. Its log line stays, under the id both nodes log.
        let forwarded = parts.headers.contains_key(&crate::http::FORWARDED);
        count_and_log(&state.plane, slot, answered, encoded, !forwarded);
    }
    match outcome {
        Ok(encoded) | Err(Stop::Reply(encoded)) => Ok(respond(encoded, &request_id)),
        // The body names the owner's request id; so does the header.
        Err(Stop::Relayed(encoded, id)) => Ok(respond(encoded, &id)),
        Err(Stop::Drop) => Err(DroppedConnection),
    }
}

/// A body refused for want of room among the bodies arriving: 503, which SDKs retry with
/// backoff.
fn no_room(state: &AppState) -> SqsError {
    SqsError::new(
        ErrorCode::ServiceUnavailable,
        format!(
            "Service is unable to handle request: the request bodies arriving fill sqsim's budget for them ({} bytes, --max-incoming-bytes); retry later.",
            state.config.limits.max_incoming_bytes
        ),
    )
}

/// Stage 1: the body, refused with 413 when it is (or announces itself) over the cap, and
/// with 503 when the bodies arriving leave no room for it.
async fn read_body<B>(
    state: &AppState,
    parts: &Parts,
    body: B,
    request_id: &str,
) -> Result<Bytes, Stop>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let render = render_of(&parts.headers, parts.uri.query());
    if declared_too_large(&parts.headers, state.config.max_body_bytes) {
        return Err(Stop::error(render, request_id, &too_large(state)));
    }
    match Limited::new(body, state.config.max_body_bytes)
        .collect()
        .await
    {
        Ok(b) => Ok(b.to_bytes()),
        Err(e) => {
            let err = if e
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                too_large(state)
            } else if e.downcast_ref::<crate::http::BodyRefused>().is_some() {
                tracing::debug!("request body refused: no room among the bodies arriving");
                no_room(state)
            } else {
                SqsError::invalid("The request body could not be read.")
            };
            Err(Stop::error(render, request_id, &err))
        }
    }
}

/// Who a verified request acts as: its key's account and its signature's region.
struct Identity {
    account: String,
    region: String,
}

/// Stage 2: under `--auth verify`, the signature; who signed it. Nothing else decides a
/// verified request's account or region: a second reading of the headers could see a
/// credential that was not the one verified.
fn authenticate(
    state: &AppState,
    parts: &Parts,
    body: &Bytes,
    request_id: &str,
) -> Result<Option<Identity>, Stop> {
    let AuthMode::Verify(keys) = &state.config.auth else {
        return Ok(None);
    };
    let signed = SignedRequest {
        method: parts.method.as_str(),
        path: parts.uri.path(),
        query: parts.uri.query(),
        headers: &parts.headers,
        body,
    };
    match auth::verify(&signed, keys, std::time::SystemTime::now()) {
        Ok(signer) => {
            let key = signer.credential;
            let account = match &key.account_id {
                Some(a) => a.clone(),
                None => account_for_key(state, &key.access_key).to_string(),
            };
            Ok(Some(Identity {
                account,
                region: signer.region,
            }))
        }
        Err(err) => Err(Stop::error(
            render_of(&parts.headers, parts.uri.query()),
            request_id,
            &err,
        )),
    }
}

/// Stage 3: the protocol, the action and its still untyped input.
fn decode(parts: &Parts, body: Bytes, request_id: &str) -> Result<Decoded, Stop> {
    let headers = &parts.headers;
    protocol::decode(RawRequest {
        is_get: parts.method == Method::GET,
        target: header(headers, X_AMZ_TARGET),
        content_type: header(headers, CONTENT_TYPE),
        accept: header(headers, ACCEPT),
        uri_query: parts.uri.query(),
        body,
    })
    .map_err(|e| match e {
        DecodeError::NoAction => Stop::Reply(protocol::encode_no_action()),
        DecodeError::Error(p, err) => Stop::error(p, request_id, &err),
    })
}

/// Stage 4: the fault rules that match the action and queue (called only while some are set).
async fn apply_faults(
    state: &AppState,
    parts: &Parts,
    decoded: &Decoded,
    request_id: &str,
) -> Result<(), Stop> {
    let queue = decoded
        .params
        .queue_url_hint()
        .or_else(|| Some(parts.uri.path().to_string()));
    let name = queue
        .as_deref()
        .and_then(crate::api::queue_url::parse)
        .map(|r| r.name.to_string());
    match state.faults.check(decoded.action.name(), name.as_deref()) {
        Some(FaultEffect::Drop) => Err(Stop::Drop),
        Some(FaultEffect::Latency { ms }) => {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
            Ok(())
        }
        Some(FaultEffect::Error(e)) => {
            let err = SqsError::injected(&e)
                .unwrap_or_else(|| SqsError::new(ErrorCode::InternalFailure, "Injected fault."));
            Err(Stop::error(decoded.render, request_id, &err))
        }
        None => Ok(()),
    }
}

/// Stage 5: who is asking, in which region, and how their queue URLs are spelled.
fn context(
    state: &AppState,
    parts: &Parts,
    decoded: &Decoded,
    signer: Option<Identity>,
    request_id: &str,
) -> Context {
    let headers = &parts.headers;
    // Verified: the signature's. Otherwise the credential scope names them (a 12-digit
    // access key as the account, so that tests using different keys get separate
    // namespaces), else the server's defaults.
    let (account, region) = match signer {
        Some(Identity { account, region }) => (account, region),
        None => {
            let scope = credential_scope(headers, parts.uri.query());
            let account = scope.map_or(state.config.account_id.as_str(), |s| {
                account_for_key(state, s.access_key)
            });
            let region = scope.map_or(state.config.region.as_str(), |s| s.region);
            (account.to_string(), region.to_string())
        }
    };
    let region = match state.config.single_region {
        true => state.config.region.clone(),
        false => region,
    };
    let host = header(headers, HOST);
    let base_url = state.config.queue_base_url(
        host,
        &region,
        crate::http::reached(headers, state.local_addr),
    );
    let verified = matches!(state.config.auth, AuthMode::Verify(_));
    Context {
        engine: Arc::clone(&state.engine),
        protocol: decoded.protocol,
        region,
        sender_id: Arc::from(account.as_str()),
        account,
        base_url,
        path: parts.uri.path().to_string(),
        trace_header: header(headers, X_AMZN_TRACE_ID).map(str::to_string),
        request_id: request_id.to_string(),
        single_region: state.config.single_region,
        directory: None,
        action: decoded.action,
        verified,
    }
}

#[cfg(feature = "cluster")]
/// Cluster mode: points `ctx` at the engine of the request's shard, or answers with what
/// the node serving it said.
async fn route(
    link: &Link,
    ctx: &mut Context,
    parts: &Parts,
    raw: Bytes,
    decoded: &Decoded,
    node: &Arc<Engine>,
) -> Result<(), Stop> {
    let target = api::target::target(ctx, decoded.action, &decoded.params);
    match route::route(link, parts, &raw, &target, node).await {
        Routed::Here(engine) => {
            ctx.engine = engine;
            ctx.directory = Some(Arc::new(ClusterDirectory(link.clone())));
            Ok(())
        }
        Routed::There(resp) => {
            let (head, body) = resp.into_parts();
            let id = header(&head.headers, "x-amzn-requestid")
                .unwrap_or(&ctx.request_id)
                .to_string();
            Err(Stop::Relayed(encoded_of(&head, body), id))
        }
        Routed::Refused(err, status) => {
            let mut e = protocol::encode_error(decoded.render, &ctx.request_id, &err);
            e.status = status.as_u16();
            Err(Stop::Reply(e))
        }
    }
}

/// Stage 6: the action, its reply or error encoded in the request's protocol.
async fn dispatch(ctx: &Context, decoded: Decoded) -> Encoded {
    // Acknowledged means durable: the answer waits until what it relies on is kept.
    let result = match api::dispatch(ctx, decoded.action, decoded.params)
        .await
        .kept()
        .await
    {
        (result, Ok(())) => result,
        (_, Err(e)) => {
            tracing::error!(error = %e, action = %decoded.action, "change not kept");
            Err(SqsError::internal())
        }
    };
    match result {
        Ok(reply) => protocol::encode_reply(
            decoded.render,
            decoded.action,
            &ctx.request_id,
            reply.as_ref(),
        ),
        Err(err) => protocol::encode_error(decoded.render, &ctx.request_id, &err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    #[test]
    fn region_from_signature() {
        let mut h = HeaderMap::new();
        h.insert(
            "authorization",
            HeaderValue::from_static(
                "AWS4-HMAC-SHA256 Credential=AKID/20240101/eu-west-2/sqs/aws4_request, SignedHeaders=host, Signature=abc",
            ),
        );
        assert_eq!(
            credential_scope(&h, None).map(|s| (s.region, s.service)),
            Some(("eu-west-2", Some("sqs")))
        );
        let h = HeaderMap::new();
        assert_eq!(
            credential_scope(
                &h,
                Some("X-Amz-Credential=AKID%2F20240101%2Fap-south-1%2Fsqs%2Faws4_request&x=1")
            )
            .map(|s| (s.access_key, s.region)),
            Some(("AKID", "ap-south-1"))
        );
        assert_eq!(credential_scope(&h, None), None);
        let mut h = HeaderMap::new();
        h.insert(
            "authorization",
            HeaderValue::from_static(
                "AWS4-HMAC-SHA256 Credential=123456789012/20240101/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=abc",
            ),
        );
        assert_eq!(
            credential_scope(&h, None).and_then(|s| account_of_key(s.access_key)),
            Some("123456789012")
        );
    }
}
