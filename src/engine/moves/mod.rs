//! Messages that leave one queue for another outside a receive's own dead-lettering on one
//! shard: message move tasks (`task`: StartMessageMoveTask's runner, its rate and count), and
//! the outboxes that carry messages to a queue another shard serves in cluster mode
//! (`outbox`), which both dead letters and move tasks use; and messages picked by hand in
//! the console (`selected`).

pub(crate) mod outbox;
pub(crate) mod selected;
pub(crate) mod task;

/// Why messages travel.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Via {
    /// Dead-lettered from the origin (counts kept, the origin recorded as their source).
    DeadLetter,
    /// Moved out of the origin by the message move task with this id (a fresh receive
    /// count): each task has its own outboxes, so what arrives counts for it alone.
    Move { task: String },
}

/// Where a message bound for a queue goes from this engine.
#[derive(Debug)]
pub(crate) enum Destination {
    /// The queue, here.
    Local(std::sync::Arc<super::Queue>),
    /// The outbox towards it (taken in unchanged: the target applies the transfer).
    Outbox(std::sync::Arc<super::Queue>),
    /// This engine serves the queue and it does not exist.
    Gone,
}
