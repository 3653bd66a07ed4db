//! Reading a stream back on open: the newest complete snapshot and the log after it, the
//! records of a former owner after another's fence left out, then a fence of this writer's
//! own so that nobody else's write lands after what it read.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use async_nats::jetstream::{self, stream};
use async_nats::HeaderMap;
use bytes::Bytes;

use super::group::{Group, Indexed};
use super::{io_error, Writer, AT, CODEC, COUNT, EMPTY, END, LSN, WRITER};
use crate::store::packed;
use crate::store::{Lsn, StoreError};

/// A snapshot's records as recovery reads them, and whether its end was found.
type SnapshotRead = (Vec<Vec<u8>>, bool);

/// Everything recovery found, handed back to the caller's thread to apply.
pub(super) struct Recovery {
    pub(super) snapshot: Vec<Vec<u8>>,
    pub(super) log: Vec<(Lsn, Vec<u8>)>,
    pub(super) next_lsn: Lsn,
}

impl Writer {
    /// Reads the stream: the newest complete snapshot, and the log records at or after the
    /// position it stands for.
    pub(super) async fn recover(
        &mut self,
        js: &jetstream::Context,
    ) -> Result<Recovery, StoreError> {
        let stream = js
            .get_stream(self.stream())
            .await
            .map_err(|e| io_error(format!("cannot open the stream: {e}")))?;
        let mut stream = stream;
        let state = stream
            .info()
            .await
            .map_err(|e| io_error(format!("cannot read the stream: {e}")))?
            .state
            .clone();
        let mut log = BTreeMap::new();
        // Snapshots by the position they stand for and their writer (two writers' records of
        // one position never mix): (records, complete).
        let mut snapshots: BTreeMap<(Lsn, String), SnapshotRead> = BTreeMap::new();
        let mut snapshot_bytes = 0;
        // The writer of the last fence read: from a fence on, only its writer's records
        // count. Another writer's record after it can only be a former owner's publish that
        // slipped into the slot of one of its own that was lost (its expected sequence then
        // matches the fence's): never acknowledged, since the one before it was not.
        let mut epoch: Option<String> = None;
        // The position the next log message should start at.
        let mut next: Option<Lsn> = None;
        if state.messages > 0 {
            for seq in state.first_sequence..=state.last_sequence {
                let m = match stream.get_raw_message(seq).await {
                    Ok(m) => m,
                    // Purged: a gap.
                    Err(e) if e.kind() == stream::RawMessageErrorKind::NoMessageFound => continue,
                    // Anything else would silently drop a record: recovery fails instead.
                    Err(e) => return Err(io_error(format!("cannot read record {seq}: {e}"))),
                };
                let header = |name: &str| {
                    m.headers
                        .get(name)
                        .and_then(|v| v.as_str().parse::<u64>().ok())
                };
                let writer = m
                    .headers
                    .get(async_nats::header::NATS_MESSAGE_ID)
                    .and_then(|id| id.as_str().split('-').next().map(str::to_string));
                if m.subject.as_str() == self.fence_subject() {
                    epoch = writer;
                    continue;
                }
                if epoch.is_some() && writer != epoch {
                    tracing::warn!(
                        seq,
                        stream = %self.name,
                        "skipping a record a former owner wrote after another's fence"
                    );
                    continue;
                }
                let payload = packed::unpack(
                    m.headers.get(CODEC).map(|v| v.as_str()),
                    m.payload.clone(),
                    crate::store::frame::MAX_RECORD,
                )
                .map_err(|e| io_error(format!("message {seq}: {e}")))?;
                if m.subject.as_str() == self.log_subject() {
                    let first =
                        header(LSN).ok_or_else(|| io_error("a log record has no position"))?;
                    let count = header(COUNT).unwrap_or(1);
                    let records = if count == 1 {
                        vec![payload.to_vec()]
                    } else {
                        Group::split(&payload, count).ok_or_else(|| {
                            io_error(format!(
                                "log message {seq} does not hold the {count} records it says"
                            ))
                        })?
                    };
                    // Durability is a prefix of the positions: a message past a gap was
                    // never acknowledged (one before it was lost), so it is left out; a
                    // writer starting again below what was read (a new owner after its
                    // fence) replaces what lay there, which was never acknowledged either.
                    match next {
                        Some(n) if first > n => {
                            tracing::warn!(seq, stream = %self.name, "skipping a record after a gap");
                            continue;
                        }
                        Some(n) if first < n => {
                            drop(log.split_off(&first));
                            drop(self.index.split_off(&first));
                        }
                        _ => {}
                    }
                    next = Some(first + count);
                    let bytes = payload.len() as u64;
                    self.index.insert(first, Indexed { seq, bytes, count });
                    for (i, r) in records.into_iter().enumerate() {
                        log.insert(first + i as u64, r);
                    }
                } else if let Some(at) = header(AT) {
                    snapshot_bytes += payload.len() as u64;
                    let writer = m
                        .headers
                        .get(WRITER)
                        .map(|v| v.as_str().to_string())
                        .unwrap_or_default();
                    let entry = snapshots.entry((at, writer)).or_default();
                    if m.headers.get(EMPTY).is_none() {
                        entry.0.push(payload.to_vec());
                    }
                    entry.1 |= m.headers.get(END).is_some();
                }
            }
        }
        let (at, snapshot) = snapshots
            .into_iter()
            .rev()
            .find(|(_, (_, complete))| *complete)
            .map(|((at, _), (records, _))| (at, records))
            .unwrap_or((0, Vec::new()));
        let log: Vec<(Lsn, Vec<u8>)> = log.into_iter().filter(|(l, _)| *l >= at).collect();
        let log_bytes = self.index.values().map(|m| m.bytes).sum();
        let next_lsn = log.last().map_or(at, |(l, _)| l + 1);
        self.fence(js, state.last_sequence).await?;
        self.progress.send_modify(|p| p.durable = next_lsn);
        let mut s = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        s.log_bytes = log_bytes;
        s.snapshot_bytes = snapshot_bytes;
        Ok(Recovery {
            snapshot,
            log,
            next_lsn,
        })
    }

    /// Ends recovery with a write on top of the last record read (`read_to`): refused if
    /// anyone wrote since, and from now on every write of a former owner is refused, so a
    /// writer that stalled and resumes can never add to what this one recovered.
    pub(super) async fn fence(
        &mut self,
        js: &jetstream::Context,
        read_to: u64,
    ) -> Result<(), StoreError> {
        if self.cancelled.load(Ordering::Acquire) {
            return Err(io_error("the takeover was called off"));
        }
        let mut headers = HeaderMap::new();
        headers.insert(
            async_nats::header::NATS_EXPECTED_LAST_SEQUENCE,
            read_to.to_string().as_str(),
        );
        let ack = self
            .publish_one(js, self.fence_subject(), headers, Bytes::new(), "fence")
            .await
            .map_err(|e| {
                io_error(format!(
                    "another writer appended during recovery (the fence was not written: {})",
                    e.error
                ))
            })?;
        self.last_seq = ack.sequence;
        Ok(())
    }
}
