//! `sqsim worker` against a real sqsim and a real HTTP application on loopback.

use crate::common;

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::{MessageAttributeValue, QueueAttributeName};
use bytes::Bytes;
use common::{create, sdk, start};
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use sqsim::worker::{WorkerOptions, WorkerQueue, WorkerStats};
use tokio::sync::oneshot;

/// One request the app received.
#[derive(Debug, Clone)]
struct Seen {
    headers: HashMap<String, String>,
    body: String,
}

/// What the app answers: (status, delay, extra headers), by message body.
type Behaviour = Arc<dyn Fn(&str) -> (u16, Duration, Vec<(&'static str, String)>) + Send + Sync>;

#[derive(Clone)]
struct App {
    seen: Arc<Mutex<Vec<Seen>>>,
    now: Arc<AtomicUsize>,
    max: Arc<AtomicUsize>,
    url: String,
}

async fn start_app(behaviour: Behaviour) -> App {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let app = App {
        seen: Arc::default(),
        now: Arc::default(),
        max: Arc::default(),
        url: format!("http://{}/work", listener.local_addr().unwrap()),
    };
    let a = app.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (a, behaviour) = (a.clone(), behaviour.clone());
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    let (a, behaviour) = (a.clone(), behaviour.clone());
                    async move {
                        let n = a.now.fetch_add(1, Ordering::SeqCst) + 1;
                        a.max.fetch_max(n, Ordering::SeqCst);
                        let headers = req
                            .headers()
                            .iter()
                            .map(|(k, v)| {
                                (k.to_string(), v.to_str().unwrap_or_default().to_string())
                            })
                            .collect();
                        let body = String::from_utf8(
                            req.into_body().collect().await.unwrap().to_bytes().to_vec(),
                        )
                        .unwrap();
                        let (status, delay, extra) = behaviour(&body);
                        a.seen.lock().unwrap().push(Seen { headers, body });
                        tokio::time::sleep(delay).await;
                        a.now.fetch_sub(1, Ordering::SeqCst);
                        let mut resp = Response::new(Full::new(Bytes::from_static(b"ok")));
                        *resp.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
                        for (k, v) in extra {
                            resp.headers_mut().insert(k, v.parse().unwrap());
                        }
                        Ok::<_, Infallible>(resp)
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    app
}

fn options(app: &App, urls: &[&str]) -> WorkerOptions {
    WorkerOptions {
        queues: urls
            .iter()
            .map(|u| WorkerQueue {
                url: u.to_string(),
                weight: 1,
            })
            .collect(),
        http_url: app.url.clone(),
        wait_time: 1,
        ..WorkerOptions::default()
    }
}

/// Runs the worker until the returned sender fires.
fn spawn_worker(
    sqs: aws_sdk_sqs::Client,
    opts: WorkerOptions,
) -> (
    oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
    Arc<WorkerStats>,
) {
    let stats = Arc::new(WorkerStats::default());
    let (tx, rx) = oneshot::channel();
    let s = stats.clone();
    let handle = tokio::spawn(async move {
        sqsim::worker::run(sqs, opts, s, async {
            let _ = rx.await;
        })
        .await
    });
    (tx, handle, stats)
}

async fn until(what: &str, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn visible(c: &aws_sdk_sqs::Client, url: &str) -> String {
    c.get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap()
        .into_iter()
        .map(|(k, v)| format!("{}={v}", k.as_str()))
        .collect::<Vec<_>>()
        .join(",")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posts_with_sqsd_headers_and_deletes_on_2xx() {
    let server = start().await;
    let c = sdk(&server);
    let url = create(&c, "jobs").await;
    let app = start_app(Arc::new(|_| (200, Duration::ZERO, vec![]))).await;
    let sent = c
        .send_message()
        .queue_url(&url)
        .message_body(r#"{"task":"resize"}"#)
        .message_attributes(
            "customer",
            MessageAttributeValue::builder()
                .data_type("String")
                .string_value("acme")
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    let (stop, handle, stats) = spawn_worker(c.clone(), options(&app, &[&url]));
    until("a delivery", || stats.delivered.load(Ordering::SeqCst) == 1).await;
    let seen = app.seen.lock().unwrap()[0].clone();
    assert_eq!(seen.body, r#"{"task":"resize"}"#);
    let h = &seen.headers;
    assert!(h["user-agent"].starts_with("aws-sqsd/"));
    assert_eq!(h["content-type"], "application/json");
    assert_eq!(h["x-aws-sqsd-msgid"], sent.message_id().unwrap());
    assert_eq!(h["x-aws-sqsd-queue"], "jobs");
    assert_eq!(h["x-aws-sqsd-receive-count"], "1");
    assert_eq!(h["x-aws-sqsd-sender-id"], "000000000000");
    assert_eq!(h["x-aws-sqsd-attr-customer"], "acme");
    assert!(
        h["x-aws-sqsd-first-received-at"].ends_with('Z')
            && h["x-aws-sqsd-first-received-at"].contains('T')
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        visible(&c, &url)
            .await
            .split(',')
            .filter(|p| p.ends_with("=0"))
            .count(),
        2,
        "deleted"
    );
    stop.send(()).unwrap();
    handle.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_use_the_error_visibility_timeout_and_end_in_the_dlq() {
    let server = start().await;
    server.clock().freeze();
    let c = sdk(&server);
    let dlq = create(&c, "dlq").await;
    let url = create(&c, "flaky").await;
    let dlq_arn = c
        .get_queue_attributes()
        .queue_url(&dlq)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap()[&QueueAttributeName::QueueArn]
        .clone();
    common::set_redrive(&c, &url, &dlq_arn, 2).await;
    let app = start_app(Arc::new(|_| (500, Duration::ZERO, vec![]))).await;
    common::send(&c, &url, "boom").await;
    let opts = WorkerOptions {
        error_visibility_timeout: Some(60),
        ..options(&app, &[&url])
    };
    let (stop, handle, stats) = spawn_worker(c.clone(), opts);
    until("the first failure", || {
        stats.failed.load(Ordering::SeqCst) == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        app.seen.lock().unwrap().len(),
        1,
        "hidden for the error visibility timeout"
    );
    server.advance_clock(Duration::from_secs(60));
    until("the second failure", || {
        stats.failed.load(Ordering::SeqCst) == 2
    })
    .await;
    assert_eq!(
        app.seen.lock().unwrap()[1].headers["x-aws-sqsd-receive-count"],
        "2"
    );
    server.advance_clock(Duration::from_secs(60));
    // The third receive moves it to the DLQ instead.
    let start = Instant::now();
    while common::message_counts(&c, &dlq).await != ["1", "0"] {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting for the dead letter"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.send(()).unwrap();
    handle.await.unwrap();
    assert_eq!(app.seen.lock().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_app_trips_the_inactivity_timeout_and_retry_after_is_honoured() {
    let server = start().await;
    server.clock().freeze();
    let c = sdk(&server);
    let url = create(&c, "slow").await;
    let app = start_app(Arc::new(|body| match body {
        "hang" => (200, Duration::from_secs(30), vec![]),
        _ => (
            503,
            Duration::ZERO,
            vec![("retry-after", "120".to_string())],
        ),
    }))
    .await;
    common::send(&c, &url, "hang").await;
    common::send(&c, &url, "later").await;
    let opts = WorkerOptions {
        inactivity_timeout: Duration::from_millis(300),
        error_visibility_timeout: Some(5),
        ..options(&app, &[&url])
    };
    let (stop, handle, stats) = spawn_worker(c.clone(), opts);
    until("two failures", || stats.failed.load(Ordering::SeqCst) == 2).await;
    let path = format!(
        "/_sqsim/peek?queue_url={}",
        url.replace(':', "%3A").replace('/', "%2F")
    );
    let peek = common::raw(&server, "GET", &path, &[], b"").await.json();
    let now = server.clock().now_ms();
    let until_of = |body: &str| {
        peek["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["body"] == body)
            .unwrap()["until_ms"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(
        until_of("hang"),
        now + 5_000,
        "error visibility timeout after the inactivity timeout"
    );
    assert_eq!(until_of("later"), now + 120_000, "Retry-After from the app");
    stop.send(()).unwrap();
    handle.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_heartbeat_keeps_a_long_job_from_being_delivered_twice() {
    let server = start().await;
    let c = sdk(&server);
    let url = create(&c, "long").await;
    let app = start_app(Arc::new(|_| (200, Duration::from_secs(3), vec![]))).await;
    common::send(&c, &url, "long job").await;
    // A 3-second job with a 1-second visibility timeout: without the heartbeat it would be
    // received again twice.
    let opts = WorkerOptions {
        visibility_timeout: 1,
        ..options(&app, &[&url])
    };
    let (stop, handle, stats) = spawn_worker(c.clone(), opts);
    until("the delivery", || {
        stats.delivered.load(Ordering::SeqCst) == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(app.seen.lock().unwrap().len(), 1, "delivered exactly once");
    stop.send(()).unwrap();
    handle.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_connections_is_never_exceeded() {
    let server = start().await;
    let c = sdk(&server);
    let url = create(&c, "many").await;
    let app = start_app(Arc::new(|_| (200, Duration::from_millis(30), vec![]))).await;
    for i in 0..40 {
        common::send(&c, &url, format!("m{i}")).await;
    }
    let opts = WorkerOptions {
        http_connections: 3,
        ..options(&app, &[&url])
    };
    let (stop, handle, stats) = spawn_worker(c.clone(), opts);
    until("all deliveries", || {
        stats.delivered.load(Ordering::SeqCst) == 40
    })
    .await;
    assert!(
        app.max.load(Ordering::SeqCst) <= 3,
        "max concurrent {}",
        app.max.load(Ordering::SeqCst)
    );
    assert_eq!(app.max.load(Ordering::SeqCst), 3, "and the slots were used");
    stop.send(()).unwrap();
    handle.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_mid_job_releases_the_message_at_once() {
    let server = start().await;
    let c = sdk(&server);
    let url = create(&c, "stuck").await;
    let app = start_app(Arc::new(|_| (200, Duration::from_secs(60), vec![]))).await;
    common::send(&c, &url, "unfinished").await;
    let opts = WorkerOptions {
        shutdown_timeout: Duration::from_millis(200),
        ..options(&app, &[&url])
    };
    let (stop, handle, stats) = spawn_worker(c.clone(), opts);
    until("the job to start", || app.seen.lock().unwrap().len() == 1).await;
    stop.send(()).unwrap();
    handle.await.unwrap();
    assert_eq!(stats.released.load(Ordering::SeqCst), 1);
    let again = c.receive_message().queue_url(&url).send().await.unwrap();
    assert_eq!(
        again.messages()[0].body(),
        Some("unfinished"),
        "visible again without waiting"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weights_shape_the_mix_under_a_flood() {
    let server = start().await;
    let c = sdk(&server);
    let fast = create(&c, "realtime").await;
    let slow = create(&c, "batch").await;
    for q in [&fast, &slow] {
        for chunk in 0..10 {
            let entries = (0..10)
                .map(|i| {
                    aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                        .id(format!("e{i}"))
                        .message_body(format!("{chunk}-{i}"))
                        .build()
                        .unwrap()
                })
                .collect();
            c.send_message_batch()
                .queue_url(q)
                .set_entries(Some(entries))
                .send()
                .await
                .unwrap();
        }
    }
    let app = start_app(Arc::new(|_| (200, Duration::from_millis(5), vec![]))).await;
    let mut opts = options(&app, &[&fast, &slow]);
    opts.queues[0].weight = 3;
    opts.http_connections = 10;
    let (stop, handle, stats) = spawn_worker(c.clone(), opts);
    until("80 deliveries", || {
        stats.delivered.load(Ordering::SeqCst) >= 80
    })
    .await;
    stop.send(()).unwrap();
    handle.await.unwrap();
    let seen = app.seen.lock().unwrap();
    let first: Vec<_> = seen
        .iter()
        .take(80)
        .map(|s| s.headers["x-aws-sqsd-queue"].clone())
        .collect();
    let realtime = first.iter().filter(|q| *q == "realtime").count();
    assert!(
        (52..=68).contains(&realtime),
        "3:1 weights gave {realtime} of 80 from realtime"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_tasks_post_on_schedule_with_sqsd_headers() {
    let server = start().await;
    let c = sdk(&server);
    let url = create(&c, "quiet").await;
    let app = start_app(Arc::new(|_| (200, Duration::ZERO, vec![]))).await;
    // Every second (a leading seconds field), so the test need not wait for a minute.
    let tasks = sqsim::worker::cron::parse(
        "version: 1\ncron:\n - name: \"tick\"\n   url: \"/tick\"\n   schedule: \"* * * * * *\"\n",
    )
    .unwrap();
    let opts = WorkerOptions {
        cron: tasks,
        ..options(&app, &[&url])
    };
    let (stop, handle, _) = spawn_worker(c.clone(), opts);
    until("a periodic task", || !app.seen.lock().unwrap().is_empty()).await;
    stop.send(()).unwrap();
    handle.await.unwrap();
    let seen = app.seen.lock().unwrap()[0].clone();
    assert_eq!(seen.headers["x-aws-sqsd-taskname"], "tick");
    let at = &seen.headers["x-aws-sqsd-scheduled-at"];
    assert!(at.len() == 20 && at.ends_with('Z'), "{at}");
    assert!(seen.headers["user-agent"].starts_with("aws-sqsd/"));
    assert_eq!(seen.body, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_fill_or_wait_for_the_window() {
    let server = start().await;
    server.clock().freeze();
    let c = sdk(&server);
    let url = create(&c, "batched").await;
    let app = start_app(Arc::new(|_| (200, Duration::ZERO, vec![]))).await;
    for b in ["one", "two", "three"] {
        common::send(&c, &url, b).await;
    }
    let opts = WorkerOptions {
        batch_size: 3,
        batch_window: Duration::from_millis(500),
        ..options(&app, &[&url])
    };
    let (stop, handle, stats) = spawn_worker(c.clone(), opts);
    until("a full batch", || {
        stats.delivered.load(Ordering::SeqCst) == 3
    })
    .await;
    {
        let seen = app.seen.lock().unwrap();
        assert_eq!(seen.len(), 1, "three messages, one POST");
        let arr: Vec<serde_json::Value> = serde_json::from_str(&seen[0].body).unwrap();
        let mut bodies: Vec<_> = arr
            .iter()
            .map(|m| m["body"].as_str().unwrap().to_string())
            .collect();
        bodies.sort();
        assert_eq!(bodies, ["one", "three", "two"]);
        assert_eq!(seen[0].headers["x-aws-sqsd-batch-size"], "3");
        assert_eq!(seen[0].headers["content-type"], "application/json");
    }
    // A lone message goes out when the window closes.
    let started = Instant::now();
    common::send(&c, &url, "alone").await;
    until("the lone batch", || {
        stats.delivered.load(Ordering::SeqCst) == 4
    })
    .await;
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "waited for the window"
    );
    assert_eq!(app.seen.lock().unwrap().len(), 2);
    stop.send(()).unwrap();
    handle.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_answer_can_retry_single_messages() {
    let server = start().await;
    server.clock().freeze();
    let c = sdk(&server);
    let url = create(&c, "picky").await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let app_url = format!("http://{}/", listener.local_addr().unwrap());
    // An app that retries "again" for 60 s (named twice: the first mention counts) and
    // acknowledges everything else.
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(
                    |req: Request<hyper::body::Incoming>| async move {
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let arr: Vec<serde_json::Value> = serde_json::from_slice(&body).unwrap();
                        let mut results = Vec::new();
                        for m in &arr {
                            if m["body"] == "again" {
                                results.push(serde_json::json!({"messageId": m["messageId"], "status": "retry", "delaySeconds": 60}));
                                results.push(serde_json::json!({"messageId": m["messageId"], "status": "ack"}));
                            }
                        }
                        let reply = serde_json::json!({"results": results}).to_string();
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(reply))))
                    },
                );
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    for b in ["fine", "again"] {
        common::send(&c, &url, b).await;
    }
    let opts = WorkerOptions {
        queues: vec![WorkerQueue {
            url: url.clone(),
            weight: 1,
        }],
        http_url: app_url,
        wait_time: 1,
        batch_size: 2,
        batch_window: Duration::from_millis(300),
        ..WorkerOptions::default()
    };
    let (stop, handle, stats) = spawn_worker(c.clone(), opts);
    until("the batch answer", || {
        stats.failed.load(Ordering::SeqCst) == 1
    })
    .await;
    stop.send(()).unwrap();
    handle.await.unwrap();
    assert_eq!(stats.delivered.load(Ordering::SeqCst), 1);
    let path = format!(
        "/_sqsim/peek?queue_url={}",
        url.replace(':', "%3A").replace('/', "%2F")
    );
    let peek = common::raw(&server, "GET", &path, &[], b"").await.json();
    let msgs = peek["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 1, "the acknowledged one was deleted");
    assert_eq!(msgs[0]["body"], "again");
    assert_eq!(
        msgs[0]["until_ms"].as_u64().unwrap(),
        server.clock().now_ms() + 60_000
    );
}
