//! The on-disk format shared by log segments and snapshots: a fixed header naming the
//! format version, then records, each framed as `length (u32 LE) | CRC-32 of length and
//! payload (u32 LE) | payload`. A snapshot is its frames, then an empty frame marking it
//! complete. A log segment of format version 2 holds *units*, one per write of the writer
//! (one group commit): `length of the body (u32 LE) | CRC-32 of length, position and body
//! (u32 LE) | position of its first record (u64 LE) | body: its records' frames`. A version 1
//! segment (sqsim before units) holds the frames alone and is read as it always was.
//!
//! A reader tells a torn final write from corruption: a bad unit (in a version 1 segment, a
//! bad frame) is torn only when no whole, valid unit (frame) starts anywhere after it. A crash
//! or a power cut tears only the last write, and a unit is that write whole, so any damage
//! inside the last unit — cut short, or a page of zeros in its middle with later pages
//! written, as a power cut leaves it — drops that unit, never records after valid ones. One
//! flipped bit in a unit or frame with a valid one after it is corruption, never a reason to
//! drop what follows.

#[cfg(test)]
mod tests;

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::StoreError;

/// The format this build writes; it reads this and every older one. Version 2 put a log
/// segment's records in units; snapshots are the same in both.
pub(crate) const FORMAT_VERSION: u32 = 2;
/// The first version whose log segments hold units.
const UNITS_SINCE: u32 = 2;
/// Header bytes before the first frame.
pub(crate) const HEADER_LEN: u64 = 24;
/// Frame bytes before the payload.
pub(crate) const FRAME_OVERHEAD: usize = 8;
/// Unit bytes before the body.
pub(crate) const UNIT_OVERHEAD: usize = 16;
/// No record is larger: a length above it is damage, not data.
pub(crate) const MAX_RECORD: usize = 64 << 20;
/// No unit's body is larger (the writer splits a larger batch; one record always fits): a
/// length above it is damage, and a reader holds at most this much of a unit at once.
pub(crate) const MAX_UNIT: usize = 128 << 20;

/// Which kind of file a header opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileKind {
    Log,
    Snapshot,
}

impl FileKind {
    fn magic(self) -> &'static [u8; 8] {
        match self {
            FileKind::Log => b"SQSIMLOG",
            FileKind::Snapshot => b"SQSIMSNP",
        }
    }
}

/// The header of a file of `kind` whose first record is at `lsn`.
pub(crate) fn header(kind: FileKind, lsn: u64) -> [u8; HEADER_LEN as usize] {
    header_of_version(kind, lsn, FORMAT_VERSION)
}

/// The header of a file of `kind` in format `version` (tests write older ones).
pub(crate) fn header_of_version(
    kind: FileKind,
    lsn: u64,
    version: u32,
) -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[..8].copy_from_slice(kind.magic());
    h[8..12].copy_from_slice(&version.to_le_bytes());
    h[16..24].copy_from_slice(&lsn.to_le_bytes());
    h
}

fn checksum(len: [u8; 4], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&len);
    h.update(payload);
    h.finalize()
}

fn unit_checksum(len: [u8; 4], lsn: [u8; 8], body: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&len);
    h.update(&lsn);
    h.update(body);
    h.finalize()
}

/// Appends one framed record to `out`.
pub(crate) fn encode(out: &mut Vec<u8>, payload: &[u8]) {
    let len = (payload.len() as u32).to_le_bytes();
    out.extend_from_slice(&len);
    out.extend_from_slice(&checksum(len, payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// The header of a unit whose body is `body` (frames made by [`encode`]) and whose first
/// record is at `lsn`.
pub(crate) fn unit_header(lsn: u64, body: &[u8]) -> [u8; UNIT_OVERHEAD] {
    let len = (body.len() as u32).to_le_bytes();
    let lsn = lsn.to_le_bytes();
    let mut h = [0u8; UNIT_OVERHEAD];
    h[..4].copy_from_slice(&len);
    h[4..8].copy_from_slice(&unit_checksum(len, lsn, body).to_le_bytes());
    h[8..].copy_from_slice(&lsn);
    h
}

/// How much of `frames` (made by [`encode`]) one unit takes: the bytes of the whole frames
/// that fit in `max` (at least one frame), and how many records they are.
pub(crate) fn unit_end(frames: &[u8], max: usize) -> (usize, u64) {
    let (mut end, mut records) = (0usize, 0u64);
    while end + FRAME_OVERHEAD <= frames.len() {
        let len = u32::from_le_bytes(frames[end..end + 4].try_into().unwrap_or_default());
        let next = end + FRAME_OVERHEAD + len as usize;
        if records > 0 && next > max {
            break;
        }
        end = next.min(frames.len());
        records += 1;
    }
    (end, records)
}

/// Writes the header and framed `records` to `w`; with `end`, a closing empty frame marks the
/// file complete (snapshots).
pub(crate) fn write_all(
    w: &mut impl Write,
    kind: FileKind,
    lsn: u64,
    records: &mut dyn Iterator<Item = Vec<u8>>,
) -> io::Result<u64> {
    w.write_all(&header(kind, lsn))?;
    let mut buf = Vec::with_capacity(1 << 16);
    let mut written = HEADER_LEN;
    for r in records {
        encode(&mut buf, &r);
        if buf.len() >= 1 << 16 {
            w.write_all(&buf)?;
            written += buf.len() as u64;
            buf.clear();
        }
    }
    encode(&mut buf, &[]);
    w.write_all(&buf)?;
    Ok(written + buf.len() as u64)
}

/// What a reader found next.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// A whole record, now in the reader's buffer.
    Record,
    /// An empty frame: the writer's end marker.
    EndMarker,
    /// The end of the file, cleanly between frames (units).
    End,
    /// The file's last write was cut short or damaged from this offset on: what follows is
    /// not data.
    Torn { offset: u64 },
}

/// Reads the records of one file in order.
pub(crate) struct Reader {
    path: PathBuf,
    file: BufReader<File>,
    len: u64,
    /// Where the next frame (unit) starts.
    offset: u64,
    /// The first record's position (from the header).
    pub lsn: u64,
    /// The latest record's payload.
    pub buf: Vec<u8>,
    /// A log segment of units (format version 2 on).
    units: bool,
    /// The current unit's body, checked whole, and where its next frame starts.
    unit: Vec<u8>,
    in_unit: usize,
    /// The position the next unit must start at.
    next_lsn: u64,
}

impl Reader {
    /// Opens `path` and checks its header.
    pub(crate) fn open(path: &Path, kind: FileKind) -> Result<Reader, StoreError> {
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        // Never through a symbolic link (the data directory holds none: see `log::dir`).
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW);
        let f = options.open(path)?;
        let len = f.metadata()?.len();
        let mut file = BufReader::with_capacity(1 << 20, f);
        let corrupt = |reason: &str| StoreError::Corrupt {
            file: path.to_path_buf(),
            offset: 0,
            reason: reason.to_string(),
        };
        let mut h = [0u8; HEADER_LEN as usize];
        file.read_exact(&mut h)
            .map_err(|_| corrupt("the header is cut short"))?;
        if &h[..8] != kind.magic() {
            return Err(corrupt("not an sqsim file of this kind (bad magic)"));
        }
        let version = u32::from_le_bytes(h[8..12].try_into().unwrap_or_default());
        if version > FORMAT_VERSION {
            return Err(StoreError::NewerFormat {
                file: path.to_path_buf(),
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let lsn = u64::from_le_bytes(h[16..24].try_into().unwrap_or_default());
        Ok(Reader {
            path: path.to_path_buf(),
            file,
            len,
            offset: HEADER_LEN,
            lsn,
            buf: Vec::new(),
            units: kind == FileKind::Log && version >= UNITS_SINCE,
            unit: Vec::new(),
            in_unit: 0,
            next_lsn: lsn,
        })
    }

    /// The byte offset of the next frame (in a segment of units, of the next unit).
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Reads the next record into [`Reader::buf`].
    pub(crate) fn next(&mut self) -> Result<Next, StoreError> {
        if !self.units {
            return self.next_frame();
        }
        if self.in_unit == self.unit.len() {
            if let Some(end) = self.next_unit()? {
                return Ok(end);
            }
        }
        // The unit's frames were checked when it was read: this one is whole.
        let at = self.in_unit;
        let len = u32::from_le_bytes(self.unit[at..at + 4].try_into().unwrap_or_default());
        let start = at + FRAME_OVERHEAD;
        let end = start + len as usize;
        self.buf.clear();
        self.buf.extend_from_slice(&self.unit[start..end]);
        self.in_unit = end;
        self.next_lsn += 1;
        Ok(Next::Record)
    }

    /// Reads the next frame of a version 1 segment or a snapshot.
    fn next_frame(&mut self) -> Result<Next, StoreError> {
        let at = self.offset;
        if at == self.len {
            return Ok(Next::End);
        }
        let mut head = [0u8; FRAME_OVERHEAD];
        if self.len - at < FRAME_OVERHEAD as u64 {
            return self.damaged(at, "a frame header is cut short");
        }
        self.file.read_exact(&mut head)?;
        let len_bytes: [u8; 4] = head[..4].try_into().unwrap_or_default();
        let len = u32::from_le_bytes(len_bytes) as usize;
        let crc = u32::from_le_bytes(head[4..].try_into().unwrap_or_default());
        let end = at + (FRAME_OVERHEAD + len) as u64;
        if len > MAX_RECORD {
            return self.damaged(at, "a frame length is out of range");
        }
        if end > self.len {
            return self.damaged(at, "a frame is cut short");
        }
        self.buf.resize(len, 0);
        self.file.read_exact(&mut self.buf)?;
        if checksum(len_bytes, &self.buf) != crc {
            return self.damaged(at, "checksum mismatch");
        }
        self.offset = end;
        Ok(if len == 0 {
            Next::EndMarker
        } else {
            Next::Record
        })
    }

    /// Reads the next unit whole and checks it; `Some` when there is none to read (the end,
    /// or a torn last write).
    fn next_unit(&mut self) -> Result<Option<Next>, StoreError> {
        let at = self.offset;
        if at == self.len {
            return Ok(Some(Next::End));
        }
        if self.len - at < UNIT_OVERHEAD as u64 {
            return self.damaged(at, "a unit header is cut short").map(Some);
        }
        let mut head = [0u8; UNIT_OVERHEAD];
        self.file.read_exact(&mut head)?;
        let len_bytes: [u8; 4] = head[..4].try_into().unwrap_or_default();
        let len = u32::from_le_bytes(len_bytes) as usize;
        let crc = u32::from_le_bytes(head[4..8].try_into().unwrap_or_default());
        let lsn_bytes: [u8; 8] = head[8..].try_into().unwrap_or_default();
        // Every unit holds a record: a length of 0 (a page of zeros) is no unit.
        if len == 0 || len > MAX_UNIT {
            return self.damaged(at, "a unit length is out of range").map(Some);
        }
        let end = at + (UNIT_OVERHEAD + len) as u64;
        if end > self.len {
            return self.damaged(at, "a unit is cut short").map(Some);
        }
        self.unit.resize(len, 0);
        self.file.read_exact(&mut self.unit)?;
        if unit_checksum(len_bytes, lsn_bytes, &self.unit) != crc {
            return self.damaged(at, "checksum mismatch").map(Some);
        }
        let corrupt = |reason: String| StoreError::Corrupt {
            file: self.path.clone(),
            offset: at,
            reason,
        };
        // Whole and valid, so written by sqsim: but not where this file's records go on.
        let lsn = u64::from_le_bytes(lsn_bytes);
        if lsn != self.next_lsn {
            return Err(corrupt(format!(
                "a unit of records from position {lsn} where position {} follows",
                self.next_lsn
            )));
        }
        frames_in(&self.unit).map_err(|why| corrupt(why.to_string()))?;
        self.offset = end;
        self.in_unit = 0;
        Ok(None)
    }

    /// A bad frame or unit at `at`: a torn final write when no valid one starts anywhere
    /// after it, corruption (with the reason and where a valid one was found) otherwise.
    /// Its length is not trusted: a flipped bit there would otherwise hide everything after it.
    fn damaged(&mut self, at: u64, reason: &str) -> Result<Next, StoreError> {
        let found = match self.valid_after(at)? {
            Search::Nothing => return Ok(Next::Torn { offset: at }),
            Search::Found(next) if self.units => {
                format!("a valid unit of records (a later write) follows at byte offset {next}")
            }
            Search::Found(next) => format!("a valid record follows at byte offset {next}"),
            Search::GaveUp => "what follows could not be shown to hold no record".to_string(),
        };
        Err(StoreError::Corrupt {
            file: self.path.clone(),
            offset: at,
            reason: format!("{reason}; {found}"),
        })
    }

    /// Looks for a whole unit (in a version 1 segment or a snapshot, a frame) with a matching
    /// checksum starting anywhere after `at`: only a later write is evidence of data after
    /// the damage (the frames inside a torn unit are not). A run of random bytes passes the
    /// CRC-32 about once in four billion tries. Small candidates first (real ones after
    /// damage are found at once, and random bytes rarely read as a small length), then larger
    /// ones within a bounded amount of checksumming: past it, the damage is reported as
    /// corruption (refusing to start beats dropping records).
    fn valid_after(&mut self, at: u64) -> Result<Search, StoreError> {
        let f = self.file.get_mut();
        f.seek(SeekFrom::Start(at + 1))?;
        let mut tail = Vec::new();
        f.read_to_end(&mut tail)?;
        let base = at + 1;
        let (overhead, least, most) = if self.units {
            (UNIT_OVERHEAD, 1, MAX_UNIT)
        } else {
            (FRAME_OVERHEAD, 0, MAX_RECORD)
        };
        let mut budget: usize = SCAN_BUDGET;
        for (min, max) in [(least, SMALL_CANDIDATE), (SMALL_CANDIDATE + 1, most)] {
            for i in 0..tail.len().saturating_sub(overhead - 1) {
                let len_bytes: [u8; 4] = tail[i..i + 4].try_into().unwrap_or_default();
                let len = u32::from_le_bytes(len_bytes) as usize;
                let start = i + overhead;
                if len < min || len > max || start + len > tail.len() {
                    continue;
                }
                if len > budget {
                    return Ok(Search::GaveUp);
                }
                budget -= len;
                let crc = u32::from_le_bytes(tail[i + 4..i + 8].try_into().unwrap_or_default());
                let body = &tail[start..start + len];
                let valid = if self.units {
                    let lsn: [u8; 8] = tail[i + 8..i + 16].try_into().unwrap_or_default();
                    unit_checksum(len_bytes, lsn, body) == crc
                } else {
                    checksum(len_bytes, body) == crc
                };
                if valid {
                    return Ok(Search::Found(base + i as u64));
                }
            }
        }
        Ok(Search::Nothing)
    }
}

/// Checks that a unit's body is whole frames of valid records (what the writer made: only
/// a bug could break it under a valid unit checksum).
fn frames_in(body: &[u8]) -> Result<(), &'static str> {
    let mut at = 0usize;
    while at < body.len() {
        if body.len() - at < FRAME_OVERHEAD {
            return Err("a record's frame inside the unit is cut short");
        }
        let len_bytes: [u8; 4] = body[at..at + 4].try_into().unwrap_or_default();
        let len = u32::from_le_bytes(len_bytes) as usize;
        let crc = u32::from_le_bytes(body[at + 4..at + 8].try_into().unwrap_or_default());
        let start = at + FRAME_OVERHEAD;
        if len == 0 || len > MAX_RECORD || start + len > body.len() {
            return Err("a record's length inside the unit is out of range");
        }
        if checksum(len_bytes, &body[start..start + len]) != crc {
            return Err("a record's checksum inside the unit does not match");
        }
        at = start + len;
    }
    Ok(())
}

/// Candidates up to this length are checked first.
const SMALL_CANDIDATE: usize = 1 << 20;
/// At most this many payload bytes are checksummed looking for a record after damage.
const SCAN_BUDGET: usize = 4 << 30;

/// What [`Reader::valid_after`] found.
enum Search {
    Nothing,
    Found(u64),
    GaveUp,
}
