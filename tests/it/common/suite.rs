//! The server an SDK suite test talks to (`sdk`, `fifo`, `redrive`, `visibility`): an
//! in-process one, or — with `SQSIM_TEST_ENDPOINT` set (`make cluster-suites` points it at a
//! gateway node of a 3-node cluster) — that running sqsim, reset before each test and driven
//! through its admin endpoints. Run those against one endpoint one at a time
//! (`--test-threads=1`): the clock and the queues are the endpoint's, shared.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use sqsim::Server;

/// Something an SDK client can be pointed at.
pub(crate) trait Reach {
    fn endpoint(&self) -> String;
}

impl Reach for Server {
    fn endpoint(&self) -> String {
        Server::endpoint(self)
    }
}

/// A suite test's server.
pub(crate) enum Suite {
    Here(Server),
    /// The base URL of a running sqsim.
    There(String),
}

impl Reach for Suite {
    fn endpoint(&self) -> String {
        match self {
            Suite::Here(s) => s.endpoint(),
            Suite::There(url) => url.clone(),
        }
    }
}

/// The suite's server: a fresh in-process one, or the running one, reset.
pub(crate) async fn start_suite() -> Suite {
    match std::env::var("SQSIM_TEST_ENDPOINT") {
        Ok(url) if !url.is_empty() => {
            let url = url.trim_end_matches('/').to_string();
            post(&url, "/_sqsim/reset", "{}");
            Suite::There(url)
        }
        _ => Suite::Here(super::start().await),
    }
}

impl Suite {
    /// Moves the virtual clock forward.
    pub(crate) fn advance_clock(&self, by: Duration) {
        match self {
            Suite::Here(s) => s.advance_clock(by),
            Suite::There(url) => {
                let body = format!(r#"{{"advance_seconds":{}}}"#, by.as_secs_f64());
                post(url, "/_sqsim/clock", &body);
            }
        }
    }

    /// The virtual clock.
    pub(crate) fn clock(&self) -> SuiteClock<'_> {
        SuiteClock(self)
    }
}

/// A suite server's clock.
pub(crate) struct SuiteClock<'a>(&'a Suite);

impl SuiteClock<'_> {
    /// Stops the clock (a running server's is started again when the test ends).
    pub(crate) fn freeze(&self) {
        match self.0 {
            Suite::Here(s) => s.clock().freeze(),
            Suite::There(url) => post(url, "/_sqsim/clock", r#"{"freeze":true}"#),
        }
    }
}

impl Drop for Suite {
    fn drop(&mut self) {
        if let Suite::There(url) = self {
            post(url, "/_sqsim/clock", r#"{"freeze":false}"#);
        }
    }
}

/// POSTs JSON to an admin endpoint of the running sqsim at `base`, blocking (the server is
/// another process); panics unless it answers 200.
fn post(base: &str, path: &str, body: &str) {
    let host = base.trim_start_matches("http://");
    let mut conn = TcpStream::connect(host).expect("the test endpoint accepts connections");
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(req.as_bytes()).unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "POST {path} to the test endpoint: {answer}"
    );
}
