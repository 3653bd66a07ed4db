//! Messages that leave one queue for another outside a receive's own dead-lettering on one
//! shard: message move tasks (`task`: StartMessageMoveTask's runner, its rate and count), and
//! the outboxes that carry messages to a queue another shard serves in cluster mode
//! (`outbox`), which both dead letters and move tasks use; and messages picked by hand in
//! the console (`selected`).

pub(crate) mod outbox;
pub(crate) mod selected;
pub(crate) mod task;
