//! The accept loop against raw connections: a request that panics ends only itself.

use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// One request over a fresh connection: (status line, body).
async fn request(addr: SocketAddr, head: &str, body: &str) -> (String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "{head}\r\nHost: t\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

/// A handler that panics while holding every queue's lock when asked to (path `/panic`):
/// the panicking request gets a 500 in its protocol, other requests and connections go
/// on, and the queue it broke in is still usable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_request_ends_only_itself() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = Arc::new(AppState::open(Config::default(), Arc::default(), addr).unwrap());
    let (tx, rx) = oneshot::channel::<()>();
    let server = tokio::spawn(serve_with(
        listener.into(),
        Arc::clone(&state),
        async {
            let _ = rx.await;
        },
        |state: Arc<AppState>, req: hyper::Request<crate::http::RequestBody>| async move {
            if req.uri().path() == "/panic" {
                for q in state.engine.all_queues() {
                    q.update_tags(|_| -> () { panic!("a bug while holding the lock") });
                }
            }
            router::handle(state, req).await
        },
    ));
    let json = |action: &str| {
        format!("POST / HTTP/1.1\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: AmazonSQS.{action}")
    };
    let (status, _) = request(addr, &json("CreateQueue"), r#"{"QueueName":"q"}"#).await;
    assert!(status.contains(" 200 "), "{status}");

    let (status, body) = request(
        addr,
        "POST /panic HTTP/1.1\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: AmazonSQS.ListQueues",
        "{}",
    )
    .await;
    assert!(status.contains(" 500 "), "{status}");
    assert!(body.contains("InternalFailure"), "{body}");
    let (status, body) = request(addr, "GET /panic?Action=ListQueues HTTP/1.1", "").await;
    assert!(status.contains(" 500 "), "{status}");
    assert!(body.contains("<Code>InternalFailure</Code>"), "{body}");

    // The lock the panic held is usable: tags, sends and receives on that queue work.
    let url = format!("http://{addr}/000000000000/q");
    let (status, body) = request(
        addr,
        &json("TagQueue"),
        &format!(r#"{{"QueueUrl":"{url}","Tags":{{"k":"v"}}}}"#),
    )
    .await;
    assert!(status.contains(" 200 "), "{status} {body}");
    let (status, _) = request(
        addr,
        &json("SendMessage"),
        &format!(r#"{{"QueueUrl":"{url}","MessageBody":"after"}}"#),
    )
    .await;
    assert!(status.contains(" 200 "), "{status}");
    let (_, body) = request(
        addr,
        &json("ReceiveMessage"),
        &format!(r#"{{"QueueUrl":"{url}"}}"#),
    )
    .await;
    assert!(body.contains("\"after\""), "{body}");
    let (_, body) = request(
        addr,
        &json("ListQueueTags"),
        &format!(r#"{{"QueueUrl":"{url}"}}"#),
    )
    .await;
    assert!(body.contains("\"k\":\"v\""), "{body}");

    let _ = tx.send(());
    server.await.unwrap();
}
