//! A keep-alive HTTP/1.1 SQS client for load generation: requests are prebuilt bytes in
//! either protocol, and replies are scanned for the few fields the scenarios need.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::Request;
use hyper_util::rt::TokioIo;

/// Which wire protocol to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Proto {
    Json,
    Query,
}

impl Proto {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Proto::Json => "json",
            Proto::Query => "query",
        }
    }
}

/// A prebuilt request.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    target: Option<&'static str>,
    body: Bytes,
}

/// Builds SQS requests in one protocol.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Api(pub Proto);

fn form(pairs: &[(String, String)]) -> Bytes {
    Bytes::from(serde_urlencoded::to_string(pairs).unwrap_or_default())
}

fn pair(k: impl Into<String>, v: impl Into<String>) -> (String, String) {
    (k.into(), v.into())
}

impl Api {
    fn call(
        &self,
        action: &'static str,
        json: serde_json::Value,
        query: Vec<(String, String)>,
    ) -> Call {
        match self.0 {
            Proto::Json => Call {
                target: Some(action),
                body: Bytes::from(json.to_string()),
            },
            Proto::Query => {
                let mut q = vec![pair("Action", action), pair("Version", "2012-11-05")];
                q.extend(query);
                Call {
                    target: None,
                    body: form(&q),
                }
            }
        }
    }

    pub(crate) fn create_queue(&self, name: &str, fifo: bool) -> Call {
        let mut attrs = serde_json::Map::new();
        let mut q = vec![pair("QueueName", name)];
        if fifo {
            attrs.insert("FifoQueue".into(), "true".into());
            attrs.insert("ContentBasedDeduplication".into(), "true".into());
            q.extend([
                pair("Attribute.1.Name", "FifoQueue"),
                pair("Attribute.1.Value", "true"),
                pair("Attribute.2.Name", "ContentBasedDeduplication"),
                pair("Attribute.2.Value", "true"),
            ]);
        }
        self.call(
            "CreateQueue",
            serde_json::json!({"QueueName": name, "Attributes": attrs}),
            q,
        )
    }

    /// GetQueueAttributes for ApproximateNumberOfMessages.
    pub(crate) fn queue_size(&self, url: &str) -> Call {
        self.call(
            "GetQueueAttributes",
            serde_json::json!({"QueueUrl": url, "AttributeNames": ["ApproximateNumberOfMessages"]}),
            vec![
                pair("QueueUrl", url),
                pair("AttributeName.1", "ApproximateNumberOfMessages"),
            ],
        )
    }

    pub(crate) fn delete_queue(&self, url: &str) -> Call {
        self.call(
            "DeleteQueue",
            serde_json::json!({"QueueUrl": url}),
            vec![pair("QueueUrl", url)],
        )
    }

    pub(crate) fn send(&self, url: &str, body: &str, group: Option<&str>) -> Call {
        let mut j = serde_json::json!({"QueueUrl": url, "MessageBody": body});
        let mut q = vec![pair("QueueUrl", url), pair("MessageBody", body)];
        if let Some(g) = group {
            j["MessageGroupId"] = g.into();
            q.push(pair("MessageGroupId", g));
        }
        self.call("SendMessage", j, q)
    }

    /// `bodies` with optional group ids.
    pub(crate) fn send_batch(&self, url: &str, bodies: &[(String, Option<String>)]) -> Call {
        let mut entries = Vec::new();
        let mut q = vec![pair("QueueUrl", url)];
        for (i, (b, g)) in bodies.iter().enumerate() {
            let mut e = serde_json::json!({"Id": format!("m{i}"), "MessageBody": b});
            let p = format!("SendMessageBatchRequestEntry.{}", i + 1);
            q.push(pair(format!("{p}.Id"), format!("m{i}")));
            q.push(pair(format!("{p}.MessageBody"), b.clone()));
            if let Some(g) = g {
                e["MessageGroupId"] = g.clone().into();
                q.push(pair(format!("{p}.MessageGroupId"), g.clone()));
            }
            entries.push(e);
        }
        self.call(
            "SendMessageBatch",
            serde_json::json!({"QueueUrl": url, "Entries": entries}),
            q,
        )
    }

    pub(crate) fn receive(&self, url: &str, max: u32, wait: u32) -> Call {
        self.call(
            "ReceiveMessage",
            serde_json::json!({"QueueUrl": url, "MaxNumberOfMessages": max, "WaitTimeSeconds": wait}),
            vec![
                pair("QueueUrl", url),
                pair("MaxNumberOfMessages", max.to_string()),
                pair("WaitTimeSeconds", wait.to_string()),
            ],
        )
    }

    pub(crate) fn delete(&self, url: &str, handle: &str) -> Call {
        self.call(
            "DeleteMessage",
            serde_json::json!({"QueueUrl": url, "ReceiptHandle": handle}),
            vec![pair("QueueUrl", url), pair("ReceiptHandle", handle)],
        )
    }

    pub(crate) fn delete_batch(&self, url: &str, handles: &[String]) -> Call {
        let entries: Vec<_> = handles
            .iter()
            .enumerate()
            .map(|(i, h)| serde_json::json!({"Id": format!("d{i}"), "ReceiptHandle": h}))
            .collect();
        let mut q = vec![pair("QueueUrl", url)];
        for (i, h) in handles.iter().enumerate() {
            let p = format!("DeleteMessageBatchRequestEntry.{}", i + 1);
            q.push(pair(format!("{p}.Id"), format!("d{i}")));
            q.push(pair(format!("{p}.ReceiptHandle"), h.clone()));
        }
        self.call(
            "DeleteMessageBatch",
            serde_json::json!({"QueueUrl": url, "Entries": entries}),
            q,
        )
    }
}

/// A SigV4-shaped Authorization header (nobody checks the signature).
const AUTHORIZATION: &str = "AWS4-HMAC-SHA256 Credential=bench/20240101/us-east-1/sqs/aws4_request, SignedHeaders=host;x-amz-date, Signature=0000000000000000000000000000000000000000000000000000000000000000";

/// One keep-alive connection.
pub(crate) struct Conn {
    sender: SendRequest<Full<Bytes>>,
    host: String,
}

impl Conn {
    /// Connects to `host:port`.
    pub(crate) async fn connect(addr: &str) -> std::io::Result<Conn> {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(std::io::Error::other)?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn {
            sender,
            host: addr.to_string(),
        })
    }

    /// Sends a call; returns the status and body. A connection the server closed (some peers
    /// do after a while) is reopened once.
    pub(crate) async fn send(&mut self, call: &Call) -> std::io::Result<(u16, Bytes)> {
        match self.send_once(call).await {
            Ok(r) => Ok(r),
            Err(_) => {
                *self = Conn::connect(&self.host).await?;
                self.send_once(call).await
            }
        }
    }

    async fn send_once(&mut self, call: &Call) -> std::io::Result<(u16, Bytes)> {
        // Real SDKs sign every request; peers such as moto route on the credential scope.
        let mut req = Request::post("/")
            .header("host", &self.host)
            .header("authorization", AUTHORIZATION);
        req = match call.target {
            Some(t) => req
                .header("content-type", "application/x-amz-json-1.0")
                .header("x-amz-target", format!("AmazonSQS.{t}")),
            None => req.header("content-type", "application/x-www-form-urlencoded"),
        };
        let req = req
            .body(Full::new(call.body.clone()))
            .map_err(std::io::Error::other)?;
        self.exchange(req).await
    }

    /// A GET, for health checks.
    pub(crate) async fn get(&mut self, path: &str) -> std::io::Result<u16> {
        Ok(self.get_body(path).await?.0)
    }

    async fn get_body(&mut self, path: &str) -> std::io::Result<(u16, Bytes)> {
        let req = Request::get(path)
            .header("host", &self.host)
            .body(Full::new(Bytes::new()))
            .map_err(std::io::Error::other)?;
        self.exchange(req).await
    }

    /// GET `path` and parse the reply as JSON.
    pub(crate) async fn get_json(&mut self, path: &str) -> Option<serde_json::Value> {
        let (_, body) = self.get_body(path).await.ok()?;
        serde_json::from_slice(&body).ok()
    }

    /// Sends a request and reads the whole response.
    async fn exchange(&mut self, req: Request<Full<Bytes>>) -> std::io::Result<(u16, Bytes)> {
        self.sender.ready().await.map_err(std::io::Error::other)?;
        let resp = self
            .sender
            .send_request(req)
            .await
            .map_err(std::io::Error::other)?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(std::io::Error::other)?
            .to_bytes();
        Ok((status, body))
    }
}

/// Every value of `field` in a reply of either protocol. JSON is scanned rather than parsed,
/// tolerating whitespace after the colon (other servers pretty-print); the fields the bench
/// reads (handles, URLs, bodies it wrote) need no unescaping.
pub(crate) fn fields(body: &[u8], field: &str, proto: Proto) -> Vec<String> {
    let text = String::from_utf8_lossy(body);
    let (open, close) = match proto {
        Proto::Json => (format!("\"{field}\""), "\""),
        Proto::Query => (format!("<{field}>"), ""),
    };
    let xml_close = format!("</{field}>");
    let mut out = Vec::new();
    let mut rest = &text[..];
    while let Some(i) = rest.find(&open) {
        rest = &rest[i + open.len()..];
        if proto == Proto::Json {
            let trimmed = rest.trim_start();
            let Some(after_colon) = trimmed.strip_prefix(':') else {
                continue;
            };
            let Some(value) = after_colon.trim_start().strip_prefix('"') else {
                continue;
            };
            rest = value;
        }
        let end = if proto == Proto::Json {
            close
        } else {
            xml_close.as_str()
        };
        match rest.find(end) {
            Some(j) => {
                out.push(rest[..j].to_string());
                rest = &rest[j..];
            }
            None => break,
        }
    }
    out
}
