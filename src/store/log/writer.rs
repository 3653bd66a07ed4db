//! The writer: takes every record appended since its last write, writes them as one unit
//! (`frame`: its own length and checksum, so a power cut tearing it is told from damage to
//! what was acknowledged before) to the current segment and, in fsync mode, syncs once for
//! all of them; a write the disk refused is cut back and retried.

use std::fs::{self, File};
use std::io::{self, IoSlice, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::super::frame::{self, FileKind};
use super::super::{Lsn, StoreError, SyncMode};
use super::{lock, segment_name, sync_dir, Inner, Segment};

/// How long the writer waits before retrying after the disk refused a write.
const RETRY_AFTER: Duration = Duration::from_millis(100);
/// How long a stopping store keeps retrying records the disk refused before giving up.
pub(super) const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// What one attempt to write the pending records came to.
pub(super) enum Step {
    /// Nothing was pending.
    Idle,
    Written,
    /// The disk refused; the records are pending again.
    Failed,
    /// The store is closing and the disk refused: give up.
    Abandoned,
}

impl Inner {
    /// Starts a new segment at `lsn` (the writer must not be writing), atomically: the
    /// header is written and synced under a temporary name, then renamed into place and the
    /// directory synced, so a crash at any point leaves either no segment or a whole empty
    /// one (never a header-less file that a later start would have to refuse).
    pub(super) fn start_segment(
        &self,
        slot: &mut Option<Segment>,
        lsn: Lsn,
    ) -> Result<(), StoreError> {
        let path = self.dir.join(segment_name(lsn));
        let tmp = self.dir.join(format!("{}.tmp", segment_name(lsn)));
        let made = (|| -> Result<File, StoreError> {
            // A `.tmp` a crash left behind is replaced, a link there removed (never followed).
            let mut file = super::dir::replace(&tmp)?;
            crate::store::crash_point::reached("segment-created");
            file.write_all(&frame::header(FileKind::Log, lsn))?;
            file.sync_all()?;
            crate::store::crash_point::reached("segment-written");
            fs::rename(&tmp, &path)?;
            crate::store::crash_point::reached("segment-renamed");
            sync_dir(&self.dir)?;
            Ok(file)
        })();
        match made {
            Ok(file) => {
                self.has_segment.store(true, Ordering::Release);
                *slot = Some(Segment {
                    file,
                    len: frame::HEADER_LEN,
                    end: lsn,
                });
                Ok(())
            }
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    /// The writer thread: hands each batch of appended records to the disk. In `os` mode a
    /// request writes its own batch (see [`Inner::write_pending`]), and the thread only
    /// writes records no request waits for, when their appender nudges it.
    pub(super) fn write_loop(&self) {
        loop {
            {
                let mut p = lock(&self.pending);
                while p.buf.is_empty() && !p.closing {
                    p.writer_idle = true;
                    if self.has_segment.load(Ordering::Acquire) {
                        p = self.wake.wait(p).unwrap_or_else(|e| e.into_inner());
                    } else {
                        // No segment yet (the disk refused to create one): try again
                        // soon even with nothing to write, so health recovers by itself.
                        p = self
                            .wake
                            .wait_timeout(p, RETRY_AFTER)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                        if p.buf.is_empty() && !p.closing {
                            break;
                        }
                    }
                }
                p.writer_idle = false;
                if p.buf.is_empty() && p.closing {
                    return;
                }
            }
            match self.write_pending(&mut lock(&self.segment)) {
                Step::Idle | Step::Written => {}
                Step::Failed => std::thread::sleep(RETRY_AFTER),
                Step::Abandoned => return,
            }
        }
    }

    /// Writes everything pending as one unit (and in fsync mode one sync), while the caller
    /// holds the segment: whoever holds it is the only writer, so batches reach the file in
    /// the order they were appended.
    pub(super) fn write_pending(&self, slot: &mut Option<Segment>) -> Step {
        let (bytes, upto) = {
            let mut p = lock(&self.pending);
            if p.buf.is_empty() {
                drop(p);
                if slot.is_none() {
                    self.open_segment(slot);
                }
                return Step::Idle;
            }
            // The buffer written last time, emptied, goes back to the appenders: no
            // reallocation once both have grown to the usual batch size.
            let spare = std::mem::take(&mut *lock(&self.spare));
            let mut bytes = std::mem::replace(&mut p.buf, spare);
            // One unit at most `MAX_UNIT` long (a reader holds one whole): the rest of a
            // batch that grew past it (the disk refusing for a while) waits for the next
            // write, in front of what arrives meanwhile.
            let (end, records) = frame::unit_end(&bytes, self.max_unit());
            if end < bytes.len() {
                p.buf.extend_from_slice(&bytes[end..]);
                bytes.truncate(end);
                // Whoever waits for the rest writes it, but a record nobody waits for
                // (nudged) would wait for the next append: the writer takes it.
                if std::mem::take(&mut p.writer_idle) {
                    self.wake.notify_one();
                }
            }
            // Counted, not `p.next`: an append after closing takes a position but is never
            // written, and must not be reported durable.
            (bytes, self.progress.borrow().durable + records)
        };
        match self.write(slot, &bytes, upto) {
            Ok(()) => {
                self.counters
                    .backlog
                    .fetch_sub(bytes.len() as u64, Ordering::Relaxed);
                let mut bytes = bytes;
                bytes.clear();
                *lock(&self.spare) = bytes;
                *lock(&self.last_error) = None;
                self.progress.send_modify(|p| {
                    p.durable = upto;
                    p.failure = None;
                });
                Step::Written
            }
            Err(e) => {
                tracing::error!(error = %e, "writing the log failed; retrying");
                let msg: Arc<str> = Arc::from(e.to_string());
                *lock(&self.last_error) = Some(e.to_string());
                {
                    let mut p = lock(&self.pending);
                    if p.closing_since.is_some_and(|t| t.elapsed() >= CLOSE_GRACE) {
                        // Stopping with the disk still refusing after retrying for the
                        // grace period: these records were never acknowledged (no answer
                        // that depends on one goes out before it is written), and waiting
                        // on would keep the process alive forever.
                        tracing::error!(
                            records = p.next.saturating_sub(self.progress.borrow().durable),
                            error = %e,
                            "stopping with changes the disk refused: they are lost; none was acknowledged"
                        );
                        return Step::Abandoned;
                    }
                    // Put the records back in front of what arrived since, in order.
                    let mut again = bytes;
                    again.extend_from_slice(&p.buf);
                    p.buf = again;
                }
                self.progress.send_modify(|p| {
                    p.failure = Some((upto, Arc::clone(&msg)));
                    p.failures += 1;
                });
                Step::Failed
            }
        }
    }

    /// The longest unit to write.
    fn max_unit(&self) -> usize {
        #[cfg(test)]
        return self.max_unit.load(Ordering::Acquire);
        #[cfg(not(test))]
        frame::MAX_UNIT
    }

    /// Creates the segment the writer appends to if there is none, at the first position
    /// not yet durable; records whether that worked (health reads it).
    pub(super) fn open_segment(&self, slot: &mut Option<Segment>) {
        let at = self.progress.borrow().durable;
        match self.start_segment(slot, at) {
            Ok(()) => {
                *lock(&self.last_error) = None;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot create a log segment; writes wait until it can be");
                *lock(&self.last_error) = Some(format!("cannot create a log segment: {e}"));
            }
        }
    }

    pub(super) fn write(
        &self,
        slot: &mut Option<Segment>,
        bytes: &[u8],
        upto: Lsn,
    ) -> Result<(), StoreError> {
        if slot.is_none() {
            let at = self.progress.borrow().durable;
            self.start_segment(slot, at)?;
        }
        let seg = slot
            .as_mut()
            .ok_or_else(|| StoreError::Io(Arc::from("no open log segment")))?;
        #[cfg(test)]
        if self.refusing.load(Ordering::Acquire) {
            return Err(StoreError::Io(Arc::from(
                "No space left on device (os error 28) [injected]",
            )));
        }
        let started = Instant::now();
        let head = frame::unit_header(seg.end, bytes);
        let written = write_unit(&mut seg.file, &head, bytes).and_then(|()| match self.sync {
            SyncMode::Fsync => seg.file.sync_data(),
            SyncMode::Os => Ok(()),
        });
        if let Err(e) = written {
            // Cut off whatever part of the batch reached the file, so the retry appends
            // after whole frames only.
            let _ = seg.file.set_len(seg.len);
            let _ = std::io::Seek::seek(&mut seg.file, std::io::SeekFrom::Start(seg.len));
            return Err(e.into());
        }
        let unit = (head.len() + bytes.len()) as u64;
        seg.len += unit;
        seg.end = upto;
        let c = &self.counters;
        c.syncs.fetch_add(1, Ordering::Relaxed);
        c.sync_micros
            .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        c.log_bytes.fetch_add(unit, Ordering::Relaxed);
        Ok(())
    }
}

/// Writes a unit's header and body, in one call when the kernel takes it all (it normally
/// does), without copying the body behind the header.
fn write_unit(file: &mut File, head: &[u8], body: &[u8]) -> io::Result<()> {
    let mut slices = [IoSlice::new(head), IoSlice::new(body)];
    let mut left: &mut [IoSlice<'_>] = &mut slices;
    while !left.is_empty() {
        match file.write_vectored(left) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut left, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
