//! What can go wrong inside the engine, in domain terms. The API layer maps each case to
//! the SQS error code and text.

/// An engine-level failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EngineError {
    #[error("receipt handle is not valid for this queue")]
    ReceiptHandleInvalid,
    #[error("the receipt handle has expired")]
    ReceiptHandleExpired,
    #[error("message is gone or is not available for a visibility change")]
    MessageNotAvailable,
    #[error("total visibility timeout would exceed {max_s} seconds")]
    VisibilityCapExceeded { max_s: u32 },
    #[error("message is larger than {limit} bytes")]
    MessageTooLong { limit: u32 },
    #[error("too many messages in flight")]
    OverLimit,
    #[error("a purge ran less than 60 seconds ago")]
    PurgeInProgress,
    #[error("a queue of this name was deleted less than 60 seconds ago")]
    QueueDeletedRecently,
    #[error("over the queue's throughput quota")]
    Throttled,
    /// Stored messages would pass `--max-stored-bytes`.
    #[error("what the process holds reached the memory limit ({limit} bytes)")]
    StoreFull { limit: u64 },
    /// The durable store holds `bytes` of changes the disk has not taken: more would only
    /// pile up in memory.
    #[error("{bytes} bytes of changes wait for the disk")]
    Backlog { bytes: u64 },
    /// `max` long polls are waiting already (`EngineSettings::max_long_polls`).
    #[error("too many long polls are waiting ({max})")]
    TooManyLongPolls { max: usize },
}
