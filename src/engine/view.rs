//! Read-only views of a queue: counts, traffic totals, a consistent snapshot for
//! GetQueueAttributes, and messages as `peek` shows them.

use std::sync::Arc;

use super::message::{Delivery, Payload};
use super::settings::QueueSettings;

/// Message counts as GetQueueAttributes reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct QueueCounts {
    pub visible: usize,
    pub in_flight: usize,
    pub delayed: usize,
}

/// Totals since the queue was created, for the admin `stats` endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Traffic {
    /// Messages stored by sends (duplicates dropped by FIFO deduplication not counted).
    pub sent: u64,
    /// Messages handed out by receives.
    pub received: u64,
    /// Messages removed by DeleteMessage.
    pub deleted: u64,
    /// Messages moved to the dead-letter queue after maxReceiveCount receives.
    pub dead_lettered: u64,
    /// Messages that came in from another queue: dead-lettered into this one, or moved here
    /// by a redrive (a dead-letter queue's `sent` stays 0 while it fills).
    pub arrived: u64,
    /// Messages dropped at the end of the retention period.
    pub expired: u64,
    /// Messages removed by PurgeQueue.
    pub purged: u64,
}

/// A consistent view of a queue for GetQueueAttributes and the admin endpoints.
#[derive(Debug, Clone)]
pub(crate) struct QueueSnapshot {
    pub settings: QueueSettings,
    pub counts: QueueCounts,
    pub traffic: Traffic,
    pub created_s: u64,
    pub last_modified_s: u64,
    /// When the oldest message still in the queue was sent (ApproximateAgeOfOldestMessage).
    pub oldest_sent_ms: Option<u64>,
}

/// One message as `peek` shows it, without changing anything.
#[derive(Debug, Clone)]
pub(crate) struct PeekedMessage {
    pub payload: Arc<Payload>,
    pub delivery: Delivery,
    pub receive_count: u32,
    pub first_receive_ms: Option<u64>,
}
