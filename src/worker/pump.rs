//! The worker's pump: receives from the queues in weighted turns, posts each message to the
//! application, keeps long jobs invisible, deletes or retries, and hands unfinished messages
//! back on shutdown.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, Message, MessageSystemAttributeName,
};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

mod batch;

use super::deliver::{app_client, post, AppClient, Outcome};

use super::{retry_delay, WorkerOptions, WorkerQueue, WorkerStats, VISIBILITY_CAP};

/// Picks the queue to receive from next so that, while every queue has messages, deliveries
/// follow the weights (stride scheduling: each message costs its queue 1/weight).
#[derive(Debug)]
struct Scheduler {
    pass: Vec<f64>,
    weights: Vec<f64>,
}

impl Scheduler {
    fn new(queues: &[WorkerQueue]) -> Scheduler {
        Scheduler {
            pass: vec![0.0; queues.len()],
            weights: queues.iter().map(|q| q.weight.max(1) as f64).collect(),
        }
    }

    fn next(&self) -> usize {
        (0..self.pass.len())
            .min_by(|&a, &b| self.pass[a].total_cmp(&self.pass[b]))
            .unwrap_or(0)
    }

    /// Charges a queue for a receive that returned `n` messages; an empty queue is charged
    /// as if it had returned a full batch, so it yields to the others.
    fn record(&mut self, i: usize, n: usize) {
        let cost = if n == 0 { 10.0 } else { n as f64 };
        self.pass[i] += cost / self.weights[i];
    }
}

pub(super) fn queue_name(url: &str) -> String {
    url.trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// A message being worked on, so a shutdown can hand it back.
type Unfinished = Arc<Mutex<HashMap<String, (String, String)>>>;

/// Runs until `shutdown` completes, then lets in-flight POSTs finish for up to the shutdown
/// timeout and makes every unfinished message visible again.
pub async fn run(
    sqs: aws_sdk_sqs::Client,
    opts: WorkerOptions,
    stats: Arc<WorkerStats>,
    shutdown: impl Future<Output = ()>,
) {
    let opts = Arc::new(opts);
    let app = app_client(opts.connect_timeout, opts.http_connections);
    let slots = Arc::new(Semaphore::new(
        opts.http_connections.clamp(1, Semaphore::MAX_PERMITS),
    ));
    let mut scheduler = Scheduler::new(&opts.queues);
    // With several queues, one long poll would hold up the others: poll briefly, and wait
    // only after a whole round found nothing.
    let mut empty_streak = 0usize;
    let unfinished: Unfinished = Arc::default();
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let periodic = tokio::spawn(super::cron::run(
        opts.cron.clone(),
        app.clone(),
        opts.http_url.clone(),
        opts.mime_type.clone(),
        stop_rx.clone(),
    ));
    tokio::pin!(shutdown);
    'receive: loop {
        let first = tokio::select! {
            _ = &mut shutdown => break 'receive,
            p = Arc::clone(&slots).acquire_owned() => match p { Ok(p) => p, Err(_) => break 'receive },
        };
        let mut permits = vec![first];
        while permits.len() < 10 {
            match Arc::clone(&slots).try_acquire_owned() {
                Ok(p) => permits.push(p),
                Err(_) => break,
            }
        }
        if opts.queues.is_empty() {
            break 'receive;
        }
        let qi = scheduler.next();
        let wait = match opts.queues.len() {
            1 => opts.wait_time,
            n if empty_streak >= n => opts.wait_time.min(1),
            _ => 0,
        };
        let job = Job {
            sqs: sqs.clone(),
            app: app.clone(),
            opts: Arc::clone(&opts),
            stats: Arc::clone(&stats),
            unfinished: Arc::clone(&unfinished),
            queue_url: opts.queues[qi].url.clone(),
            stop: stop_rx.clone(),
        };
        if opts.batch_size > 1 {
            // One permit is one POST, carrying up to batch_size messages.
            permits.truncate(1);
            let msgs = tokio::select! {
                _ = &mut shutdown => break 'receive,
                m = batch::gather(&job, wait) => m,
            };
            scheduler.record(qi, msgs.len());
            empty_streak = if msgs.is_empty() { empty_streak + 1 } else { 0 };
            if let (false, Some(permit)) = (msgs.is_empty(), permits.pop()) {
                tasks.spawn(async move {
                    job.process_batch(msgs).await;
                    drop(permit);
                });
            }
            while tasks.try_join_next().is_some() {}
            continue;
        }
        let got = tokio::select! {
            _ = &mut shutdown => break 'receive,
            r = job.receive(permits.len(), wait) => r,
        };
        let Some(messages) = got else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        scheduler.record(qi, messages.len());
        empty_streak = if messages.is_empty() {
            empty_streak + 1
        } else {
            0
        };
        job.track(&messages);
        for msg in messages {
            let Some(permit) = permits.pop() else { break };
            let job = job.clone();
            tasks.spawn(async move {
                job.process(msg).await;
                drop(permit);
            });
        }
        // Reap finished jobs so the set does not grow.
        while tasks.try_join_next().is_some() {}
    }
    // Shutdown: no more receives or periodic tasks; let jobs finish for a while, then hand
    // the rest back.
    periodic.abort();
    let drained = tokio::time::timeout(opts.shutdown_timeout, async {
        while tasks.join_next().await.is_some() {}
    })
    .await
    .is_ok();
    if !drained {
        let _ = stop_tx.send(true);
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
    let rest: Vec<(String, String)> = unfinished
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .drain()
        .map(|(_, v)| v)
        .collect();
    for (url, handle) in rest {
        let _ = sqs
            .change_message_visibility()
            .queue_url(&url)
            .receipt_handle(&handle)
            .visibility_timeout(0)
            .send()
            .await;
        WorkerStats::add(&stats.released);
    }
}

/// Everything receiving from one queue and processing its messages needs.
#[derive(Clone)]
struct Job {
    sqs: aws_sdk_sqs::Client,
    app: AppClient,
    opts: Arc<WorkerOptions>,
    stats: Arc<WorkerStats>,
    unfinished: Unfinished,
    queue_url: String,
    stop: watch::Receiver<bool>,
}

/// ApproximateReceiveCount of a received message (1 if absent).
pub(super) fn receive_count(msg: &Message) -> u32 {
    msg.attributes()
        .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
        .and_then(|c| c.parse().ok())
        .unwrap_or(1)
}

/// A number in [0, 1) for retry jitter, from the sub-second part of an elapsed time.
pub(super) fn jitter(since: Instant) -> f64 {
    (since.elapsed().subsec_nanos() % 1000) as f64 / 1000.0
}

impl Job {
    /// Receives up to `max` (≤ 10) messages with all attributes; `None` after an error (logged).
    async fn receive(&self, max: usize, wait: i32) -> Option<Vec<Message>> {
        let got = self
            .sqs
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(max.min(10) as i32)
            .wait_time_seconds(wait)
            .visibility_timeout(self.opts.visibility_timeout as i32)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await;
        match got {
            Ok(out) => Some(out.messages.unwrap_or_default()),
            Err(e) => {
                tracing::warn!(queue = %self.queue_url, error = %aws_sdk_sqs::error::DisplayErrorContext(&e), "receive failed");
                None
            }
        }
    }

    /// Records messages as being worked on, so a shutdown can hand them back.
    fn track(&self, msgs: &[Message]) {
        let mut unfinished = self.unfinished.lock().unwrap_or_else(|p| p.into_inner());
        for m in msgs {
            unfinished.insert(
                m.message_id().unwrap_or_default().to_string(),
                (
                    self.queue_url.clone(),
                    m.receipt_handle().unwrap_or_default().to_string(),
                ),
            );
        }
    }

    /// Forgets messages whose outcome is settled.
    fn untrack<'a>(&self, ids: impl IntoIterator<Item = &'a str>) {
        let mut unfinished = self.unfinished.lock().unwrap_or_else(|p| p.into_inner());
        for id in ids {
            unfinished.remove(id);
        }
    }

    /// Hides a failed message for `secs` before it is retried.
    async fn retry_in(&self, handle: &str, secs: u32) {
        let _ = self
            .sqs
            .change_message_visibility()
            .queue_url(&self.queue_url)
            .receipt_handle(handle)
            .visibility_timeout(secs.min(VISIBILITY_CAP.as_secs() as u32) as i32)
            .send()
            .await;
        WorkerStats::add(&self.stats.retried);
    }

    async fn process(self, msg: Message) {
        let started = Instant::now();
        let id = msg.message_id().unwrap_or_default().to_string();
        let handle = msg.receipt_handle().unwrap_or_default().to_string();
        let receive_count = receive_count(&msg);
        self.stats.in_flight.fetch_add(1, Ordering::Relaxed);
        let handles = [handle.clone()];
        let heartbeat = self.heartbeat(&handles, started);
        let name = queue_name(&self.queue_url);
        let delivery = post(
            &self.app,
            &self.opts.http_url,
            &self.opts.mime_type,
            &name,
            &msg,
            self.opts.inactivity_timeout,
        );
        let outcome = tokio::select! {
            o = delivery => o,
            _ = heartbeat => unreachable_outcome(),
        };
        self.stats.in_flight.fetch_sub(1, Ordering::Relaxed);
        if *self.stop.borrow() {
            return; // shutdown hands it back
        }
        match &outcome {
            Outcome::Ok => {
                let r = self
                    .sqs
                    .delete_message()
                    .queue_url(&self.queue_url)
                    .receipt_handle(&handle)
                    .send()
                    .await;
                if let Err(e) = r {
                    tracing::warn!(message_id = %id, error = %aws_sdk_sqs::error::DisplayErrorContext(&e), "delete failed");
                }
                WorkerStats::add(&self.stats.delivered);
            }
            failure => {
                let retry_after = match failure {
                    Outcome::Failed { retry_after, .. } => *retry_after,
                    _ => None,
                };
                let jitter = jitter(started);
                if let Some(delay) = retry_delay(&self.opts, receive_count, retry_after, jitter) {
                    self.retry_in(&handle, delay).await;
                }
                // Counted once the queue reflects the outcome, so observers see both agree.
                WorkerStats::add(&self.stats.failed);
            }
        }
        self.untrack([id.as_str()]);
        tracing::info!(
            message_id = %id,
            queue = %name,
            outcome = ?outcome,
            attempt = receive_count,
            ms = started.elapsed().as_millis() as u64,
            "delivered"
        );
    }

    /// Extends the visibility of the messages the app works on every half timeout, up to
    /// the 12-hour cap: one message by ChangeMessageVisibility, a batch by its batch form.
    /// Never completes on its own.
    async fn heartbeat(&self, handles: &[String], started: Instant) {
        let timeout = self.opts.visibility_timeout as i32;
        let vis = Duration::from_secs(self.opts.visibility_timeout.max(1) as u64);
        loop {
            tokio::time::sleep(vis / 2).await;
            if started.elapsed() + vis >= VISIBILITY_CAP {
                std::future::pending::<()>().await;
            }
            if let [handle] = handles {
                let _ = self
                    .sqs
                    .change_message_visibility()
                    .queue_url(&self.queue_url)
                    .receipt_handle(handle)
                    .visibility_timeout(timeout)
                    .send()
                    .await;
                continue;
            }
            let entries = handles
                .iter()
                .enumerate()
                .filter_map(|(i, h)| {
                    ChangeMessageVisibilityBatchRequestEntry::builder()
                        .id(format!("m{i}"))
                        .receipt_handle(h)
                        .visibility_timeout(timeout)
                        .build()
                        .ok()
                })
                .collect();
            let _ = self
                .sqs
                .change_message_visibility_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(entries))
                .send()
                .await;
        }
    }
}

fn unreachable_outcome() -> Outcome {
    Outcome::Unreachable("heartbeat ended".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stride_scheduling_follows_weights() {
        let q = |w| WorkerQueue {
            url: String::new(),
            weight: w,
        };
        let mut s = Scheduler::new(&[q(3), q(1)]);
        let mut got = [0usize; 2];
        for _ in 0..400 {
            let i = s.next();
            got[i] += 10;
            s.record(i, 10);
        }
        assert!((2900..=3100).contains(&got[0]), "{got:?}");
        // An empty queue yields.
        let mut s = Scheduler::new(&[q(1), q(1)]);
        s.record(0, 0);
        assert_eq!(s.next(), 1);
    }
}
