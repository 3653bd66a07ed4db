//! The on-disk framing shared by log segments and snapshots: a fixed header naming the
//! format version, then records, each as `length (u32 LE) | CRC-32 of length and payload
//! (u32 LE) | payload`. A reader tells a torn final write (cut short, or a bad checksum with
//! nothing but zeros after it) from corruption in the middle of a file.

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
        let f = File::open(path)?;
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
            return self.damaged(at, self.len, "a frame header is cut short");
        }
        self.file.read_exact(&mut head)?;
        let len_bytes: [u8; 4] = head[..4].try_into().unwrap_or_default();
        let len = u32::from_le_bytes(len_bytes) as usize;
        let crc = u32::from_le_bytes(head[4..].try_into().unwrap_or_default());
        let end = at + (FRAME_OVERHEAD + len) as u64;
        if len > MAX_RECORD {
            return self.damaged(at, self.len, "a frame length is out of range");
        }
        if end > self.len {
            return self.damaged(at, self.len, "a frame is cut short");
        }
        self.buf.resize(len, 0);
        self.file.read_exact(&mut self.buf)?;
        if checksum(len_bytes, &self.buf) != crc {
            return self.damaged(at, end, "checksum mismatch");
        }
        self.offset = end;
        Ok(if len == 0 {
            Next::EndMarker
        } else {
            Next::Record
        })
    }

    /// A bad frame at `at` whose bytes run to `end`: a torn final write when nothing but
    /// zeros follows it, corruption otherwise.
    fn damaged(&mut self, at: u64, end: u64, reason: &str) -> Result<Next, StoreError> {
        if self.only_zeros_from(end)? {
            return Ok(Next::Torn { offset: at });
        }
        Err(StoreError::Corrupt {
            file: self.path.clone(),
            offset: at,
            reason: reason.to_string(),
        })
    }

    fn only_zeros_from(&mut self, from: u64) -> Result<bool, StoreError> {
        let f = self.file.get_mut();
        f.seek(SeekFrom::Start(from))?;
        let mut chunk = vec![0u8; 1 << 16];
        loop {
            let n = f.read(&mut chunk)?;
            if n == 0 {
                return Ok(true);
            }
            if chunk[..n].iter().any(|b| *b != 0) {
                return Ok(false);
            }
        }
    }
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
