//! The on-disk framing shared by log segments and snapshots: a fixed header naming the
//! format version, then records, each as `length (u32 LE) | CRC-32 of length and payload
//! (u32 LE) | payload`. A reader tells a torn final write from corruption: a bad frame is
//! torn only when no whole, valid frame follows it anywhere in the file (a crash can only
//! tear the last write), so one flipped bit in a length or checksum in the middle of a file
//! is corruption, never a reason to drop what follows.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::StoreError;

/// The format this build writes; it reads this and every older one.
pub(crate) const FORMAT_VERSION: u32 = 1;
/// Header bytes before the first frame.
pub(crate) const HEADER_LEN: u64 = 24;
/// Frame bytes before the payload.
pub(crate) const FRAME_OVERHEAD: usize = 8;
/// No record is larger: a length above it is damage, not data.
pub(crate) const MAX_RECORD: usize = 64 << 20;

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
    let mut h = [0u8; HEADER_LEN as usize];
    h[..8].copy_from_slice(kind.magic());
    h[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&lsn.to_le_bytes());
    h
}

fn checksum(len: [u8; 4], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&len);
    h.update(payload);
    h.finalize()
}

/// Appends one framed record to `out`.
pub(crate) fn encode(out: &mut Vec<u8>, payload: &[u8]) {
    let len = (payload.len() as u32).to_le_bytes();
    out.extend_from_slice(&len);
    out.extend_from_slice(&checksum(len, payload).to_le_bytes());
    out.extend_from_slice(payload);
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
    /// The end of the file, cleanly between frames.
    End,
    /// The file's last write was cut short at this offset: what follows is not data.
    Torn { offset: u64 },
}

/// Reads the frames of one file in order.
pub(crate) struct Reader {
    path: PathBuf,
    file: BufReader<File>,
    len: u64,
    offset: u64,
    /// The first record's position (from the header).
    pub lsn: u64,
    /// The latest record's payload.
    pub buf: Vec<u8>,
}

impl Reader {
    /// Opens `path` and checks its header.
    pub(crate) fn open(path: &Path, kind: FileKind) -> Result<Reader, StoreError> {
        // Never through a symbolic link (the data directory holds none: see `log::dir`).
        let f = std::os::unix::fs::OpenOptionsExt::custom_flags(
            std::fs::OpenOptions::new().read(true),
            libc::O_NOFOLLOW,
        )
        .open(path)?;
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
        Ok(Reader {
            path: path.to_path_buf(),
            file,
            len,
            offset: HEADER_LEN,
            lsn: u64::from_le_bytes(h[16..24].try_into().unwrap_or_default()),
            buf: Vec::new(),
        })
    }

    /// The byte offset of the next frame.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Reads the next frame into [`Reader::buf`].
    pub(crate) fn next(&mut self) -> Result<Next, StoreError> {
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

    /// A bad frame at `at`: a torn final write when no valid frame starts anywhere after
    /// it, corruption (with the reason and where a valid frame was found) otherwise. Its
    /// length is not trusted: a flipped bit there would otherwise hide everything after it.
    fn damaged(&mut self, at: u64, reason: &str) -> Result<Next, StoreError> {
        let found = match self.valid_frame_after(at)? {
            Search::Nothing => return Ok(Next::Torn { offset: at }),
            Search::Found(next) => format!("a valid record follows at byte offset {next}"),
            Search::GaveUp => "what follows could not be shown to hold no record".to_string(),
        };
        Err(StoreError::Corrupt {
            file: self.path.clone(),
            offset: at,
            reason: format!("{reason}; {found}"),
        })
    }

    /// Looks for a whole frame with a matching checksum starting anywhere after `at`. A run
    /// of random bytes passes the CRC-32 about once in four billion tries. Small candidates
    /// first (real records after damage are found at once, and random bytes rarely read as
    /// a small length), then larger ones within a bounded amount of checksumming: past it,
    /// the damage is reported as corruption (refusing to start beats dropping records).
    fn valid_frame_after(&mut self, at: u64) -> Result<Search, StoreError> {
        let f = self.file.get_mut();
        f.seek(SeekFrom::Start(at + 1))?;
        let mut tail = Vec::new();
        f.read_to_end(&mut tail)?;
        let base = at + 1;
        let mut budget: usize = SCAN_BUDGET;
        for (min, max) in [(0, SMALL_CANDIDATE), (SMALL_CANDIDATE + 1, MAX_RECORD)] {
            for i in 0..tail.len().saturating_sub(FRAME_OVERHEAD - 1) {
                let len_bytes: [u8; 4] = tail[i..i + 4].try_into().unwrap_or_default();
                let len = u32::from_le_bytes(len_bytes) as usize;
                let start = i + FRAME_OVERHEAD;
                if len < min || len > max || start + len > tail.len() {
                    continue;
                }
                if len > budget {
                    return Ok(Search::GaveUp);
                }
                budget -= len;
                let crc = u32::from_le_bytes(tail[i + 4..i + 8].try_into().unwrap_or_default());
                if checksum(len_bytes, &tail[start..start + len]) == crc {
                    return Ok(Search::Found(base + i as u64));
                }
            }
        }
        Ok(Search::Nothing)
    }
}

/// Candidates up to this length are checked first.
const SMALL_CANDIDATE: usize = 1 << 20;
/// At most this many payload bytes are checksummed looking for a record after damage.
const SCAN_BUDGET: usize = 4 << 30;

/// What [`Reader::valid_frame_after`] found.
enum Search {
    Nothing,
    Found(u64),
    GaveUp,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, bytes).unwrap();
        (dir, p)
    }

    fn log_of(records: &[&[u8]]) -> Vec<u8> {
        let mut out = header(FileKind::Log, 7).to_vec();
        for r in records {
            encode(&mut out, r);
        }
        out
    }

    fn read_all(p: &Path) -> Result<(Vec<Vec<u8>>, Next), StoreError> {
        let mut r = Reader::open(p, FileKind::Log)?;
        assert_eq!(r.lsn, 7);
        let mut out = Vec::new();
        loop {
            match r.next()? {
                Next::Record => out.push(r.buf.clone()),
                other => return Ok((out, other)),
            }
        }
    }

    #[test]
    fn records_round_trip() {
        let (_d, p) = file_with(&log_of(&[b"a", b"bb", &[0u8; 3]]));
        let (got, end) = read_all(&p).unwrap();
        assert_eq!(got, vec![b"a".to_vec(), b"bb".to_vec(), vec![0, 0, 0]]);
        assert_eq!(end, Next::End);
    }

    #[test]
    fn a_cut_short_final_frame_is_torn() {
        let bytes = log_of(&[b"first", b"second record"]);
        for cut in 1..(FRAME_OVERHEAD + 13) {
            let (_d, p) = file_with(&bytes[..bytes.len() - cut]);
            let (got, end) = read_all(&p).unwrap();
            assert_eq!(got, vec![b"first".to_vec()], "cut {cut}");
            assert_eq!(
                end,
                Next::Torn {
                    offset: HEADER_LEN + 13
                }
            );
        }
    }

    #[test]
    fn a_bad_final_checksum_or_zeros_after_it_are_torn() {
        let mut bytes = log_of(&[b"first", b"second"]);
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        bytes.extend_from_slice(&[0u8; 4096]);
        let (_d, p) = file_with(&bytes);
        let (got, end) = read_all(&p).unwrap();
        assert_eq!(got.len(), 1);
        assert!(matches!(end, Next::Torn { .. }));
    }

    #[test]
    fn damage_with_data_after_it_is_corruption_with_file_and_offset() {
        let mut bytes = log_of(&[b"first", b"second", b"third"]);
        let second_payload = (HEADER_LEN as usize) + 13 + FRAME_OVERHEAD;
        bytes[second_payload] ^= 0x40;
        let (_d, p) = file_with(&bytes);
        match read_all(&p) {
            Err(StoreError::Corrupt { file, offset, .. }) => {
                assert_eq!(file, p);
                assert_eq!(offset, HEADER_LEN + 13);
            }
            other => panic!("{other:?}"),
        }
    }

    /// One flipped bit in any byte of a frame header (length or checksum) or payload in the
    /// middle of a file is corruption named by file and offset, never a torn end that would
    /// drop the records after it; the same damage in the last frame is a torn write.
    #[test]
    fn a_flipped_bit_anywhere_in_a_middle_frame_is_corruption() {
        let records: [&[u8]; 4] = [b"first", b"second record", b"third", b"fourth"];
        let clean = log_of(&records);
        let second = HEADER_LEN as usize + FRAME_OVERHEAD + 5;
        let second_end = second + FRAME_OVERHEAD + 13;
        for byte in second..second_end {
            for bit in 0..8 {
                let mut bytes = clean.clone();
                bytes[byte] ^= 1 << bit;
                let (_d, p) = file_with(&bytes);
                match read_all(&p) {
                    Err(StoreError::Corrupt { offset, reason, .. }) => {
                        assert_eq!(offset, second as u64, "byte {byte} bit {bit}");
                        assert!(reason.contains("valid record follows"), "{reason}");
                    }
                    other => panic!("byte {byte} bit {bit}: {other:?}"),
                }
            }
        }
        // The last frame: nothing valid follows, so it reads as a torn final write.
        let last = clean.len() - FRAME_OVERHEAD - 6;
        let mut bytes = clean.clone();
        bytes[last] ^= 0x10;
        let (_d, p) = file_with(&bytes);
        let (got, end) = read_all(&p).unwrap();
        assert_eq!(got.len(), 3);
        assert!(matches!(end, Next::Torn { .. }));
    }

    #[test]
    fn newer_versions_and_foreign_files_are_refused() {
        let mut bytes = log_of(&[b"a"]);
        bytes[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
        let (_d, p) = file_with(&bytes);
        assert!(matches!(
            Reader::open(&p, FileKind::Log),
            Err(StoreError::NewerFormat { found, .. }) if found == FORMAT_VERSION + 1
        ));
        let (_d2, p2) = file_with(b"GIF89a not a log at all, really");
        assert!(matches!(
            Reader::open(&p2, FileKind::Log),
            Err(StoreError::Corrupt { offset: 0, .. })
        ));
    }
}
