//! Shared test harness: an in-process sqsim on a random port, an `aws-sdk-sqs` client for it,
//! and a minimal raw HTTP/1.1 client for byte-level protocol tests.

#![allow(dead_code)]

pub(crate) mod suite;

use std::time::{Duration, Instant};

use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
use sqsim::{Config, Server};
pub(crate) use suite::{start_suite, Reach};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Starts a server with default settings on 127.0.0.1:0.
pub(crate) async fn start() -> Server {
    start_with(Config::default()).await
}

/// Starts a server with `config`; [`raw`] requests name it `sqsim.test`, which it answers to.
pub(crate) async fn start_with(mut config: Config) -> Server {
    config.security.allowed_hosts.push("sqsim.test".into());
    Server::builder()
        .config(config)
        .start()
        .await
        .expect("server starts")
}

/// An SDK client pointed at `server`.
pub(crate) fn sdk(server: &impl Reach) -> aws_sdk_sqs::Client {
    sdk_for(&server.endpoint(), "us-east-1")
}

/// An SDK client for any endpoint and region.
pub(crate) fn sdk_for(endpoint: &str, region: &str) -> aws_sdk_sqs::Client {
    sdk_with(endpoint, region, "test", "test")
}

/// An SDK client with its own access key and secret.
pub(crate) fn sdk_with(
    endpoint: &str,
    region: &str,
    key: &str,
    secret: &str,
) -> aws_sdk_sqs::Client {
    let conf = aws_sdk_sqs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new(region.to_string()))
        .credentials_provider(Credentials::new(key, secret, None, None, "static"))
        .build();
    aws_sdk_sqs::Client::from_conf(conf)
}

/// A raw HTTP response.
#[derive(Debug, Clone)]
pub(crate) struct RawResponse {
    pub status: u16,
    /// Lowercased names, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl RawResponse {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("bad JSON {e}: {}", self.body))
    }

    /// Unescaped text of the first `<tag>` element in an XML body.
    pub(crate) fn xml_text(&self, tag: &str) -> Option<String> {
        let open = format!("<{tag}>");
        let start = self.body.find(&open)? + open.len();
        let end = self.body[start..].find(&format!("</{tag}>"))? + start;
        Some(
            self.body[start..end]
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&#xD;", "\r")
                .replace("&amp;", "&"),
        )
    }
}

/// Sends one request over a fresh connection and reads the whole response.
pub(crate) async fn raw(
    server: &Server,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> RawResponse {
    let mut stream = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .expect("connect");
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: sqsim.test\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    stream.write_all(req.as_bytes()).await.expect("write");
    stream.write_all(body).await.expect("write body");
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut buf))
        .await
        .expect("response in time")
        .expect("read");
    parse_response(&buf)
}

fn parse_response(buf: &[u8]) -> RawResponse {
    let text = String::from_utf8_lossy(buf);
    let (head, body) = text.split_once("\r\n\r\n").expect("header end");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("status line");
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status code");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    RawResponse {
        status,
        headers,
        body: body.to_string(),
    }
}

/// A JSON-protocol request.
pub(crate) async fn json(server: &Server, action: &str, body: &serde_json::Value) -> RawResponse {
    raw(
        server,
        "POST",
        "/",
        &[
            ("Content-Type", "application/x-amz-json-1.0"),
            ("X-Amz-Target", &format!("AmazonSQS.{action}")),
        ],
        body.to_string().as_bytes(),
    )
    .await
}

/// A query-protocol POST with a form body (given unencoded as key/value pairs).
pub(crate) async fn query(server: &Server, pairs: &[(&str, &str)]) -> RawResponse {
    query_at(server, "/", pairs).await
}

/// A query-protocol POST to `path`.
pub(crate) async fn query_at(server: &Server, path: &str, pairs: &[(&str, &str)]) -> RawResponse {
    let body = serde_urlencoded::to_string(pairs).expect("form");
    raw(
        server,
        "POST",
        path,
        &[("Content-Type", "application/x-www-form-urlencoded")],
        body.as_bytes(),
    )
    .await
}

/// The URL a queue called `name` gets when addressed through [`raw`] (Host: sqsim.test).
pub(crate) fn raw_url(name: &str) -> String {
    format!("http://sqsim.test/000000000000/{name}")
}

/// Creates a queue through the SDK and returns its URL.
pub(crate) async fn create(client: &aws_sdk_sqs::Client, name: &str) -> String {
    client
        .create_queue()
        .queue_name(name)
        .send()
        .await
        .expect("create queue")
        .queue_url
        .expect("url")
}

/// The named attributes of a queue.
pub(crate) async fn queue_attrs(
    client: &aws_sdk_sqs::Client,
    url: &str,
    names: &[aws_sdk_sqs::types::QueueAttributeName],
) -> std::collections::HashMap<aws_sdk_sqs::types::QueueAttributeName, String> {
    client
        .get_queue_attributes()
        .queue_url(url)
        .set_attribute_names(Some(names.to_vec()))
        .send()
        .await
        .expect("get queue attributes")
        .attributes
        .unwrap_or_default()
}

/// One attribute of a queue.
pub(crate) async fn queue_attr(
    client: &aws_sdk_sqs::Client,
    url: &str,
    name: aws_sdk_sqs::types::QueueAttributeName,
) -> String {
    queue_attrs(client, url, std::slice::from_ref(&name))
        .await
        .remove(&name)
        .expect("the attribute")
}

/// Receives up to `max` messages with all system attributes.
pub(crate) async fn receive_msgs(
    client: &aws_sdk_sqs::Client,
    url: &str,
    max: i32,
    visibility: Option<i32>,
) -> Vec<aws_sdk_sqs::types::Message> {
    client
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(max)
        .set_visibility_timeout(visibility)
        .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
        .send()
        .await
        .expect("receive")
        .messages
        .unwrap_or_default()
}

/// Sends one message (body only) and returns its MessageId.
pub(crate) async fn send(
    client: &aws_sdk_sqs::Client,
    url: &str,
    body: impl Into<String>,
) -> String {
    client
        .send_message()
        .queue_url(url)
        .message_body(body)
        .send()
        .await
        .expect("send message")
        .message_id
        .expect("message id")
}

/// Sets one queue attribute, expecting success.
pub(crate) async fn set_attr(
    client: &aws_sdk_sqs::Client,
    url: &str,
    name: aws_sdk_sqs::types::QueueAttributeName,
    value: impl Into<String>,
) {
    client
        .set_queue_attributes()
        .queue_url(url)
        .attributes(name, value)
        .send()
        .await
        .expect("set queue attributes");
}

/// Points `url`'s RedrivePolicy at `dlq_arn` with maxReceiveCount `max`.
pub(crate) async fn set_redrive(client: &aws_sdk_sqs::Client, url: &str, dlq_arn: &str, max: u32) {
    set_attr(
        client,
        url,
        aws_sdk_sqs::types::QueueAttributeName::RedrivePolicy,
        format!(r#"{{"deadLetterTargetArn":"{dlq_arn}","maxReceiveCount":{max}}}"#),
    )
    .await;
}

/// Creates a queue with attributes through the SDK and returns its URL.
pub(crate) async fn create_with(
    client: &aws_sdk_sqs::Client,
    name: &str,
    attrs: &[(aws_sdk_sqs::types::QueueAttributeName, &str)],
) -> String {
    let mut req = client.create_queue().queue_name(name);
    for (k, v) in attrs {
        req = req.attributes(k.clone(), *v);
    }
    req.send()
        .await
        .expect("create queue")
        .queue_url
        .expect("url")
}

/// True when a plain ReceiveMessage (default options) returns no `Messages` field.
pub(crate) async fn receives_nothing(client: &aws_sdk_sqs::Client, url: &str) -> bool {
    client
        .receive_message()
        .queue_url(url)
        .send()
        .await
        .expect("receive")
        .messages
        .is_none()
}

/// Starts a ReceiveMessage long poll in the background; resolves to the number of messages.
pub(crate) fn spawn_long_poll(
    client: &aws_sdk_sqs::Client,
    url: &str,
    wait: i32,
) -> tokio::task::JoinHandle<usize> {
    let (c, url) = (client.clone(), url.to_string());
    tokio::spawn(async move {
        c.receive_message()
            .queue_url(&url)
            .wait_time_seconds(wait)
            .send()
            .await
            .expect("long poll")
            .messages()
            .len()
    })
}

/// The URL of a queue by name.
pub(crate) async fn queue_url(client: &aws_sdk_sqs::Client, name: &str) -> String {
    client
        .get_queue_url()
        .queue_name(name)
        .send()
        .await
        .expect("get queue url")
        .queue_url
        .expect("url")
}

/// A queue's tags.
pub(crate) async fn queue_tags(
    client: &aws_sdk_sqs::Client,
    url: &str,
) -> std::collections::HashMap<String, String> {
    client
        .list_queue_tags()
        .queue_url(url)
        .send()
        .await
        .expect("list tags")
        .tags
        .expect("tags")
}

/// [ApproximateNumberOfMessages, ApproximateNumberOfMessagesNotVisible] of a queue.
pub(crate) async fn message_counts(client: &aws_sdk_sqs::Client, url: &str) -> [String; 2] {
    use aws_sdk_sqs::types::QueueAttributeName as N;
    let mut a = queue_attrs(
        client,
        url,
        &[
            N::ApproximateNumberOfMessages,
            N::ApproximateNumberOfMessagesNotVisible,
        ],
    )
    .await;
    [
        a.remove(&N::ApproximateNumberOfMessages).expect("visible"),
        a.remove(&N::ApproximateNumberOfMessagesNotVisible)
            .expect("not visible"),
    ]
}

/// The newest move task of `source_arn`.
pub(crate) async fn newest_task(
    client: &aws_sdk_sqs::Client,
    source_arn: &str,
) -> aws_sdk_sqs::types::ListMessageMoveTasksResultEntry {
    client
        .list_message_move_tasks()
        .source_arn(source_arn)
        .send()
        .await
        .unwrap()
        .results()[0]
        .clone()
}

/// Waits (in real time, until `deadline`) until the newest move task of `source_arn`
/// satisfies `done`.
pub(crate) async fn wait_task_until(
    client: &aws_sdk_sqs::Client,
    source_arn: &str,
    deadline: Instant,
    done: impl Fn(&aws_sdk_sqs::types::ListMessageMoveTasksResultEntry) -> bool,
) -> aws_sdk_sqs::types::ListMessageMoveTasksResultEntry {
    loop {
        let t = newest_task(client, source_arn).await;
        if done(&t) {
            return t;
        }
        assert!(Instant::now() < deadline, "task stuck: {t:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits (in real time, up to 20 s) until the newest move task of `source_arn` satisfies `done`.
pub(crate) async fn wait_task(
    client: &aws_sdk_sqs::Client,
    source_arn: &str,
    done: impl Fn(&aws_sdk_sqs::types::ListMessageMoveTasksResultEntry) -> bool,
) -> aws_sdk_sqs::types::ListMessageMoveTasksResultEntry {
    wait_task_until(
        client,
        source_arn,
        Instant::now() + Duration::from_secs(20),
        done,
    )
    .await
}

/// Starts a move task out of `source_arn` at `per_second` messages a second, to
/// `destination_arn` (or, without one, back to the queues it came from).
pub(crate) async fn start_move_task(
    client: &aws_sdk_sqs::Client,
    source_arn: &str,
    destination_arn: Option<&str>,
    per_second: i32,
) -> aws_sdk_sqs::operation::start_message_move_task::StartMessageMoveTaskOutput {
    client
        .start_message_move_task()
        .source_arn(source_arn)
        .set_destination_arn(destination_arn.map(str::to_string))
        .max_number_of_messages_per_second(per_second)
        .send()
        .await
        .unwrap()
}

/// The `sqsim` binary in its own process, for what an in-process server cannot show (signals,
/// a process's open-file limit, its memory): killed when dropped unless it already exited.
pub(crate) struct Process {
    pub child: std::process::Child,
    /// Where it listens (`127.0.0.1:port`).
    pub addr: std::net::SocketAddr,
}

impl Process {
    /// Starts `sqsim --host 127.0.0.1 --port 0 --log-level warn` and reads its address off
    /// the first line it prints.
    pub(crate) fn start() -> Process {
        Process::start_with(&[])
    }

    /// [`Process::start`] with more flags.
    pub(crate) fn start_with(flags: &[&str]) -> Process {
        use std::io::BufRead;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sqsim"))
            .args(["--host", "127.0.0.1", "--port", "0", "--log-level", "warn"])
            .args(flags)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start sqsim");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("sqsim's listen line");
        let addr = line
            .trim()
            .rsplit("http://")
            .next()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        Process { child, addr }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
