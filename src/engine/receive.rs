//! The values a receive takes and gives, and how messages move between queues (dead
//! letters, redrives).

use super::ids::{MessageKey, QueueId};
use super::message::{ReceivedMessage, StoredMessage};

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
