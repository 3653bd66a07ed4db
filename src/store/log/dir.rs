//! The data directory's guard. What the directory holds is every message body, so it is
//! private to the user sqsim runs as: the directory is 0700 and every file sqsim makes in it
//! 0600, whatever the process's umask (an explicit `chmod` after creating, since a umask can
//! only take bits away). sqsim never follows a symbolic link there (a link planted at the name
//! of a file it is about to write would send the write anywhere its user may write, for root
//! anywhere at all), refuses a directory that is a link, holds links or belongs to another
//! user, and keeps a second process out for its whole life with an OS lock on the directory
//! itself (which no rename or deletion of a file inside can take away) as well as on `LOCK`
//! (which older versions take). Modes, owners and links are Unix's: elsewhere (Windows) the
//! directory is created and `LOCK` taken as before, and its ACLs decide who reads it.

use std::fs::{self, File, OpenOptions};
use std::io;
#[cfg(unix)]
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::super::StoreError;

/// The directory: only its owner may list it or reach a file in it.
#[cfg(unix)]
const DIR_MODE: u32 = 0o700;
/// Every file: only its owner may read or write it.
#[cfg(unix)]
const FILE_MODE: u32 = 0o600;

/// The locks that keep a second process out of the directory, held until released or
/// dropped (the process ending drops them).
#[derive(Debug)]
pub(super) struct Held {
    /// The directory itself, open read-only and `flock`ed: a file's name can be deleted or
    /// renamed away, the directory this process writes in cannot be swapped by that.
    #[cfg(unix)]
    dir: File,
    /// `LOCK`, `flock`ed as every earlier version did, so that an older sqsim is kept out
    /// too (and keeps this one out).
    lock_file: File,
}

impl Held {
    /// Lets another process take the directory.
    pub(super) fn release(&self) {
        let _ = self.lock_file.unlock();
        #[cfg(unix)]
        let _ = self.dir.unlock();
    }
}

#[cfg(unix)]
fn unsafe_dir(path: &Path, reason: impl Into<String>) -> StoreError {
    StoreError::Unsafe {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

#[cfg(unix)]
fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// `err` with the path it concerns, which a bare `io::Error` does not carry; a link where
/// `O_NOFOLLOW` refused one says so.
fn at(path: &Path, err: io::Error) -> io::Error {
    #[cfg(unix)]
    if err.raw_os_error() == Some(libc::ELOOP) {
        return io::Error::other(format!(
            "{} is a symbolic link: sqsim follows none in its data directory",
            path.display()
        ));
    }
    io::Error::new(err.kind(), format!("{}: {err}", path.display()))
}

/// Opens (creating it if needed) the data directory `dir`, checks that it is safe to use,
/// makes it private, and locks it. Returns the path to use from now on (`dir` without a
/// trailing slash, which would make the kernel follow a link there) and the locks.
#[cfg(unix)]
pub(super) fn take(dir: &Path) -> Result<(PathBuf, Held), StoreError> {
    let dir: PathBuf = dir.components().collect();
    if matches!(fs::symlink_metadata(&dir), Err(e) if e.kind() == io::ErrorKind::NotFound) {
        // Parents created along the way are private too: they were made for this.
        fs::DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(&dir)
            .map_err(|e| at(&dir, e))?;
    }
    let handle = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(&dir)
        .map_err(|e| {
            // Linux answers ENOTDIR for a link with O_DIRECTORY, ELOOP without.
            let link = fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink());
            if link || e.raw_os_error() == Some(libc::ELOOP) {
                unsafe_dir(
                    &dir,
                    "is a symbolic link: give the directory itself (sqsim follows no link to or in its data directory)",
                )
            } else {
                at(&dir, e).into()
            }
        })?;
    // Checked on the open directory, not its name: what is checked is what is used.
    let meta = handle.metadata()?;
    if meta.uid() != euid() {
        return Err(unsafe_dir(
            &dir,
            format!(
                "belongs to uid {}, and sqsim runs as uid {}: chown it to that user, or use another data directory",
                meta.uid(),
                euid()
            ),
        ));
    }
    if handle.try_lock().is_err() {
        return Err(StoreError::Locked(dir));
    }
    let lock_path = dir.join("LOCK");
    let lock_file = private_options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| checked_entry_error(&lock_path, e))?;
    if lock_file.try_lock().is_err() {
        return Err(StoreError::Locked(dir));
    }
    if meta.mode() & 0o777 != DIR_MODE {
        handle.set_permissions(fs::Permissions::from_mode(DIR_MODE))?;
        tracing::warn!(
            dir = %dir.display(),
            was = format!("{:o}", meta.mode() & 0o777),
            "the data directory was open to other users (made by an older sqsim, or by hand): now 0700"
        );
    }
    check_entries(&dir)?;
    Ok((
        dir,
        Held {
            dir: handle,
            lock_file,
        },
    ))
}

/// Without Unix's modes and links (Windows): creates the directory and takes `LOCK`.
#[cfg(not(unix))]
pub(super) fn take(dir: &Path) -> Result<(PathBuf, Held), StoreError> {
    fs::create_dir_all(dir).map_err(|e| at(dir, e))?;
    let lock_path = dir.join("LOCK");
    let lock_file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| at(&lock_path, e))?;
    if lock_file.try_lock().is_err() {
        return Err(StoreError::Locked(dir.to_path_buf()));
    }
    Ok((dir.to_path_buf(), Held { lock_file }))
}

/// An error opening an entry of the directory: a link there is refused like one found by
/// [`check_entries`].
#[cfg(unix)]
fn checked_entry_error(path: &Path, e: io::Error) -> StoreError {
    if e.raw_os_error() == Some(libc::ELOOP) {
        return link_refused(path);
    }
    at(path, e).into()
}

#[cfg(unix)]
fn link_refused(path: &Path) -> StoreError {
    unsafe_dir(
        path,
        "is a symbolic link in the data directory: sqsim follows none there (one could send its writes to any file); remove it",
    )
}

/// Whether `name` is one of sqsim's own files (the others are left as they are).
#[cfg(unix)]
fn is_ours(name: &str) -> bool {
    name == "LOCK" || name.starts_with("log-") || name.starts_with("snapshot-")
}

/// Refuses a symbolic link anywhere in the directory, and among sqsim's own files one that
/// belongs to another user or has another name elsewhere (a hard link: a chmod or a
/// truncation of it would reach that file too); makes each of sqsim's files 0600 (an older
/// version made them 0644), saying how many were.
#[cfg(unix)]
fn check_entries(dir: &Path) -> Result<(), StoreError> {
    let mut tightened = 0u64;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        // Not followed: the entry itself.
        let meta = entry.metadata().map_err(|e| at(&path, e))?;
        if meta.file_type().is_symlink() {
            return Err(link_refused(&path));
        }
        let name = entry.file_name();
        if !meta.is_file() || !name.to_str().is_some_and(is_ours) {
            continue;
        }
        if meta.uid() != euid() {
            return Err(unsafe_dir(
                &path,
                format!(
                    "belongs to uid {}, and sqsim runs as uid {}: chown the data directory's files to that user",
                    meta.uid(),
                    euid()
                ),
            ));
        }
        if meta.nlink() > 1 {
            return Err(unsafe_dir(
                &path,
                format!(
                    "has {} names (hard links); sqsim makes none, and changing it would change the file under its other names: copy it instead",
                    meta.nlink()
                ),
            ));
        }
        if meta.mode() & 0o7777 != FILE_MODE {
            // Through a descriptor of the very file checked (not followed, and a FIFO
            // swapped in meanwhile does not block the open).
            let f = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                .open(&path)
                .map_err(|e| checked_entry_error(&path, e))?;
            let now = f.metadata()?;
            if now.ino() == meta.ino() && now.dev() == meta.dev() {
                f.set_permissions(fs::Permissions::from_mode(FILE_MODE))?;
                tightened += 1;
            }
        }
    }
    if tightened > 0 {
        tracing::warn!(
            dir = %dir.display(),
            files = tightened,
            "files of the data directory were readable by other users (made by an older sqsim): now 0600"
        );
    }
    Ok(())
}

/// Options that never follow a symbolic link.
fn no_follow() -> OpenOptions {
    let mut o = OpenOptions::new();
    #[cfg(unix)]
    o.custom_flags(libc::O_NOFOLLOW);
    o
}

/// Options that never follow a symbolic link and make a new file private (before the
/// umask; [`create_new`] then sets the mode exactly).
fn private_options() -> OpenOptions {
    let mut o = no_follow();
    #[cfg(unix)]
    o.mode(FILE_MODE);
    o
}

/// Creates `path` as a new file only this user can read and write. Fails if anything is at
/// that name already, a link included: nothing else is ever written through.
pub(super) fn create_new(path: &Path) -> io::Result<File> {
    let f = private_options()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| at(path, e))?;
    // A umask can take the owner's bits too; the mode is set, not left to it.
    #[cfg(unix)]
    f.set_permissions(fs::Permissions::from_mode(FILE_MODE))
        .map_err(|e| at(path, e))?;
    Ok(f)
}

/// Removes whatever is at `path` (a temporary file a crash left, or a link planted there:
/// the link goes, never what it points at) and creates a new private file there.
pub(super) fn replace(path: &Path) -> io::Result<File> {
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(at(path, e)),
    }
    create_new(path)
}

/// Opens an existing file of the directory for writing (to cut it), never through a link.
pub(super) fn open_to_write(path: &Path) -> io::Result<File> {
    no_follow().write(true).open(path).map_err(|e| at(path, e))
}

/// Opens an existing file of the directory for reading, never through a link.
pub(super) fn open_to_read(path: &Path) -> io::Result<File> {
    no_follow().read(true).open(path).map_err(|e| at(path, e))
}

/// Copies `from` to a new private file `to` (replacing one there), synced.
pub(super) fn copy_aside(from: &Path, to: &Path) -> io::Result<()> {
    let mut src = open_to_read(from)?;
    let mut dst = replace(to)?;
    io::copy(&mut src, &mut dst).map_err(|e| at(to, e))?;
    dst.sync_all()
}
