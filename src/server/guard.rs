//! The checks every request passes before anything else reads it: who may reach sqsim from
//! a web page, by which host name, and who may use the control plane.
//!
//! - **Web pages.** SDKs, the CLI and scripts send neither `Origin` nor `Sec-Fetch-Site`/
//!   `Sec-Fetch-Dest`, and sign their requests; a request that sends one of those headers,
//!   or a browser's `User-Agent` without a signature, is a browser's. It is answered only
//!   when it comes from sqsim's own origin or one in `--allowed-origins` (then with CORS
//!   headers naming it), or when the user typed it (`Sec-Fetch-Site: none`, which a link
//!   opened from a chat or a mail sends too: on the SQS API such a request may only read,
//!   a `GET` whose `Action` gets or lists). So a foreign
//!   page can neither plant nor delete anything — not by `fetch`, not by a form POST (which
//!   needs no preflight), not by an `<img>` GET — on the SQS API or the control plane.
//! - **Host names.** A page that rebinds its own name to 127.0.0.1 is same-origin with
//!   sqsim as far as the browser knows; what gives it away is its name in `Host`. The
//!   control plane, and the SQS API when a browser asks, answer only to loopback names,
//!   IP addresses, the advertised URL's host and `--allowed-hosts`.
//! - **The control plane** (`/_sqsim/…`, `/metrics`, LocalStack's `/_localstack/…` and
//!   `/_aws/…`): with `--admin-token` or `--auth verify` it needs `Authorization: Bearer
//!   <token>`, a SigV4 signature by a credential marked `admin`, or the console's session
//!   cookie; health checks stay open. `--admin off` removes it, also for what peers forward.
//!   The cluster's own endpoints (`POST /_sqsim/cluster/…`, and anything a node forwards)
//!   need the cluster's peer secret.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderMap, HeaderValue, HOST, ORIGIN, USER_AGENT};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::json;

use super::AppState;
use crate::config::{same_secret, AuthMode};
use crate::control::console::login::{self, cookie_name};
use crate::control::{console, localstack, metrics};
use crate::http::{header, RequestBody, FORWARDED, PEER_SECRET, SEC_FETCH_DEST, SEC_FETCH_SITE};

/// Which part of sqsim a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Area {
    /// The SQS API.
    Sqs,
    /// The admin API, console, metrics, LocalStack's developer endpoints.
    Control,
    /// Health checks: no credentials needed (container runtimes and Testcontainers poll
    /// them), but the browser checks still apply.
    Health,
    /// The cluster's node-to-node endpoints.
    Peer,
}

/// Which area `path` belongs to.
pub(super) fn area_of(state: &AppState, method: &Method, path: &str, query: Option<&str>) -> Area {
    // The nodes' own calls (queues, arrive, describe, stats, clock) are POSTs; reading the
    // status and locating a queue are the operator's.
    if path.starts_with("/_sqsim/cluster/") && *method != Method::GET {
        return Area::Peer;
    }
    let health = matches!(
        path,
        "/_sqsim/health" | "/_localstack/health" | "/_localstack/init" | "/health"
    ) || path.starts_with("/_localstack/init/");
    if health && (*method == Method::GET || *method == Method::HEAD) {
        return Area::Health;
    }
    let control = path.starts_with(crate::control::admin::PREFIX)
        || path == "/_sqsim"
        || (path == metrics::PATH && !query.is_some_and(|q| q.contains("Action=")))
        || (state.config.localstack.is_some() && localstack::is_internal(path));
    if control {
        Area::Control
    } else {
        Area::Sqs
    }
}

/// What the checks decided.
// `Pass` is every request the guard lets through: boxing it would cost an allocation per
// request to save space in a value that lives only until the router unpacks it.
#[allow(clippy::large_enum_variant)]
pub(super) enum Verdict {
    /// Go on; with the origin to name in CORS headers when a page of an allowed origin
    /// asked. The request comes back (its body may have been read for a signature).
    Pass(Request<RequestBody>, Option<HeaderValue>),
    /// Answer this instead.
    Answer(Response<Full<Bytes>>),
    /// Refused: the status and why (the caller renders it for its area).
    Refuse(StatusCode, String),
}

/// The host a request names: its `Host`, or (HTTP/2) its URI's authority.
fn host_of<B>(req: &Request<B>) -> Option<String> {
    header(req.headers(), HOST)
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()))
}

/// `host[:port]` without the port (and an IPv6 literal without its brackets), lower-cased,
/// without a trailing dot.
fn host_name(host: &str) -> String {
    let (name, _) = crate::config::host_port(host);
    let name = name
        .strip_prefix('[')
        .map_or(name, |n| n.split(']').next().unwrap_or_default());
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Whether `host` (a `Host` header) is a name sqsim answers to.
pub(super) fn host_allowed(state: &AppState, host: &str) -> bool {
    let name = host_name(host);
    if name.is_empty() {
        return false;
    }
    // Single-label names are a compose file's service names (`sqs`, `localstack`): no web
    // page can rebind one (it is resolved on the developer's machine or network, not under
    // a domain an attacker holds).
    if crate::config::names_this_machine(&name) || !name.contains('.') {
        return true;
    }
    let security = &state.config.security;
    if security.allowed_hosts.contains(&name) {
        return true;
    }
    let url_host = |url: &str| {
        let rest = url.split_once("://").map_or(url, |(_, r)| r);
        host_name(rest.split('/').next().unwrap_or_default())
    };
    if state
        .config
        .advertised_url
        .as_deref()
        .is_some_and(|u| url_host(u) == name)
    {
        return true;
    }
    if let Some(ls) = &state.config.localstack {
        let domain = crate::config::LOCALSTACK_DOMAIN;
        if name == domain || name.ends_with(&format!(".{domain}")) {
            return true;
        }
        if ls.host.as_deref().is_some_and(|h| host_name(h) == name) {
            return true;
        }
    }
    if let Some(c) = &state.config.cluster {
        if c.peer_url.as_deref().is_some_and(|u| url_host(u) == name) {
            return true;
        }
    }
    false
}

/// Whether a page of `origin` may call sqsim: its own origin (the host it was reached by,
/// when that is a name sqsim answers to) or one of `--allowed-origins`.
fn origin_allowed(state: &AppState, origin: &str, host: Option<&str>) -> bool {
    let origin = origin.trim_end_matches('/').to_ascii_lowercase();
    if state.config.security.allowed_origins.contains(&origin) {
        return true;
    }
    host.is_some_and(|h| {
        let h = h.to_ascii_lowercase();
        host_allowed(state, &h)
            && (origin == format!("http://{h}") || origin == format!("https://{h}"))
    })
}

/// Whether a browser sent this: `Origin` or `Sec-Fetch-Site`/`Sec-Fetch-Dest`, which only
/// browsers send (Node's `fetch` sends `Sec-Fetch-Mode` but neither of the others, so that
/// one does not count).
///
/// A user agent proves nothing: Celery's transport (kombu over pycurl) sends `Mozilla/5.0
/// (compatible; pycurl)`, and other libraries copy browsers' agents too. It is read only for
/// an unsigned request — every AWS client signs, also with dummy keys — to catch a browser
/// too old for `Sec-Fetch-*`, or a page's `<img>` GET to a plain-http LAN address (where
/// browsers send none of them).
fn from_browser(headers: &HeaderMap, query: Option<&str>) -> bool {
    headers.contains_key(ORIGIN)
        || headers.contains_key(SEC_FETCH_SITE)
        || headers.contains_key(SEC_FETCH_DEST)
        || (header(headers, USER_AGENT).is_some_and(|ua| ua.starts_with("Mozilla/"))
            && !super::auth::carries_signature(headers, query))
}

/// Whether a query-protocol request only reads: its `Action` (if any) gets or lists.
fn reads_only(query: Option<&str>) -> bool {
    crate::protocol::form::parse(query.unwrap_or_default().as_bytes())
        .iter()
        .filter(|(key, _)| key == "Action")
        .all(|(_, action)| action.starts_with("Get") || action.starts_with("List"))
}

/// Why a request to the control plane of a node started with `--admin off` is refused.
const ADMIN_OFF: &str = "the control plane is off (--admin off)";

/// Runs the checks for `req` (see the module documentation).
pub(super) async fn check(state: &AppState, area: Area, req: Request<RequestBody>) -> Verdict {
    let headers = req.headers();
    let forwarded = headers.contains_key(&FORWARDED);
    if area == Area::Peer || forwarded {
        // A node's request: only the cluster's peers know the secret. Forwarded requests
        // were checked by the node they first reached.
        let secret = state.peer_secret();
        let given = header(headers, &PEER_SECRET);
        return match (secret, given) {
            // `--admin off` holds for what peers forward too: no node serves a control
            // plane it was told not to have.
            (Some(s), Some(g))
                if same_secret(s, g) && area == Area::Control && !state.config.security.admin =>
            {
                Verdict::Refuse(StatusCode::NOT_FOUND, ADMIN_OFF.into())
            }
            (Some(s), Some(g)) if same_secret(s, g) => Verdict::Pass(req, None),
            _ => Verdict::Refuse(
                StatusCode::FORBIDDEN,
                "node-to-node requests need the cluster's peer secret".into(),
            ),
        };
    }
    let browser = from_browser(headers, req.uri().query());
    if area == Area::Sqs && !browser {
        // An SDK, the CLI or a script (the hot path): no page, no host check, nothing more
        // to look at here.
        return Verdict::Pass(req, None);
    }
    if area == Area::Control && !state.config.security.admin {
        return Verdict::Refuse(StatusCode::NOT_FOUND, ADMIN_OFF.into());
    }
    let host = host_of(&req);
    // Health answers tell nothing: a container runtime may ask by any name. The control
    // plane, and anything a browser asks, answer only to names sqsim knows as its own.
    let checked = area == Area::Control || (browser && area != Area::Health);
    if checked && !host.as_deref().is_some_and(|h| host_allowed(state, h)) {
        return Verdict::Refuse(
            StatusCode::FORBIDDEN,
            format!(
                "sqsim does not answer {} by the host name {:?}; add it with --allowed-hosts if it is yours",
                if area == Area::Sqs { "browsers" } else { "its control plane" },
                host.as_deref().map(host_name).unwrap_or_default()
            ),
        );
    }
    let site = header(headers, "sec-fetch-site");
    let cors = match header(headers, "origin") {
        Some(origin) => {
            if !origin_allowed(state, origin, host.as_deref()) {
                return Verdict::Refuse(
                    StatusCode::FORBIDDEN,
                    format!("sqsim refuses requests from web pages of {origin}; start it with --allowed-origins {origin} to allow them"),
                );
            }
            if *req.method() == Method::OPTIONS {
                return Verdict::Answer(preflight(origin, headers));
            }
            HeaderValue::from_str(origin).ok()
        }
        None => {
            let typed = matches!(site, Some("none" | "same-origin"));
            let safe = matches!(*req.method(), Method::GET | Method::HEAD);
            // `none` is also what a link clicked in a chat or a mail sends: such a request
            // may read the SQS API, not change it.
            let changes = site == Some("none") && !(safe && reads_only(req.uri().query()));
            if matches!(site, Some("cross-site" | "same-site"))
                || (browser && area == Area::Sqs && (!typed || changes))
                || (browser && area != Area::Sqs && !safe)
            {
                return Verdict::Refuse(
                    StatusCode::FORBIDDEN,
                    "sqsim refuses requests a web page sends from another origin".into(),
                );
            }
            None
        }
    };
    if area != Area::Control || state.admin_token.is_none() {
        return Verdict::Pass(req, cors);
    }
    let console = req.uri().path().starts_with(console::PREFIX);
    if req.uri().path() == login::LOGIN_PATH && *req.method() == Method::POST {
        return Verdict::Answer(login::login(state, req).await);
    }
    if req.uri().path() == login::LOGOUT_PATH && *req.method() == Method::POST {
        return Verdict::Answer(login::logout(state, &req));
    }
    let page = console && *req.method() == Method::GET;
    match admin_authenticated(state, req).await {
        Ok(req) => Verdict::Pass(req, cors),
        // A browser opening the console signs in first.
        Err(Verdict::Refuse(StatusCode::UNAUTHORIZED, _)) if page => {
            Verdict::Answer(login::page(None))
        }
        Err(refusal) => refusal,
    }
}

/// The answer to a CORS preflight from an allowed origin.
fn preflight(origin: &str, headers: &HeaderMap) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::new()));
    *resp.status_mut() = StatusCode::NO_CONTENT;
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(origin) {
        h.insert("access-control-allow-origin", v);
    }
    h.insert(
        "access-control-allow-methods",
        HeaderValue::from_static("GET, POST, DELETE"),
    );
    if let Some(asked) = headers.get("access-control-request-headers") {
        h.insert("access-control-allow-headers", asked.clone());
    }
    h.insert("access-control-max-age", HeaderValue::from_static("600"));
    h.insert("vary", HeaderValue::from_static("Origin"));
    resp
}

/// Adds the CORS headers that let a page of `origin` read the answer.
pub(super) fn allow_origin(resp: &mut Response<Full<Bytes>>, origin: Option<HeaderValue>) {
    if let Some(o) = origin {
        let h = resp.headers_mut();
        h.insert("access-control-allow-origin", o);
        h.insert(
            "access-control-expose-headers",
            HeaderValue::from_static("x-amzn-requestid, x-amzn-query-error"),
        );
        h.append("vary", HeaderValue::from_static("Origin"));
    }
}

/// A control request's credentials: the bearer token, the console's cookie, or a SigV4
/// signature by an admin credential (whose body is read to check it, then handed on).
async fn admin_authenticated(
    state: &AppState,
    req: Request<RequestBody>,
) -> Result<Request<RequestBody>, Verdict> {
    let token = state.admin_token.as_deref().unwrap_or_default();
    let headers = req.headers();
    let authorization = header(headers, "authorization").unwrap_or_default();
    if let Some(given) = authorization.strip_prefix("Bearer ") {
        if same_secret(given.trim(), token) {
            return Ok(req);
        }
        return Err(unauthorized("the bearer token is not sqsim's admin token"));
    }
    let cookie = cookie_name(&state.plane);
    if login::session_ids(headers, &cookie).any(|s| state.sessions.is_open(s)) {
        return Ok(req);
    }
    let AuthMode::Verify(keys) = &state.config.auth else {
        return Err(unauthorized("the control plane needs the admin token"));
    };
    if !authorization.starts_with("AWS4-HMAC-SHA256")
        && !req
            .uri()
            .query()
            .is_some_and(|q| q.contains("X-Amz-Signature="))
    {
        return Err(unauthorized(
            "the control plane needs the admin token or a signature by an admin credential",
        ));
    }
    let (parts, body) = req.into_parts();
    let bytes = match Limited::new(body, state.config.max_body_bytes)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return Err(match e.downcast_ref::<crate::http::BodyRefused>() {
                Some(refused) => {
                    Verdict::Refuse(StatusCode::SERVICE_UNAVAILABLE, refused.to_string())
                }
                None => Verdict::Refuse(
                    StatusCode::BAD_REQUEST,
                    "the request body could not be read".into(),
                ),
            })
        }
    };
    let signed = super::auth::SignedRequest {
        method: parts.method.as_str(),
        path: parts.uri.path(),
        query: parts.uri.query(),
        headers: &parts.headers,
        body: &bytes,
    };
    match super::auth::verify(&signed, keys, std::time::SystemTime::now()) {
        Ok(signer) if signer.credential.admin => {
            Ok(Request::from_parts(parts, RequestBody::ready(bytes)))
        }
        Ok(signer) => Err(Verdict::Refuse(
            StatusCode::FORBIDDEN,
            format!(
                "the credential {} is not marked admin",
                signer.credential.access_key
            ),
        )),
        Err(e) => Err(unauthorized(&e.message)),
    }
}

fn unauthorized(why: &str) -> Verdict {
    Verdict::Refuse(StatusCode::UNAUTHORIZED, why.to_string())
}

/// A refusal as the control plane answers: JSON with the reason.
pub(super) fn control_refusal(status: StatusCode, why: &str) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(json!({ "error": why }).to_string())));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if status == StatusCode::UNAUTHORIZED {
        resp.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"sqsim\""),
        );
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_lose_port_case_and_trailing_dot() {
        assert_eq!(host_name("LocalHost:9324"), "localhost");
        assert_eq!(host_name("[::1]:9324"), "::1");
        assert_eq!(host_name("sqs.example.com."), "sqs.example.com");
        assert_eq!(host_name("127.0.0.1"), "127.0.0.1");
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abcdef", "abcdef"));
        assert!(!same_secret("abcdef", "abcdeg"));
        assert!(!same_secret("abc", "abcdef"));
    }
}
