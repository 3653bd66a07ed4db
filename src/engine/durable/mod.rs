//! Durable mode above the registry: rebuilding the engine from a snapshot and the log after
//! it (`replay`, with `restore` for one queue's state), snapshots (`replay::snapshot`), and
//! snapshotting a grown log in the background (`compactor`). What sits below the queue lock
//! — the changes a queue records and handing them to the store — is [`super::journal`].
//! Without a store none of it runs and nothing is encoded.

pub(crate) mod compactor;
#[cfg(test)]
mod durable_answers;
pub(in crate::engine) mod replay;
mod restore;
