//! The data directory's guard against a store that writes, snapshots, tears and salvages:
//! who may read it (modes), where its writes may land (symbolic links), whose it is, and
//! that one process holds it whatever happens to `LOCK`.

use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};

use super::*;

fn records(s: &LogStore) -> Result<Vec<Vec<u8>>, StoreError> {
    let mut out = Vec::new();
    s.recover(&mut |_, r| {
        out.push(r.to_vec());
        Ok(())
    })?;
    Ok(out)
}

/// A start on `dir`: what it recovered, the store kept open.
fn started(dir: &Path, salvage: bool) -> (LogStore, Vec<Vec<u8>>) {
    let s = LogStore::open(dir, SyncMode::Fsync, salvage).unwrap();
    let got = records(&s).unwrap();
    (s, got)
}

/// A start on `dir` that must be refused: the error, as the operator reads it.
fn refused(dir: &Path) -> String {
    match LogStore::open(dir, SyncMode::Fsync, false).and_then(|s| records(&s).map(|_| s)) {
        Ok(_) => panic!("{} was opened", dir.display()),
        Err(e) => e.to_string(),
    }
}

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

/// Every entry of `dir` with its mode.
fn entries(dir: &Path) -> Vec<(String, u32)> {
    let mut out: Vec<(String, u32)> = fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                mode(&e.path()),
            )
        })
        .collect();
    out.sort();
    out
}

fn newest_segment(dir: &Path) -> PathBuf {
    numbered(dir, "log-", ".wal").unwrap().pop().unwrap().1
}

/// The umask most systems start processes with: group and others may read what is made.
fn umask_022() {
    // SAFETY: umask only swaps the process's mask; 022 is what the tests run with anyway.
    unsafe { libc::umask(0o022) };
}

/// With the usual umask (022: files readable by every local user), the directory sqsim makes
/// is 0700 and every file in it 0600: segments and snapshots (made under their temporary
/// names, then renamed: the same files), `LOCK`, a torn tail kept aside, the copies and
/// renames a salvage leaves.
#[test]
fn the_directory_is_0700_and_every_file_0600_whatever_the_umask() {
    umask_022();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data");
    let (s, _) = started(&dir, false);
    for r in [&b"a"[..], b"b"] {
        s.append(r);
    }
    s.snapshot(2, &mut vec![b"s0".to_vec(), b"s1".to_vec()].into_iter())
        .unwrap();
    s.append(b"c");
    s.close();
    drop(s);
    // A torn final write, kept aside at the next start.
    let seg = newest_segment(&dir);
    let mut bytes = fs::read(&seg).unwrap();
    bytes.extend_from_slice(&[9, 0, 0, 0, 1]);
    fs::write(&seg, &bytes).unwrap();
    let (s, got) = started(&dir, false);
    assert_eq!(got.len(), 3);
    s.append(b"d");
    s.close();
    drop(s);
    // A damaged snapshot, salvaged: the snapshot copied aside, the log after it renamed.
    let snap = dir.join(snapshot_name(2));
    let mut bytes = fs::read(&snap).unwrap();
    bytes[frame::HEADER_LEN as usize + frame::FRAME_OVERHEAD] ^= 0xff;
    fs::write(&snap, &bytes).unwrap();
    // The test's own writes above made files of 0644 (fs::write follows the umask);
    // put them back as sqsim left them, so only sqsim's files are judged.
    for f in [&seg, &snap] {
        fs::set_permissions(f, fs::Permissions::from_mode(0o600)).unwrap();
    }
    let (s, _) = started(&dir, true);
    s.append(b"e");
    s.snapshot(s.next_lsn(), &mut vec![b"t0".to_vec()].into_iter())
        .unwrap();
    s.close();
    drop(s);

    assert_eq!(mode(&dir), 0o700, "the data directory");
    let found = entries(&dir);
    for suffix in [
        "LOCK",
        ".wal",
        ".snap",
        ".torn-",
        ".salvaged",
        ".wal.salvaged",
    ] {
        assert!(
            found.iter().any(|(n, _)| n.contains(suffix)),
            "{suffix}: {found:?}"
        );
    }
    for (name, m) in &found {
        assert_eq!(*m, 0o600, "{name}: {m:o} in {found:?}");
    }
}

/// A data directory made by an older sqsim (0755, its files 0644) is made private at the
/// next start, and everything in it still reads.
#[test]
fn a_data_directory_left_open_by_an_older_version_is_tightened_at_open() {
    umask_022();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data");
    let (s, _) = started(&dir, false);
    s.append(b"a");
    s.snapshot(1, &mut vec![b"s0".to_vec()].into_iter())
        .unwrap();
    s.append(b"b");
    s.close();
    drop(s);
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    for (name, _) in entries(&dir) {
        fs::set_permissions(dir.join(name), fs::Permissions::from_mode(0o644)).unwrap();
    }
    let (s, got) = started(&dir, false);
    assert_eq!(got, [b"s0".to_vec(), b"b".to_vec()]);
    assert_eq!(mode(&dir), 0o700);
    for (name, m) in entries(&dir) {
        assert_eq!(m, 0o600, "{name}");
    }
    drop(s);
}

/// A symbolic link planted at the name of the next snapshot's or segment's temporary file,
/// pointing outside, is never written through: the file it points at stays as it was
/// (before, sqsim as root truncated and overwrote it), and the store still holds every record.
#[test]
fn a_symlink_planted_at_a_temporary_name_is_never_followed() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data");
    let outside = root.path().join("outside");
    fs::create_dir(&outside).unwrap();
    let (s, _) = started(&dir, false);
    for r in [&b"a"[..], b"b"] {
        let lsn = s.append(r);
        crate::store::suite::block_on(crate::store::durable(&s, lsn)).unwrap();
    }
    let at = s.next_lsn();
    let planted = [
        (
            dir.join(format!("{}.tmp", snapshot_name(at))),
            outside.join("root-only-1"),
        ),
        (
            dir.join(format!("{}.tmp", segment_name(at))),
            outside.join("root-only-2"),
        ),
    ];
    for (link, target) in &planted {
        fs::write(target, b"not sqsim's").unwrap();
        symlink(target, link).unwrap();
    }
    // Written, or refused: either way nothing outside is touched.
    let _ = s.snapshot(at, &mut vec![b"s0".to_vec()].into_iter());
    for (link, target) in &planted {
        assert_eq!(
            fs::read(target).unwrap(),
            b"not sqsim's",
            "{}",
            link.display()
        );
        assert!(
            fs::symlink_metadata(link).map_or(true, |m| !m.file_type().is_symlink()),
            "{} is still a link (and the next write would try it again)",
            link.display()
        );
    }
    s.append(b"c");
    s.close();
    drop(s);
    let (s, got) = started(&dir, false);
    assert!(got.ends_with(&[b"c".to_vec()]), "{got:?}");
    drop(s);
}

/// A symbolic link among the data directory's entries (`LOCK`, a leftover temporary file,
/// anything), or the data directory itself given as a link, stops start-up naming it; the
/// file it points at is untouched.
#[test]
fn a_symlink_in_the_data_directory_or_as_it_stops_start_up() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data");
    let (s, _) = started(&dir, false);
    s.append(b"a");
    s.close();
    drop(s);
    let target = root.path().join("root-only");
    fs::write(&target, b"not sqsim's").unwrap();
    for name in ["LOCK".to_string(), format!("{}.tmp", segment_name(1))] {
        let link = dir.join(&name);
        let _ = fs::remove_file(&link);
        symlink(&target, &link).unwrap();
        let err = refused(&dir);
        assert!(err.contains(&link.display().to_string()), "{name}: {err}");
        assert!(err.contains("symbolic link"), "{name}: {err}");
        assert_eq!(fs::read(&target).unwrap(), b"not sqsim's");
        fs::remove_file(&link).unwrap();
    }
    let via = root.path().join("via");
    symlink(&dir, &via).unwrap();
    let err = refused(&via);
    assert!(
        err.contains(&via.display().to_string()) && err.contains("symbolic link"),
        "{err}"
    );
    let (s, got) = started(&dir, false);
    assert_eq!(got, [b"a".to_vec()]);
    drop(s);
}

/// A data directory, or a file of sqsim's in it, that belongs to another user is refused
/// with the path and both users: sqsim running as root would otherwise write where that
/// user can plant links, and read what they wrote.
#[test]
fn a_data_directory_of_another_user_is_refused() {
    let root = tempfile::tempdir().unwrap();
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        // Only root can give a directory away; any other user finds `/` owned by root.
        let err = refused(Path::new("/"));
        assert!(err.contains("uid 0"), "{err}");
        return;
    }
    let dir = root.path().join("data");
    let (s, _) = started(&dir, false);
    s.append(b"a");
    s.close();
    drop(s);
    std::os::unix::fs::chown(&dir, Some(65534), None).unwrap();
    let err = refused(&dir);
    assert!(err.contains(&dir.display().to_string()), "{err}");
    assert!(err.contains("uid 65534") && err.contains("uid 0"), "{err}");
    std::os::unix::fs::chown(&dir, Some(0), None).unwrap();
    let lock = dir.join("LOCK");
    std::os::unix::fs::chown(&lock, Some(65534), None).unwrap();
    let err = refused(&dir);
    assert!(
        err.contains(&lock.display().to_string()) && err.contains("uid 65534"),
        "{err}"
    );
    std::os::unix::fs::chown(&lock, Some(0), None).unwrap();
    let (s, got) = started(&dir, false);
    assert_eq!(got, [b"a".to_vec()]);
    drop(s);
}

/// `LOCK` removed (or renamed) while a store holds the directory: a second store on it is
/// still refused, since the lock is also held on the directory itself.
#[test]
fn removing_lock_does_not_let_a_second_store_in() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data");
    let (first, _) = started(&dir, false);
    fs::remove_file(dir.join("LOCK")).unwrap();
    match LogStore::open(&dir, SyncMode::Fsync, false) {
        Err(StoreError::Locked(d)) => assert_eq!(d, dir),
        other => panic!("a second store: {:?}", other.map(|_| "opened")),
    }
    drop(first);
    let (s, _) = started(&dir, false);
    drop(s);
}
