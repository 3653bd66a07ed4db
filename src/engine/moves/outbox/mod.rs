//! Cluster mode: messages on their way to a queue that another engine (another shard)
//! serves — a dead letter whose dead-letter queue is elsewhere, or a message a move task
//! sends elsewhere.
//!
//! Such a message goes into an **outbox**: a hidden queue of this engine, one per (kind,
//! origin, target). It is taken in with its removal from the origin in one record, by the
//! same path as any move between two queues of one engine, so a crash leaves it in exactly
//! one of them. The server's courier then hands each outbox's entries, oldest (`seq`) first,
//! as a [`Parcel`] to the engine serving the target. That engine takes them in with
//! [`Engine::take_parcel`] and records, in the same frame, the highest `seq` it took from
//! that outbox. Only once the arrival is durable does the courier remove the entries here. A
//! parcel delivered again (this shard failed over before it recorded the delivery) is thus
//! recognised and nothing arrives twice: a message is never in neither queue, and never
//! visible in both.
//!
//! Outboxes are ordinary queues to snapshots, replay and retention; they are left out of
//! every listing, and no client can name one (`~` is not allowed in queue names). An
//! outbox goes once it is empty and nothing will add to it any more (a move task's once
//! its runner ended, a dead-letter outbox once its origin queue is gone: see
//! `Engine::retire_if_done`).

pub(crate) use super::{Destination, Via};
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::engine::ids::QueueId;
use crate::engine::journal::change::MessageRecord;
use crate::engine::queue::Queue;
use crate::engine::receive::Transfer;
use crate::engine::settings::QueueSettings;
use crate::engine::Engine;

/// Starts every outbox's name; no client-given queue name contains it.
const HIDDEN: char = '~';
/// An outbox's retention: the longest SQS allows (the target applies its own on arrival).
const RETENTION_S: u32 = 1_209_600;
/// Entries and bytes one parcel carries at most (at least one entry, whatever its size).
const PARCEL_ENTRIES: usize = 200;
const PARCEL_BYTES: usize = 4 << 20;

/// Whether a queue name is an outbox's (hidden from listings and clients).
pub(crate) fn is_hidden(name: &str) -> bool {
    name.starts_with(HIDDEN)
}

/// Where an outbox's messages come from and go to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Route {
    pub via: Via,
    pub origin: QueueId,
    pub target: QueueId,
}

impl Route {
    /// The outbox carrying this route: in the origin's namespace, named after the route.
    pub(crate) fn outbox_id(&self) -> QueueId {
        let via = match &self.via {
            Via::DeadLetter => "dl".to_string(),
            Via::Move { task } => format!("mv-{task}"),
        };
        let t = &self.target;
        QueueId {
            region: self.origin.region.clone(),
            account: self.origin.account.clone(),
            name: format!(
                "{HIDDEN}{via}{HIDDEN}{}{HIDDEN}{}{HIDDEN}{}{HIDDEN}{}",
                self.origin.name, t.region, t.account, t.name
            ),
        }
    }

    /// The route an outbox's id names.
    pub(crate) fn of(outbox: &QueueId) -> Option<Route> {
        let mut parts = outbox.name.strip_prefix(HIDDEN)?.split(HIDDEN);
        let via = match parts.next()? {
            "dl" => Via::DeadLetter,
            v => Via::Move {
                task: v.strip_prefix("mv-")?.to_string(),
            },
        };
        let origin = QueueId {
            region: outbox.region.clone(),
            account: outbox.account.clone(),
            name: parts.next()?.to_string(),
        };
        let target = QueueId {
            region: parts.next()?.to_string(),
            account: parts.next()?.to_string(),
            name: parts.next()?.to_string(),
        };
        parts.next().is_none().then_some(Route {
            via,
            origin,
            target,
        })
    }
}

/// Which queues an engine serves, in cluster mode (else it serves every queue it has).
pub(crate) struct Home {
    /// Names this engine's outboxes to the engines they deliver to (the shard's stream).
    pub name: String,
    pub serves: Box<dyn Fn(&QueueId) -> bool + Send + Sync>,
}

impl std::fmt::Debug for Home {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Home").field("name", &self.name).finish()
    }
}

/// Entries of one outbox on their way to the engine serving its target.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Parcel<'a> {
    /// The outbox, as the target's marks name it: the sending engine's home and the
    /// outbox's uid (a new outbox of the same route starts afresh).
    pub source: Cow<'a, str>,
    pub route: Route,
    /// (`seq` in the outbox, message), oldest first.
    pub entries: Vec<(u64, MessageRecord<'a>)>,
}

impl<'a> Parcel<'a> {
    /// A parcel as [`Outgoing::body`] carries it.
    pub(crate) fn decode(body: &'a [u8]) -> Result<Parcel<'a>, Refusal> {
        postcard::from_bytes(body).map_err(|e| Refusal::Invalid(e.to_string()))
    }
}

/// Why a parcel was not taken.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The target does not exist: the entries go back to their origin.
    Gone,
    /// This engine does not serve the target (ownership moved): deliver elsewhere.
    NotHere,
    /// The parcel does not decode.
    Invalid(String),
    /// Taken, but the store could not keep it (the shard is recovered afresh).
    NotKept(String),
}

/// A parcel ready to go, and the outbox entries it carries.
#[derive(Debug)]
pub(crate) struct Outgoing {
    pub route: Route,
    pub body: Vec<u8>,
    keys: Vec<crate::engine::ids::MessageKey>,
}

impl Engine {
    /// Makes this engine one shard of a cluster: messages bound for queues it does not
    /// serve go through outboxes. Set once, before it serves.
    pub(crate) fn set_home(&self, home: Home) {
        let _ = self.home.set(home);
    }

    /// Whether this engine serves the queue `id` (always, outside cluster mode).
    pub(crate) fn serves(&self, id: &QueueId) -> bool {
        self.home.get().is_none_or(|h| (h.serves)(id))
    }

    /// Where a message from `origin` bound for `target` goes.
    pub(crate) fn destination(&self, origin: &QueueId, target: &QueueId, via: Via) -> Destination {
        if self.serves(target) {
            return match self.queue(target) {
                Some(q) if !q.is_deleted() => Destination::Local(q),
                _ => Destination::Gone,
            };
        }
        let route = Route {
            via,
            origin: origin.clone(),
            target: target.clone(),
        };
        let id = route.outbox_id();
        if Route::of(&id).as_ref() != Some(&route) {
            // A namespace the outbox's name cannot spell (a `~` in a region taken from a
            // signature): no outbox could ever deliver it, so the message stays put.
            return Destination::Gone;
        }
        let settings = QueueSettings {
            message_retention_period: RETENTION_S,
            ..QueueSettings::default()
        };
        match self.create_queue(id, settings) {
            Ok((q, _)) => Destination::Outbox(q),
            // Only a deleted-name cooldown refuses, and outboxes are never deleted by name.
            Err(_) => Destination::Gone,
        }
    }

    /// Tells the courier an outbox has entries.
    pub(crate) fn outbox_filled(&self) {
        self.outbox_ready.notify_one();
    }

    /// Waits until some outbox may have entries (or `max` passed).
    pub(crate) async fn outbox_wait(&self, max: Duration) {
        let _ = tokio::time::timeout(max, self.outbox_ready.notified()).await;
    }

    /// Every outbox holding entries (none outside cluster mode, without a look).
    pub(crate) fn outboxes(&self) -> Vec<Arc<Queue>> {
        self.outboxes_where(|_, q| !q.is_empty())
    }

    /// Every outbox, empty ones included, with the route it serves and how many messages it
    /// holds (what is in transit out of this shard), read as they stand: a look at them
    /// catches no queue up, so it records nothing.
    pub(crate) fn outbox_routes(&self) -> Vec<(Route, usize)> {
        self.outboxes_where(|_, _| true)
            .into_iter()
            .filter_map(|o| Some((Route::of(&o.id)?, o.stored_size().0 as usize)))
            .collect()
    }

    /// The outboxes `keep` takes, empty ones included (none outside cluster mode).
    fn outboxes_where(&self, keep: impl Fn(&QueueId, &Queue) -> bool) -> Vec<Arc<Queue>> {
        if self.home.get().is_none() {
            return Vec::new();
        }
        let queues = self.queues.read().unwrap_or_else(|p| p.into_inner());
        queues
            .iter()
            .filter(|(id, q)| is_hidden(&id.name) && keep(id, q))
            .map(|(_, q)| Arc::clone(q))
            .collect()
    }

    /// The oldest entries of `outbox` as a parcel, if it has any.
    pub(crate) fn parcel_of(&self, outbox: &Queue) -> Option<Outgoing> {
        let route = Route::of(&outbox.id)?;
        let home = self.home.get().map_or("", |h| h.name.as_str());
        let source = format!("{home}/{}", outbox.uid);
        let (body, keys) = outbox.with_oldest(PARCEL_ENTRIES, |oldest| {
            let mut size = 0;
            let mut keys = Vec::new();
            let mut entries = Vec::new();
            for (key, m) in oldest {
                let p = &*m.payload;
                let attributes: usize = p
                    .attributes()
                    .iter()
                    .map(|(name, v)| name.len() + v.size())
                    .sum();
                size += p.body.len() + attributes + 1024;
                if !entries.is_empty() && size > PARCEL_BYTES {
                    break;
                }
                keys.push(key);
                entries.push((key.seq, MessageRecord::of(m)));
            }
            let parcel = Parcel {
                source: Cow::Borrowed(&source),
                route: route.clone(),
                entries,
            };
            // Encoding into a Vec cannot fail.
            (postcard::to_allocvec(&parcel).unwrap_or_default(), keys)
        });
        (!keys.is_empty()).then_some(Outgoing { route, body, keys })
    }

    /// The target took `parcel` (durably): its entries leave the outbox, and a move task's
    /// count takes them in the same record (it counts messages that arrived).
    pub(crate) fn parcel_delivered(&self, outbox: &Queue, parcel: &Outgoing) {
        let task = self
            .task_of(&parcel.route)
            .map(|t| t as Arc<dyn crate::engine::journal::MoveCount>);
        outbox.remove_keys(&parcel.keys, task, self.now_ms());
        // Whoever waits for these to arrive ([`crate::engine::wait::delivered`]) looks again.
        outbox.wake_waiters();
        self.retire_if_done(outbox, &parcel.route);
    }

    /// Removes an outbox once it is empty and nothing will add to it any more, so that
    /// neither move tasks nor queues that come and go leave hidden queues behind for good:
    /// - a move task's, once no runner of the task is under way (it alone adds to it, and
    ///   task ids are never reused), whether the task is still listed or not (pruned);
    /// - a dead-letter outbox, once its origin queue is gone (deleted, or reset) or no longer
    ///   names its target as dead-letter queue. While the origin's policy names it, any
    ///   receive may add to it, so it stays (one per pair of queues): a
    ///   busy pair does not make and remove one each time it empties, nor leave the target
    ///   one mark ([`Engine::take_parcel`]) per outbox it ever had. A queue of the
    ///   origin's name made later makes a new outbox.
    ///
    /// The removal is sealed in one step with its emptiness ([`Engine::remove_outbox`]):
    /// a dead letter that found the outbox just before goes to a new one.
    fn retire_if_done(&self, outbox: &Queue, route: &Route) {
        let done = match &route.via {
            Via::Move { task } => !self.runner_under_way(task),
            Via::DeadLetter => self.queue(&route.origin).is_none_or(|origin| {
                origin.is_deleted() || origin.dead_letter_target().as_ref() != Some(&route.target)
            }),
        };
        if done && self.remove_outbox(outbox) {
            tracing::debug!(outbox = %outbox.id.name, "an outbox nothing adds to any more is empty; removed");
        }
    }

    /// A queue of this engine is gone: the outbox towards its dead-letter queue goes now if
    /// it is empty, else once its last entries are delivered (or returned). An outbox
    /// towards an earlier dead-letter queue of it (the policy changed) goes at the next
    /// start or takeover ([`Self::retire_finished_outboxes`]).
    pub(crate) fn origin_gone(&self, origin: &Queue) {
        if self.home.get().is_none() {
            return;
        }
        let Some(target) = origin.dead_letter_target() else {
            return;
        };
        let route = Route {
            via: Via::DeadLetter,
            origin: origin.id.clone(),
            target,
        };
        if let Some(outbox) = self.registered(&route.outbox_id()) {
            self.retire_if_done(&outbox, &route);
        }
    }

    /// Removes every empty outbox nothing will add to any more (see
    /// [`Self::retire_if_done`]): when a runner ends, and at a start or a takeover (for
    /// tasks that ended and origins that went before it, and removals a crash cut short).
    /// Those still holding entries go once delivered.
    pub(crate) fn retire_finished_outboxes(&self) {
        for o in self.outboxes_where(|_, q| q.is_empty()) {
            if let Some(route) = Route::of(&o.id) {
                self.retire_if_done(&o, &route);
            }
        }
    }

    /// The move task whose messages travel `route`, if any.
    fn task_of(&self, route: &Route) -> Option<Arc<super::task::MoveTask>> {
        let Via::Move { task } = &route.via else {
            return None;
        };
        self.move_tasks_of(&route.origin.arn())
            .into_iter()
            .find(|t| t.task_id == *task)
    }

    /// The outboxes of move task `task`, out of `source`, empty ones included.
    pub(crate) fn task_outboxes(&self, source: &QueueId, task: &str) -> Vec<Arc<Queue>> {
        self.outboxes_where(|id, _| {
            Route::of(id).is_some_and(|r| {
                r.origin == *source && matches!(&r.via, Via::Move { task: t } if t == task)
            })
        })
    }

    /// The target of `outbox` is gone: its entries go back to their origin, unchanged (or,
    /// when the origin is gone too, nowhere), and a move task sending them fails, as it
    /// does when its destination is gone on one node.
    pub(crate) fn return_outbox(&self, outbox: &Queue, route: &Route) {
        let now = self.now_ms();
        if let Some(task) = self.task_of(route) {
            task.fail_queue_gone(self);
        }
        match self.queue(&route.origin) {
            Some(origin) if !origin.is_deleted() => {
                let back = outbox.take_for_move(usize::MAX, now);
                origin.accept(back, Transfer::Restore, now);
            }
            // Both queues are gone: so are their messages.
            _ => {
                let _ = outbox.purge(now, false);
            }
        }
        outbox.wake_waiters();
        self.retire_if_done(outbox, route);
    }

    /// Takes in a parcel another engine's outbox sent (see the module documentation).
    /// Returns how many entries were new.
    pub(crate) fn take_parcel(&self, parcel: Parcel<'_>) -> Result<usize, Refusal> {
        let route = &parcel.route;
        if !self.serves(&route.target) {
            return Err(Refusal::NotHere);
        }
        // Outboxes are no courier's target or origin: a parcel naming one is not from a
        // courier, and takes nothing into a hidden queue.
        if is_hidden(&route.target.name) || is_hidden(&route.origin.name) {
            return Err(Refusal::Gone);
        }
        let target = match self.queue(&route.target) {
            Some(q) if !q.is_deleted() => q,
            _ => return Err(Refusal::Gone),
        };
        let origin_arn = route.origin.arn();
        let transfer = match route.via {
            Via::DeadLetter => Transfer::DeadLetter {
                source_arn: &origin_arn,
            },
            Via::Move { .. } => Transfer::Redrive,
        };
        let entries = parcel
            .entries
            .into_iter()
            .map(|(seq, r)| (seq, r.into_stored()))
            .collect();
        Ok(target.arrive(&parcel.source, entries, transfer, self.now_ms()))
    }
}

#[cfg(test)]
mod tests;
