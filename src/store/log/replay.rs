//! Playing the data directory back on start-up, one file at a time: a torn final write
//! in the newest segment is cut off and kept aside; damage anywhere else stops start-up,
//! or with `--salvage` ends recovery there.

use std::fs;
use std::path::{Path, PathBuf};

use super::super::frame::{self, FileKind, Next, Reader};
use super::super::{Apply, Lsn, Recovered, StoreError};
use super::{dir, LogStore};

/// Sets the bytes of `path` from `offset` on (a torn final write) aside in
/// `<path>.torn-<offset>`, then cuts the file there so the next start reads cleanly. They
/// were never acknowledged (a record is answered only once written whole), but they are
/// evidence: if the space to copy them is missing, they are cut anyway (the start must not
/// depend on free space) and the log line says so.
fn keep_torn_tail(path: &Path, offset: u64, len: u64) -> Result<(), StoreError> {
    let aside = PathBuf::from(format!("{}.torn-{offset}", path.display()));
    let copied = (|| -> std::io::Result<()> {
        let mut from = dir::open_to_read(path)?;
        std::io::Seek::seek(&mut from, std::io::SeekFrom::Start(offset))?;
        let mut to = dir::replace(&aside)?;
        std::io::copy(&mut from, &mut to)?;
        to.sync_all()
    })();
    match &copied {
        Ok(()) => tracing::warn!(
            file = %path.display(),
            offset,
            bytes = len - offset,
            kept = %aside.display(),
            "the log ends in an incomplete or damaged write, cut off and kept aside: a crash during its write (then it was never answered), or damage on the disk (then an acknowledged change is lost)"
        ),
        Err(e) => {
            let _ = fs::remove_file(&aside);
            tracing::warn!(
                file = %path.display(),
                offset,
                bytes = len - offset,
                error = %e,
                "the log ends in an incomplete or damaged write, cut off without a copy (no room for one): a crash during its write (then it was never answered), or damage on the disk (then an acknowledged change is lost)"
            );
        }
    }
    let f = dir::open_to_write(path)?;
    f.set_len(offset)?;
    f.sync_all()?;
    Ok(())
}

impl LogStore {
    /// Plays one file's records from position `from` on; returns the position after its last
    /// record and whether it ended torn (the rest is kept aside and the file truncated).
    /// Only the newest segment (`last`) can end torn: every older one was whole before the
    /// next was created, so damage at its end is corruption.
    pub(super) fn replay_file(
        &self,
        path: &Path,
        kind: FileKind,
        from: Lsn,
        last: bool,
        apply: &mut Apply<'_>,
        report: &mut Recovered,
    ) -> Result<(Lsn, bool), StoreError> {
        let mut r = match Reader::open(path, kind) {
            // A newest segment whose header never reached the disk (a sqsim before atomic
            // segment creation, killed between creating it and writing its header) holds
            // no record: a torn write.
            Err(StoreError::Corrupt { offset: 0, .. })
                if last
                    && kind == FileKind::Log
                    && fs::metadata(path)?.len() < frame::HEADER_LEN =>
            {
                let len = fs::metadata(path)?.len();
                tracing::warn!(file = %path.display(), bytes = len, "the newest log segment has no header (a crash while creating it): set aside");
                report.torn_bytes += len;
                fs::rename(path, path.with_extension("wal.torn"))?;
                return Ok((from, true));
            }
            // A header that does not read (damaged, or the file cut inside it): with
            // `--salvage` recovery ends before this file, which is kept aside.
            Err(e @ StoreError::Corrupt { .. }) => {
                let ended = self.salvaged(e, from, report)?;
                fs::rename(path, path.with_extension("salvaged"))?;
                return Ok(ended);
            }
            other => other?,
        };
        let mut lsn = r.lsn;
        loop {
            let at = r.offset();
            match r.next() {
                Ok(Next::Record) => {
                    if lsn >= from {
                        let position = (kind == FileKind::Log).then_some(lsn);
                        apply(position, &r.buf)
                            .map_err(|reason| StoreError::Replay { lsn, reason })?;
                        report.records += 1;
                        if kind == FileKind::Snapshot {
                            report.from_snapshot += 1;
                        }
                    }
                    lsn += 1;
                }
                Ok(Next::EndMarker) if kind == FileKind::Snapshot => return Ok((lsn, false)),
                Ok(Next::End) if kind == FileKind::Log => return Ok((lsn, false)),
                Ok(Next::Torn { offset }) if kind == FileKind::Log && last => {
                    let len = fs::metadata(path)?.len();
                    report.torn_bytes += len - offset;
                    keep_torn_tail(path, offset, len)?;
                    return Ok((lsn, true));
                }
                Ok(_) => {
                    // A snapshot without its end marker, or an end marker in a log.
                    let e = StoreError::Corrupt {
                        file: path.to_path_buf(),
                        offset: at,
                        reason: "the file does not end where its format says".into(),
                    };
                    return self.salvaged(e, lsn, report);
                }
                Err(e @ StoreError::Corrupt { .. }) => {
                    let ended = self.salvaged(e, lsn, report)?;
                    // Keep the damaged file aside for inspection; the live one ends before
                    // the damage so that the next start reads cleanly.
                    dir::copy_aside(path, &path.with_extension("salvaged"))?;
                    let cut = if kind == FileKind::Log { at } else { 0 };
                    dir::open_to_write(path)?.set_len(cut)?;
                    if kind == FileKind::Snapshot {
                        fs::remove_file(path)?;
                    }
                    return Ok(ended);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// With `--salvage`, a corrupt record ends recovery there; otherwise it stops start-up.
    pub(super) fn salvaged(
        &self,
        e: StoreError,
        lsn: Lsn,
        report: &mut Recovered,
    ) -> Result<(Lsn, bool), StoreError> {
        if !self.inner.salvage {
            return Err(e);
        }
        tracing::warn!(error = %e, "salvage: starting with the records before it");
        report.salvaged = Some(e.to_string());
        Ok((lsn, true))
    }
}
