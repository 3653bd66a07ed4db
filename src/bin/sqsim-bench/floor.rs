//! The floor: a hyper server that answers with canned SQS replies and does no queue work.
//! Whatever it reaches is the ceiling of HTTP on this machine for the same request mix.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;

fn canned_message(i: usize) -> String {
    format!(
        "{{\"MessageId\":\"5fea7756-0ea4-451a-a703-a558b933e27{i}\",\"ReceiptHandle\":\"AQEBcannedcannedcannedcannedcanned{i}=\",\"MD5OfBody\":\"5d41402abc4b2a76b9719d911017c592\",\"Body\":\"{}\"}}",
        "x".repeat(256)
    )
}

fn reply(target: &str, body: &[u8]) -> String {
    let ten = || {
        (0..10)
            .map(|i| format!("{{\"Id\":\"m{i}\",\"MessageId\":\"5fea7756-0ea4-451a-a703-a558b933e27{i}\",\"MD5OfMessageBody\":\"5d41402abc4b2a76b9719d911017c592\"}}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    match target {
        "CreateQueue" => "{\"QueueUrl\":\"http://127.0.0.1/000000000000/floor\"}".into(),
        "SendMessageBatch" => format!("{{\"Successful\":[{}]}}", ten()),
        "SendMessage" => "{\"MD5OfMessageBody\":\"5d41402abc4b2a76b9719d911017c592\",\"MessageId\":\"5fea7756-0ea4-451a-a703-a558b933e274\"}".into(),
        "ReceiveMessage" => {
            let n = if body.windows(24).any(|w| w == b"\"MaxNumberOfMessages\":10") { 10 } else { 1 };
            let msgs: Vec<_> = (0..n).map(canned_message).collect();
            format!("{{\"Messages\":[{}]}}", msgs.join(","))
        }
        "DeleteMessageBatch" => {
            let ids: Vec<_> = (0..10).map(|i| format!("{{\"Id\":\"d{i}\"}}")).collect();
            format!("{{\"Successful\":[{}]}}", ids.join(","))
        }
        _ => "{}".into(),
    }
}

async fn handle(
    req: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let target = req
        .headers()
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.strip_prefix("AmazonSQS."))
        .unwrap_or("")
        .to_string();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let mut resp = Response::new(Full::new(Bytes::from(reply(&target, &body))));
    resp.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static("application/x-amz-json-1.0"),
    );
    Ok(resp)
}

/// Starts the floor server on its own runtime with as many workers as sqsim gets.
pub fn start(workers: usize) -> std::io::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        let rt = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(_) => return,
        };
        rt.block_on(async move {
            let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                return;
            };
            let builder = auto::Builder::new(TokioExecutor::new());
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let conn = builder
                    .serve_connection(TokioIo::new(stream), hyper::service::service_fn(handle))
                    .into_owned();
                tokio::spawn(conn);
            }
        });
    });
    Ok(addr)
}
