//! sqsim's SQS request path without sockets: the real service, state and engine, driven
//! with requests built in memory. For the fuzzer (`sqsim-fuzz`) and the golden wire files'
//! format, which both read `fixtures/wire`; not a stable API.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

use super::AppState;
use crate::Config;

/// Every SQS action name.
pub const ACTIONS: &[&str] = crate::protocol::Action::NAMES;

/// One request of a `fixtures/wire` file.
#[derive(Debug, Clone)]
pub struct WireRequest {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

/// Splits a `fixtures/wire` file into its leading comment lines and its exchanges: each
/// request (`>>> METHOD PATH`, headers, a blank line, the body) with the response text that
/// follows it (from its `<<< STATUS` line on).
pub fn parse_wire(text: &str) -> (Vec<String>, Vec<(WireRequest, String)>) {
    let mut preamble = Vec::new();
    let mut out = Vec::new();
    let mut blocks = text.split("\n>>> ");
    let first = blocks.next().unwrap_or_default();
    let mut rest: Vec<&str> = Vec::new();
    if let Some(req) = first.strip_prefix(">>> ") {
        rest.push(req);
    } else {
        preamble.extend(first.lines().map(str::to_string));
    }
    rest.extend(blocks);
    for block in rest {
        let (request, response) = block.split_once("\n<<< ").unwrap_or((block, ""));
        let (head, body) = request.split_once("\n\n").unwrap_or((request, ""));
        let mut lines = head.lines();
        let (method, path) = lines
            .next()
            .unwrap_or_default()
            .split_once(' ')
            .unwrap_or(("GET", "/"));
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        out.push((
            WireRequest {
                method: method.to_string(),
                path: path.to_string(),
                headers,
                body: body.trim_end_matches('\n').to_string(),
            },
            format!("<<< {}", response.trim_end_matches('\n')),
        ));
    }
    (preamble, out)
}

/// A server without a socket.
pub struct InProcess {
    state: Arc<AppState>,
}

/// What the service answered.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
}

impl InProcess {
    /// A fresh in-memory server with `config` (durable mode is not for in-process use).
    /// Its engine is told it is stopping, so a long poll answers at once with what is there
    /// (a 20-second WaitTimeSeconds costs nothing when requests are sent one at a time) and
    /// move tasks do not run on in the background.
    pub fn new(config: Config) -> Result<InProcess, String> {
        let addr: SocketAddr = ([127, 0, 0, 1], 9324).into();
        let state = AppState::open(config, Arc::default(), addr)?;
        state.engine.begin_shutdown();
        Ok(InProcess {
            state: Arc::new(state),
        })
    }

    /// Answers one SQS request. `Err` when the parts cannot form an HTTP request at all (an
    /// invalid method, URI or header: no client could send it); `Ok(None)` when the service
    /// dropped the connection (an injected fault).
    pub async fn request(
        &self,
        method: &[u8],
        uri: &str,
        headers: &[(String, Vec<u8>)],
        body: Bytes,
    ) -> Result<Option<Answer>, String> {
        let mut b = hyper::Request::builder()
            .method(hyper::Method::from_bytes(method).map_err(|e| e.to_string())?)
            .uri(uri);
        for (k, v) in headers {
            b = b.header(k.as_str(), v.as_slice());
        }
        let req = b.body(Full::new(body)).map_err(|e| e.to_string())?;
        let Ok(resp) = super::service::answer(Arc::clone(&self.state), req).await else {
            return Ok(None);
        };
        let status = resp.status().as_u16();
        let headers = resp
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let body = resp
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        Ok(Some(Answer {
            status,
            headers,
            body,
        }))
    }

    /// Everything back to a fresh server (queues, messages, faults).
    pub fn reset(&self) {
        self.state.reset_all();
    }
}
