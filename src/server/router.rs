//! Where a request goes: the guard's checks (browsers, host names, the control plane's
//! credentials), then by path to the control plane (admin, metrics, console, LocalStack's
//! endpoints; cluster-wide in cluster mode) or to the SQS path ([`super::service`]); and the
//! panic fence around each request.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};

use crate::control::{admin, console, kept_on, localstack, metrics};
use crate::error::{ErrorCode, SqsError};
use crate::http::{respond, RequestBody};
use crate::protocol::{self, Render};

use super::service::{answer, render_of, DroppedConnection};
use super::AppState;

/// Runs a request's handling so that a panic in it (a bug) ends only that request: it is
/// logged and answered with a 500 `InternalFailure` in the request's protocol, and the
/// connection and every other request go on. The engine's locks ignore poisoning, so a
/// panic while one was held leaves it usable.
pub(super) async fn guarded<F>(
    render: Render,
    handling: F,
) -> Result<Response<Full<Bytes>>, DroppedConnection>
where
    F: std::future::Future<Output = Result<Response<Full<Bytes>>, DroppedConnection>>,
{
    use futures_util::FutureExt;
    match std::panic::AssertUnwindSafe(handling).catch_unwind().await {
        Ok(outcome) => outcome,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("a panic");
            tracing::error!(panic = what, "request handling panicked; answered 500");
            let request_id = uuid::Uuid::new_v4().to_string();
            Ok(respond(
                protocol::encode_error(render, &request_id, &SqsError::internal()),
                &request_id,
            ))
        }
    }
}

/// Handles one HTTP request: the guard's checks (browsers, host names, the control plane's
/// credentials), then the endpoint, with CORS headers for a page of an allowed origin.
pub(super) async fn handle(
    state: Arc<AppState>,
    req: Request<RequestBody>,
) -> Result<Response<Full<Bytes>>, DroppedConnection> {
    use super::guard::{self, Area, Verdict};
    let area = guard::area_of(&state, req.method(), req.uri().path(), req.uri().query());
    let render = render_of(req.headers(), req.uri().query());
    let (req, cors) = match guard::check(&state, area, req).await {
        Verdict::Pass(req, cors) => (req, cors),
        Verdict::Answer(resp) => return Ok(resp),
        Verdict::Refuse(status, why) => {
            return Ok(match area {
                Area::Sqs => {
                    let request_id = uuid::Uuid::new_v4().to_string();
                    let err = SqsError::new(ErrorCode::AccessDenied, why);
                    let mut encoded = protocol::encode_error(render, &request_id, &err);
                    encoded.status = status.as_u16();
                    respond(encoded, &request_id)
                }
                _ => guard::control_refusal(status, &why),
            })
        }
    };
    let mut resp = endpoint(state, req).await?;
    guard::allow_origin(&mut resp, cors);
    Ok(resp)
}

/// Handles one HTTP request the guard let through, by path. The control plane's handlers
/// run boxed: their futures are large (an admin endpoint, a request forwarded to another
/// node), and inline they would make every SQS request's future as large, to be copied
/// each time hyper moves it (measured: a 28 KB future, memcpy a sixth of the CPU of
/// single-message sends).
async fn endpoint(
    state: Arc<AppState>,
    req: Request<RequestBody>,
) -> Result<Response<Full<Bytes>>, DroppedConnection> {
    if metrics::is_scrape(&req) {
        let accept = crate::http::header(req.headers(), hyper::header::ACCEPT);
        return Ok(metrics::response(&state.plane, state.engines(), accept));
    }
    if console::is_browser_root(&req) {
        return Ok(console::redirect());
    }
    if console::is_favicon(&req) {
        return Ok(console::favicon());
    }
    if state.config.localstack.is_some() {
        if localstack::is_internal(req.uri().path()) {
            // Its message listing reads state: answered once what it shows is kept.
            return Ok(Box::pin(kept_on(localstack::handle(&state.plane, req))).await);
        }
        if let Some(service) = localstack::other_service(req.headers(), req.uri().query()) {
            return Ok(localstack::not_sqs(&service, req.headers()));
        }
    }
    #[cfg(feature = "cluster")]
    let req = match &state.link {
        Some(link) if req.uri().path().starts_with(admin::PREFIX) => {
            match Box::pin(crate::cluster::admin::admin(&state.plane, link, req)).await {
                Ok(resp) => return Ok(resp),
                Err(req) => req,
            }
        }
        _ => req,
    };
    if req.uri().path().starts_with(admin::PREFIX) {
        // Admin changes (reset, clock) are acknowledged like any other: once kept.
        return Ok(Box::pin(kept_on(admin::handle(&state.plane, req))).await);
    }
    answer(state, req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request's future is moved by value into the panic fence and into hyper's
    /// connection, and each move copies all of it: the control plane's handlers and the
    /// actions that wait must stay boxed, or every SQS request pays for their size (once it
    /// was 28 KB here, and copying it a sixth of the CPU of single-message sends).
    #[tokio::test]
    async fn a_requests_future_stays_small() {
        let addr = ([127, 0, 0, 1], 9324).into();
        let state = AppState::open(crate::Config::default(), Arc::default(), addr).unwrap();
        let req = Request::builder()
            .method("POST")
            .uri("/")
            .header("x-amz-target", "AmazonSQS.ListQueues")
            .body(RequestBody::ready(Bytes::from_static(b"{}")))
            .unwrap();
        let future = handle(Arc::new(state), req);
        let size = std::mem::size_of_val(&future);
        // Measured in a debug build (larger than release): 3.5 KB boxed, 28 KB inline.
        assert!(size < 6 * 1024, "a request's future is {size} bytes");
        let answered = future.await.map_err(|_| "dropped").unwrap();
        assert_eq!(answered.status(), 200);
    }
}
