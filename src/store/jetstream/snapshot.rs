//! Writing a snapshot: its records published back to back, then older snapshots, fences
//! and the log before it purged from the stream.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use async_nats::jetstream;
use async_nats::HeaderMap;

use super::{io_error, Writer, AT, CODEC, EMPTY, END, WRITER};
use crate::store::packed::{self, Packed};
use crate::store::{Lsn, StoreError};

impl Writer {
    /// Publishes a snapshot standing for position `at`, then purges what it replaces. Every
    /// append queued before it was published (and acknowledged) first.
    pub(super) async fn snapshot(
        &mut self,
        js: &jetstream::Context,
        at: Lsn,
        records: Vec<Vec<u8>>,
    ) -> Result<(), StoreError> {
        if let Some((_, e)) = &self.progress.borrow().failure {
            return Err(StoreError::Io(Arc::clone(e)));
        }
        let count = records.len();
        let mut first_seq = None;
        let mut bytes = 0u64;
        // Even an empty snapshot is one (end) record, so that it can be found.
        let records = if records.is_empty() {
            vec![Vec::new()]
        } else {
            records
        };
        let headers = |i: usize, expect: u64| {
            let mut headers = HeaderMap::new();
            headers.insert(AT, at.to_string().as_str());
            headers.insert(WRITER, self.writer_id.as_str());
            if i + 1 == count.max(1) {
                headers.insert(END, "1");
            }
            if count == 0 {
                headers.insert(EMPTY, "1");
            }
            headers.insert(
                async_nats::header::NATS_EXPECTED_LAST_SEQUENCE,
                expect.to_string().as_str(),
            );
            headers
        };
        let id = |i: usize| format!("snap-{at}-{i}");
        bytes += records.iter().map(|r| r.len() as u64).sum::<u64>();
        // Published back to back, each expecting the one before it, and then acknowledged:
        // a snapshot of many records costs about one round trip, not one per record. From
        // the first one not acknowledged on, one at a time with retries (a retry of one that
        // landed is dropped by its message id).
        let compress = self.compress.load(Ordering::Relaxed);
        let records: Vec<Packed> = records
            .into_iter()
            .map(|r| packed::pack(r, compress))
            .collect();
        let headers = |i: usize, expect: u64| {
            let mut h = headers(i, expect);
            if let Some(codec) = records[i].codec {
                h.insert(CODEC, codec);
            }
            h
        };
        let mut acks = Vec::with_capacity(records.len());
        for (i, record) in records.iter().enumerate() {
            let mut h = headers(i, self.last_seq + i as u64);
            self.stamp(&mut h, id(i));
            match js
                .publish_with_headers(self.snap_subject(), h, record.body.clone())
                .await
            {
                Ok(ack) => acks.push(ack),
                Err(_) => break,
            }
        }
        let mut confirmed = 0;
        for ack in acks {
            match ack.await {
                Ok(ack) => {
                    self.last_seq = ack.sequence;
                    first_seq.get_or_insert(ack.sequence);
                    confirmed += 1;
                }
                Err(_) => break,
            }
        }
        for (i, record) in records.iter().enumerate().skip(confirmed) {
            let published = self
                .publish_one(
                    js,
                    self.snap_subject(),
                    headers(i, self.last_seq),
                    record.body.clone(),
                    &id(i),
                )
                .await
                .map_err(|e| e.error);
            // Not written: another writer, or JetStream unreachable for long; either way
            // nothing more from this one is durable.
            let ack = published.map_err(|e| {
                self.fail(Lsn::MAX, &e);
                io_error(e)
            })?;
            self.last_seq = ack.sequence;
            first_seq.get_or_insert(ack.sequence);
        }
        let stream = js
            .get_stream(self.stream())
            .await
            .map_err(|e| io_error(format!("cannot open the stream: {e}")))?;
        // Older snapshots and fences, then log records before `at`, are no longer needed.
        if let Some(first) = first_seq {
            for subject in [self.snap_subject(), self.fence_subject()] {
                stream
                    .purge()
                    .filter(subject)
                    .sequence(first)
                    .await
                    .map_err(|e| io_error(format!("cannot purge old snapshots: {e}")))?;
            }
        }
        // The first message still needed holds `at`, or comes after it.
        let keep = match self.index.range(..=at).next_back() {
            Some((first, m)) if first + m.count > at => *first,
            _ => at,
        };
        let keep_from = self
            .index
            .range(keep..)
            .next()
            .map_or(self.last_seq + 1, |(_, m)| m.seq);
        stream
            .purge()
            .filter(self.log_subject())
            .sequence(keep_from)
            .await
            .map_err(|e| io_error(format!("cannot purge the log: {e}")))?;
        self.index = self.index.split_off(&keep);
        let mut s = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        s.snapshots += 1;
        s.snapshot_bytes = bytes;
        s.log_bytes = self.index.values().map(|m| m.bytes).sum();
        Ok(())
    }
}
