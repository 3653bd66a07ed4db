//! A queue's configurable attributes, typed. Parsing and rendering their wire names and
//! values is the API layer's job; the engine only obeys them.

use super::redrive::{RedriveAllowPolicy, RedrivePolicy};

/// Longest visibility timeout, and the cap on a message's total invisibility per receive.
pub(crate) const MAX_VISIBILITY_TIMEOUT_S: u32 = 43_200;
/// Largest message (body plus attributes) a queue may be configured to accept.
pub(crate) const MAX_MESSAGE_SIZE: u32 = 1_048_576;
/// In-flight messages a queue may hold before receives stop handing out more.
pub(crate) const DEFAULT_MAX_IN_FLIGHT: usize = 120_000;
/// Minimum time between two purges of one queue.
pub(crate) const PURGE_COOLDOWN_MS: u64 = 60_000;
/// How long a deleted queue's name stays unavailable.
pub(crate) const DELETED_QUEUE_COOLDOWN_MS: u64 = 60_000;

/// How a FIFO queue scopes deduplication.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum DeduplicationScope {
    Queue,
    MessageGroup,
}

/// How a FIFO queue's throughput quota is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum FifoThroughputLimit {
    PerQueue,
    PerMessageGroupId,
}

/// The settable attributes of one queue.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct QueueSettings {
    pub delay_seconds: u32,
    pub maximum_message_size: u32,
    pub message_retention_period: u32,
    pub receive_message_wait_time_seconds: u32,
    pub visibility_timeout: u32,
    pub policy: Option<String>,
    pub redrive_policy: Option<RedrivePolicy>,
    pub redrive_allow_policy: Option<RedriveAllowPolicy>,
    pub kms_master_key_id: Option<String>,
    pub kms_data_key_reuse_period_seconds: u32,
    pub sqs_managed_sse_enabled: bool,
    pub fifo_queue: bool,
    pub content_based_deduplication: bool,
    pub deduplication_scope: DeduplicationScope,
    pub fifo_throughput_limit: FifoThroughputLimit,
}

impl Default for QueueSettings {
    fn default() -> Self {
        QueueSettings {
            delay_seconds: 0,
            maximum_message_size: MAX_MESSAGE_SIZE,
            message_retention_period: 345_600,
            receive_message_wait_time_seconds: 0,
            visibility_timeout: 30,
            policy: None,
            redrive_policy: None,
            redrive_allow_policy: None,
            kms_master_key_id: None,
            kms_data_key_reuse_period_seconds: 300,
            sqs_managed_sse_enabled: true,
            fifo_queue: false,
            content_based_deduplication: false,
            deduplication_scope: DeduplicationScope::Queue,
            fifo_throughput_limit: FifoThroughputLimit::PerQueue,
        }
    }
}

/// Engine-wide knobs.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// In-flight quota per queue.
    pub max_in_flight: usize,
    /// Refuse a second purge within 60 seconds, as AWS does.
    pub purge_cooldown: bool,
    /// Refuse to re-create a queue within 60 seconds of deleting it, as AWS does.
    pub deleted_queue_cooldown: bool,
    /// ReceiveMessage long polls waiting at once, over all queues; one more is answered
    /// ServiceUnavailable (503, which SDKs retry with backoff) instead of holding memory
    /// and a task for up to 20 seconds.
    pub max_long_polls: usize,
    /// AWS-realism mode for every queue at start (off by default); a queue may have its own.
    /// The engine takes it over: it changes at run time (`/_sqsim/realism`).
    pub realism: super::realism::mode::Realism,
    /// The seed realism draws from; `None` picks one from the time.
    pub seed: Option<u64>,
    /// Bytes the process may hold for its clients, as [`super::memory`] counts them
    /// (messages, FIFO memory, queues); a change past it gets ServiceUnavailable (503).
    /// 0: no limit.
    pub max_stored_bytes: u64,
}

/// The default `max_stored_bytes`: half of the memory the process may use (the smallest of
/// the machine's, its cgroups' and its resource limits: [`super::memory::process_limit`]),
/// so a producer outrunning its consumers gets retryable errors long before the kernel
/// kills the process; 0 (no limit) when none can be read.
pub(crate) fn default_max_stored_bytes() -> u64 {
    super::memory::process_limit().map_or(0, |(bytes, _)| bytes / 2)
}

/// Long polls waiting at once by default: one per connection the default connection cap
/// allows is more than any test suite or dev stack runs.
pub(crate) const DEFAULT_MAX_LONG_POLLS: usize = 16_384;

impl EngineSettings {
    /// Sets the long-poll cap; zero would refuse every long poll, so it is an error (a
    /// one-line message naming the setting).
    pub fn set_max_long_polls(&mut self, n: usize) -> Result<(), String> {
        if n == 0 {
            return Err("max_long_polls must be at least 1".into());
        }
        self.max_long_polls = n;
        Ok(())
    }
}

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            purge_cooldown: true,
            deleted_queue_cooldown: true,
            max_long_polls: DEFAULT_MAX_LONG_POLLS,
            realism: super::realism::mode::Realism::default(),
            seed: None,
            max_stored_bytes: default_max_stored_bytes(),
        }
    }
}
