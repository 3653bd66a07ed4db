//! The floor: a hyper server that answers with canned SQS replies and does no queue work,
//! in JSON or, for form-encoded requests, in the query protocol's XML. Whatever it reaches is
//! the ceiling of HTTP on this machine for the same request mix.

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

/// The query protocol's reply to the same actions, as XML.
fn reply_xml(action: &str, body: &[u8]) -> String {
    let message_id = |i: usize| format!("5fea7756-0ea4-451a-a703-a558b933e27{i}");
    const MD5: &str = "5d41402abc4b2a76b9719d911017c592";
    let result = match action {
        "CreateQueue" => "<QueueUrl>http://127.0.0.1/000000000000/floor</QueueUrl>".to_string(),
        "SendMessageBatch" => (0..10)
            .map(|i| format!("<SendMessageBatchResultEntry><Id>m{i}</Id><MessageId>{}</MessageId><MD5OfMessageBody>{MD5}</MD5OfMessageBody></SendMessageBatchResultEntry>", message_id(i)))
            .collect(),
        "SendMessage" => format!("<MessageId>{}</MessageId><MD5OfMessageBody>{MD5}</MD5OfMessageBody>", message_id(4)),
        "ReceiveMessage" => {
            let n = if body.windows(22).any(|w| w == b"MaxNumberOfMessages=10") { 10 } else { 1 };
            (0..n)
                .map(|i| format!("<Message><MessageId>{}</MessageId><ReceiptHandle>AQEBcannedcannedcannedcannedcanned{i}=</ReceiptHandle><MD5OfBody>{MD5}</MD5OfBody><Body>{}</Body></Message>", message_id(i), "x".repeat(256)))
                .collect()
        }
        "DeleteMessageBatch" => (0..10)
            .map(|i| format!("<DeleteMessageBatchResultEntry><Id>d{i}</Id></DeleteMessageBatchResultEntry>"))
            .collect(),
        _ => String::new(),
    };
    format!(
        "<?xml version=\"1.0\"?><{action}Response xmlns=\"http://queue.amazonaws.com/doc/2012-11-05/\"><{action}Result>{result}</{action}Result><ResponseMetadata><RequestId>00000000-0000-0000-0000-000000000000</RequestId></ResponseMetadata></{action}Response>"
    )
}

/// The `Action` of a form-encoded request.
fn form_action(body: &[u8]) -> String {
    body.split(|&b| b == b'&')
        .find_map(|pair| pair.strip_prefix(b"Action="))
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .unwrap_or_default()
}

async fn handle(
    req: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let target = req
        .headers()
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.strip_prefix("AmazonSQS."))
        .map(str::to_string);
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let (text, content_type) = match target {
        Some(t) => (reply(&t, &body), "application/x-amz-json-1.0"),
        None => (reply_xml(&form_action(&body), &body), "text/xml"),
    };
    let mut resp = Response::new(Full::new(Bytes::from(text)));
    resp.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static(content_type),
    );
    Ok(resp)
}

/// Starts the floor server on its own runtime with as many workers as sqsim gets.
pub(crate) fn start(workers: usize) -> std::io::Result<SocketAddr> {
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
