//! The binary shuts down gracefully on SIGTERM and SIGINT: waiting long polls return an empty
//! result at once and the process exits 0.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common;

fn request(addr: &str, target: &str, body: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "POST / HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: AmazonSQS.{target}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn graceful(signal: &str) {
    let mut server = common::Process::start();
    let addr = server.addr.to_string();
    let created = request(&addr, "CreateQueue", r#"{"QueueName":"q"}"#);
    assert!(created.starts_with("HTTP/1.1 200"), "{created}");

    let poller = {
        let addr = addr.clone();
        std::thread::spawn(move || {
            let url = format!("http://{addr}/000000000000/q");
            let started = Instant::now();
            let reply = request(
                &addr,
                "ReceiveMessage",
                &format!(r#"{{"QueueUrl":"{url}","WaitTimeSeconds":20}}"#),
            );
            (reply, started.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let status = Command::new("kill")
        .args([signal, &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let (reply, waited) = poller.join().unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.ends_with("{}"), "an empty receive: {reply}");
    assert!(
        waited < Duration::from_secs(5),
        "the long poll was released, not timed out: {waited:?}"
    );
    let exit = server.child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
}

#[test]
fn sigterm_releases_long_polls_and_exits_cleanly() {
    graceful("-TERM");
}

#[test]
fn sigint_releases_long_polls_and_exits_cleanly() {
    graceful("-INT");
}
