//! Durable mode inside the engine: the changes a queue records (`change`), handing them to
//! the store and knowing which of them an answer relies on (`journal`), rebuilding the
//! engine from a snapshot and the log after it (`replay`, with `restore` for one queue's
//! state), and snapshotting a grown log in the background (`compactor`). Without a store
//! none of it runs and nothing is encoded.

pub(crate) mod change;
pub(crate) mod compactor;
#[cfg(test)]
mod durable_answers;
pub(crate) mod journal;
pub(in crate::engine) mod replay;
mod restore;
