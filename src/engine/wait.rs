//! Every wait the engine does, in one place, and none of them a sleep in small steps: each
//! sleeps on the notification of what it waits for (a queue changed, was deleted or the
//! clock moved; a task was cancelled; the server is shutting down) and, at most, until the
//! next deadline on the engine's clock turns due in real time.
//!
//! - [`Engine::receive_waiting`]: a receive and its long poll.
//! - [`delivered`]: until an outbox has handed its entries on (cluster mode).
//! - [`until_clock`]: until the engine clock reaches a time (a rate-limited move task).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::{Engine, EngineError, Queue, ReceiveRequest, ReceivedMessage};

/// How long a receive that dead-lettered messages to another shard waits for them to
/// arrive there before it answers.
const FORWARD_WAIT: Duration = Duration::from_secs(2);

impl Engine {
    /// Receives from `queue`, waiting up to `wait` for messages to become available (a
    /// long poll; none for a zero `wait`). The wait runs on the engine's clock and on real
    /// time, and ends with whichever is done first: a test that moves the clock forward
    /// ends a long poll at once, and a frozen clock still lets it end. It also ends empty
    /// when the queue is deleted or the server shuts down.
    ///
    /// In cluster mode, when the receive dead-lettered messages to a queue another shard
    /// serves, it answers once they are there (as on one node), unless that takes long;
    /// they arrive regardless.
    pub(crate) async fn receive_waiting(
        &self,
        queue: &Queue,
        req: ReceiveRequest,
        wait: Duration,
    ) -> Result<Vec<ReceivedMessage>, EngineError> {
        let mut forwarded = None;
        let received = self.poll(queue, req, wait, &mut forwarded).await;
        if let Some((seq, outbox)) = forwarded {
            delivered(&outbox, seq, FORWARD_WAIT).await;
        }
        received
    }

    /// The receive and its long poll; `forwarded` is where dead letters it moved went,
    /// when that is an outbox.
    async fn poll(
        &self,
        queue: &Queue,
        req: ReceiveRequest,
        wait: Duration,
        forwarded: &mut Option<(u64, Arc<Queue>)>,
    ) -> Result<Vec<ReceivedMessage>, EngineError> {
        let mut receive = |now_ms| {
            let mut outcome = self.receive(queue, req.clone(), now_ms);
            if let Ok(o) = &mut outcome {
                if let Some(f) = o.forwarded.take() {
                    *forwarded = Some(f);
                }
            }
            outcome
        };
        if wait.is_zero() {
            return receive(self.now_ms()).map(|o| o.messages);
        }
        // A place under the long-poll cap, taken only once the poll has to wait: a receive
        // that finds messages at once is never refused.
        let mut slot = None;
        let give_up = Instant::now() + wait;
        let give_up_ms = self.now_ms().saturating_add(wait.as_millis() as u64);
        let mut shutdown = self.shutdown_signal();
        let _waiter = queue.register_waiter();
        loop {
            let changed = queue.changed().notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let now_ms = self.now_ms();
            let next_deadline = match receive(now_ms) {
                Ok(o) if !o.messages.is_empty() => return Ok(o.messages),
                Ok(o) => o.next_deadline_ms,
                // A long poll over the in-flight quota waits instead of failing.
                Err(EngineError::OverLimit) => None,
                Err(e) => return Err(e),
            };
            if queue.is_deleted() || *shutdown.borrow() {
                return Ok(Vec::new());
            }
            let now = Instant::now();
            if now >= give_up || now_ms >= give_up_ms {
                return Ok(Vec::new());
            }
            let due_ms = next_deadline.map_or(give_up_ms, |d| d.min(give_up_ms));
            let wake_at = give_up.min(self.real_time_of(due_ms, now_ms, now).unwrap_or(give_up));
            if slot.is_none() {
                let max = self.settings().max_long_polls;
                slot = Some(
                    self.begin_long_poll()
                        .ok_or(EngineError::TooManyLongPolls { max })?,
                );
            }
            tokio::select! {
                _ = &mut changed => {}
                _ = tokio::time::sleep_until(wake_at) => {}
                _ = shutdown.changed() => {}
            }
        }
    }

    /// When, in real time, the engine clock (at `now_ms` at the instant `now`) reaches
    /// `due_ms`; none while it is frozen (only a clock move or unfreezing gets it there,
    /// and both wake every queue's waiters).
    fn real_time_of(&self, due_ms: u64, now_ms: u64, now: Instant) -> Option<Instant> {
        (!self.clock().is_frozen())
            .then(|| now + Duration::from_millis(due_ms.saturating_sub(now_ms)))
    }
}

/// Waits until `outbox` holds no entry at or below `seq` (all handed on), it is deleted,
/// or `max` of real time passed: a receive that dead-lettered messages across shards, or a
/// move task that moved them, answers once they are in their queue, as on one node. Woken
/// by the courier each time it takes entries out.
pub(crate) async fn delivered(outbox: &Queue, seq: u64, max: Duration) {
    let give_up = Instant::now() + max;
    let _waiter = outbox.register_waiter();
    loop {
        let changed = outbox.changed().notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if !outbox.holds_up_to(seq) || outbox.is_deleted() {
            return;
        }
        if tokio::time::timeout_at(give_up, changed).await.is_err() {
            return;
        }
    }
}

/// Sleeps until the engine clock reaches `due_ms`, or until something else is worth a new
/// look: `queue` changed or was deleted (a clock move or unfreezing wakes every queue),
/// `also` was notified, or the server started shutting down.
pub(crate) async fn until_clock(engine: &Engine, queue: &Queue, also: &Notify, due_ms: u64) {
    // Listening first, then looking: nothing that happens in between is missed.
    let changed = queue.changed().notified();
    tokio::pin!(changed);
    changed.as_mut().enable();
    let mut shutdown = engine.shutdown_signal();
    let now_ms = engine.now_ms();
    if now_ms >= due_ms || queue.is_deleted() || *shutdown.borrow() {
        return;
    }
    let sleep = async {
        match engine.real_time_of(due_ms, now_ms, Instant::now()) {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = &mut changed => {}
        _ = also.notified() => {}
        _ = sleep => {}
        _ = shutdown.changed() => {}
    }
}
