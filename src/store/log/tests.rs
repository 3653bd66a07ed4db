//! The log store's own cases beyond the shared suite: crashes mid-snapshot, damaged and
//! torn files, and appenders waiting while snapshots rotate segments.

use std::time::Duration;

use super::*;

pub(super) fn records(s: &LogStore) -> Result<(Vec<Vec<u8>>, Recovered), StoreError> {
    let mut out = Vec::new();
    let report = s.recover(&mut |_, r| {
        out.push(r.to_vec());
        Ok(())
    })?;
    Ok((out, report))
}

/// A store on `dir`, recovered and ready to append.
pub(super) fn opened(dir: &Path) -> LogStore {
    let s = LogStore::open(dir, SyncMode::Fsync, false).unwrap();
    records(&s).unwrap();
    s
}

/// A start on `dir` without `--salvage`: the error that refuses it.
pub(super) fn refused(dir: &Path) -> StoreError {
    let s = LogStore::open(dir, SyncMode::Fsync, false).unwrap();
    records(&s).unwrap_err()
}

/// A start on `dir` with `--salvage`: what it recovered.
pub(super) fn salvaged(dir: &Path) -> (Vec<Vec<u8>>, Recovered) {
    let s = LogStore::open(dir, SyncMode::Fsync, true).unwrap();
    records(&s).unwrap()
}

fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A crash while a snapshot was written leaves `snapshot-*.snap.tmp` behind; the next
/// start removes it and recovers from what was there before.
#[test]
fn an_unfinished_snapshot_left_by_a_crash_is_removed_at_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let s = opened(dir.path());
    s.append(b"a");
    s.append(b"b");
    s.close();
    drop(s);
    let tmp = dir.path().join(format!("{}.tmp", snapshot_name(1)));
    fs::write(&tmp, b"SQSIMSNP half a snapsh").unwrap();
    let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
    let (got, _) = records(&s).unwrap();
    assert_eq!(got, [b"a".to_vec(), b"b".to_vec()]);
    assert!(!tmp.exists(), "left: {:?}", files(dir.path()));
    assert!(!files(dir.path()).iter().any(|f| f.ends_with(".tmp")));
}

/// A snapshot with a damaged record stops start-up naming the file and the offset;
/// `--salvage` starts with the records before the damage and keeps the file aside.
#[test]
fn a_damaged_snapshot_is_refused_with_its_file_and_offset_or_salvaged() {
    let dir = tempfile::tempdir().unwrap();
    let s = opened(dir.path());
    for r in [&b"x1"[..], b"x2", b"x3"] {
        s.append(r);
    }
    let snap: Vec<Vec<u8>> = ["s0", "s1", "s2"]
        .iter()
        .map(|r| r.as_bytes().to_vec())
        .collect();
    s.snapshot(3, &mut snap.clone().into_iter()).unwrap();
    s.append(b"after");
    s.close();
    drop(s);
    let path = dir.path().join(snapshot_name(3));
    let mut bytes = fs::read(&path).unwrap();
    // The second record: header, then the first frame (8 bytes + 2), then its payload.
    let second = frame::HEADER_LEN as usize + frame::FRAME_OVERHEAD + 2;
    bytes[second + frame::FRAME_OVERHEAD] ^= 0xff;
    fs::write(&path, &bytes).unwrap();

    let err = refused(dir.path());
    let text = err.to_string();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{text}");
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains(&format!("offset {second}")), "{text}");
    assert_eq!(
        fs::read(&path).unwrap(),
        bytes,
        "a refused start changes nothing"
    );

    let (got, report) = salvaged(dir.path());
    assert_eq!(
        got,
        snap[..1],
        "the records before the damage, nothing after"
    );
    assert!(report.salvaged.is_some_and(|r| r.contains("offset")));
    let names = files(dir.path());
    assert!(names.iter().any(|f| f.ends_with(".salvaged")), "{names:?}");
    assert!(!path.exists(), "the damaged snapshot is no longer read");
}

/// One flipped bit in any field of a frame header (length or checksum) in the middle of
/// a snapshot, or of a unit's or its record's header in the middle of a log segment, stops
/// start-up with the file and the offset, and leaves the file as it was; nothing after the
/// damage is silently dropped.
#[test]
fn a_flipped_header_bit_mid_snapshot_or_mid_segment_is_refused_with_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let s = opened(dir.path());
    let snap: Vec<Vec<u8>> = (0..5).map(|i| format!("snap-{i}").into_bytes()).collect();
    s.snapshot(0, &mut snap.clone().into_iter()).unwrap();
    for i in 0..5 {
        // Each written before the next: one unit per record.
        let lsn = s.append(format!("logs-{i}").as_bytes());
        crate::store::suite::block_on(crate::store::durable(&s, lsn)).unwrap();
    }
    s.close();
    drop(s);
    let snapshot = dir.path().join(snapshot_name(0));
    let segment = numbered(dir.path(), "log-", ".wal")
        .unwrap()
        .pop()
        .unwrap()
        .1;
    // The third record of each, after the header and two records of 6 payload bytes: in the
    // snapshot its frame, in the segment its unit (the unit's header, then the frame's).
    let head = frame::HEADER_LEN as usize;
    let in_snapshot = (
        head + 2 * (frame::FRAME_OVERHEAD + 6),
        frame::FRAME_OVERHEAD,
    );
    let unit = frame::UNIT_OVERHEAD + frame::FRAME_OVERHEAD;
    let in_segment = (head + 2 * (unit + 6), unit);
    for (path, (third, headers)) in [(&snapshot, in_snapshot), (&segment, in_segment)] {
        let clean = fs::read(path).unwrap();
        for byte in third..third + headers {
            for bit in 0..8 {
                let mut bytes = clean.clone();
                bytes[byte] ^= 1 << bit;
                fs::write(path, &bytes).unwrap();
                let err = refused(dir.path()).to_string();
                let at = format!("{} at byte offset {third}", path.display());
                assert!(err.contains(&at), "byte {byte} bit {bit}: {err}");
                assert_eq!(
                    fs::read(path).unwrap(),
                    bytes,
                    "a refused start changes nothing"
                );
            }
        }
        fs::write(path, &clean).unwrap();
    }
    let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
    assert_eq!(records(&s).unwrap().0.len(), 10);
}

/// A crash between creating a segment file and writing its header (an older sqsim, or
/// another tool) leaves an empty or header-less newest segment: a torn write, set aside,
/// and start-up goes on with everything before it. A segment creation a crash stopped
/// before its rename leaves only a `.wal.tmp`, removed at the next start.
#[test]
fn an_empty_or_headerless_newest_segment_is_a_torn_write() {
    for leftover in [&b""[..], b"SQSIMLO"] {
        let dir = tempfile::tempdir().unwrap();
        let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
        records(&s).unwrap();
        s.append(b"a");
        s.append(b"b");
        s.close();
        drop(s);
        fs::write(dir.path().join(segment_name(2)), leftover).unwrap();
        fs::write(dir.path().join(format!("{}.tmp", segment_name(2))), b"SQ").unwrap();
        let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
        let (got, report) = records(&s).unwrap();
        assert_eq!(got, [b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(report.torn_bytes, leftover.len() as u64);
        s.append(b"c");
        s.close();
        drop(s);
        let names = files(dir.path());
        assert!(!names.iter().any(|f| f.ends_with(".tmp")), "{names:?}");
        let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
        let (got, _) = records(&s).unwrap();
        assert_eq!(got, [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
    }
}

/// A torn final write is cut off, and its bytes are kept aside (never the only copy of
/// something unread deleted); the same damage in an older segment is corruption.
#[test]
fn a_torn_tail_is_kept_aside_and_only_the_newest_segment_can_be_torn() {
    let dir = tempfile::tempdir().unwrap();
    let s = opened(dir.path());
    s.append(b"one");
    s.append(b"two");
    s.close();
    drop(s);
    let seg = numbered(dir.path(), "log-", ".wal")
        .unwrap()
        .pop()
        .unwrap()
        .1;
    let mut bytes = fs::read(&seg).unwrap();
    let whole = bytes.len();
    bytes.extend_from_slice(&[7, 0, 0, 0, 1, 2]);
    fs::write(&seg, &bytes).unwrap();
    let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
    let (got, report) = records(&s).unwrap();
    assert_eq!(got, [b"one".to_vec(), b"two".to_vec()]);
    assert_eq!(report.torn_bytes, 6);
    let aside = PathBuf::from(format!("{}.torn-{whole}", seg.display()));
    assert_eq!(fs::read(&aside).unwrap(), [7, 0, 0, 0, 1, 2]);
    s.close();
    drop(s);
    // The same tail on a segment that is no longer the newest: refused.
    let mut bytes = fs::read(&seg).unwrap();
    bytes.extend_from_slice(&[7, 0, 0, 0, 1, 2]);
    fs::write(&seg, &bytes).unwrap();
    let later = dir.path().join(segment_name(99));
    fs::write(&later, frame::header(FileKind::Log, 99)).unwrap();
    let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
    let err = records(&s).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
}

/// Requests that wait for their records while snapshots rotate the segment never hang:
/// whoever holds the segment writes what is pending before letting go.
#[test]
fn waiting_appenders_finish_while_snapshots_rotate_segments() {
    for sync in [SyncMode::Os, SyncMode::Fsync] {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(LogStore::open(dir.path(), sync, false).unwrap());
        store.recover(&mut |_, _| Ok(())).unwrap();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let rotations = Arc::new(AtomicU64::new(0));
        let snapshots = {
            let (store, done, rotations) = (
                Arc::clone(&store),
                Arc::clone(&done),
                Arc::clone(&rotations),
            );
            std::thread::spawn(move || {
                while !done.load(Ordering::Acquire) {
                    let at = store.next_lsn();
                    store.snapshot(at, &mut std::iter::empty()).unwrap();
                    rotations.fetch_add(1, Ordering::Release);
                }
            })
        };
        while rotations.load(Ordering::Acquire) == 0 {
            std::thread::yield_now();
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let finished = rt.block_on(async {
            let tasks: Vec<_> = (0..8)
                .map(|t| {
                    let (store, rotations) = (Arc::clone(&store), Arc::clone(&rotations));
                    tokio::spawn(async move {
                        // Keep going until several rotations happened meanwhile, however
                        // fast the appends alone would be.
                        let mut i = 0;
                        while i < 300 || rotations.load(Ordering::Acquire) < 5 {
                            let lsn = store.append(format!("{t}-{i}").as_bytes());
                            crate::store::durable(store.as_ref(), lsn).await.unwrap();
                            i += 1;
                        }
                    })
                })
                .collect();
            tokio::time::timeout(Duration::from_secs(30), async {
                for t in tasks {
                    t.await.unwrap();
                }
            })
            .await
        });
        let during = rotations.load(Ordering::Acquire);
        done.store(true, Ordering::Release);
        snapshots.join().unwrap();
        assert!(finished.is_ok(), "{sync}: a waiting request hung");
        assert!(during >= 5, "{sync}: snapshots ran meanwhile");
    }
}

/// A file that is gone (a snapshot deleted, so the log starts past record 0) or whose
/// header does not read (a damaged magic) stops start-up, with `--salvage` named as the
/// way on; and `--salvage` then starts, with what comes before the damage, the rest kept
/// aside — not the same refusal again.
#[test]
fn a_missing_file_or_a_damaged_header_is_refused_then_salvaged() {
    // The snapshot deleted: records 0 to 2 are missing before the segment after it.
    let dir = tempfile::tempdir().unwrap();
    let s = opened(dir.path());
    for r in [&b"x1"[..], b"x2", b"x3"] {
        s.append(r);
    }
    let snap = vec![b"s0".to_vec()];
    s.snapshot(3, &mut snap.into_iter()).unwrap();
    s.append(b"after");
    s.close();
    drop(s);
    fs::remove_file(dir.path().join(snapshot_name(3))).unwrap();
    let text = refused(dir.path()).to_string();
    assert!(
        text.contains("missing") && text.contains("--salvage"),
        "{text}"
    );
    let (got, report) = salvaged(dir.path());
    assert!(got.is_empty(), "nothing before the gap: {got:?}");
    assert!(report.salvaged.is_some_and(|r| r.contains("missing")));
    let names = files(dir.path());
    assert!(
        names.iter().any(|f| f.ends_with(".wal.salvaged")),
        "{names:?}"
    );
    let s = opened(dir.path());
    s.append(b"new");
    s.close();
    drop(s);
    let s = LogStore::open(dir.path(), SyncMode::Fsync, false).unwrap();
    assert_eq!(
        records(&s).unwrap().0,
        [b"new".to_vec()],
        "the next start is clean"
    );
    drop(s);

    // A segment whose header is damaged.
    let dir = tempfile::tempdir().unwrap();
    let s = opened(dir.path());
    s.append(b"a");
    s.append(b"b");
    s.close();
    drop(s);
    let (_, segment) = numbered(dir.path(), "log-", ".wal").unwrap().pop().unwrap();
    let mut bytes = fs::read(&segment).unwrap();
    bytes[0] ^= 0xff;
    fs::write(&segment, &bytes).unwrap();
    let text = refused(dir.path()).to_string();
    assert!(text.contains("--salvage"), "{text}");
    assert_eq!(
        fs::read(&segment).unwrap(),
        bytes,
        "a refused start changes nothing"
    );
    let (got, report) = salvaged(dir.path());
    assert!(got.is_empty(), "{got:?}");
    assert!(report.salvaged.is_some());
    // Kept aside whole; a fresh segment may take its name.
    assert_eq!(fs::read(segment.with_extension("salvaged")).unwrap(), bytes);
    assert!(fs::read(&segment).map_or(true, |now| now != bytes));
}
