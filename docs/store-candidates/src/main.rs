//! Candidates for sqsim's durable store, on one workload: 32 threads, each appending a
//! frame and waiting until it is durable (as a request does), frames of the sizes sqsim's
//! engine writes for a send/receive/delete cycle of 10-message batches. Every candidate sits
//! behind the same group-commit writer thread, so what differs is the storage engine.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

trait Sink: Send + 'static {
    fn write_group(&mut self, first: u64, frames: &[Vec<u8>]);
}

struct Log { f: std::fs::File, sync: bool }
impl Sink for Log {
    fn write_group(&mut self, _first: u64, frames: &[Vec<u8>]) {
        use std::io::Write;
        let mut buf = Vec::new();
        for fr in frames {
            buf.extend_from_slice(&(fr.len() as u32).to_le_bytes());
            buf.extend_from_slice(&crc32fast::hash(fr).to_le_bytes());
            buf.extend_from_slice(fr);
        }
        self.f.write_all(&buf).unwrap();
        if self.sync { self.f.sync_data().unwrap(); }
    }
}

struct Sqlite { c: rusqlite::Connection }
impl Sink for Sqlite {
    fn write_group(&mut self, first: u64, frames: &[Vec<u8>]) {
        let tx = self.c.transaction().unwrap();
        {
            let mut st = tx.prepare_cached("INSERT INTO log(lsn, bytes) VALUES (?1, ?2)").unwrap();
            for (i, fr) in frames.iter().enumerate() {
                st.execute(rusqlite::params![(first + i as u64) as i64, fr]).unwrap();
            }
        }
        tx.commit().unwrap();
    }
}

const T: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("log");
struct Redb { db: redb::Database, sync: bool }
impl Sink for Redb {
    fn write_group(&mut self, first: u64, frames: &[Vec<u8>]) {
        let mut tx = self.db.begin_write().unwrap();
        if !self.sync { tx.set_durability(redb::Durability::None); }
        {
            let mut t = tx.open_table(T).unwrap();
            for (i, fr) in frames.iter().enumerate() {
                t.insert(first + i as u64, fr.as_slice()).unwrap();
            }
        }
        tx.commit().unwrap();
    }
}

struct Fjall { ks: fjall::Keyspace, p: fjall::PartitionHandle, sync: bool }
impl Sink for Fjall {
    fn write_group(&mut self, first: u64, frames: &[Vec<u8>]) {
        let mut b = self.ks.batch();
        for (i, fr) in frames.iter().enumerate() {
            b.insert(&self.p, (first + i as u64).to_be_bytes(), fr.as_slice());
        }
        b.commit().unwrap();
        self.ks.persist(if self.sync { fjall::PersistMode::SyncData } else { fjall::PersistMode::Buffer }).unwrap();
    }
}

#[derive(Default)]
struct Pending { frames: Vec<Vec<u8>>, appended: u64, durable: u64 }
struct Shared { pending: Mutex<Pending>, wake: Condvar, done: Condvar }

fn run(name: &str, mut sink: impl Sink, secs: f64) {
    let sh = Arc::new(Shared { pending: Mutex::new(Pending::default()), wake: Condvar::new(), done: Condvar::new() });
    let stop = Arc::new(AtomicBool::new(false));
    let groups = Arc::new(AtomicU64::new(0));
    let writer = {
        let (sh, stop, groups) = (sh.clone(), stop.clone(), groups.clone());
        std::thread::spawn(move || loop {
            let (frames, upto) = {
                let mut p = sh.pending.lock().unwrap();
                while p.frames.is_empty() {
                    if stop.load(Ordering::Relaxed) { return; }
                    p = sh.wake.wait_timeout(p, Duration::from_millis(10)).unwrap().0;
                }
                (std::mem::take(&mut p.frames), p.appended)
            };
            sink.write_group(upto - frames.len() as u64, &frames);
            groups.fetch_add(1, Ordering::Relaxed);
            sh.pending.lock().unwrap().durable = upto;
            sh.done.notify_all();
        })
    };
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(secs);
    let threads: Vec<_> = (0..32).map(|t| {
        let sh = sh.clone();
        std::thread::spawn(move || {
            let mut n = 0u64;
            let mut lat = Vec::new();
            let mut x = t as u64 * 7919 + 1;
            while Instant::now() < deadline {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                // A cycle's frames: a batch send (10 x 256-byte bodies plus metadata), its
                // receive (10 progress records), its delete (10 removals).
                let size = match x % 3 { 0 => 3300, 1 => 420, _ => 200 };
                let t0 = Instant::now();
                let lsn = {
                    let mut p = sh.pending.lock().unwrap();
                    p.frames.push(vec![(x & 0xff) as u8; size]);
                    p.appended += 1;
                    sh.wake.notify_one();
                    p.appended
                };
                let mut p = sh.pending.lock().unwrap();
                while p.durable < lsn { p = sh.done.wait(p).unwrap(); }
                drop(p);
                lat.push(t0.elapsed());
                n += 1;
            }
            (n, lat)
        })
    }).collect();
    let mut total = 0; let mut lat = Vec::new();
    for t in threads { let (n, l) = t.join().unwrap(); total += n; lat.extend(l); }
    let el = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    lat.sort();
    let p = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize].as_secs_f64() * 1000.0;
    println!("{name:<22} {:>9.0} frames/s  {:>7.0} commits/s  p50 {:.2} ms  p99 {:.2} ms",
        total as f64 / el, groups.load(Ordering::Relaxed) as f64 / el, p(0.5), p(0.99));
}

fn fresh(base: &std::path::Path) {
    let _ = std::fs::remove_dir_all(base);
    std::fs::create_dir_all(base).unwrap();
}

struct Pre { f: std::fs::File, off: u64 }
impl Sink for Pre {
    fn write_group(&mut self, _first: u64, frames: &[Vec<u8>]) {
        use std::os::unix::fs::FileExt;
        let mut buf = Vec::new();
        for fr in frames {
            buf.extend_from_slice(&(fr.len() as u32).to_le_bytes());
            buf.extend_from_slice(&crc32fast::hash(fr).to_le_bytes());
            buf.extend_from_slice(fr);
        }
        self.f.write_all_at(&buf, self.off).unwrap();
        self.off += buf.len() as u64;
        self.f.sync_data().unwrap();
    }
}

fn main() {
    if std::env::args().nth(2).as_deref() == Some("pre") {
        let base = std::env::temp_dir().join("sqsim-store-candidates-data");
        fresh(&base);
        let f = std::fs::OpenOptions::new().create(true).write(true).open(base.join("log")).unwrap();
        let f2 = std::fs::OpenOptions::new().create(true).append(true).open(base.join("log2")).unwrap();
        use std::io::Write;
        let zeros = vec![0u8; 1 << 20];
        let mut w = &f;
        for _ in 0..1024 { w.write_all(&zeros).unwrap(); }
        f.sync_all().unwrap();
        for _ in 0..2 {
            run("own log (fsync)", Log { f: f2.try_clone().unwrap(), sync: true }, 5.0);
            run("prewritten (fsync)", Pre { f: f.try_clone().unwrap(), off: 0 }, 5.0);
        }
        return;
    }
    let secs: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(5.0);
    let base = std::env::temp_dir().join("sqsim-store-candidates-data");
    for round in 0..2 {
        println!("round {round}");
        for sync in [true, false] {
            let mode = if sync { "fsync" } else { "os" };
            fresh(&base);
            let f = std::fs::OpenOptions::new().create(true).append(true).open(base.join("log")).unwrap();
            run(&format!("own log ({mode})"), Log { f, sync }, secs);
            fresh(&base);
            let c = rusqlite::Connection::open(base.join("db")).unwrap();
            c.pragma_update(None, "journal_mode", "WAL").unwrap();
            c.pragma_update(None, "synchronous", if sync { "FULL" } else { "OFF" }).unwrap();
            c.execute("CREATE TABLE log(lsn INTEGER PRIMARY KEY, bytes BLOB)", []).unwrap();
            run(&format!("sqlite wal ({mode})"), Sqlite { c }, secs);
            fresh(&base);
            let db = redb::Database::create(base.join("redb")).unwrap();
            run(&format!("redb ({mode})"), Redb { db, sync }, secs);
            fresh(&base);
            std::fs::create_dir_all(base.join("fjall")).unwrap();
            let ks = fjall::Config::new(base.join("fjall")).open().unwrap();
            let p = ks.open_partition("log", Default::default()).unwrap();
            run(&format!("fjall ({mode})"), Fjall { ks, p, sync }, secs);
        }
    }
    let _ = std::fs::remove_dir_all(&base);
}
