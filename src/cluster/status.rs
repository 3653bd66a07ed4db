//! What a node tells about the cluster: `/_sqsim/cluster`'s status (members, owners,
//! counters, the outboxes of its shards) and `/_sqsim/health` in cluster mode.

use std::time::Instant;

use super::{other_formats, Cluster};

/// Most outboxes `/_sqsim/cluster` lists one by one (the fullest first); it counts them all.
const LISTED_OUTBOXES: usize = 100;

impl Cluster {
    /// What `/_sqsim/cluster` shows: this node, the members, each shard's owner, counters,
    /// the outboxes of its shards.
    pub(crate) fn status(&self) -> serde_json::Value {
        let owners = self
            .owners
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let serving: Vec<u32> = self.served().into_iter().map(|(s, _)| s).collect();
        serde_json::json!({
            "node": self.config.node_id,
            "url": self.peer_url,
            "shards": self.config.shards,
            "members": *self.members.read().unwrap_or_else(|p| p.into_inner()),
            "serving": serving,
            "owners": owners
                .iter()
                .map(|o| o.as_ref().map(|o| o.node.clone()))
                .collect::<Vec<_>>(),
            "complete": owners.iter().all(Option::is_some),
            "format": crate::store::LOG_FORMAT,
            "other_formats": other_formats(&owners),
            "stats": *self.stats.read().unwrap_or_else(|p| p.into_inner()),
            "outboxes": self.outboxes(),
        })
    }

    /// The outboxes of this node's shards (messages on their way to a queue another shard
    /// serves): how many, the messages in them, and the first [`LISTED_OUTBOXES`] with their
    /// route (dead letters or a move task; origin and target) and messages.
    fn outboxes(&self) -> serde_json::Value {
        let mut routes: Vec<(crate::engine::moves::outbox::Route, usize)> = self
            .served()
            .into_iter()
            .flat_map(|(_, engine)| engine.outbox_routes())
            .collect();
        routes.sort_by_key(|r| std::cmp::Reverse(r.1));
        let messages: usize = routes.iter().map(|(_, n)| n).sum();
        let listed: Vec<serde_json::Value> = routes
            .iter()
            .take(LISTED_OUTBOXES)
            .map(|(route, n)| serde_json::json!({"route": route, "messages": n}))
            .collect();
        serde_json::json!({"count": routes.len(), "messages": messages, "listed": listed})
    }

    /// Notes whether this node's last heartbeat writes to the buckets went through.
    pub(in crate::cluster) fn note_writes(&self, written: bool) {
        let mut since = self
            .writes_failing_since
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match (written, *since) {
            (true, _) => *since = None,
            (false, None) => *since = Some(Instant::now()),
            (false, Some(_)) => {}
        }
    }

    /// `/_sqsim/health` in cluster mode: degraded (503 for a load balancer) while this node's
    /// writes to JetStream have failed for a whole lease — JetStream unreachable, or its disk
    /// full — since its leases are then not extended and it soon serves nothing. Shards without
    /// an owner (a failover under way) are reported, not counted against this node.
    pub(crate) fn health(&self) -> (bool, serde_json::Value) {
        let failing_for = self
            .writes_failing_since
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .map(|t| t.elapsed());
        let joined = self.leases.get().is_some();
        let healthy = joined && failing_for.is_none_or(|d| d < self.config.lease);
        let ownerless = self
            .owners
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|o| o.is_none())
            .count();
        let serving = self.engines().len();
        let mut cluster = serde_json::json!({
            "joined": joined,
            "serving": serving,
            "shards_without_owner": ownerless,
        });
        if let Some(d) = failing_for {
            cluster["writes_failing_for_ms"] = serde_json::json!(d.as_millis() as u64);
        }
        let status = if healthy { "ok" } else { "degraded" };
        (
            healthy,
            serde_json::json!({ "status": status, "cluster": cluster }),
        )
    }
}
