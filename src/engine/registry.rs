//! The engine's queue registry: queues made, found, listed, deleted and reset, and hidden
//! outboxes removed, each change recorded with it under the registry's lock (so a snapshot
//! sees a change and its record, or neither).

use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{journal, moves, settings, Engine, EngineError, Queue, QueueId, QueueSettings};

impl Engine {
    /// Returns the queue with this id, creating it with `settings` if there is none.
    /// The flag says whether it was created by this call. A name deleted less than 60 seconds
    /// ago cannot be created again (when the cooldown is on).
    pub(crate) fn create_queue(
        &self,
        id: QueueId,
        settings: QueueSettings,
    ) -> Result<(Arc<Queue>, bool), EngineError> {
        self.create(id, settings, true)
    }

    /// Like [`Engine::create_queue`], for a queue the operator declared (a config file's):
    /// the deletion cooldown is a rule for CreateQueue calls, and a restart must start, so a
    /// name still cooling down is created at once (and its cooldown ends), with a log line.
    pub(crate) fn declare_queue(
        &self,
        id: QueueId,
        settings: QueueSettings,
    ) -> Result<(Arc<Queue>, bool), EngineError> {
        self.create(id, settings, false)
    }

    fn create(
        &self,
        id: QueueId,
        settings: QueueSettings,
        cooldown: bool,
    ) -> Result<(Arc<Queue>, bool), EngineError> {
        if let Some(q) = self.registered(&id) {
            return Ok((q, false));
        }
        let mut queues = self.queues.write().unwrap_or_else(|p| p.into_inner());
        if let Some(q) = queues.get(&id) {
            q.depend_on_creation();
            return Ok((Arc::clone(q), false));
        }
        if self.settings.deleted_queue_cooldown {
            let mut deleted = self.deleted.lock().unwrap_or_else(|p| p.into_inner());
            let now = self.now_ms();
            deleted.retain(|_, at| now < *at + settings::DELETED_QUEUE_COOLDOWN_MS);
            if deleted.contains_key(&id) {
                if cooldown {
                    self.depend_on_registry();
                    return Err(EngineError::QueueDeletedRecently);
                }
                // Its QueueCreated record ends the cooldown on replay too.
                deleted.remove(&id);
                tracing::warn!(
                    queue = %id.name,
                    "a declared queue deleted less than 60 seconds ago is created again at once (the cooldown holds for CreateQueue calls only)"
                );
            }
        }
        let uid = self.next_uid.fetch_add(1, Ordering::Relaxed);
        let now = self.now_ms();
        // Recorded under the registry's lock: before any change to the new queue.
        let created = self
            .journal
            .record(&[journal::change::Change::QueueCreated {
                id: Cow::Borrowed(&id),
                uid,
                created_ms: now,
                settings: Cow::Borrowed(&settings),
            }]);
        self.registry_lsn.raise(created);
        let q = Arc::new(Queue::new(
            id.clone(),
            uid,
            settings,
            now,
            self.journal.clone(),
            created,
        ));
        let realism = self.realism();
        if realism.is_on() {
            self.set_queue_realism(&q, realism, true);
        }
        queues.insert(id, Arc::clone(&q));
        Ok((q, true))
    }

    /// The queue with this id. Outboxes (cluster mode's hidden queues) are nobody's: no
    /// request, listing or test control finds one.
    pub(crate) fn queue(&self, id: &QueueId) -> Option<Arc<Queue>> {
        if moves::outbox::is_hidden(&id.name) {
            return None;
        }
        self.registered(id)
    }

    /// Any queue with this id, outboxes included. The answer of whoever asks relies on
    /// what it found: the queue's creation, or (not found) the registry's latest change.
    pub(super) fn registered(&self, id: &QueueId) -> Option<Arc<Queue>> {
        let found = self
            .queues
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned();
        match &found {
            Some(q) => q.depend_on_creation(),
            None => self.depend_on_registry(),
        }
        found
    }

    /// The settings of the queue with this id, if it exists.
    pub(crate) fn queue_settings(&self, id: &QueueId) -> Option<QueueSettings> {
        self.queue(id)
            .filter(|q| !q.is_deleted())
            .map(|q| q.with_settings(Clone::clone))
    }

    /// Deletes a queue with its messages; false if it did not exist. Its name stays
    /// unavailable for 60 seconds (when the cooldown is on).
    pub(crate) fn delete_queue(&self, id: &QueueId) -> bool {
        self.remove_queue(id, Some(self.now_ms()))
    }

    /// Queues of one namespace whose names start with `prefix`, sorted by name.
    pub(crate) fn list_queues(&self, region: &str, account: &str, prefix: &str) -> Vec<Arc<Queue>> {
        self.depend_on_registry();
        let mut found: Vec<Arc<Queue>> = self
            .queues
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|q| {
                q.id.region == region
                    && q.id.account == account
                    && q.id.name.starts_with(prefix)
                    && !moves::outbox::is_hidden(&q.id.name)
            })
            .cloned()
            .collect();
        found.sort_by(|a, b| a.id.name.cmp(&b.id.name));
        found
    }

    /// Queues of the namespace whose RedrivePolicy names `target` as dead-letter queue.
    pub(crate) fn dead_letter_sources(&self, target: &QueueId) -> Vec<Arc<Queue>> {
        self.list_queues(&target.region, &target.account, "")
            .into_iter()
            .filter(|q| {
                q.with_settings(|s| {
                    s.redrive_policy
                        .as_ref()
                        .is_some_and(|p| p.dead_letter_target == *target)
                })
            })
            .collect()
    }

    /// Removes queues, their messages, move tasks and deleted-name cooldowns: a fresh engine.
    /// `namespace` limits it to one (region, account).
    pub(crate) fn reset(&self, namespace: Option<(&str, &str)>) {
        self.forget(namespace, true);
    }

    /// [`Engine::reset`], recording it or (replaying it) not.
    pub(super) fn forget(&self, namespace: Option<(&str, &str)>, record: bool) {
        let removed: Vec<Arc<Queue>> = {
            let mut queues = self.queues.write().unwrap_or_else(|p| p.into_inner());
            if record {
                let lsn = self.journal.record(&[journal::change::Change::Reset {
                    namespace: namespace.map(|(r, a)| (r.into(), a.into())),
                }]);
                self.registry_lsn.raise(lsn);
            }
            let ids: Vec<QueueId> = queues
                .keys()
                .filter(|id| namespace.is_none_or(|(r, a)| id.region == r && id.account == a))
                .cloned()
                .collect();
            // Under the registry's lock, with the record: a snapshot sees both or neither.
            self.deleted
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|id, _| namespace.is_some_and(|(r, a)| id.region != r || id.account != a));
            ids.iter().filter_map(|id| queues.remove(id)).collect()
        };
        for q in &removed {
            q.mark_deleted();
        }
        let arns: Vec<&str> = removed.iter().map(|q| q.arn.as_str()).collect();
        let mut tasks = self.move_tasks.lock().unwrap_or_else(|p| p.into_inner());
        for t in tasks
            .iter()
            .filter(|t| arns.contains(&t.source_arn.as_str()))
        {
            t.request_cancel();
        }
        tasks.retain(|t| !arns.contains(&t.source_arn.as_str()));
    }

    /// Removes one queue without leaving a deleted-name cooldown behind.
    pub(crate) fn reset_queue(&self, id: &QueueId) -> bool {
        self.remove_queue(id, None)
    }

    /// Removes `outbox` (a hidden queue) if it is still the registered one and holds
    /// nothing; recorded as any deletion, without a cooldown (an outbox is never named by
    /// a client). It is sealed in one step with the check that it is empty
    /// ([`Queue::seal_if_empty`]): a dead letter that found it just before is refused by it
    /// and goes to the outbox made in its place (see [`Engine::receive`]).
    pub(crate) fn remove_outbox(&self, outbox: &Queue) -> bool {
        if !moves::outbox::is_hidden(&outbox.id.name) || !outbox.is_empty() {
            return false;
        }
        {
            let mut queues = self.queues.write().unwrap_or_else(|p| p.into_inner());
            // The registry's lock, then the queue's, as `outboxes_where` takes them; nothing
            // takes a queue's lock and then the registry's.
            if queues.get(&outbox.id).is_none_or(|q| q.uid != outbox.uid) || !outbox.seal_if_empty()
            {
                return false;
            }
            queues.remove(&outbox.id);
            // Under the registry's lock, with the removal: a snapshot sees both or neither.
            let lsn = self
                .journal
                .record(&[journal::change::Change::QueueDeleted {
                    uid: outbox.uid,
                    cooldown_from: None,
                }]);
            self.registry_lsn.raise(lsn);
        }
        true
    }

    pub(super) fn remove_queue(&self, id: &QueueId, cooldown_from: Option<u64>) -> bool {
        if moves::outbox::is_hidden(&id.name) {
            // An outbox goes only with a reset of its namespace (its entries with it).
            return false;
        }
        let removed = {
            let mut queues = self.queues.write().unwrap_or_else(|p| p.into_inner());
            let removed = queues.remove(id);
            if let Some(q) = &removed {
                let lsn = self
                    .journal
                    .record(&[journal::change::Change::QueueDeleted {
                        uid: q.uid,
                        cooldown_from,
                    }]);
                self.registry_lsn.raise(lsn);
                // Under the registry's lock, with the record: a snapshot sees both or neither.
                if let Some(at) = cooldown_from {
                    self.deleted
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(id.clone(), at);
                }
            }
            removed
        };
        match removed {
            Some(q) => {
                q.mark_deleted();
                self.origin_gone(&q);
                true
            }
            None => false,
        }
    }

    /// How many messages every queue (hidden ones too) stores, and their footprints' sum.
    pub(crate) fn stored_size(&self) -> (u64, u64) {
        let queues: Vec<Arc<Queue>> = (self.queues.read().unwrap_or_else(|p| p.into_inner()))
            .values()
            .cloned()
            .collect();
        queues
            .iter()
            .map(|q| q.stored_size())
            .fold((0, 0), |(n, b), (qn, qb)| (n + qn, b + qb))
    }

    /// Every queue of every namespace, sorted by region, account and name.
    pub(crate) fn all_queues(&self) -> Vec<Arc<Queue>> {
        self.depend_on_registry();
        let mut all: Vec<Arc<Queue>> = self
            .queues
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|q| !moves::outbox::is_hidden(&q.id.name))
            .cloned()
            .collect();
        all.sort_by(|a, b| {
            (&a.id.region, &a.id.account, &a.id.name).cmp(&(
                &b.id.region,
                &b.id.account,
                &b.id.name,
            ))
        });
        all
    }
}
