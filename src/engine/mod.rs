//! All queue semantics, with no HTTP and no wire strings: the queue registry, messages,
//! visibility, delays, retention and purge. Time comes only from the engine's [`Clock`].
//! Everything here is synchronous except waiting for a queue to change, which long polls use.

pub mod clock;
pub mod digest;
pub mod error;
pub mod fair;
pub mod fifo;
pub mod message;
pub mod queue;
pub mod receipt;
pub mod settings;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::watch;

pub use clock::Clock;
pub use error::EngineError;
pub use message::{AttributeData, AttributeValue, NewMessage, ReceivedMessage, SendReceipt};
pub use queue::{Queue, QueueCounts, QueueId, QueueSnapshot, ReceiveOutcome, ReceiveRequest};
pub use settings::{EngineSettings, QueueSettings};

/// The set of all queues, in all (region, account) namespaces, and the clock they share.
#[derive(Debug)]
pub struct Engine {
    clock: Arc<Clock>,
    settings: EngineSettings,
    queues: RwLock<HashMap<QueueId, Arc<Queue>>>,
    next_uid: AtomicU64,
    shutdown: watch::Sender<bool>,
}

impl Engine {
    /// An empty engine running on `clock`.
    pub fn new(clock: Arc<Clock>, settings: EngineSettings) -> Engine {
        let seed = clock.now_ms() << 16;
        Engine {
            clock,
            settings,
            queues: RwLock::new(HashMap::new()),
            next_uid: AtomicU64::new(seed),
            shutdown: watch::Sender::new(false),
        }
    }

    /// The engine's clock.
    pub fn clock(&self) -> &Arc<Clock> {
        &self.clock
    }

    /// Current clock time in epoch milliseconds.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Engine-wide settings.
    pub fn settings(&self) -> &EngineSettings {
        &self.settings
    }

    /// Returns the queue with this id, creating it with `settings` if there is none.
    /// The flag says whether it was created by this call.
    pub fn create_queue(&self, id: QueueId, settings: QueueSettings) -> (Arc<Queue>, bool) {
        if let Some(q) = self.queue(&id) {
            return (q, false);
        }
        let mut queues = self.queues.write().unwrap_or_else(|p| p.into_inner());
        if let Some(q) = queues.get(&id) {
            return (Arc::clone(q), false);
        }
        let uid = self.next_uid.fetch_add(1, Ordering::Relaxed);
        let q = Arc::new(Queue::new(id.clone(), uid, settings, self.now_ms()));
        queues.insert(id, Arc::clone(&q));
        (q, true)
    }

    /// The queue with this id.
    pub fn queue(&self, id: &QueueId) -> Option<Arc<Queue>> {
        self.queues
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
    }

    /// Deletes a queue with its messages; false if it did not exist.
    pub fn delete_queue(&self, id: &QueueId) -> bool {
        let removed = self
            .queues
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        match removed {
            Some(q) => {
                q.mark_deleted();
                true
            }
            None => false,
        }
    }

    /// Queues of one namespace whose names start with `prefix`, sorted by name.
    pub fn list_queues(&self, region: &str, account: &str, prefix: &str) -> Vec<Arc<Queue>> {
        let mut found: Vec<Arc<Queue>> = self
            .queues
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|q| {
                q.id.region == region && q.id.account == account && q.id.name.starts_with(prefix)
            })
            .cloned()
            .collect();
        found.sort_by(|a, b| a.id.name.cmp(&b.id.name));
        found
    }

    /// Moves the clock forward and lets every long poll re-check its queue.
    pub fn advance_clock(&self, by: Duration) {
        self.clock.advance(by);
        self.wake_all();
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
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// A receiver that turns true when the server starts shutting down.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }
}
