//! The console's login, when the control plane needs credentials (`--admin-token`, or
//! `--auth verify`): a page that asks for the admin token once, and the session cookie it
//! buys (`HttpOnly`, `SameSite=Strict`, so no other site's page can ride on it).

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, CONTENT_TYPE, LOCATION, SET_COOKIE};
use hyper::{Request, Response, StatusCode};

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::PREFIX;
use crate::control::Plane;
use crate::http::RequestBody;

/// Where the login form posts.
pub(crate) const LOGIN_PATH: &str = "/_sqsim/console/login";
/// Where a session is ended.
pub(crate) const LOGOUT_PATH: &str = "/_sqsim/console/logout";

const PAGE: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sqsim console: sign in</title>
<style>body{font:15px system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem}
input{font:inherit;width:100%;padding:.4rem;margin:.5rem 0}button{font:inherit;padding:.4rem 1rem}
.err{color:#b00020}</style></head>
<body><h1>sqsim console</h1>
<p>This sqsim asks for its admin token (<code>--admin-token</code>, or the one printed at
start under <code>--auth verify</code>).</p>
<form method="post" action="/_sqsim/console/login">
<label>Admin token <input name="token" type="password" autocomplete="current-password" autofocus></label>
<button type="submit">Sign in</button></form>
<!--error--></body></html>"#;

/// The sign-in page (401: what was asked for needs credentials).
pub(crate) fn page(error: Option<&str>) -> Response<Full<Bytes>> {
    let body = match error {
        Some(e) => PAGE.replace("<!--error-->", &format!("<p class=\"err\">{e}</p>")),
        None => PAGE.to_string(),
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = StatusCode::UNAUTHORIZED;
    super::page_headers(resp.headers_mut());
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    resp
}

/// `POST /_sqsim/console/logout`: ends the session its cookie names (a cookie another
/// program on this host saw is then worth nothing), clears the cookie and goes back to
/// the sign-in page.
pub(crate) fn logout(state: &Plane, req: &Request<RequestBody>) -> Response<Full<Bytes>> {
    let name = cookie_name(state);
    for id in session_ids(req.headers(), &name) {
        state.sessions.close(id);
    }
    let mut resp = Response::new(Full::new(Bytes::new()));
    *resp.status_mut() = StatusCode::SEE_OTHER;
    let h = resp.headers_mut();
    h.insert(LOCATION, HeaderValue::from_static(PREFIX));
    if let Ok(v) = HeaderValue::from_str(&format!(
        "{name}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"
    )) {
        h.insert(SET_COOKIE, v);
    }
    resp
}

/// The values of the cookies named `name` in `headers`.
pub(crate) fn session_ids<'h>(
    headers: &'h hyper::HeaderMap,
    name: &'h str,
) -> impl Iterator<Item = &'h str> + 'h {
    headers
        .get_all(hyper::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .filter(move |(n, _)| *n == name)
        .map(|(_, v)| v)
}

/// `POST /_sqsim/console/login` (a form with `token`): a session cookie and a redirect to
/// the console, or the page again.
pub(crate) async fn login(state: &Plane, req: Request<RequestBody>) -> Response<Full<Bytes>> {
    let Ok(body) = Limited::new(req.into_body(), 4096).collect().await else {
        return page(Some("The form could not be read."));
    };
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_bytes(&body.to_bytes()).unwrap_or_default();
    let given = pairs
        .iter()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.as_str())
        .unwrap_or_default();
    let Some(token) = state.admin_token.as_deref() else {
        return page(Some("This sqsim has no admin token."));
    };
    if !crate::config::same_secret(given, token) {
        return page(Some("That is not the admin token."));
    }
    let session = state.sessions.open();
    let mut resp = Response::new(Full::new(Bytes::new()));
    *resp.status_mut() = StatusCode::SEE_OTHER;
    let h = resp.headers_mut();
    h.insert(LOCATION, HeaderValue::from_static(PREFIX));
    if let Ok(v) = HeaderValue::from_str(&format!(
        "{}={session}; HttpOnly; SameSite=Strict; Path=/",
        cookie_name(state)
    )) {
        h.insert(SET_COOKIE, v);
    }
    resp
}

/// How long a console login lasts.
const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

/// Console logins: session id → when it ends.
#[derive(Debug, Default)]
pub(crate) struct Sessions(Mutex<HashMap<String, Instant>>);

impl Sessions {
    /// A new session, as the cookie value.
    pub(crate) fn open(&self) -> String {
        let id = crate::config::new_secret();
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        s.retain(|_, until| *until > now);
        s.insert(id.clone(), now + SESSION_TTL);
        id
    }

    /// Ends session `id`.
    pub(crate) fn close(&self, id: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
    }

    pub(crate) fn is_open(&self, id: &str) -> bool {
        let s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        s.get(id).is_some_and(|until| *until > Instant::now())
    }
}

/// The console's session cookie name: per port, so two sqsims on one host (cookies ignore
/// ports) keep their logins apart.
pub(crate) fn cookie_name(state: &Plane) -> String {
    format!("sqsim_session_{}", state.local_addr.port())
}
