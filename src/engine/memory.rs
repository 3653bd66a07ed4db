//! The memory the process holds for its clients, as `--max-stored-bytes` counts it:
//! messages, FIFO groups, deduplication and receive-attempt memory, and queues with their
//! settings and tags — each charged at what it really costs in the heap, not at its size on
//! the wire (ten one-byte attributes take ten times more than they weigh).
//!
//! The costs are measured, not guessed: `make bench`'s memory scenarios and
//! `tests/python/test_memory_limit.py` fill a capped server with each shape (small
//! attributes, long FIFO ids, dedup entries of deleted messages, queues with tags and a
//! policy) and check the RSS it grows stays within the budget docs/reliability.md states.
//!
//! Process-wide, because memory is (cluster mode runs one engine per shard in one process).
//! Kept in stripes, one per thread slot, so the runtime's threads never fight over one
//! cache line on every message; a stripe may go below zero (charged on one thread, released
//! on another), the sum never does.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

const STRIPES: usize = 16;

#[repr(align(128))]
struct Stripe(AtomicI64);

static HELD: [Stripe; STRIPES] = [const { Stripe(AtomicI64::new(0)) }; STRIPES];

/// This thread's stripe.
fn stripe() -> &'static AtomicI64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static SLOT: usize = (NEXT.fetch_add(1, Ordering::Relaxed) as usize) % STRIPES;
    }
    &HELD[SLOT.with(|s| *s)].0
}

/// Counts `bytes` more as held.
pub(crate) fn charge(bytes: u64) {
    stripe().fetch_add(bytes as i64, Ordering::Relaxed);
}

/// Counts `bytes` fewer as held.
pub(crate) fn release(bytes: u64) {
    stripe().fetch_sub(bytes as i64, Ordering::Relaxed);
}

/// Bytes held now, over every queue of the process.
pub(crate) fn held() -> u64 {
    let sum: i64 = HELD.iter().map(|s| s.0.load(Ordering::Relaxed)).sum();
    sum.max(0) as u64
}

/// What the allocator hands out for a request of `len` bytes (0: none): size classes of
/// 16 bytes at least, rounded up to 16 (mimalloc's small classes; larger ones round to
/// an eighth of their power of two, which this stays near enough to).
pub(crate) fn heap(len: usize) -> u64 {
    match len {
        0 => 0,
        n => (n.max(16) as u64).div_ceil(16) * 16,
    }
}

/// A charge held for as long as this value lives, resized as what it stands for changes:
/// a queue's settings and tags, a FIFO queue's groups and deduplication memory. Dropping
/// it (the queue is gone) gives it all back.
#[derive(Debug, Default)]
pub(crate) struct Held(u64);

impl Held {
    /// Now holds `bytes`.
    pub(crate) fn set(&mut self, bytes: u64) {
        if bytes > self.0 {
            charge(bytes - self.0);
        } else {
            release(self.0 - bytes);
        }
        self.0 = bytes;
    }

    /// Holds `bytes` more.
    pub(crate) fn add(&mut self, bytes: u64) {
        self.set(self.0 + bytes);
    }

    /// Holds `bytes` fewer.
    pub(crate) fn sub(&mut self, bytes: u64) {
        self.set(self.0.saturating_sub(bytes));
    }

    /// What it holds.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> u64 {
        self.0
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        release(self.0);
    }
}

/// The memory this process may use, and what sets it: the smallest of the machine's memory,
/// the limits of every cgroup it runs in — cgroup v2's `memory.max` and `memory.high` (what a
/// systemd unit's `MemoryMax=`/`MemoryHigh=` and a container runtime's `--memory` write) of
/// its own cgroup and each parent, cgroup v1's `memory.limit_in_bytes` likewise — and its
/// `RLIMIT_AS`/`RLIMIT_DATA` (`ulimit -v`, a unit's `LimitAS=`/`LimitDATA=`).
///
/// Read once: the default cap is taken from it at start, and `/_sqsim/stats` names the same.
pub(crate) fn process_limit() -> Option<&'static (u64, String)> {
    static LIMIT: std::sync::OnceLock<Option<(u64, String)>> = std::sync::OnceLock::new();
    LIMIT.get_or_init(read_process_limit).as_ref()
}

fn read_process_limit() -> Option<(u64, String)> {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let rlimits = [
        (
            "RLIMIT_AS",
            rlimit::Resource::AS.get().ok().map(|(soft, _)| soft),
        ),
        (
            "RLIMIT_DATA",
            rlimit::Resource::DATA.get().ok().map(|(soft, _)| soft),
        ),
    ];
    limit_from(
        std::path::Path::new("/sys/fs/cgroup"),
        &read("/proc/self/cgroup").unwrap_or_default(),
        &read("/proc/meminfo").unwrap_or_default(),
        &rlimits,
    )
}

/// [`process_limit`] from what it reads: the cgroup file system's mount point, the text of
/// `/proc/self/cgroup` and of `/proc/meminfo`, and the soft resource limits.
fn limit_from(
    root: &std::path::Path,
    self_cgroup: &str,
    meminfo: &str,
    rlimits: &[(&str, Option<u64>)],
) -> Option<(u64, String)> {
    let mut found: Vec<(u64, String)> = Vec::new();
    if let Some(kib) = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
    {
        found.push((kib * 1024, "the machine's memory (MemTotal)".into()));
    }
    // A limit file's value; "max" (v2) and v1's near-2^63 "unlimited" are no limit.
    let value = |path: &std::path::Path| -> Option<u64> {
        let v = std::fs::read_to_string(path)
            .ok()?
            .trim()
            .parse::<u64>()
            .ok()?;
        (v < 1 << 60).then_some(v)
    };
    // Each directory from the process's own cgroup up to the hierarchy's root (inside a
    // container, the root is often the container's own cgroup).
    let mut each_level = |base: std::path::PathBuf, rel: &str, files: &[&str]| {
        let mut dir = std::path::PathBuf::from(rel.trim_start_matches('/'));
        loop {
            for f in files {
                let path = base.join(&dir).join(f);
                if let Some(v) = value(&path) {
                    found.push((v, path.display().to_string()));
                }
            }
            if !dir.pop() {
                break;
            }
        }
    };
    for line in self_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            // cgroup v2: mounted at the root, or beside v1 at `unified` (hybrid mode).
            for base in [root.to_path_buf(), root.join("unified")] {
                each_level(base, path, &["memory.max", "memory.high"]);
            }
        } else if controllers.split(',').any(|c| c == "memory") {
            each_level(root.join("memory"), path, &["memory.limit_in_bytes"]);
        }
    }
    for (name, v) in rlimits {
        if let Some(v) = v.filter(|v| *v < 1 << 60) {
            found.push((v, (*name).to_string()));
        }
    }
    found.into_iter().min_by_key(|(v, _)| *v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smallest_limit_of_every_cgroup_level_and_rlimit_wins() {
        let root = tempfile::tempdir().unwrap();
        let put = |rel: &str, text: &str| {
            let p = root.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        let meminfo = "MemTotal:       25165824 kB\nMemFree: 1 kB\n";
        // Nothing but the machine.
        let (v, what) = limit_from(root.path(), "0::/\n", meminfo, &[]).unwrap();
        assert_eq!((v, what.contains("MemTotal")), (24 << 30, true));
        // cgroup v2: a systemd unit's MemoryMax on its own cgroup, "max" above it.
        put("system.slice/sqsim.service/memory.max", "536870912\n");
        put("system.slice/sqsim.service/memory.high", "max\n");
        put("system.slice/memory.max", "max\n");
        let v2 = "0::/system.slice/sqsim.service\n";
        let (v, what) = limit_from(root.path(), v2, meminfo, &[]).unwrap();
        assert_eq!(v, 512 << 20);
        assert!(
            what.ends_with("system.slice/sqsim.service/memory.max"),
            "{what}"
        );
        // A parent's lower limit holds too (MemoryHigh on the slice).
        put("system.slice/memory.high", "268435456\n");
        assert_eq!(
            limit_from(root.path(), v2, meminfo, &[]).unwrap().0,
            256 << 20
        );
        // cgroup v1 (this project's CI machines): the memory controller's own line.
        put("memory/docker/abc/memory.limit_in_bytes", "134217728\n");
        put("memory/memory.limit_in_bytes", "9223372036854771712\n");
        let v1 = "12:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n0::/\n";
        let (v, what) = limit_from(root.path(), v1, meminfo, &[]).unwrap();
        assert_eq!(v, 128 << 20);
        assert!(what.ends_with("docker/abc/memory.limit_in_bytes"), "{what}");
        // ulimit -v below them all; an unlimited one counts for nothing.
        let rl = [
            ("RLIMIT_AS", Some(64 << 20)),
            ("RLIMIT_DATA", Some(u64::MAX)),
        ];
        assert_eq!(
            limit_from(root.path(), v1, meminfo, &rl).unwrap(),
            (64 << 20, "RLIMIT_AS".to_string())
        );
    }

    #[test]
    fn heap_rounds_to_allocator_classes() {
        assert_eq!(heap(0), 0);
        assert_eq!(heap(1), 16);
        assert_eq!(heap(16), 16);
        assert_eq!(heap(17), 32);
        assert_eq!(heap(128), 128);
    }

    #[test]
    fn a_held_charge_follows_its_value_and_goes_with_it() {
        // Other tests charge the same counter: compare differences on this thread only.
        let before = stripe().load(Ordering::Relaxed);
        let mut h = Held::default();
        h.set(100);
        h.add(50);
        h.sub(30);
        assert_eq!(h.bytes(), 120);
        assert_eq!(stripe().load(Ordering::Relaxed) - before, 120);
        drop(h);
        assert_eq!(stripe().load(Ordering::Relaxed), before);
    }
}
