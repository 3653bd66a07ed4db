//! Request bodies that never finish cannot take the server's memory: 200 HTTP/1.1
//! connections, or one HTTP/2 connection's 200 streams, each announcing an 8 MB body and
//! sending most of it, unsigned, to a server that checks signatures. The server runs in its
//! own process so that its peak memory can be read (`/proc/PID/status`); a client with a key
//! keeps being served during and after. And what does not fit: a large body waits for room
//! on HTTP/1.1 and is refused at once on HTTP/2, small ones still pass, and a body cut off
//! mid-way gives its room back.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::common::{self, create, sdk_with, Process};

/// The default body budget (`--max-incoming-bytes`), and the three quarters of it that
/// bodies over 64 KiB may take.
const BUDGET: u64 = sqsim::config::DEFAULT_MAX_INCOMING_BYTES;
const LARGE_SHARE: u64 = BUDGET - BUDGET / 4;
/// What the server may grow by beyond the budget under these attacks: the tasks and
/// buffers of 200 connections or streams, and the allocator's slack.
const SLACK: u64 = 64 << 20;
/// What each attacking request announces (under the 8 MiB body cap), and sends of it.
const ANNOUNCED: usize = 8_000_000;
const SENT: usize = 7_000_000;
/// Attacking connections (HTTP/1.1), or streams on one connection (HTTP/2: the server's
/// maximum).
const ATTACKERS: usize = 200;
const CHUNK: usize = 64 * 1024;
static PAD: [u8; CHUNK] = [b' '; CHUNK];
const KEY: &str = "AKIDUNFINISHED";
const SECRET: &str = "unfinished-bodies-secret";

/// A `kB` figure of `/proc/PID/status` (`VmRSS`, `VmHWM`: the peak), in bytes.
fn status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| {
            let kb = l.strip_prefix(field)?.strip_prefix(':')?.trim();
            kb.strip_suffix("kB")?.trim().parse::<u64>().ok()
        })
        .map(|kb| kb * 1024)
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"))
}

/// A server checking signatures, a client with its key, and a queue the client uses.
async fn verifying() -> (Process, aws_sdk_sqs::Client, String) {
    let server = Process::start_with(&[
        "--auth",
        "verify",
        "--credentials",
        &format!("{KEY}:{SECRET}"),
    ]);
    let client = sdk_with(&format!("http://{}", server.addr), "us-east-1", KEY, SECRET);
    let url = create(&client, "served").await;
    round_trip(&client, &url, "warm-up").await;
    (server, client, url)
}

/// A send and a receive of a small message, which must both succeed.
async fn round_trip(client: &aws_sdk_sqs::Client, url: &str, body: &str) {
    common::send(client, url, body).await;
    let got = client
        .receive_message()
        .queue_url(url)
        .send()
        .await
        .expect("a receive");
    assert_eq!(got.messages().len(), 1);
    let handle = got.messages()[0].receipt_handle().unwrap_or_default();
    client
        .delete_message()
        .queue_url(url)
        .receipt_handle(handle)
        .send()
        .await
        .expect("a delete");
}

/// Waits until the attack has moved no byte for a second (what the server would read it
/// has read), or the server has grown past `bound` over `baseline`.
async fn until_settled(pid: u32, moved: &AtomicU64, baseline: u64, bound: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut last, mut still) = (u64::MAX, 0);
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if status_bytes(pid, "VmRSS").saturating_sub(baseline) > bound {
            return;
        }
        let now = moved.load(Relaxed);
        if now == last {
            still += 1;
            if still >= 10 {
                return;
            }
        } else {
            (last, still) = (now, 0);
        }
    }
}

/// Measures an attack: waits for it to settle, checks that the client is served while it
/// holds, and that the server's peak stayed within the budget and the slack.
async fn measured(
    server: &Process,
    client: &aws_sdk_sqs::Client,
    url: &str,
    baseline: u64,
    moved: &AtomicU64,
    what: &str,
) {
    let pid = server.child.id();
    let bound = BUDGET + SLACK;
    until_settled(pid, moved, baseline, bound).await;
    let (rss, peak) = (status_bytes(pid, "VmRSS"), status_bytes(pid, "VmHWM"));
    eprintln!(
        "{what}: {} MB sent; server RSS {} MiB before, {} MiB now, peak {} MiB (growth {} MiB)",
        moved.load(Relaxed) / 1_000_000,
        baseline >> 20,
        rss >> 20,
        peak >> 20,
        peak.saturating_sub(baseline) >> 20,
    );
    let growth = peak.saturating_sub(baseline);
    assert!(
        growth <= bound,
        "{what}: the server grew by {} MiB (peak {} MiB), over the {} MiB budget and {} MiB slack",
        growth >> 20,
        peak >> 20,
        BUDGET >> 20,
        SLACK >> 20
    );
    round_trip(client, url, "during").await;
}

/// After an attack: a large message (its body is a large one) goes through, so the room
/// the attack held was given back when its connections went.
async fn large_send_after(client: &aws_sdk_sqs::Client, url: &str) {
    client
        .send_message()
        .queue_url(url)
        .message_body("a".repeat(500_000))
        .send()
        .await
        .expect("a large send after the attack");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unfinished_http1_bodies_stay_within_the_body_budget() {
    let (server, client, url) = verifying().await;
    let baseline = status_bytes(server.child.id(), "VmRSS");
    let addr = server.addr;
    let moved = Arc::new(AtomicU64::new(0));
    let head = format!(
        "POST / HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: AmazonSQS.SendMessage\r\nContent-Length: {ANNOUNCED}\r\n\r\n"
    );
    let attackers: Vec<JoinHandle<()>> = (0..ATTACKERS)
        .map(|_| {
            let (head, moved) = (head.clone(), Arc::clone(&moved));
            tokio::spawn(async move {
                let Ok(mut s) = TcpStream::connect(addr).await else {
                    return;
                };
                if s.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let mut left = SENT;
                while left > 0 {
                    let n = left.min(CHUNK);
                    if s.write_all(&PAD[..n]).await.is_err() {
                        break;
                    }
                    moved.fetch_add(n as u64, Relaxed);
                    left -= n;
                }
                // The stall: the body stays unfinished, the connection open.
                std::future::pending::<()>().await;
                drop(s);
            })
        })
        .collect();
    measured(&server, &client, &url, baseline, &moved, "HTTP/1.1").await;
    for a in attackers {
        a.abort();
    }
    large_send_after(&client, &url).await;
}

/// A request body that sends `SENT` bytes of an announced `ANNOUNCED`, then nothing.
struct Stalling {
    left: usize,
    moved: Arc<AtomicU64>,
}

impl hyper::body::Body for Stalling {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.left == 0 {
            // Never woken: the body stays unfinished until the stream goes.
            return Poll::Pending;
        }
        let n = self.left.min(CHUNK);
        self.left -= n;
        self.moved.fetch_add(n as u64, Relaxed);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(&PAD[..n])))))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(ANNOUNCED as u64)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unfinished_http2_streams_stay_within_the_body_budget() {
    let (server, client, url) = verifying().await;
    let baseline = status_bytes(server.child.id(), "VmRSS");
    let addr = server.addr;
    let io = TokioIo::new(TcpStream::connect(addr).await.unwrap());
    let (sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
        .await
        .expect("h2 handshake");
    let conn = tokio::spawn(conn);
    let moved = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let streams: Vec<JoinHandle<()>> = (0..ATTACKERS)
        .map(|_| {
            let mut sender = sender.clone();
            let (moved, refused) = (Arc::clone(&moved), Arc::clone(&refused));
            tokio::spawn(async move {
                let req = hyper::Request::post(format!("http://{addr}/"))
                    .header("content-type", "application/x-amz-json-1.0")
                    .header("x-amz-target", "AmazonSQS.SendMessage")
                    .header("content-length", ANNOUNCED)
                    .body(Stalling { left: SENT, moved })
                    .unwrap();
                if let Ok(resp) = sender.send_request(req).await {
                    if resp.status() == 503 {
                        refused.fetch_add(1, Relaxed);
                    }
                }
                std::future::pending::<()>().await;
            })
        })
        .collect();
    measured(&server, &client, &url, baseline, &moved, "HTTP/2").await;
    eprintln!(
        "HTTP/2: {} of {ATTACKERS} streams refused with 503",
        refused.load(Relaxed)
    );
    for s in streams {
        s.abort();
    }
    drop(sender);
    conn.abort();
    large_send_after(&client, &url).await;
}

/// A JSON SendMessage to `url` of exactly `len` bytes (the message, then blanks).
fn padded_send(url: &str, len: usize) -> Vec<u8> {
    let mut body = format!(r#"{{"QueueUrl":"{url}","MessageBody":"padded"}}"#).into_bytes();
    assert!(body.len() <= len);
    body.resize(len, b' ');
    body
}

/// A connection whose SendMessage announces `len` bytes and has sent only the first 100 kB.
struct Begun {
    stream: TcpStream,
    rest: Vec<u8>,
}

async fn begun(server: &sqsim::Server, url: &str, len: usize) -> Begun {
    let mut stream = TcpStream::connect(server.local_addr()).await.unwrap();
    let head = format!(
        "POST / HTTP/1.1\r\nHost: sqsim.test\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: AmazonSQS.SendMessage\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
    );
    let mut body = padded_send(url, len);
    let rest = body.split_off(100_000);
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body).await.unwrap();
    Begun { stream, rest }
}

impl Begun {
    /// Sends the rest of the body; the answer's status line.
    async fn finish(mut self) -> String {
        self.stream.write_all(&self.rest).await.unwrap();
        let mut answer = String::new();
        tokio::time::timeout(
            Duration::from_secs(30),
            self.stream.read_to_string(&mut answer),
        )
        .await
        .expect("an answer in time")
        .unwrap();
        answer.lines().next().unwrap_or_default().to_string()
    }
}

/// One request on a new HTTP/2 connection: its status and body.
async fn h2_call(server: &sqsim::Server, headers: &[(&str, &str)], body: Vec<u8>) -> (u16, String) {
    let io = TokioIo::new(TcpStream::connect(server.local_addr()).await.unwrap());
    let (mut sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
        .await
        .expect("h2 handshake");
    let conn = tokio::spawn(conn);
    let mut req = hyper::Request::post("http://sqsim.test/");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = sender
        .send_request(req.body(Full::new(Bytes::from(body))).unwrap())
        .await
        .expect("an h2 answer");
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    conn.abort();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// An unlabelled series of `/metrics`, 0 when absent.
async fn metric(server: &sqsim::Server, name: &str) -> f64 {
    let r = common::raw(server, "GET", "/metrics", &[], b"").await;
    r.body
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_body_waits_for_room_on_http1_and_is_refused_at_once_on_http2() {
    let server = Arc::new(common::start().await);
    let url = common::raw_url("room");
    let made = common::json(
        &server,
        "CreateQueue",
        &serde_json::json!({"QueueName": "room"}),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.body);
    // Bodies over 64 KiB may take three quarters of the budget together: twelve of 8 MB
    // and one of 4 MB, each only begun, leave 663,296 bytes of it.
    let mut held = Vec::new();
    for _ in 0..12 {
        held.push(begun(&server, &url, 8_000_000).await);
    }
    let last = begun(&server, &url, 4_000_000).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric(&server, "sqsim_incoming_body_bytes").await < 100_000_000.0
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    const { assert!(LARGE_SHARE - 100_000_000 < 1_000_000) };
    // HTTP/2: a 1 MB body is refused at once, in the request's protocol (a stream left
    // waiting would hold its connection's window from the others).
    let json_headers = [
        ("content-type", "application/x-amz-json-1.0"),
        ("x-amz-target", "AmazonSQS.SendMessage"),
    ];
    let (status, body) = h2_call(&server, &json_headers, padded_send(&url, 1_000_000)).await;
    assert_eq!(status, 503, "a large HTTP/2 body with no room: {body}");
    assert!(body.contains("ServiceUnavailable"), "{body}");
    let mut form = format!("Action=SendMessage&QueueUrl={url}&MessageBody=x").into_bytes();
    form.resize(1_000_000, b'x');
    let form_headers = [("content-type", "application/x-www-form-urlencoded")];
    let (status, body) = h2_call(&server, &form_headers, form).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("<Code>ServiceUnavailable</Code>"), "{body}");
    // Small bodies have a quarter of the budget to themselves.
    let small = common::raw(
        &server,
        "POST",
        "/",
        &json_headers,
        &padded_send(&url, 1000),
    )
    .await;
    assert_eq!(small.status, 200, "{}", small.body);
    let (status, body) = h2_call(&server, &json_headers, padded_send(&url, 1000)).await;
    assert_eq!(status, 200, "{body}");
    // HTTP/1.1: a large body waits for room (its connection is simply not read)...
    let (server_, url_) = (Arc::clone(&server), url.clone());
    let waiting = tokio::spawn(async move {
        common::raw(
            &server_,
            "POST",
            "/",
            &json_headers,
            &padded_send(&url_, 1_000_000),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "answered with no room for its body");
    // ...which the 4 MB body gives back once it is whole.
    let answer = last.finish().await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let answered = waiting.await.unwrap();
    assert_eq!(answered.status, 200, "{}", answered.body);
    // Bodies cut off mid-way give their room back: the 96 MB are free again.
    drop(held);
    let big = common::raw(
        &server,
        "POST",
        "/",
        &json_headers,
        &padded_send(&url, 5_000_000),
    )
    .await;
    assert_eq!(big.status, 200, "{}", big.body);
    assert!(metric(&server, "sqsim_incoming_bodies_refused_total").await >= 2.0);
}
