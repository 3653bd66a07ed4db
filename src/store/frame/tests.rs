//! The format's reader on whole, torn and damaged files: version 1 segments of frames (as
//! sqsim wrote before units) and snapshots, then segments of units.

use super::*;

fn file_with(bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f");
    std::fs::write(&p, bytes).unwrap();
    (dir, p)
}

/// A version 1 segment (frames without units), as sqsim wrote before units; still read.
fn log_of(records: &[&[u8]]) -> Vec<u8> {
    let mut out = header_of_version(FileKind::Log, 7, 1).to_vec();
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

/// A segment of the current format, each inner list one unit (one write) of records, the
/// first at position 7; and where each unit starts.
fn units_of(units: &[Vec<Vec<u8>>]) -> (Vec<u8>, Vec<u64>) {
    let mut out = header(FileKind::Log, 7).to_vec();
    let (mut lsn, mut starts) = (7, Vec::new());
    for records in units {
        let mut body = Vec::new();
        for r in records {
            encode(&mut body, r);
        }
        starts.push(out.len() as u64);
        out.extend_from_slice(&unit_header(lsn, &body));
        out.extend_from_slice(&body);
        lsn += records.len() as u64;
    }
    (out, starts)
}

fn small(tag: &str) -> Vec<Vec<u8>> {
    vec![
        format!("{tag}-1").into_bytes(),
        format!("{tag}-2").into_bytes(),
    ]
}

/// A unit of 40 records of 300 bytes: four pages and more.
fn big() -> Vec<Vec<u8>> {
    (0..40u8).map(|i| vec![i; 300]).collect()
}

/// The first page-aligned 4 KiB page wholly inside `from..to` that has bytes of the unit
/// after it (a power cut writes a file's pages in any order).
fn middle_page(from: u64, to: u64) -> std::ops::Range<usize> {
    let page = from.div_ceil(4096) * 4096;
    assert!(
        page + 4096 < to,
        "the unit spans a whole page and more: {from}..{to}"
    );
    page as usize..page as usize + 4096
}

#[test]
fn units_round_trip() {
    let (bytes, _) = units_of(&[small("a"), vec![b"b".to_vec()], big()]);
    let (_d, p) = file_with(&bytes);
    let (got, end) = read_all(&p).unwrap();
    assert_eq!(got.len(), 43);
    assert_eq!(got[..3], [b"a-1".to_vec(), b"a-2".to_vec(), b"b".to_vec()]);
    assert_eq!(end, Next::End);
}

/// A power cut during the last write: a page of zeros in the middle of the last unit, the
/// pages after it written. The unit is a torn write, dropped whole; what came before reads.
/// The same for the last unit cut short anywhere.
#[test]
fn a_page_of_zeros_or_a_cut_in_the_last_unit_tears_that_unit_whole() {
    let (clean, starts) = units_of(&[small("a"), big()]);
    let mut bytes = clean.clone();
    bytes[middle_page(starts[1], clean.len() as u64)].fill(0);
    let (_d, p) = file_with(&bytes);
    let (got, end) = read_all(&p).unwrap();
    assert_eq!(got, small("a"));
    assert_eq!(end, Next::Torn { offset: starts[1] });
    for cut in [1, 7, 100, 4096, clean.len() - starts[1] as usize - 1] {
        let (_d, p) = file_with(&clean[..clean.len() - cut]);
        let (got, end) = read_all(&p).unwrap();
        assert_eq!(got, small("a"), "cut {cut}");
        assert_eq!(end, Next::Torn { offset: starts[1] }, "cut {cut}");
    }
}

/// The same page of zeros in a unit that a whole later unit follows: that unit was written,
/// so the damaged one was acknowledged before it; corruption, named by file and the damaged
/// unit's offset, never a torn end.
#[test]
fn the_same_damage_with_a_later_unit_after_it_is_corruption_at_the_unit() {
    let (clean, starts) = units_of(&[small("a"), big(), small("c")]);
    let mut bytes = clean.clone();
    bytes[middle_page(starts[1], starts[2])].fill(0);
    let (_d, p) = file_with(&bytes);
    match read_all(&p) {
        Err(StoreError::Corrupt {
            file,
            offset,
            reason,
        }) => {
            assert_eq!((file, offset), (p.clone(), starts[1]));
            assert!(
                reason.contains(&format!("offset {}", starts[2])),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// One flipped bit anywhere in a middle unit (its header, a record's frame, a payload) is
/// corruption at the unit's offset; the same in the last unit is a torn write.
#[test]
fn a_flipped_bit_anywhere_in_a_middle_unit_is_corruption() {
    let (clean, starts) = units_of(&[small("a"), small("b"), small("c")]);
    for byte in starts[1] as usize..starts[2] as usize {
        for bit in 0..8 {
            let mut bytes = clean.clone();
            bytes[byte] ^= 1 << bit;
            let (_d, p) = file_with(&bytes);
            match read_all(&p) {
                Err(StoreError::Corrupt { offset, .. }) => {
                    assert_eq!(offset, starts[1], "byte {byte} bit {bit}")
                }
                other => panic!("byte {byte} bit {bit}: {other:?}"),
            }
        }
    }
    for byte in starts[2] as usize..clean.len() {
        let mut bytes = clean.clone();
        bytes[byte] ^= 0x10;
        let (_d, p) = file_with(&bytes);
        let (got, end) = read_all(&p).unwrap();
        assert_eq!(got.len(), 4, "byte {byte}");
        assert_eq!(end, Next::Torn { offset: starts[2] }, "byte {byte}");
    }
}

/// A whole, valid unit whose first position is not the one that follows (a unit copied or
/// moved within the file) is corruption, not records replayed at the wrong place.
#[test]
fn a_unit_out_of_place_is_corruption() {
    let (mut bytes, starts) = units_of(&[small("a")]);
    let mut body = Vec::new();
    encode(&mut body, b"stray");
    bytes.extend_from_slice(&unit_header(42, &body));
    bytes.extend_from_slice(&body);
    let (_d, p) = file_with(&bytes);
    match read_all(&p) {
        Err(StoreError::Corrupt { offset, reason, .. }) => {
            assert!(offset > starts[0], "{offset}");
            assert!(reason.contains("position 42"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

/// A batch is cut into units at frame boundaries, each at most the limit long unless one
/// record alone is longer (it then goes alone).
#[test]
fn a_batch_is_cut_into_units_at_whole_frames() {
    let mut frames = Vec::new();
    for r in [&[1u8; 10][..], &[2; 10], &[3; 100], &[4; 10]] {
        encode(&mut frames, r);
    }
    assert_eq!(unit_end(&frames, 1 << 20), (frames.len(), 4));
    assert_eq!(unit_end(&frames, 36), (36, 2));
    assert_eq!(unit_end(&frames, 37), (36, 2));
    assert_eq!(unit_end(&frames, 5), (18, 1));
    assert_eq!(unit_end(&frames[36..], 50), (108, 1));
}
