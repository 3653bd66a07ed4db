//! What request bodies may hold of the process while they arrive: one budget of bytes for
//! every connection and stream together (`--max-incoming-bytes`). Without it the only bound
//! was the body cap times the connection and stream caps: 200 connections announcing 8 MB
//! and sending 7 MB of it, unsigned, grew a server by 1.3 GiB (one HTTP/2 connection's 200
//! streams by 1.7 GiB); a body is read whole before its signature can be checked, so
//! nothing else stops them.
//!
//! - A **small** body (64 KiB or less) takes bytes as they arrive, and may use the whole
//!   budget. When they do not fit it is refused at once (`BodyRefused`, a 503): holding
//!   what it has while waiting for more could leave every body half-read, waiting on the
//!   others. A body of unknown length (chunked) is taken the same way, its bytes past
//!   64 KiB in the large bodies' share.
//! - A **large** body (announced by its `Content-Length`) is admitted whole before any of it
//!   is read, within three quarters of the budget: the last quarter stays for small
//!   requests, so bodies that never finish cannot stop a client's ordinary calls. One not
//!   admitted waits for room on HTTP/1.1 (its connection is not read meanwhile, so the
//!   client's own socket holds the bytes) and is refused at once on HTTP/2 (a stream left
//!   unread would take its connection's flow-control window from the others).
//!
//! What a body holds is given back when it is dropped: read whole, refused, or cut off with
//! its connection.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::futures::OwnedNotified;
use tokio::sync::Notify;

/// Bodies up to this size are small (see the module documentation): every call but a large
/// message or batch.
pub(crate) const SMALL_BODY: u64 = 64 * 1024;

/// The bytes every request body arriving holds, against a capacity.
#[derive(Debug)]
pub(crate) struct BodyBudget {
    capacity: u64,
    /// What large bodies may hold together: three quarters of `capacity`.
    large_capacity: u64,
    /// Everything held: small bodies' bytes and large bodies' admissions.
    held: AtomicU64,
    /// The large bodies' part of `held`.
    held_large: AtomicU64,
    /// Large bodies waiting for room; a release wakes them only when there are some.
    waiting: AtomicUsize,
    room: Arc<Notify>,
    /// Bodies refused for want of room, for `/metrics`.
    refused: AtomicU64,
}

/// A request body refused for want of room in the [`BodyBudget`]: answered with 503.
#[derive(Debug, thiserror::Error)]
#[error("the request bodies arriving fill the server's budget for them")]
pub(crate) struct BodyRefused;

impl BodyBudget {
    /// A budget of `capacity` bytes; 0 for no limit.
    pub(crate) fn new(capacity: u64) -> Arc<BodyBudget> {
        let capacity = if capacity == 0 { u64::MAX } else { capacity };
        Arc::new(BodyBudget {
            capacity,
            large_capacity: capacity - capacity / 4,
            held: AtomicU64::new(0),
            held_large: AtomicU64::new(0),
            waiting: AtomicUsize::new(0),
            room: Arc::new(Notify::new()),
            refused: AtomicU64::new(0),
        })
    }

    /// Bytes held now.
    pub(crate) fn held(&self) -> u64 {
        self.held.load(SeqCst)
    }

    /// Bodies refused so far.
    pub(crate) fn refused(&self) -> u64 {
        self.refused.load(SeqCst)
    }

    /// What a new body of `declared` length (when known) holds: nothing yet. `may_wait`:
    /// whether a large one waits for room or is refused at once.
    pub(crate) fn hold(self: &Arc<Self>, declared: Option<u64>, may_wait: bool) -> Hold {
        let (bytes, stage) = match declared {
            Some(len) if len > SMALL_BODY => (len, Stage::Unadmitted),
            _ => (0, Stage::Small),
        };
        Hold {
            budget: Arc::clone(self),
            bytes,
            stage,
            may_wait,
            waiter: None,
        }
    }

    /// Takes `all` bytes, `large` of them in the large bodies' share, if they fit. Compare
    /// and swap, not an add undone: a body must not be refused because another's attempt
    /// was counted for a moment.
    fn take(&self, all: u64, large: u64) -> bool {
        let fits = |n: u64, cap: u64| move |h: u64| h.checked_add(n).filter(|t| *t <= cap);
        if large > 0
            && self
                .held_large
                .fetch_update(SeqCst, SeqCst, fits(large, self.large_capacity))
                .is_err()
        {
            return false;
        }
        if self
            .held
            .fetch_update(SeqCst, SeqCst, fits(all, self.capacity))
            .is_err()
        {
            self.give_back(0, large);
            return false;
        }
        true
    }

    /// Gives back `all` bytes held, `large` of them in the large bodies' share (taken in
    /// that share alone when a take is undone).
    fn give_back(&self, all: u64, large: u64) {
        self.held_large.fetch_sub(large, SeqCst);
        self.held.fetch_sub(all, SeqCst);
        // A waiter counts itself before it looks for room: either it sees these bytes given
        // back, or this sees it waiting (both orders are sequentially consistent).
        if self.waiting.load(SeqCst) > 0 {
            self.room.notify_waiters();
        }
    }

    fn refuse(&self) -> BodyRefused {
        self.refused.fetch_add(1, SeqCst);
        BodyRefused
    }
}

/// What one body holds of its budget, given back when dropped. Small: every request
/// carries one.
#[derive(Debug)]
pub(crate) struct Hold {
    budget: Arc<BodyBudget>,
    /// A small body's bytes arrived so far; a large body's announced length.
    bytes: u64,
    stage: Stage,
    may_wait: bool,
    /// While a large body waits for room (boxed: rare).
    waiter: Option<Box<Waiter>>,
}

/// Where a body stands with its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Small, or of unknown length: holds what arrived, the bytes past [`SMALL_BODY`] in the
    /// large bodies' share.
    Small,
    /// Large, not admitted yet: holds nothing.
    Unadmitted,
    /// Large and admitted: holds its whole length.
    Admitted,
}

impl Hold {
    /// What the body holds: all of it, and its part in the large bodies' share.
    fn holding(&self) -> (u64, u64) {
        match self.stage {
            Stage::Small => (self.bytes, self.bytes.saturating_sub(SMALL_BODY)),
            Stage::Unadmitted => (0, 0),
            Stage::Admitted => (self.bytes, self.bytes),
        }
    }

    /// Admits a large body whole before any of it is read: ready at once for a small one;
    /// pending while it waits for room; refused when it may not wait or can never fit.
    pub(crate) fn poll_admit(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BodyRefused>> {
        if self.stage != Stage::Unadmitted {
            return Poll::Ready(Ok(()));
        }
        let len = self.bytes;
        if len > self.budget.large_capacity {
            return Poll::Ready(Err(self.budget.refuse()));
        }
        loop {
            if self.budget.take(len, len) {
                (self.stage, self.waiter) = (Stage::Admitted, None);
                return Poll::Ready(Ok(()));
            }
            if !self.may_wait {
                return Poll::Ready(Err(self.budget.refuse()));
            }
            match &mut self.waiter {
                // Registered before looking again, so a release in between is not missed.
                None => self.waiter = Some(Box::new(Waiter::new(&self.budget))),
                Some(w) => match w.notified.as_mut().poll(cx) {
                    Poll::Ready(()) => self.waiter = None,
                    Poll::Pending => return Poll::Pending,
                },
            }
        }
    }

    /// A body that waited for room until its read deadline: refused.
    pub(crate) fn gave_up(&mut self) -> BodyRefused {
        self.waiter = None;
        self.budget.refuse()
    }

    /// `n` more bytes arrived. An admitted body holds its whole length already (hyper and h2
    /// refuse more data than the announced length); a small one takes them now, or is
    /// refused.
    pub(crate) fn arrived(&mut self, n: usize) -> Result<(), BodyRefused> {
        if self.stage != Stage::Small {
            return Ok(());
        }
        let after = self.bytes + n as u64;
        let large = after.saturating_sub(SMALL_BODY) - self.bytes.saturating_sub(SMALL_BODY);
        if !self.budget.take(n as u64, large) {
            return Err(self.budget.refuse());
        }
        self.bytes = after;
        Ok(())
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.waiter = None;
        let (all, large) = self.holding();
        if all > 0 {
            self.budget.give_back(all, large);
        }
    }
}

/// A large body waiting for room, counted in [`BodyBudget::waiting`] while it lives.
#[derive(Debug)]
struct Waiter {
    budget: Arc<BodyBudget>,
    notified: Pin<Box<OwnedNotified>>,
}

impl Waiter {
    fn new(budget: &Arc<BodyBudget>) -> Waiter {
        budget.waiting.fetch_add(1, SeqCst);
        Waiter {
            budget: Arc::clone(budget),
            notified: Box::pin(Arc::clone(&budget.room).notified_owned()),
        }
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.budget.waiting.fetch_sub(1, SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    const MIB: u64 = 1 << 20;

    /// Admits `hold` if it can be without waiting: `None` while it would wait.
    fn admit_now(hold: &mut Hold) -> Option<Result<(), BodyRefused>> {
        std::future::poll_fn(|cx| hold.poll_admit(cx)).now_or_never()
    }

    #[test]
    fn small_bodies_may_fill_the_budget_large_ones_three_quarters_and_all_is_given_back() {
        let budget = BodyBudget::new(16 * MIB);
        let mut large = budget.hold(Some(12 * MIB), true);
        assert!(matches!(admit_now(&mut large), Some(Ok(()))));
        large.arrived(4 << 20).expect("held already");
        assert_eq!(budget.held(), 12 * MIB);
        let mut another = budget.hold(Some(SMALL_BODY + 1), false);
        assert!(
            matches!(admit_now(&mut another), Some(Err(BodyRefused))),
            "the large bodies' share is full"
        );
        // Small bodies have the last quarter.
        let mut smalls: Vec<Hold> = (0..64)
            .map(|_| budget.hold(Some(SMALL_BODY), false))
            .collect();
        for s in &mut smalls {
            assert!(matches!(admit_now(s), Some(Ok(()))));
            s.arrived(SMALL_BODY as usize)
                .expect("room for a small body");
        }
        assert_eq!(budget.held(), 16 * MIB);
        let mut one_more = budget.hold(None, false);
        assert!(one_more.arrived(1).is_err(), "the budget is full");
        assert_eq!(budget.refused(), 2);
        drop((large, smalls, one_more, another));
        assert_eq!(budget.held(), 0);
        assert_eq!(budget.held_large.load(SeqCst), 0);
    }

    #[tokio::test]
    async fn a_large_body_waits_for_room_when_it_may_and_is_refused_when_it_may_not() {
        let budget = BodyBudget::new(16 * MIB);
        let mut first = budget.hold(Some(8 * MIB), true);
        assert!(matches!(admit_now(&mut first), Some(Ok(()))));
        let mut waiting = budget.hold(Some(8 * MIB), true);
        assert!(admit_now(&mut waiting).is_none(), "no room: it waits");
        let mut refused = budget.hold(Some(8 * MIB), false);
        assert!(matches!(admit_now(&mut refused), Some(Err(BodyRefused))));
        let mut never = budget.hold(Some(13 * MIB), true);
        assert!(
            matches!(admit_now(&mut never), Some(Err(BodyRefused))),
            "larger than the large bodies' share: it could wait for ever"
        );
        let admitted = tokio::spawn(async move {
            std::future::poll_fn(|cx| waiting.poll_admit(cx))
                .await
                .map(|()| waiting)
        });
        tokio::task::yield_now().await;
        drop(first);
        let waiting = tokio::time::timeout(std::time::Duration::from_secs(10), admitted)
            .await
            .expect("woken when room was given back")
            .unwrap()
            .expect("admitted");
        assert_eq!(budget.held(), 8 * MIB);
        assert_eq!(budget.waiting.load(SeqCst), 0);
        drop(waiting);
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn a_body_of_unknown_length_is_a_large_one_past_64_kib() {
        let budget = BodyBudget::new(16 * MIB);
        let mut unknown = budget.hold(None, true);
        assert!(matches!(admit_now(&mut unknown), Some(Ok(()))));
        unknown.arrived(SMALL_BODY as usize).unwrap();
        assert_eq!(budget.held_large.load(SeqCst), 0);
        unknown.arrived(1000).unwrap();
        assert_eq!(budget.held_large.load(SeqCst), 1000);
        assert!(
            unknown.arrived(12 * MIB as usize).is_err(),
            "past the large bodies' share"
        );
        drop(unknown);
        assert_eq!((budget.held(), budget.held_large.load(SeqCst)), (0, 0));
    }

    #[test]
    fn no_limit_holds_anything() {
        let budget = BodyBudget::new(0);
        let mut huge = budget.hold(Some(u64::MAX / 2), false);
        assert!(matches!(admit_now(&mut huge), Some(Ok(()))));
    }
}
