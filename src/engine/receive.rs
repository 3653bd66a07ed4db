//! The values a receive takes and gives, how messages move between queues (dead letters,
//! redrives), and the engine's receive, which hands a queue's dead letters to their queue.

use super::ids::{MessageKey, QueueId};
use super::message::{ReceivedMessage, StoredMessage};
use super::{moves, Engine, EngineError, Queue};

/// Parameters of one receive.
#[derive(Debug, Clone)]
pub(crate) struct ReceiveRequest {
    pub max_messages: usize,
    /// `None` takes the queue's VisibilityTimeout.
    pub visibility_timeout: Option<u32>,
    pub max_in_flight: usize,
    /// FIFO ReceiveRequestAttemptId: a retry within 5 minutes gets the same messages.
    pub attempt_id: Option<String>,
    /// A short poll (WaitTimeSeconds 0): under realism it sees only some partitions.
    pub short_poll: bool,
}

/// What one receive attempt found.
#[derive(Debug, Default)]
pub(crate) struct ReceiveOutcome {
    pub messages: Vec<ReceivedMessage>,
    /// When the next delayed or in-flight message becomes visible, in clock ms.
    pub next_deadline_ms: Option<u64>,
    /// Messages this receive took out because they exceeded maxReceiveCount; the engine
    /// hands them to the dead-letter queue.
    pub dead_letters: Option<DeadLetters>,
    /// Cluster mode: dead letters this receive put into an outbox towards a dead-letter
    /// queue another shard serves, up to this `seq` of it.
    pub forwarded: Option<(u64, std::sync::Arc<super::Queue>)>,
}

/// Messages on their way to a dead-letter queue.
#[derive(Debug)]
pub(crate) struct DeadLetters {
    pub target: QueueId,
    pub messages: Vec<Taken>,
}

/// A message taken out of one queue on its way to another (or back). Its removal is
/// recorded together with its arrival, so a crash cannot leave it in both queues or neither.
#[derive(Debug)]
pub(crate) struct Taken {
    /// The queue (uid) it left, and the key it had there.
    pub from: u64,
    pub key: MessageKey,
    pub message: StoredMessage,
}

/// Why messages arrive from another queue.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Transfer<'a> {
    /// Dead-lettered from the queue with this ARN: counts kept, source recorded.
    DeadLetter { source_arn: &'a str },
    /// Moved back by a message move task: a fresh receive count, no source.
    Redrive,
    /// Returned to where they came from (their dead-letter queue vanished): unchanged.
    Restore,
}

impl Engine {
    /// Receives from `queue`, handing messages that exceeded maxReceiveCount to its
    /// dead-letter queue (two queue locks are never held at once).
    pub(crate) fn receive(
        &self,
        queue: &Queue,
        req: ReceiveRequest,
        now_ms: u64,
    ) -> Result<ReceiveOutcome, EngineError> {
        let mut outcome = queue.receive(req, now_ms)?;
        if let Some(dead) = outcome.dead_letters.take() {
            use moves::{Destination, Via};
            let mut messages = Some(dead.messages);
            // An outbox removed since it was found refuses them; the next look makes a new
            // one. Twice refused (outboxes of a source being deleted), they stay here.
            for _ in 0..2 {
                let Some(taken) = messages.take() else { break };
                match self.destination(&queue.id, &dead.target, Via::DeadLetter) {
                    Destination::Local(dlq) => {
                        dlq.accept(
                            taken,
                            Transfer::DeadLetter {
                                source_arn: &queue.arn,
                            },
                            now_ms,
                        );
                        // Their removal from here is logged with their arrival there.
                        queue.changed_at(dlq.last_lsn());
                    }
                    Destination::Outbox(o) => match o.accept_open(taken, Transfer::Restore, now_ms)
                    {
                        Ok(()) => {
                            queue.changed_at(o.last_lsn());
                            outcome.forwarded = Some((o.last_seq(), o));
                            self.outbox_filled();
                        }
                        Err(back) => messages = Some(back),
                    },
                    // The dead-letter queue is gone: keep the messages where they were.
                    Destination::Gone => queue.accept(taken, Transfer::Restore, now_ms),
                }
            }
            if let Some(back) = messages {
                queue.accept(back, Transfer::Restore, now_ms);
            }
        }
        Ok(outcome)
    }
}
