//! One control step: heartbeat, read both buckets, watch each member and lease for
//! silence, let go of what is lost, extend what is held, and take or give back shards so
//! that each is served by its preferred live node.

use std::time::Instant;

use super::buckets::{beat_key_of, leader_last, purge_through, within, Last};
use super::{placement, Beats, Control, LeasesFrom, Owner, Seen};

impl Control {
    /// Watches entry `key` at `revision`: whether it has stayed the same for a whole lease.
    pub(super) fn silent(&mut self, key: String, revision: (u64, u64), now: Instant) -> bool {
        let seen = self.seen.entry(key).or_insert(Seen {
            revision,
            since: now,
        });
        if seen.revision != revision {
            *seen = Seen {
                revision,
                since: now,
            };
        }
        now.duration_since(seen.since) > self.lease()
    }

    /// Forgets a departed node for good: its heartbeat in the leases bucket as it stands
    /// now, then its name in the members bucket as it stood at `revision`. The heartbeat
    /// goes first so that a step that fails between the two leaves the name, and the next
    /// step forgets both again; the other way round a failed purge left a heartbeat of a
    /// node no longer named anywhere. Should the node come back under its name in between,
    /// its new heartbeat may go too: its next step's fenced read then finds no heartbeat,
    /// reads from the leader once, and writes another (its new name, later than
    /// `revision`, stays).
    pub(super) async fn forget(&self, name: &str, revision: u64) -> Result<(), String> {
        let beat = beat_key_of(name);
        match leader_last(&self.leases, &beat).await? {
            Last::Entry(_, at) | Last::Marker(at) => purge_through(&self.leases, &beat, at).await?,
            Last::Nothing => {}
        }
        purge_through(&self.members, name, revision).await
    }

    /// Forgets what was watched in one bucket (`"m."` or `"l."` keys): a gap.
    pub(super) fn unwatch(&mut self, prefix: &str) {
        self.seen.retain(|k, _| !k.starts_with(prefix));
    }

    pub(super) async fn tick(&mut self) -> Result<(), String> {
        // A gateway is no member and watches no lease: it only routes.
        let gateway = self.cluster.config.gateway;
        let beats = if gateway {
            Beats {
                members: None,
                leases: None,
                sent: Instant::now(),
            }
        } else {
            let beats = self.beat().await;
            self.cluster
                .note_writes(beats.members.is_some() && beats.leases.is_some());
            beats
        };
        let (members_written, leases_written) = (beats.members.is_some(), beats.leases.is_some());
        self.finish_opens().await;
        self.drop_broken().await;
        let now = Instant::now();
        // A step that came late is a gap too: a holder may have renewed unseen.
        let late = now.duration_since(self.last_read) > self.lease() / 2;
        let read = self.read(beats).await;
        self.last_read = Instant::now();
        if (!members_written || !leases_written || late || read.is_err()) && !gateway {
            tracing::debug!(
                members_written,
                leases_written,
                late,
                read_failed = read.is_err(),
                "a gap in watching the buckets"
            );
        }
        if !members_written || late || read.is_err() {
            self.unwatch("m.");
        }
        if !leases_written || late || read.is_err() {
            self.unwatch("l.");
        }
        if !leases_written || read.is_err() {
            // Nothing shows this step that the leases held are still this node's: none is
            // extended, and one kept too long without is dropped.
            let held: Vec<u32> = self.held.keys().copied().collect();
            for s in held {
                self.outage(s);
            }
        }
        let (mut live, leases, beats_read, from) = read?;
        // Side by side: on the leader path each is a read of its own.
        tokio::join!(self.follow_clock(&from), self.follow_realism(&from));
        let now = Instant::now();
        let mut gone = Vec::new();
        let watching_members = members_written && !late;
        live.retain(|(name, revision)| {
            if name == self.me() || !watching_members {
                return true;
            }
            let key = format!("m.{name}");
            let silent = self.silent(key.clone(), (*revision, 0), now);
            if silent
                && self
                    .seen
                    .get(&key)
                    .is_some_and(|s| now.duration_since(s.since) > self.lease() * 10)
            {
                gone.push((name.clone(), *revision));
            }
            !silent
        });
        // A node silent for ten leases is gone for good (its name would be listed forever).
        for (name, revision) in gone {
            if let Err(e) = within(self.lease() / 4, self.forget(&name, revision)).await {
                tracing::debug!(node = name, error = %e, "could not forget a departed node");
            }
        }
        let mut live: Vec<String> = live.into_iter().map(|(n, _)| n).collect();
        if !gateway && !live.iter().any(|m| m == self.me()) {
            live.push(self.me().to_string());
        }
        live.sort();
        let watching_leases = leases_written && !late;
        let shards = self.cluster.config.shards;
        let mut owners: Vec<Option<Owner>> = Vec::with_capacity(shards as usize);
        // Each lease as read: its revision and whether it went silent.
        let mut state: Vec<Option<(u64, bool)>> = Vec::with_capacity(shards as usize);
        // The holders whose heartbeats the next step reads.
        let mut holders = std::collections::BTreeSet::from([self.me().to_string()]);
        // Leases naming this process that it does not hold.
        let mut strays = std::collections::HashSet::new();
        for (s, lease) in leases.into_iter().enumerate() {
            let s = s as u32;
            match lease {
                Some((owner, revision)) => {
                    // A lease lives while the heartbeat of the process it names changes:
                    // watched as the pair (lease, heartbeat). A heartbeat naming another
                    // process (the node restarted under its name), absent or unreadable
                    // counts as one that does not change, so the lease goes silent once
                    // neither has changed for a whole lease. A heartbeat this read did not
                    // ask for (a holder new since the last step) is no sign of anything:
                    // the watch starts again next step.
                    let beat = match &owner {
                        Some(o) => {
                            holders.insert(o.node.clone());
                            match beats_read.get(&o.node) {
                                Some(Some((Some(b), at))) if b.process == o.process => Some(*at),
                                Some(_) => Some(0),
                                None => None,
                            }
                        }
                        None => Some(0),
                    };
                    let watch = format!("l.{s}");
                    // A lease of this process's that it no longer holds (dropped after an
                    // outage): its heartbeat keeps it alive for everyone else, so it is
                    // this node's to take again, or to give up.
                    let stray =
                        owner.as_ref().is_some_and(|o| self.ours(o)) && !self.held.contains_key(&s);
                    if stray {
                        strays.insert(s);
                    }
                    let silent = match beat {
                        _ if stray => true,
                        Some(b) => {
                            watching_leases
                                && !self.held.contains_key(&s)
                                && self.silent(watch, (revision, b), now)
                        }
                        None => {
                            self.seen.remove(&watch);
                            false
                        }
                    };
                    state.push(Some((revision, silent)));
                    // An unreadable value is an unknown holder: taken over once silent.
                    owners.push(owner.filter(|_| !silent));
                }
                None => {
                    state.push(None);
                    owners.push(None);
                }
            }
        }
        self.choose_encoding(&owners);
        // A lease this node holds that the read shows taken (or gone): lost, at once.
        let held: Vec<u32> = self.held.keys().copied().collect();
        for s in held {
            match &owners[s as usize] {
                Some(o) if self.ours(o) => {
                    let revision = state[s as usize].map_or(0, |(r, _)| r);
                    if let Some(h) = self.held.get_mut(&s) {
                        h.revision = h.revision.max(revision);
                    }
                }
                _ => {
                    // A batched read can miss a key (a replica catching up, see
                    // `batch_read`): the leader confirms before the shard goes.
                    if matches!(from, LeasesFrom::Batched { .. }) {
                        let ours = match self.leader_says_ours(s).await {
                            Ok(ours) => ours,
                            // Unknown: kept, as when a whole read fails.
                            Err(_) => self.held.get(&s).map(|h| h.revision),
                        };
                        if let Some(revision) = ours {
                            tracing::debug!(shard = s, "a batched read missed a held lease");
                            if let Some(h) = self.held.get_mut(&s) {
                                h.revision = h.revision.max(revision);
                            }
                            owners[s as usize] = Some(self.owner());
                            continue;
                        }
                    }
                    tracing::warn!(
                        shard = s,
                        "the lease shows another holder; no longer serving the shard"
                    );
                    self.drop_shard(s);
                    self.cluster.stats_mut().lost += 1;
                }
            }
        }
        self.beat_nodes = holders.into_iter().collect();
        // The step's heartbeat was written and the read after it (fenced by it, or from the
        // leader) shows these leases still this node's: each is extended from when the
        // heartbeat was sent. Anyone taking one over first watched that heartbeat stay the
        // same for a whole lease, so not before a quarter of a lease after this runs out.
        if leases_written {
            let until = self.valid_until(beats.sent);
            let serving = self
                .cluster
                .serving
                .read()
                .unwrap_or_else(|p| p.into_inner());
            for (s, h) in self.held.iter_mut() {
                h.renewed = h.renewed.max(beats.sent);
                if let Some(shard) = serving.get(s) {
                    shard.extend(until);
                }
            }
        }
        // Nodes starting together see each other before anyone takes everything.
        let settled = now.duration_since(self.started) >= self.lease() / 2;
        let preferred = placement::owners(shards, &live);
        for s in 0..shards {
            let mine = preferred[s as usize] == Some(self.me());
            if let Some(h) = self.held.get(&s) {
                self.orphaned.remove(&s);
                if !mine && h.opening.is_none() {
                    self.release(s).await;
                    owners[s as usize] = None;
                }
                continue;
            }
            let take = match (&owners[s as usize], state[s as usize]) {
                (Some(_), _) => {
                    self.orphaned.remove(&s);
                    continue;
                }
                // Ours but no longer held, and another node's to serve: given up at once.
                (None, Some((revision, true))) if !mine && strays.contains(&s) => {
                    self.free(s, revision).await;
                    continue;
                }
                // Silent (or unreadable and silent): taken on its revision.
                (None, Some((revision, true))) => Some(revision),
                // Present, not yet silent (an unreadable value being watched).
                (None, Some((_, false))) => continue,
                (None, None) => None,
            };
            let since = *self.orphaned.entry(s).or_insert(now);
            let abandoned = now.duration_since(since) > self.lease() * 2;
            let backing_off = self.backoff.get(&s).is_some_and(|t| now < *t);
            if settled && (mine || abandoned) && !backing_off && !gateway {
                self.acquire(s, take).await;
                if self.held.contains_key(&s) {
                    self.orphaned.remove(&s);
                }
            }
        }
        *self
            .cluster
            .members
            .write()
            .unwrap_or_else(|p| p.into_inner()) = live;
        let changed = {
            let mut current = self
                .cluster
                .owners
                .write()
                .unwrap_or_else(|p| p.into_inner());
            let changed = *current != owners;
            if changed {
                *current = owners.clone();
            }
            changed
        };
        if changed {
            self.tell_formats(&owners);
            self.cluster.notify();
        }
        Ok(())
    }
}
