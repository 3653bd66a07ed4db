//! `sqsim health`: asks a server on this machine for `/_sqsim/health`, for container health
//! checks in an image that has no curl (the exit status is the answer).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// How long the probe waits to connect, and then for the answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// `Ok` when the server listening on loopback port `port` answers its health endpoint with
/// 200; otherwise what went wrong, in a line.
pub fn health(port: u16) -> Result<(), String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, PROBE_TIMEOUT)
        .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    let _ = s.set_read_timeout(Some(PROBE_TIMEOUT));
    let _ = s.set_write_timeout(Some(PROBE_TIMEOUT));
    s.write_all(b"GET /_sqsim/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .map_err(|e| format!("cannot ask {addr}: {e}"))?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer)
        .map_err(|e| format!("no answer from {addr}: {e}"))?;
    let answer = String::from_utf8_lossy(&answer);
    let status = answer.lines().next().unwrap_or_default();
    if status.split(' ').nth(1) == Some("200") {
        Ok(())
    } else {
        Err(format!("{addr} is not healthy: {}", answer.trim()))
    }
}
