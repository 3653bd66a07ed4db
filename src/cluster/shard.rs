//! One shard as the node that owns it serves it: today's engine, recovered from the
//! shard's JetStream stream and writing to it, valid while the node's lease is.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::config;
use crate::engine::moves::outbox::Home;
use crate::engine::{Clock, Engine, EngineSettings};

use super::placement;
use crate::store::jetstream::JetStreamStore;
use crate::store::{Store, StoreError};

/// A shard this node serves.
#[derive(Debug)]
pub(crate) struct Shard {
    pub index: u32,
    pub engine: Arc<Engine>,
    /// The engine's store, as what it is: leadership moves go through it.
    pub store: Arc<JetStreamStore>,
    /// Until when this node may answer for the shard: the lease extended last, less a margin
    /// (a node that stalls past it stops answering before anyone else can take over).
    valid_until: Mutex<Instant>,
}

impl Shard {
    /// Opens shard `index`'s stream, recovers its queues and fences off any former owner
    /// (recovery ends with a write on top of what it read). Blocking: JetStream I/O.
    /// `cancelled`: the takeover was called off; the store then writes nothing more.
    pub(crate) fn open(
        config: &config::Cluster,
        index: u32,
        clock: Arc<Clock>,
        settings: EngineSettings,
        valid_until: Instant,
        cancelled: Arc<AtomicBool>,
        compress: Arc<AtomicBool>,
    ) -> Result<Shard, StoreError> {
        let (nats, replicas, shards) = (&config.nats, config.replicas, config.shards);
        let store = Arc::new(JetStreamStore::open_cancellable(
            nats,
            &stream_name(index),
            replicas,
            cancelled,
            compress,
        )?);
        let shared: Arc<dyn Store> = Arc::clone(&store) as Arc<dyn Store>;
        let (engine, report) = Engine::open_on_clock(clock, settings, shared)?;
        // Queues of other shards are reached through outboxes (dead letters, move tasks).
        engine.set_home(Home {
            name: stream_name(index),
            serves: Box::new(move |id| placement::shard_of(id, shards) == index),
        });
        tracing::info!(
            shard = index,
            records = report.records,
            from_snapshot = report.from_snapshot,
            "shard recovered"
        );
        Ok(Shard {
            index,
            engine: Arc::new(engine),
            store,
            valid_until: Mutex::new(valid_until),
        })
    }

    /// Whether the lease still covers answering now, and the log still takes writes (a
    /// failed write leaves memory ahead of the log until the shard is recovered again).
    pub(crate) fn is_valid(&self) -> bool {
        Instant::now() < *self.valid_until.lock().unwrap_or_else(|p| p.into_inner())
            && self
                .engine
                .journal()
                .store()
                .is_none_or(|s| s.is_writable())
    }

    /// The lease was extended (a heartbeat went through): valid until `until`.
    pub(crate) fn extend(&self, until: Instant) {
        *self.valid_until.lock().unwrap_or_else(|p| p.into_inner()) = until;
    }

    /// Stops serving: long polls return, what was appended is written, and nothing
    /// appended from now on is ever acknowledged. Blocking.
    pub(crate) fn close(&self) {
        self.extend(Instant::now());
        self.engine.begin_shutdown();
        if let Some(store) = self.engine.journal().store() {
            store.close();
        }
    }
}

/// The name of shard `index`'s stream (`SQSIM_<name>`) and subjects (`sqsim.<name>.*`).
pub(crate) fn stream_name(index: u32) -> String {
    format!("shard{index}")
}

/// The shard whose JetStream stream is `stream`, if it is a shard's (the names above, read
/// back).
pub(crate) fn shard_of_stream(stream: &str) -> Option<u32> {
    let digits = stream.trim_start_matches(|c: char| !c.is_ascii_digit());
    let index: u32 = digits.parse().ok()?;
    (crate::store::jetstream::stream_of(&stream_name(index)) == stream).then_some(index)
}
