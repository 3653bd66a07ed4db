//! A power cut during the last write, and data directories written before units: a torn
//! last unit is dropped whole and kept aside, the same damage under a later unit stops
//! start-up, and segments of the format before units still read.

use super::tests::{opened, records, refused, salvaged};
use super::*;
use crate::store::suite::block_on;

fn newest_segment(dir: &Path) -> PathBuf {
    numbered(dir, "log-", ".wal").unwrap().pop().unwrap().1
}

fn len(path: &Path) -> u64 {
    fs::metadata(path).unwrap().len()
}

fn kept(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("kept-{i}").into_bytes()).collect()
}

/// Appends `records` one write each, each durable before the next.
fn one_by_one(s: &LogStore, records: &[Vec<u8>]) {
    for r in records {
        let lsn = s.append(r);
        block_on(crate::store::durable(s, lsn)).unwrap();
    }
}

/// Appends 40 records of 300 bytes (four pages and more) while holding the segment, so the
/// writer takes them together: one group commit, one write. Returns once they are durable.
fn one_batch(s: &LogStore) {
    let last = {
        let _writing = lock(&s.inner.segment);
        let mut last = 0;
        for i in 0..40u8 {
            last = s.append(&[i; 300]);
        }
        last
    };
    block_on(crate::store::durable(s, last)).unwrap();
}

/// A 4 KiB page of the file, page-aligned as the page cache writes it, wholly inside
/// `from..to` and with bytes of that range after it.
fn middle_page(from: u64, to: u64) -> std::ops::Range<usize> {
    let page = from.div_ceil(4096) * 4096;
    assert!(
        page + 4096 < to,
        "the batch spans a page and more: {from}..{to}"
    );
    page as usize..page as usize + 4096
}

/// A power cut while the last batch was being written (so it was never acknowledged): a page
/// of it reads as zeros and the pages after it were written. The start goes on without it:
/// the batch is dropped whole and its bytes kept aside as a torn tail; everything written
/// before it is there. (Before units, the zeros read as a damaged record with valid ones
/// after it, and only `--salvage` started.)
#[test]
fn a_power_cut_tearing_the_last_batch_mid_page_drops_it_whole_and_keeps_it_aside() {
    let dir = tempfile::tempdir().unwrap();
    let s = opened(dir.path());
    one_by_one(&s, &kept(3));
    let seg = newest_segment(dir.path());
    let from = len(&seg);
    one_batch(&s);
    s.close();
    drop(s);
    let mut bytes = fs::read(&seg).unwrap();
    let page = middle_page(from, bytes.len() as u64);
    bytes[page].fill(0);
    fs::write(&seg, &bytes).unwrap();

    let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
    let (got, report) = records(&s).unwrap();
    assert_eq!(
        got,
        kept(3),
        "everything before the torn batch, nothing of it"
    );
    assert_eq!(report.torn_bytes, bytes.len() as u64 - from);
    assert_eq!(report.salvaged, None);
    let aside = PathBuf::from(format!("{}.torn-{from}", seg.display()));
    assert_eq!(fs::read(&aside).unwrap(), bytes[from as usize..]);
    assert_eq!(len(&seg), from, "the segment ends before the torn batch");
    s.append(b"after");
    s.close();
    drop(s);
    let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
    let mut want = kept(3);
    want.push(b"after".to_vec());
    assert_eq!(records(&s).unwrap().0, want, "the next start is clean");
}

/// The same page of zeros in a batch that a later, whole batch follows: that batch was
/// written (and acknowledged) before the later one, so this is damage, not a torn write.
/// Start-up stops naming the file and the damaged batch's offset, and changes nothing;
/// `--salvage` starts with what came before it.
#[test]
fn the_same_tear_under_a_later_batch_is_refused_with_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let s = opened(dir.path());
    one_by_one(&s, &kept(3));
    let seg = newest_segment(dir.path());
    let from = len(&seg);
    one_batch(&s);
    let to = len(&seg);
    one_by_one(&s, &[b"later".to_vec()]);
    s.close();
    drop(s);
    let mut bytes = fs::read(&seg).unwrap();
    bytes[middle_page(from, to)].fill(0);
    fs::write(&seg, &bytes).unwrap();

    let err = refused(dir.path());
    let text = err.to_string();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{text}");
    let at = format!("{} at byte offset {from}:", seg.display());
    assert!(text.contains(&at), "{text}");
    assert!(
        text.contains(&format!("follows at byte offset {to}")),
        "{text}"
    );
    assert_eq!(
        fs::read(&seg).unwrap(),
        bytes,
        "a refused start changes nothing"
    );
    let (got, report) = salvaged(dir.path());
    assert_eq!(got, kept(3));
    assert!(report.salvaged.is_some());
}

/// A data directory of the format before units (version 1: a snapshot, a segment of bare
/// frames ending in a torn frame) opens as before; what is written next goes to a new
/// segment of the current format, and both read at the next start.
#[test]
fn a_data_directory_of_the_format_before_units_still_opens() {
    let dir = tempfile::tempdir().unwrap();
    let mut snap = frame::header_of_version(FileKind::Snapshot, 1, 1).to_vec();
    frame::encode(&mut snap, b"s0");
    frame::encode(&mut snap, &[]);
    let mut seg = frame::header_of_version(FileKind::Log, 1, 1).to_vec();
    frame::encode(&mut seg, b"r1");
    frame::encode(&mut seg, b"r2");
    let whole = seg.len() as u64;
    seg.extend_from_slice(&[9, 0, 0, 0, 1]);
    let old = dir.path().join(segment_name(1));
    fs::write(dir.path().join(snapshot_name(1)), &snap).unwrap();
    fs::write(&old, &seg).unwrap();

    let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
    let (got, report) = records(&s).unwrap();
    assert_eq!(got, [b"s0".to_vec(), b"r1".to_vec(), b"r2".to_vec()]);
    assert_eq!((report.from_snapshot, report.torn_bytes), (1, 5));
    assert_eq!(len(&old), whole);
    one_by_one(&s, &[b"r3".to_vec()]);
    s.close();
    drop(s);

    let new = newest_segment(dir.path());
    assert_ne!(new, old);
    let version = |p: &Path| fs::read(p).unwrap()[8..12].to_vec();
    assert_eq!(version(&old), 1u32.to_le_bytes());
    assert_eq!(version(&new), frame::FORMAT_VERSION.to_le_bytes());
    let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
    let (got, _) = records(&s).unwrap();
    assert_eq!(
        got,
        [
            b"s0".to_vec(),
            b"r1".to_vec(),
            b"r2".to_vec(),
            b"r3".to_vec()
        ]
    );
}

/// A batch longer than a unit may be (`frame::MAX_UNIT`, here lowered to 1 KiB) is written as
/// several units, each of whole records and starting at the position the previous one ended
/// (a position reported durable too early would show here as a unit out of place), and every
/// record comes back in order.
#[test]
fn a_batch_past_the_unit_limit_is_written_as_several_units() {
    let dir = tempfile::tempdir().unwrap();
    let s = opened(dir.path());
    s.limit_units(1024);
    let sent: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; 300]).collect();
    let last = {
        let _writing = lock(&s.inner.segment);
        sent.iter().map(|r| s.append(r)).last().unwrap()
    };
    block_on(crate::store::durable(&s, last)).unwrap();
    s.close();
    drop(s);
    let bytes = fs::read(newest_segment(dir.path())).unwrap();
    let (mut at, mut units, mut next) = (frame::HEADER_LEN as usize, 0, 0u64);
    while at < bytes.len() {
        let word = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap()) as usize;
        let body = word(at);
        let lsn = u64::from_le_bytes(bytes[at + 8..at + 16].try_into().unwrap());
        assert!(body <= 1024, "unit {units}: {body} bytes");
        assert_eq!(lsn, next, "unit {units} starts where the last one ended");
        next += (body / (frame::FRAME_OVERHEAD + 300)) as u64;
        at += frame::UNIT_OVERHEAD + body;
        units += 1;
    }
    assert_eq!((units, next), (4, 10), "three records a unit, then one");
    let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
    assert_eq!(records(&s).unwrap().0, sent);
}
