//! Clients that misbehave cannot take the server from others: a slowloris sending a byte a
//! second, 10,000 idle connections, a client that never reads its answers, pipelined
//! requests, more connections than the cap, more long polls than the cap, HTTP/2 streams
//! and idleness. In each case a well-behaved client keeps getting its answers meanwhile.

use std::time::{Duration, Instant};

use sqsim::config::Limits;
use sqsim::{Config, Server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{self, create, json, sdk, start_with};

/// A generous bound on one request's latency on a loaded 2-core CI machine in debug: the
/// point is that a well-behaved client is not held up for seconds, not a speed figure.
const PROMPT: Duration = Duration::from_millis(1500);

fn limits(read_s: u64, idle_s: u64, max_connections: usize) -> Config {
    Config {
        limits: Limits {
            max_connections,
            read_timeout: Duration::from_secs(read_s),
            idle_timeout: Duration::from_secs(idle_s),
            ..Limits::default()
        },
        ..Config::default()
    }
}

/// Sends and receives through the SDK for `for_how_long`, failing on any slow answer;
/// returns how many round trips were made.
async fn keeps_answering(server: &Server, url: &str, for_how_long: Duration) -> usize {
    let client = sdk(server);
    let until = Instant::now() + for_how_long;
    let mut n = 0;
    while Instant::now() < until {
        let t = Instant::now();
        client
            .send_message()
            .queue_url(url)
            .message_body("ok")
            .send()
            .await
            .expect("send");
        let got = client
            .receive_message()
            .queue_url(url)
            .send()
            .await
            .expect("receive");
        assert_eq!(got.messages().len(), 1);
        assert!(t.elapsed() < PROMPT, "a round trip took {:?}", t.elapsed());
        n += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    n
}

/// Whether the server has closed `s` (EOF or reset) within `within`; bytes it answered
/// before closing are skipped.
async fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 4096];
    let until = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(until, s.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

/// A queue `name` holding ten 200 kB messages: a receive of them is a 2 MB answer.
async fn filled(client: &aws_sdk_sqs::Client, name: &str) -> String {
    let url = create(client, name).await;
    let body = "x".repeat(200_000);
    for _ in 0..10 {
        client
            .send_message()
            .queue_url(&url)
            .message_body(&body)
            .send()
            .await
            .unwrap();
    }
    url
}

/// The value of an unlabelled series in `/metrics`.
async fn metric(server: &Server, name: &str) -> f64 {
    let r = crate::common::raw(server, "GET", "/metrics", &[], b"").await;
    r.body
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} in /metrics"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_clients_are_cut_off_at_the_read_timeout_and_others_are_served() {
    let server = start_with(limits(3, 30, 1000)).await;
    let url = create(&sdk(&server), "slow").await;
    let addr = server.local_addr();
    // 100 clients each sending a request head one byte a second, and 20 sending a
    // complete head, then the body one byte a second.
    let head =
        b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-amz-json-1.0\r\n";
    let mut loris = Vec::new();
    for i in 0..120 {
        loris.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            let started = Instant::now();
            let drip: Vec<u8> = if i < 100 {
                head.to_vec()
            } else {
                s.write_all(b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: AmazonSQS.ListQueues\r\nContent-Length: 100\r\n\r\n")
                    .await
                    .unwrap();
                vec![b' '; 100]
            };
            for b in drip {
                if s.write_all(&[b]).await.is_err() {
                    break;
                }
                let mut one = [0u8; 512];
                match tokio::time::timeout(Duration::from_secs(1), s.read(&mut one)).await {
                    Ok(Ok(0)) | Ok(Err(_)) => return (started.elapsed(), String::new()),
                    Ok(Ok(n)) => {
                        let answer = String::from_utf8_lossy(&one[..n]).into_owned();
                        let closed = closed_within(&mut s, Duration::from_secs(5)).await;
                        assert!(closed, "closed after its answer");
                        return (started.elapsed(), answer);
                    }
                    Err(_) => {}
                }
            }
            (started.elapsed(), "still open after the whole drip".to_string())
        }));
    }
    let served = keeps_answering(&server, &url, Duration::from_secs(5)).await;
    assert!(served > 10, "{served} round trips");
    for (i, l) in loris.into_iter().enumerate() {
        let (took, answer) = l.await.unwrap();
        assert!(
            took >= Duration::from_secs(2) && took < Duration::from_secs(8),
            "client {i} cut off after {took:?}"
        );
        if i < 100 {
            assert!(
                answer.is_empty(),
                "a head that never ends gets no answer: {answer}"
            );
        } else {
            // The slow body: refused with a 400 in the request's protocol.
            assert!(answer.starts_with("HTTP/1.1 400"), "client {i}: {answer}");
        }
    }
}

#[test]
fn ten_thousand_idle_connections_do_not_stop_service() {
    // This process holds the 10,000 client sockets: it needs that many files too.
    let (soft, hard) = rlimit::Resource::NOFILE.get().unwrap();
    if soft < 12_000 {
        rlimit::Resource::NOFILE
            .set(hard, hard)
            .expect("raise the open-file limit");
    }
    assert!(
        rlimit::Resource::NOFILE.get().unwrap().0 >= 12_000,
        "the open-file limit ({hard}) is too low for 10,000 connections"
    );
    // A separate server process: 10,000 sockets on each side would not fit one process's
    // open-file limit. Default limits, as a user runs it.
    let server = common::Process::start();
    let addr = server.addr;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let outcome = rt.block_on(async {
        let mut idle = Vec::with_capacity(10_000);
        for _ in 0..10_000 {
            idle.push(TcpStream::connect(addr).await.expect("connect"));
        }
        let client = crate::common::sdk_for(&format!("http://{addr}"), "us-east-1");
        let url = create(&client, "busy").await;
        for _ in 0..20 {
            let t = Instant::now();
            client
                .send_message()
                .queue_url(&url)
                .message_body("b")
                .send()
                .await
                .expect("send with 10,000 idle connections open");
            assert!(t.elapsed() < PROMPT, "a send took {:?}", t.elapsed());
        }
        let scrape = get(addr, "/metrics").await.expect("a scrape");
        let open: f64 = scrape
            .lines()
            .find_map(|l| {
                l.strip_prefix("sqsim_connections_open ")?
                    .trim()
                    .parse()
                    .ok()
            })
            .expect("sqsim_connections_open");
        drop(idle);
        open
    });
    drop(server);
    assert!(outcome >= 10_000.0, "{outcome} connections open");
}

/// A GET over a fresh connection, by hand (the SDK cannot fetch /metrics); `None` when the
/// server closed the connection instead of answering.
async fn get(addr: std::net::SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).await.ok()?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).await.ok()?;
    (!out.is_empty()).then_some(out)
}

/// [`get`], retried for up to 5 s while the server is at its connection cap and closes the
/// connection on arrival.
async fn get_once_room(addr: std::net::SocketAddr, path: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(r) = get(addr, path).await {
            return r;
        }
        assert!(Instant::now() < deadline, "no room for GET {path}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_is_closed_when_idle_and_blocks_no_one() {
    let server = start_with(limits(30, 2, 1000)).await;
    let client = sdk(&server);
    let big = filled(&client, "big").await;
    let before = metric(&server, "sqsim_connections_open").await;
    // Fifty pipelined receives of ~2 MB each, never read: the server's writes stall.
    let mut greedy = TcpStream::connect(server.local_addr()).await.unwrap();
    let req_body =
        format!(r#"{{"QueueUrl":"{big}","MaxNumberOfMessages":10,"VisibilityTimeout":0}}"#);
    let one = format!(
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: AmazonSQS.ReceiveMessage\r\nContent-Length: {}\r\n\r\n{req_body}",
        req_body.len()
    );
    greedy.write_all(one.repeat(50).as_bytes()).await.unwrap();
    let url = create(&client, "small").await;
    let served = keeps_answering(&server, &url, Duration::from_secs(1)).await;
    assert!(served > 3, "{served} round trips");
    // No byte has moved for the idle timeout: the server lets go of the stuck connection.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let open = metric(&server, "sqsim_connections_open").await;
        if open <= before {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{open} connections still open (before: {before})"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    drop(greedy);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_is_closed_and_a_long_poll_is_not_cut() {
    let server = start_with(limits(30, 1, 1000)).await;
    // Connected and silent: closed after the idle timeout.
    let mut silent = TcpStream::connect(server.local_addr()).await.unwrap();
    let t = Instant::now();
    assert!(closed_within(&mut silent, Duration::from_secs(5)).await);
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
    // A 3-second long poll moves no byte for three idle timeouts and still gets its answer.
    let client = sdk(&server);
    let url = create(&client, "wait").await;
    let t = Instant::now();
    let got = client
        .receive_message()
        .queue_url(&url)
        .wait_time_seconds(3)
        .send()
        .await
        .expect("a long poll outlives the idle timeout");
    assert!(got.messages().is_empty());
    assert!(t.elapsed() >= Duration::from_secs(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_are_all_answered_in_order() {
    let server = start_with(Config::default()).await;
    let mut s = TcpStream::connect(server.local_addr()).await.unwrap();
    let mut reqs = String::new();
    for i in 0..100 {
        let body = format!(r#"{{"QueueName":"p{i}"}}"#);
        reqs.push_str(&format!(
            "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: AmazonSQS.CreateQueue\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ));
    }
    reqs.push_str("GET /_sqsim/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    s.write_all(reqs.as_bytes()).await.unwrap();
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_string(&mut out))
        .await
        .expect("answers in time")
        .unwrap();
    assert_eq!(out.matches("HTTP/1.1 200 OK").count(), 101);
    let order: Vec<usize> = out
        .match_indices("/000000000000/p")
        .map(|(i, _)| {
            out[i + 15..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(order, (0..100).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_are_closed_on_arrival() {
    let server = start_with(limits(30, 30, 8)).await;
    let mut held = Vec::new();
    for _ in 0..8 {
        held.push(TcpStream::connect(server.local_addr()).await.unwrap());
    }
    // Let the accept loop take all eight.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut ninth = TcpStream::connect(server.local_addr()).await.unwrap();
    let _ = ninth
        .write_all(b"GET /_sqsim/health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await;
    let mut buf = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(5), ninth.read_to_end(&mut buf))
        .await
        .expect("closed at once");
    assert!(
        n.is_err() || buf.is_empty(),
        "over the cap: {:?}",
        String::from_utf8_lossy(&buf)
    );
    // One leaves: the next client is served.
    drop(held.pop());
    let answer = get_once_room(server.local_addr(), "/_sqsim/health").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    drop(held);
    // The scrape needs a place too, once the server has seen the others go.
    let scrape = get_once_room(server.local_addr(), "/metrics").await;
    let refused: f64 = scrape
        .lines()
        .find_map(|l| {
            l.strip_prefix("sqsim_connections_refused_total ")?
                .trim()
                .parse()
                .ok()
        })
        .expect("sqsim_connections_refused_total");
    assert!(refused >= 1.0, "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_polls_over_the_cap_get_service_unavailable() {
    let mut config = Config::default();
    config.engine.set_max_long_polls(2).unwrap();
    let server = start_with(config).await;
    let client = sdk(&server);
    let url = create(&client, "polls").await;
    let mut waiting = Vec::new();
    for _ in 0..2 {
        let (client, url) = (client.clone(), url.clone());
        waiting.push(tokio::spawn(async move {
            client
                .receive_message()
                .queue_url(url)
                .wait_time_seconds(20)
                .send()
                .await
        }));
    }
    // Both places taken: the queue's gauge in /metrics shows two waiting.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = crate::common::raw(&server, "GET", "/metrics", &[], b"").await;
        let waiting = r.body.lines().any(|l| {
            l.starts_with("sqsim_queue_long_polls_waiting{")
                && l.contains(r#"queue="polls""#)
                && l.ends_with(" 2")
        });
        if waiting {
            break;
        }
        assert!(Instant::now() < deadline, "two long polls never waited");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let body = serde_json::json!({"QueueUrl": url, "WaitTimeSeconds": 5});
    let third = json(&server, "ReceiveMessage", &body).await;
    assert_eq!(third.status, 503, "{}", third.body);
    assert!(third.body.contains("ServiceUnavailable"), "{}", third.body);
    let query = crate::common::query(
        &server,
        &[
            ("Action", "ReceiveMessage"),
            ("QueueUrl", &url),
            ("WaitTimeSeconds", "5"),
        ],
    )
    .await;
    assert_eq!(query.status, 503);
    assert!(
        query.body.contains("<Code>ServiceUnavailable</Code>"),
        "{}",
        query.body
    );
    // A short poll needs no place, nor does a long poll that finds a message at once.
    let short = json(
        &server,
        "ReceiveMessage",
        &serde_json::json!({"QueueUrl": url}),
    )
    .await;
    assert_eq!(short.status, 200);
    let ready = create(&client, "ready").await;
    client
        .send_message()
        .queue_url(&ready)
        .message_body("here")
        .send()
        .await
        .unwrap();
    let at_once = json(
        &server,
        "ReceiveMessage",
        &serde_json::json!({"QueueUrl": ready, "WaitTimeSeconds": 20}),
    )
    .await;
    assert_eq!(at_once.status, 200, "{}", at_once.body);
    assert!(at_once.body.contains("here"), "{}", at_once.body);
    // A message ends one waiting poll and frees its place.
    client
        .send_message()
        .queue_url(&url)
        .message_body("wake")
        .send()
        .await
        .unwrap();
    let mut woken = 0;
    for _ in 0..100 {
        woken = waiting.iter().filter(|w| w.is_finished()).count();
        if woken > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(woken, 1);
    let again = json(
        &server,
        "ReceiveMessage",
        &serde_json::json!({"QueueUrl": url, "WaitTimeSeconds": 1}),
    )
    .await;
    assert_eq!(again.status, 200, "{}", again.body);
    for w in waiting {
        w.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_serves_many_streams_keeps_a_long_poll_and_closes_when_idle() {
    use http_body_util::{BodyExt, Full};
    let server = start_with(limits(30, 1, 1000)).await;
    let io = hyper_util::rt::TokioIo::new(TcpStream::connect(server.local_addr()).await.unwrap());
    let (sender, conn) =
        hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
            .await
            .expect("h2 handshake");
    let conn = tokio::spawn(conn);
    let call = |action: &'static str, body: String| {
        let mut sender = sender.clone();
        async move {
            let req = hyper::Request::post("http://sqsim.test/")
                .header("content-type", "application/x-amz-json-1.0")
                .header("x-amz-target", format!("AmazonSQS.{action}"))
                .body(Full::new(bytes::Bytes::from(body)))
                .unwrap();
            let resp = sender.send_request(req).await.expect("h2 request");
            let status = resp.status().as_u16();
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            (status, String::from_utf8_lossy(&body).into_owned())
        }
    };
    // More streams at once than the server allows (200): the client queues the rest.
    let calls: Vec<_> = (0..400)
        .map(|i| {
            tokio::spawn(call(
                "CreateQueue",
                format!(r#"{{"QueueName":"h{}"}}"#, i % 7),
            ))
        })
        .collect();
    for c in calls {
        let (status, body) = c.await.unwrap();
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("QueueUrl"), "{body}");
    }
    // A 2-second long poll outlives the 1-second idle timeout: it is a running request.
    let url = "http://sqsim.test/000000000000/h0";
    let t = Instant::now();
    let (status, body) = call(
        "ReceiveMessage",
        format!(r#"{{"QueueUrl":"{url}","WaitTimeSeconds":2}}"#),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(t.elapsed() >= Duration::from_secs(2));
    // Then nothing runs: the server closes the connection (the client still holds it open).
    let ended = tokio::time::timeout(Duration::from_secs(5), conn).await;
    assert!(ended.is_ok(), "an idle HTTP/2 connection is closed");
    drop(sender);
}

/// An HTTP/2 client that never opens its flow-control window leaves every answer unsent in
/// the server's memory (tens of MB each at most); a long poll it keeps running beside them
/// used to count as activity, so the connection and those answers stayed for good. An
/// answer left unwritten for the idle timeout now ends the connection, whatever runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_answers_never_read_end_the_connection_even_beside_a_long_poll() {
    use http_body_util::Full;
    let server = start_with(limits(30, 2, 1000)).await;
    let client = sdk(&server);
    let big = filled(&client, "unread").await;
    let empty = create(&client, "empty").await;
    let io = hyper_util::rt::TokioIo::new(TcpStream::connect(server.local_addr()).await.unwrap());
    let (sender, conn) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .initial_stream_window_size(0)
            .handshake(io)
            .await
            .expect("h2 handshake");
    let conn = tokio::spawn(conn);
    let call = move |body: String| {
        let mut sender = sender.clone();
        async move {
            let req = hyper::Request::post("http://sqsim.test/")
                .header("content-type", "application/x-amz-json-1.0")
                .header("x-amz-target", "AmazonSQS.ReceiveMessage")
                .body(Full::new(bytes::Bytes::from(body)))
                .unwrap();
            // The answer's head arrives; its body is never read.
            sender.send_request(req).await.map(|r| r.status())
        }
    };
    // The first unsent answer is ready after this: the connection may not end sooner than
    // the idle timeout after it.
    let t = Instant::now();
    for _ in 0..3 {
        let status = call(format!(
            r#"{{"QueueUrl":"{big}","MaxNumberOfMessages":10,"VisibilityTimeout":0}}"#
        ))
        .await
        .expect("an answer's head");
        assert_eq!(status, 200);
    }
    // One long poll after another keeps a request running on the connection.
    let polls = tokio::spawn(async move {
        loop {
            let poll = format!(r#"{{"QueueUrl":"{empty}","WaitTimeSeconds":1}}"#);
            if call(poll).await.is_err() {
                return;
            }
        }
    });
    let ended = tokio::time::timeout(Duration::from_secs(10), conn).await;
    assert!(
        ended.is_ok(),
        "the connection holding unsent answers is closed"
    );
    assert!(t.elapsed() >= Duration::from_secs(2), "{:?}", t.elapsed());
    polls.abort();
    // Others were never held up.
    let url = create(&client, "others").await;
    assert!(keeps_answering(&server, &url, Duration::from_millis(500)).await > 1);
}
