//! The web console at `/_sqsim/console`: one page, its script and its style, embedded in the
//! binary (no CDN, no build step), over sqsim's own endpoints. Two endpoints exist for it:
//! `POST /_sqsim/console/sqs/<Action>` runs any SQS action in AWS JSON shapes for a given
//! account and region without a signature (like every `/_sqsim/` endpoint, it is for a
//! trusted network), and `POST /_sqsim/console/delete-message` deletes one message by its
//! MessageId. Messages are only ever shown through the side-effect-free peek. The SQS
//! actions the console runs are counted in `/metrics` and logged like any other request.

pub(crate) mod login;

use crate::control::error::ControlError;
use std::sync::Arc;

use crate::http::RequestBody;
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, HOST};
use hyper::{Method, Request, Response, StatusCode};
use serde::Deserialize;
use serde_json::json;

use super::error::{read_body_up_to, read_json, reply};
use super::metrics::{self, RequestMetrics};
use super::queue_id_of;
use super::request_log::{Answered, QueueSource};
use crate::api::context::Directory;
use crate::api::{self, Context};
use crate::control::Plane;
use crate::engine::Engine;
use crate::protocol::{self, Action, Params, Protocol, Render};

/// Where the console lives.
pub(crate) const PREFIX: &str = "/_sqsim/console";

const PAGE: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("app.js");
const STYLE: &str = include_str!("app.css");
/// The console's icon, served as the origin's `/favicon.ico` (outside the control plane, so
/// the sign-in page shows it too): a browser asks for one on every page, and without it each
/// visit logged a failed SQS request.
const ICON: &str = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 16 16\">\
<rect width=\"16\" height=\"16\" rx=\"3\" fill=\"#2d6cdf\"/>\
<rect x=\"3\" y=\"4\" width=\"10\" height=\"2\" fill=\"#fff\"/>\
<rect x=\"3\" y=\"7\" width=\"10\" height=\"2\" fill=\"#fff\"/>\
<rect x=\"3\" y=\"10\" width=\"6\" height=\"2\" fill=\"#fff\"/></svg>";

/// What a browser is told about every console page and asset: never framed (clickjacking,
/// also in browsers that send no `Sec-Fetch-*` for the guard to refuse), types taken as
/// given, and scripts, styles and images from the console alone.
pub(crate) fn page_headers(h: &mut hyper::HeaderMap) {
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
             object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
        ),
    );
}

fn asset(content_type: &'static str, body: &'static str) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    let h = resp.headers_mut();
    page_headers(h);
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    // The assets change with the binary; a restart must not be hidden by a cache.
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

/// Whether a request is a browser opening the server's root: it is sent to the console.
pub(crate) fn is_browser_root<B>(req: &Request<B>) -> bool {
    req.method() == Method::GET
        && req.uri().path() == "/"
        && req.uri().query().is_none()
        && crate::http::header(req.headers(), hyper::header::ACCEPT.as_str())
            .is_some_and(|a| a.contains("text/html"))
}

/// Whether a request is a browser asking for the origin's icon.
pub(crate) fn is_favicon<B>(req: &Request<B>) -> bool {
    req.method() == Method::GET && req.uri().path() == "/favicon.ico"
}

/// The icon, for `/favicon.ico`.
pub(crate) fn favicon() -> Response<Full<Bytes>> {
    asset("image/svg+xml", ICON)
}

/// The redirect a browser opening `/` gets.
pub(crate) fn redirect() -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::new()));
    *resp.status_mut() = StatusCode::FOUND;
    resp.headers_mut()
        .insert(hyper::header::LOCATION, HeaderValue::from_static(PREFIX));
    resp
}

/// Handles a request under [`PREFIX`].
pub(crate) async fn handle(state: &Plane, req: Request<RequestBody>) -> Response<Full<Bytes>> {
    let path = req.uri().path().trim_end_matches('/');
    let rest = path.strip_prefix(PREFIX).unwrap_or_default();
    match (req.method(), rest) {
        (&Method::GET, "" | "/index.html") => asset("text/html; charset=utf-8", PAGE),
        (&Method::GET, "/app.js") => asset("text/javascript; charset=utf-8", SCRIPT),
        (&Method::GET, "/app.css") => asset("text/css; charset=utf-8", STYLE),
        (&Method::POST, "/delete-message") => match read_json::<DeleteById>(req).await {
            Ok(d) => delete_by_id(state, &state.engine, d),
            Err(e) => e.reply(),
        },
        (&Method::POST, "/move-messages") => match read_json::<MoveSelected>(req).await {
            Ok(m) => move_selected(state, &state.engine, m),
            Err(e) => e.reply(),
        },
        (&Method::POST, r) if r.starts_with("/sqs/") => {
            let name = r["/sqs/".len()..].to_string();
            match Call::read(state, req, &name).await {
                Ok(call) => {
                    let ctx = call.context(state, Arc::clone(&state.engine), None);
                    run(state, &ctx, call).await
                }
                Err(refused) => refused,
            }
        }
        _ => ControlError::not_found("no such console endpoint").reply(),
    }
}

/// A message to delete, by id.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeleteById {
    pub queue_url: String,
    pub region: Option<String>,
    message_id: String,
}

/// Deletes a message by id from a queue of `engine` (in cluster mode, the engine serving
/// the queue's shard).
pub(crate) fn delete_by_id(state: &Plane, engine: &Engine, d: DeleteById) -> Response<Full<Bytes>> {
    let Ok(id) = uuid::Uuid::parse_str(&d.message_id) else {
        return ControlError::bad_request("message_id is not a MessageId").reply();
    };
    let found =
        queue_id_of(state, &d.queue_url, d.region.as_deref()).and_then(|id| engine.queue(&id));
    let Some(q) = found else {
        return ControlError::not_found("no such queue").reply();
    };
    if q.delete_by_id(id, engine.now_ms()) {
        reply(StatusCode::OK, json!({"deleted": d.message_id}))
    } else {
        ControlError::not_found("no such message").reply()
    }
}

/// Messages to move, by id, to another queue of the same namespace or any other.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MoveSelected {
    pub queue_url: String,
    pub region: Option<String>,
    message_ids: Vec<String>,
    to_queue_url: String,
}

/// Moves the visible messages among the selected to the destination (the console's "move
/// selected"); both queues must be served by `engine`.
pub(crate) fn move_selected(
    state: &Plane,
    engine: &Engine,
    m: MoveSelected,
) -> Response<Full<Bytes>> {
    let mut ids = Vec::with_capacity(m.message_ids.len());
    for id in &m.message_ids {
        match uuid::Uuid::parse_str(id) {
            Ok(u) => ids.push(u),
            Err(_) => {
                return ControlError::bad_request(format!("{id:?} is not a MessageId")).reply()
            }
        }
    }
    let region = m.region.as_deref();
    let (Some(from), Some(to)) = (
        queue_id_of(state, &m.queue_url, region),
        queue_id_of(state, &m.to_queue_url, region),
    ) else {
        return ControlError::bad_request("queue_url and to_queue_url must name queues").reply();
    };
    use crate::engine::moves::selected::MoveSelectedError as E;
    match engine.move_selected(&from, &ids, &to) {
        Ok(done) => reply(
            StatusCode::OK,
            json!({"moved": done.moved, "stayed": done.stayed}),
        ),
        Err(e @ (E::NoSource | E::NoDestination)) => ControlError::not_found(e.to_string()).reply(),
        Err(e @ E::SameQueue) => ControlError::bad_request(e.to_string()).reply(),
        Err(e @ E::Elsewhere) => ControlError::new(StatusCode::CONFLICT, e.to_string()).reply(),
    }
}

/// An SQS action the console asked for (`POST /_sqsim/console/sqs/<Action>`), in AWS JSON
/// shapes, in the namespace its query string names (`account`, `region`; the server's
/// defaults otherwise).
pub(crate) struct Call {
    pub action: Action,
    account: String,
    region: String,
    base_url: String,
    pub body: Bytes,
    started: std::time::Instant,
}

impl Call {
    /// Reads the call to the action named `name` off its request; refused with the answer
    /// to give (SQS's, in JSON, for an action it does not have).
    pub(crate) async fn read(
        state: &Plane,
        req: Request<RequestBody>,
        name: &str,
    ) -> Result<Call, Response<Full<Bytes>>> {
        let action = Action::parse(name, Protocol::Json).map_err(|err| {
            let id = uuid::Uuid::new_v4().to_string();
            crate::http::respond(protocol::encode_error(Render::Json, &id, &err), &id)
        })?;
        let params: Vec<(String, String)> =
            serde_urlencoded::from_str(req.uri().query().unwrap_or_default()).unwrap_or_default();
        let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let account = get("account").unwrap_or_else(|| state.config.account_id.clone());
        let region = get("region").unwrap_or_else(|| state.config.region.clone());
        let host = crate::http::header(req.headers(), HOST.as_str());
        let local = crate::http::reached(req.headers(), state.local_addr);
        let base_url = state.config.queue_base_url(host, &region, local);
        let started = std::time::Instant::now();
        let body = read_body_up_to(req, state.config.max_body_bytes)
            .await
            .map_err(|e| e.reply())?;
        Ok(Call {
            action,
            account,
            region,
            base_url,
            body,
            started,
        })
    }

    /// The context the action runs in, on `engine` (with the cluster's `directory`).
    pub(crate) fn context(
        &self,
        state: &Plane,
        engine: Arc<Engine>,
        directory: Option<Arc<dyn Directory>>,
    ) -> Context {
        Context {
            engine,
            protocol: Protocol::Json,
            region: self.region.clone(),
            sender_id: Arc::from(self.account.as_str()),
            account: self.account.clone(),
            base_url: self.base_url.clone(),
            path: "/".into(),
            trace_header: None,
            request_id: uuid::Uuid::new_v4().to_string(),
            single_region: state.config.single_region,
            directory,
            action: self.action,
            // The console is the operator's (the control plane's credentials opened it):
            // it acts in whichever account it names.
            verified: false,
        }
    }
}

/// Runs `call` in `ctx`, counted and logged like any SQS request.
pub(crate) async fn run(state: &Plane, ctx: &Context, call: Call) -> Response<Full<Bytes>> {
    let Call {
        action,
        body,
        started,
        ..
    } = call;
    let request_id = ctx.request_id.clone();
    let counted = metrics::per_request();
    let queue = if counted {
        QueueSource::of(&body, Protocol::Json)
    } else {
        QueueSource::default()
    };
    let result = match api::dispatch(ctx, action, Params::Json(body))
        .await
        .kept()
        .await
    {
        (result, Ok(())) => result,
        (_, Err(e)) => return super::error::ControlError::not_kept(e).reply(),
    };
    let encoded = match result {
        Ok(reply) => protocol::encode_reply(Render::Json, action, &request_id, reply.as_ref()),
        Err(err) => protocol::encode_error(Render::Json, &request_id, &err),
    };
    // Counted and logged like any SQS request, under the action's own label.
    if counted {
        let slot = RequestMetrics::slot_of(Some(action));
        let answered = Answered {
            request_id: &request_id,
            action: RequestMetrics::action_label(slot),
            queue,
            path: "/",
            uri_query: None,
            took: started.elapsed(),
        };
        // In cluster mode this runs on the owner only (the node asked relays its answer
        // without counting it), so the action is counted once.
        super::metrics::count_and_log(state, slot, answered, Some(&encoded), true);
    }
    crate::http::respond(encoded, &request_id)
}
