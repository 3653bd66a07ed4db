//! All queue semantics, with no HTTP and no wire strings: the queue registry, messages,
//! visibility, delays, retention and purge. Time comes only from the engine's [`Clock`].
//! Everything here is synchronous except waiting for a queue to change, which long polls use.

pub(crate) mod attribute;
pub(crate) mod clock;
pub(crate) mod digest;
pub(crate) mod durable;
pub(crate) mod error;
pub(crate) mod fair;
pub(crate) mod fifo;
pub(crate) mod ids;
pub(crate) mod journal;
pub(crate) mod md5_lanes;
pub(crate) mod memory;
pub(crate) mod message;
pub(crate) mod moves;
pub(crate) mod queue;
pub(crate) mod random;
pub(crate) mod realism;
pub(crate) mod receipt;
pub(crate) mod receive;
pub(crate) mod redrive;
mod registry;
pub(crate) mod search;
pub(crate) mod settings;
pub(crate) mod slab;
mod state;
pub(crate) mod view;
pub(crate) mod wait;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::watch;

use crate::store;

pub(crate) use state::{queue_footprint, tags_footprint};

/// The most a durable store may hold unwritten (the disk refusing writes) before changes
/// are refused with 503; see [`Engine::admit_change`].
const MAX_BACKLOG: u64 = 64 << 20;

pub use clock::Clock;
pub(crate) use durable::compactor::spawn_compactor;
pub(crate) use error::EngineError;
pub(crate) use ids::QueueId;
pub(crate) use message::{AttributeData, AttributeValue, NewMessage, ReceivedMessage, SendReceipt};
pub(crate) use queue::Queue;
pub use realism::Realism;
pub(crate) use receive::ReceiveRequest;
pub use settings::EngineSettings;
pub(crate) use settings::QueueSettings;
pub(crate) use view::QueueSnapshot;

/// The set of all queues, in all (region, account) namespaces, and the clock they share.
#[derive(Debug)]
pub(crate) struct Engine {
    clock: Arc<Clock>,
    settings: EngineSettings,
    queues: RwLock<HashMap<QueueId, Arc<Queue>>>,
    /// When each recently deleted queue name was deleted, for the 60-second cooldown.
    deleted: Mutex<HashMap<QueueId, u64>>,
    /// Every message move task, oldest first.
    pub(crate) move_tasks: Mutex<Vec<Arc<moves::task::MoveTask>>>,
    /// The ids of the move tasks whose runners are under way, listed or not (a task is
    /// dropped from [`Engine::move_tasks`] when pruned, its runner may still be ending):
    /// until a runner ends, its outboxes stay.
    live_runners: Mutex<std::collections::HashSet<String>>,
    next_uid: AtomicU64,
    shutdown: watch::Sender<bool>,
    /// Where changes are recorded (nowhere in the in-memory default).
    journal: journal::Journal,
    /// AWS-realism mode for queues created from now on (and every queue, when set through
    /// [`Engine::set_realism`]), with the seed their draws start from.
    realism: RwLock<realism::Realism>,
    seed: u64,
    /// Long polls waiting now, over all queues (capped by `settings.max_long_polls`).
    long_polls: AtomicUsize,
    /// Cluster mode: which queues this engine (one shard) serves.
    home: std::sync::OnceLock<moves::outbox::Home>,
    /// Signals the courier that an outbox took entries.
    outbox_ready: tokio::sync::Notify,
    /// The newest record of the registry, the clock or the move tasks (durable mode):
    /// an answer that reads them (a queue not found, a listing, the time) waits for it.
    registry_lsn: journal::LastLsn,
}

/// A long poll's place under [`EngineSettings::max_long_polls`], given back when dropped.
#[derive(Debug)]
pub(crate) struct LongPollSlot<'a>(&'a AtomicUsize);

impl Drop for LongPollSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Engine {
    /// An empty engine running on `clock`.
    pub(crate) fn new(clock: Arc<Clock>, mut settings: EngineSettings) -> Engine {
        let seed = clock.now_ms() << 16;
        // The engine keeps the one current realism setting (it changes at run time).
        let realism = std::mem::take(&mut settings.realism);
        // Realism's seed: the one given, or one from the time (printed, so a run can be
        // replayed with --seed).
        let realism_seed = settings
            .seed
            .unwrap_or_else(|| clock.now_ms() ^ u64::from(std::process::id()) << 40);
        Engine {
            realism: RwLock::new(realism),
            seed: realism_seed,
            clock,
            settings,
            queues: RwLock::new(HashMap::new()),
            deleted: Mutex::new(HashMap::new()),
            move_tasks: Mutex::new(Vec::new()),
            live_runners: Mutex::default(),
            next_uid: AtomicU64::new(seed),
            shutdown: watch::Sender::new(false),
            journal: journal::Journal::default(),
            long_polls: AtomicUsize::new(0),
            home: std::sync::OnceLock::new(),
            outbox_ready: tokio::sync::Notify::new(),
            registry_lsn: journal::LastLsn::default(),
        }
    }

    /// A record of the registry, the clock or the move tasks was appended at `lsn`.
    pub(super) fn registry_changed(&self, lsn: Option<store::Lsn>) {
        self.registry_lsn.raise(lsn);
    }

    /// Notes that the current request's answer relies on the registry as it is now (a
    /// queue not found, a listing): it waits until the registry's changes are kept.
    pub(crate) fn depend_on_registry(&self) {
        if self.journal.is_on() {
            self.registry_lsn.depend_in(&self.journal);
        }
    }

    /// A place for one more waiting long poll, or `None` when `max_long_polls` are waiting.
    pub(crate) fn begin_long_poll(&self) -> Option<LongPollSlot<'_>> {
        let max = self.settings.max_long_polls;
        self.long_polls
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| LongPollSlot(&self.long_polls))
    }

    /// Refuses messages that would take the process's stored message bytes past
    /// [`EngineSettings::max_stored_bytes`].
    pub(crate) fn admit_stored<'a>(
        &self,
        messages: impl IntoIterator<Item = &'a NewMessage>,
    ) -> Result<(), EngineError> {
        let limit = self.settings.max_stored_bytes;
        if limit == 0 {
            return Ok(());
        }
        self.admit_bytes(messages.into_iter().map(NewMessage::footprint).sum())
    }

    /// Refuses a change that would take what the process holds for its clients (see
    /// [`memory`]) past [`EngineSettings::max_stored_bytes`] by `adding` bytes: a new queue,
    /// settings or tags, as much as messages. Changes the store holds unwritten count too;
    /// their own bound, [`Engine::admit_change`], is checked for every change before its
    /// handler runs.
    pub(crate) fn admit_bytes(&self, adding: u64) -> Result<(), EngineError> {
        let limit = self.settings.max_stored_bytes;
        let held = memory::held().saturating_add(self.backlog_bytes());
        if limit == 0 || held.saturating_add(adding) <= limit {
            return Ok(());
        }
        Err(EngineError::StoreFull { limit })
    }

    /// Refuses any change while the durable store holds more than [`Engine::max_backlog`]
    /// of records the disk has not taken: each change (and each client's retry of one)
    /// would add a record to that memory for as long as the disk refuses.
    pub(crate) fn admit_change(&self) -> Result<(), EngineError> {
        let backlog = self.backlog_bytes();
        if backlog > self.max_backlog() {
            return Err(EngineError::Backlog { bytes: backlog });
        }
        Ok(())
    }

    /// Bytes of changes appended and not yet written by the durable store.
    fn backlog_bytes(&self) -> u64 {
        self.journal.store().map_or(0, |s| s.backlog_bytes())
    }

    /// The most the durable store may hold unwritten before changes are refused: a quarter
    /// of `--max-stored-bytes`, at most [`MAX_BACKLOG`].
    fn max_backlog(&self) -> u64 {
        match self.settings.max_stored_bytes {
            0 => MAX_BACKLOG,
            cap => (cap / 4).min(MAX_BACKLOG),
        }
    }

    /// The engine's journal (its durable store, if any).
    pub(crate) fn journal(&self) -> &journal::Journal {
        &self.journal
    }

    /// The engine's clock.
    pub(crate) fn clock(&self) -> &Arc<Clock> {
        &self.clock
    }

    /// Current clock time in epoch milliseconds.
    pub(crate) fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Engine-wide settings.
    pub(crate) fn settings(&self) -> &EngineSettings {
        &self.settings
    }

    /// The realism setting new queues get.
    pub(crate) fn realism(&self) -> realism::Realism {
        self.realism
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The seed realism draws from.
    pub(crate) fn seed(&self) -> u64 {
        self.seed
    }

    /// Sets realism for every queue and for queues created from now on.
    pub(crate) fn set_realism(&self, realism: realism::Realism) {
        *self.realism.write().unwrap_or_else(|p| p.into_inner()) = realism.clone();
        for q in self.all_queues() {
            self.set_queue_realism(&q, realism.clone(), false);
        }
    }

    /// Sets one queue's realism, drawing from this engine's seed; `created`: the queue is
    /// new (under propagation it stays unknown for up to a second).
    pub(crate) fn set_queue_realism(&self, q: &Queue, realism: realism::Realism, created: bool) {
        q.set_realism(realism, self.seed, self.now_ms(), created);
    }

    /// Records a move task's current state (under the task list's lock, which a snapshot
    /// copies the tasks under).
    pub(crate) fn record_task(&self, task: &moves::task::MoveTask) {
        if self.journal.is_on() {
            let _tasks = self.move_tasks.lock().unwrap_or_else(|p| p.into_inner());
            let lsn = self
                .journal
                .record(&[journal::change::Change::MoveTask(task.record())]);
            self.registry_lsn.raise(lsn);
        }
    }

    /// Move tasks of one source queue, newest first.
    pub(crate) fn move_tasks_of(&self, source_arn: &str) -> Vec<Arc<moves::task::MoveTask>> {
        self.depend_on_registry();
        self.move_tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .rev()
            .filter(|t| t.source_arn == source_arn)
            .cloned()
            .collect()
    }

    /// Turns at-least-once redelivery off on every queue.
    pub(crate) fn clear_redelivery(&self) {
        for q in self
            .queues
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
        {
            q.set_redelivery(0.0);
        }
    }

    /// Moves the clock forward and lets every long poll re-check its queue.
    pub(crate) fn advance_clock(&self, by: Duration) {
        self.clock.advance(by);
        self.record_clock();
        self.wake_all();
    }

    /// Freezes (true) or unfreezes the clock.
    pub(crate) fn set_clock_frozen(&self, frozen: bool) {
        if frozen {
            self.clock.freeze();
        } else {
            self.clock.unfreeze();
        }
        self.record_clock();
        if !frozen {
            // Waits on a frozen clock have no real-time deadline: they look again now.
            self.wake_all();
        }
    }

    /// The clock this engine shares was set from elsewhere (cluster mode: another node moved
    /// the cluster's clock): records its state and lets long polls re-check.
    pub(crate) fn clock_changed(&self) {
        self.record_clock();
        self.wake_all();
    }

    fn record_clock(&self) {
        let (offset_ms, frozen_at) = self.clock.virtual_state();
        let lsn = self.journal.record(&[journal::change::Change::Clock {
            offset_ms,
            frozen_at,
        }]);
        self.registry_lsn.raise(lsn);
    }

    /// Like [`Engine::advance_clock`], but refuses (false, clock unchanged) a move past
    /// [`clock::MAX_EPOCH_MS`] instead of stopping there.
    pub(crate) fn try_advance_clock(&self, by: Duration) -> bool {
        let moved = self.clock.try_advance(by);
        if moved {
            self.record_clock();
            self.wake_all();
        }
        moved
    }

    fn wake_all(&self) {
        let queues: Vec<Arc<Queue>> = self
            .queues
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        for q in queues {
            q.changed().notify_waiters();
        }
    }

    /// Tells waiting long polls to return: the server is stopping.
    pub(crate) fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Whether the server has started shutting down.
    pub(crate) fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// A receiver that turns true when the server starts shutting down.
    pub(crate) fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }
}
