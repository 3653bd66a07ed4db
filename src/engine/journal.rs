//! Where the engine hands its recorded changes to a durable store, and how a request learns
//! which of them it must wait for. Without a store (the in-memory default) every call here
//! is a no-op and nothing is encoded.

use std::cell::Cell;
use std::future::Future;
use std::sync::Arc;

use crate::store::{Lsn, Store};

use super::change::{self, Change};

tokio::task_local! {
    /// The newest record the current request appended, if any.
    static APPENDED: Cell<Option<Lsn>>;
}

/// Runs `f` (one request), noting the newest record it appended, to wait for before the
/// answer goes out.
pub(crate) async fn tracking<F: Future>(f: F) -> (F::Output, Option<Lsn>) {
    APPENDED
        .scope(Cell::new(None), async move {
            let out = f.await;
            (out, APPENDED.with(Cell::get))
        })
        .await
}

/// The engine's handle on its store, if it has one.
#[derive(Debug, Clone, Default)]
pub(crate) struct Journal(Option<Arc<dyn Store>>);

impl Journal {
    /// Records into `store`.
    pub(crate) fn to(store: Arc<dyn Store>) -> Journal {
        Journal(Some(store))
    }

    /// Whether changes are recorded at all.
    pub(crate) fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// The store, if any.
    pub(crate) fn store(&self) -> Option<&Arc<dyn Store>> {
        self.0.as_ref()
    }

    /// Appends one frame (changes already encoded) and notes it for the current request.
    pub(crate) fn append(&self, frame: &[u8]) {
        if let Some(s) = &self.0 {
            let lsn = s.append(frame);
            let in_request =
                APPENDED.try_with(|c| c.set(Some(c.get().map_or(lsn, |l| l.max(lsn)))));
            if in_request.is_err() {
                // A background change (move task, start-up): nobody waits for it.
                s.nudge();
            }
        }
    }

    /// Encodes `changes` as one frame and appends it.
    pub(crate) fn record(&self, changes: &[Change<'_>]) {
        if self.is_on() {
            let mut frame = Vec::new();
            for c in changes {
                change::encode(&mut frame, c);
            }
            self.append(&frame);
        }
    }
}
