//! Batch delivery (`--batch-size N --batch-window S`): up to N messages in one POST, as a JSON
//! array, sent when N are ready or S seconds after the first arrived. The application answers
//! 2xx to acknowledge all, non-2xx to retry all, or a 2xx JSON body naming messages:
//! `{"results": [{"messageId": "…", "status": "ack" | "retry", "delaySeconds": 30}]}`. A
//! message named twice counts by its first mention; one not named is acknowledged.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, Message};
use bytes::Bytes;
use http_body_util::Full;
use hyper::Request;
use serde_json::{json, Value};

use super::{jitter, queue_name, receive_count, retry_delay, Job};
use crate::worker::deliver::{exchange, Answer, USER_AGENT};

/// Receives until `opts.batch_size` messages are in hand or the window after the first one
/// has passed. Each message is recorded as unfinished as soon as it arrives.
pub(super) async fn gather(job: &Job, wait: i32) -> Vec<Message> {
    let opts = &job.opts;
    let mut batch: Vec<Message> = Vec::new();
    let mut deadline: Option<Instant> = None;
    while batch.len() < opts.batch_size {
        let wait_s = match deadline {
            None => wait,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                left.as_secs().min(20) as i32
            }
        };
        let Some(messages) = job.receive(opts.batch_size - batch.len(), wait_s).await else {
            if batch.is_empty() {
                tokio::time::sleep(Duration::from_secs(1)).await;
                return batch;
            }
            continue;
        };
        if messages.is_empty() {
            match deadline {
                None => return batch,
                // Short polls inside a sub-second window: do not spin.
                Some(d) if wait_s == 0 => {
                    let left = d.saturating_duration_since(Instant::now());
                    tokio::time::sleep(left.min(Duration::from_millis(25))).await;
                }
                Some(_) => {}
            }
            continue;
        }
        deadline.get_or_insert_with(|| Instant::now() + opts.batch_window);
        job.track(&messages);
        batch.extend(messages);
    }
    batch
}

fn message_json(m: &Message) -> Value {
    let attrs: HashMap<&str, &str> = m
        .attributes()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let message_attributes: serde_json::Map<String, Value> = m
        .message_attributes()
        .into_iter()
        .flatten()
        .map(|(name, v)| {
            let mut value = json!({"DataType": v.data_type()});
            if let Some((member, text)) = crate::worker::deliver::attribute_text(v) {
                value[member] = Value::String(text);
            }
            (name.clone(), value)
        })
        .collect();
    json!({
        "messageId": m.message_id(),
        "body": m.body(),
        "attributes": attrs,
        "messageAttributes": message_attributes,
    })
}

/// What the application decided for each message: `None` acknowledges, `Some(delay)` retries
/// (`Some(None)`: with the worker's own retry rules).
fn decisions(msgs: &[Message], answer: &Answer) -> Vec<Option<Option<u32>>> {
    let (status, retry_after, body) = match answer {
        Answer::Replied {
            status,
            retry_after,
            body,
        } => (*status, *retry_after, body),
        _ => return vec![Some(None); msgs.len()],
    };
    if !(200..300).contains(&status) {
        return vec![Some(retry_after); msgs.len()];
    }
    let mut verdicts: HashMap<String, Option<Option<u32>>> = HashMap::new();
    if let Ok(doc) = serde_json::from_slice::<Value>(body) {
        for r in doc["results"].as_array().into_iter().flatten() {
            let Some(id) = r["messageId"].as_str() else {
                continue;
            };
            let verdict = match r["status"].as_str() {
                Some("retry") => Some(delay_seconds(&r["delaySeconds"])),
                _ => None,
            };
            verdicts.entry(id.to_string()).or_insert(verdict);
        }
    }
    msgs.iter()
        .map(|m| {
            verdicts
                .get(m.message_id().unwrap_or_default())
                .cloned()
                .unwrap_or(None)
        })
        .collect()
}

/// The app's `delaySeconds`, clamped to what a visibility timeout can be (0 to 12 hours):
/// a negative number retries at once, a huge one waits the longest SQS allows. Anything but
/// a number leaves the delay to the worker's own retry rules.
fn delay_seconds(v: &Value) -> Option<u32> {
    let cap = super::VISIBILITY_CAP.as_secs();
    if let Some(d) = v.as_u64() {
        return Some(u32::try_from(d.min(cap)).unwrap_or(u32::MAX));
    }
    if v.as_i64().is_some() {
        return Some(0);
    }
    let d = v.as_f64()?;
    // NaN cannot come from JSON; `as` saturates, and the clamp keeps it within the cap.
    Some(d.clamp(0.0, cap as f64).round() as u32)
}

impl Job {
    /// POSTs a batch and acts on the answer, keeping the messages hidden meanwhile.
    pub(super) async fn process_batch(self, msgs: Vec<Message>) {
        let started = Instant::now();
        let handles: Vec<String> = msgs
            .iter()
            .map(|m| m.receipt_handle().unwrap_or_default().to_string())
            .collect();
        self.stats
            .in_flight
            .fetch_add(msgs.len() as u64, std::sync::atomic::Ordering::Relaxed);
        let body = Value::Array(msgs.iter().map(message_json).collect()).to_string();
        let req = Request::post(&self.opts.http_url)
            .header("user-agent", USER_AGENT)
            .header("content-type", "application/json")
            .header("x-aws-sqsd-queue", queue_name(&self.queue_url))
            .header("x-aws-sqsd-batch-size", msgs.len().to_string())
            .body(Full::new(Bytes::from(body)));
        let answer = match req {
            Ok(req) => {
                tokio::select! {
                    a = exchange(&self.app, req, self.opts.inactivity_timeout) => a,
                    _ = self.heartbeat(&handles, started) => Answer::TimedOut,
                }
            }
            Err(e) => Answer::Unreachable(e.to_string()),
        };
        self.stats
            .in_flight
            .fetch_sub(msgs.len() as u64, std::sync::atomic::Ordering::Relaxed);
        if *self.stop.borrow() {
            return; // shutdown hands them back
        }
        let verdicts = decisions(&msgs, &answer);
        let acks: Vec<DeleteMessageBatchRequestEntry> = handles
            .iter()
            .zip(&verdicts)
            .enumerate()
            .filter(|(_, (_, v))| v.is_none())
            .filter_map(|(i, (h, _))| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(format!("m{i}"))
                    .receipt_handle(h)
                    .build()
                    .ok()
            })
            .collect();
        let acked = acks.len() as u64;
        if !acks.is_empty() {
            let _ = self
                .sqs
                .delete_message_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(acks))
                .send()
                .await;
        }
        let jitter = jitter(started);
        let mut failed = 0u64;
        for ((m, h), v) in msgs.iter().zip(&handles).zip(&verdicts) {
            let Some(explicit) = v else { continue };
            failed += 1;
            let delay = match explicit {
                Some(d) => Some(*d),
                None => retry_delay(&self.opts, receive_count(m), None, jitter),
            };
            if let Some(d) = delay {
                self.retry_in(h, d).await;
            }
        }
        self.stats
            .delivered
            .fetch_add(acked, std::sync::atomic::Ordering::Relaxed);
        self.stats
            .failed
            .fetch_add(failed, std::sync::atomic::Ordering::Relaxed);
        self.untrack(msgs.iter().map(|m| m.message_id().unwrap_or_default()));
        tracing::info!(
            queue = %queue_name(&self.queue_url),
            messages = msgs.len(),
            acked,
            failed,
            ms = started.elapsed().as_millis() as u64,
            "delivered batch"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(id: &str) -> Message {
        Message::builder().message_id(id).build()
    }

    #[test]
    fn answers_decide_per_message() {
        let msgs = [msg("a"), msg("b"), msg("c")];
        let reply = |status, body: &str| Answer::Replied {
            status,
            retry_after: None,
            body: Bytes::from(body.to_string()),
        };
        assert_eq!(decisions(&msgs, &reply(200, "")), vec![None, None, None]);
        assert_eq!(decisions(&msgs, &reply(500, "")), vec![Some(None); 3]);
        let body = r#"{"results":[{"messageId":"b","status":"retry","delaySeconds":30},{"messageId":"b","status":"ack"},{"messageId":"c","status":"retry"}]}"#;
        assert_eq!(
            decisions(&msgs, &reply(200, body)),
            vec![None, Some(Some(30)), Some(None)]
        );
        assert_eq!(decisions(&msgs, &Answer::TimedOut), vec![Some(None); 3]);
    }

    #[test]
    fn a_deeply_nested_reply_is_refused_not_recursed_into() {
        // serde_json stops at 128 levels; the app's answer then names no message, and a 2xx
        // that names none acknowledges them all.
        let deep = format!(
            r#"{{"results":[{{"messageId":"a","status":"retry","x":{}1{}}}]}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let reply = Answer::Replied {
            status: 200,
            retry_after: None,
            body: Bytes::from(deep),
        };
        assert_eq!(decisions(&[msg("a")], &reply), vec![None]);
    }

    #[test]
    fn delay_seconds_is_clamped_not_wrapped() {
        let msgs = [msg("a"), msg("b"), msg("c"), msg("d"), msg("e"), msg("f")];
        let body = r#"{"results":[
            {"messageId":"a","status":"retry","delaySeconds":4294967296},
            {"messageId":"b","status":"retry","delaySeconds":18446744073709551615},
            {"messageId":"c","status":"retry","delaySeconds":-5},
            {"messageId":"d","status":"retry","delaySeconds":1e300},
            {"messageId":"e","status":"retry","delaySeconds":-1e300},
            {"messageId":"f","status":"retry","delaySeconds":"30"}]}"#;
        let reply = Answer::Replied {
            status: 200,
            retry_after: None,
            body: Bytes::from(body),
        };
        // 4294967296 as u32 once wrapped to 0: an immediate retry instead of the longest wait.
        assert_eq!(
            decisions(&msgs, &reply),
            vec![
                Some(Some(43_200)),
                Some(Some(43_200)),
                Some(Some(0)),
                Some(Some(43_200)),
                Some(Some(0)),
                Some(None),
            ]
        );
        assert_eq!(delay_seconds(&json!(12.6)), Some(13));
        assert_eq!(delay_seconds(&json!(30)), Some(30));
    }
}
