//! Fault injection for tests: rules that make matching requests fail with a given AWS error,
//! wait before answering, or lose their connection — for the next N matches or with a
//! probability. They belong to the server: they match AWS error names and action strings,
//! and the service applies the effect before the engine sees the request.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// What a matching request suffers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FaultEffect {
    /// Answer with this error (a name from the admin API's list, e.g. `ThrottlingException`).
    Error(String),
    /// Wait this long, then handle the request normally.
    Latency { ms: u64 },
    /// Close the connection without answering.
    Drop,
}

/// One rule.
#[derive(Debug, Clone)]
pub(crate) struct FaultRule {
    pub id: u64,
    /// Only this action (e.g. `SendMessage`); `None` matches all.
    pub action: Option<String>,
    /// Only requests addressing a queue of this name; `None` matches all.
    pub queue: Option<String>,
    pub effect: FaultEffect,
    /// Matches left before the rule retires; `None` for no limit.
    pub remaining: Option<u64>,
    /// Chance that a match takes effect (1.0 always).
    pub probability: f64,
    /// How often the rule took effect.
    pub hits: u64,
}

/// The active rules.
#[derive(Debug, Default)]
pub(crate) struct FaultSet {
    rules: Mutex<Vec<FaultRule>>,
    any: AtomicBool,
    next_id: AtomicU64,
    rng: AtomicU64,
}

impl FaultSet {
    /// Whether any rule exists (a cheap check before finding the request's queue).
    pub(crate) fn is_active(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// Adds a rule; returns its id.
    pub(crate) fn add(&self, mut rule: FaultRule) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        rule.id = id;
        rule.hits = 0;
        let mut rules = self.rules.lock().unwrap_or_else(|p| p.into_inner());
        rules.push(rule);
        self.any.store(true, Ordering::Release);
        id
    }

    /// The rules and their hit counts.
    pub(crate) fn list(&self) -> Vec<FaultRule> {
        self.rules.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Removes the rule with this id; whether there was one.
    pub(crate) fn remove(&self, id: u64) -> bool {
        let mut rules = self.rules.lock().unwrap_or_else(|p| p.into_inner());
        let before = rules.len();
        rules.retain(|r| r.id != id);
        self.any.store(!rules.is_empty(), Ordering::Release);
        rules.len() < before
    }

    /// Removes every rule.
    pub(crate) fn clear(&self) {
        self.rules.lock().unwrap_or_else(|p| p.into_inner()).clear();
        self.any.store(false, Ordering::Release);
    }

    /// A uniform number in [0, 1).
    pub(crate) fn chance(&self) -> f64 {
        let mut x = self.rng.load(Ordering::Relaxed);
        let roll = crate::engine::random::unit(&mut x);
        self.rng.store(x, Ordering::Relaxed);
        roll
    }

    /// The effect for a request, if a rule matches and fires. Counts the hit.
    pub(crate) fn check(&self, action: &str, queue: Option<&str>) -> Option<FaultEffect> {
        if !self.is_active() {
            return None;
        }
        let mut rules = self.rules.lock().unwrap_or_else(|p| p.into_inner());
        // Each matching rule gets its own roll; the first that fires wins, so a rule that
        // does not fire never hides a later one.
        for rule in rules.iter_mut() {
            let matches = rule.remaining != Some(0)
                && rule.action.as_deref().is_none_or(|a| a == action)
                && rule.queue.as_deref().is_none_or(|q| Some(q) == queue);
            if !matches || self.chance() >= rule.probability {
                continue;
            }
            if let Some(n) = &mut rule.remaining {
                *n -= 1;
            }
            rule.hits += 1;
            return Some(rule.effect.clone());
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(action: Option<&str>, remaining: Option<u64>, probability: f64) -> FaultRule {
        FaultRule {
            id: 0,
            action: action.map(str::to_string),
            queue: None,
            effect: FaultEffect::Error("ThrottlingException".into()),
            remaining,
            probability,
            hits: 0,
        }
    }

    #[test]
    fn counts_down_and_matches_actions() {
        let f = FaultSet::default();
        assert!(f.check("SendMessage", None).is_none());
        f.add(rule(Some("SendMessage"), Some(2), 1.0));
        assert!(f.check("ReceiveMessage", None).is_none());
        assert!(f.check("SendMessage", Some("q")).is_some());
        assert!(f.check("SendMessage", None).is_some());
        assert!(f.check("SendMessage", None).is_none());
        assert_eq!(f.list()[0].hits, 2);
        f.clear();
        assert!(!f.is_active());
    }

    #[test]
    fn removes_one_rule_by_id() {
        let f = FaultSet::default();
        let first = f.add(rule(Some("SendMessage"), None, 1.0));
        let second = f.add(rule(Some("ReceiveMessage"), None, 1.0));
        assert!(f.remove(first));
        assert!(!f.remove(first), "already gone");
        assert!(f.check("SendMessage", None).is_none());
        assert!(f.check("ReceiveMessage", None).is_some());
        assert_eq!(f.list().iter().map(|r| r.id).collect::<Vec<_>>(), [second]);
        assert!(f.remove(second));
        assert!(!f.is_active());
    }

    #[test]
    fn a_rule_that_does_not_fire_does_not_hide_the_next() {
        let f = FaultSet::default();
        f.add(rule(None, None, 0.0));
        f.add(rule(None, None, 1.0));
        assert!(f.check("X", None).is_some());
        assert_eq!(f.list()[1].hits, 1);
    }

    #[test]
    fn probability_is_roughly_honoured() {
        let f = FaultSet::default();
        f.add(rule(None, None, 0.25));
        let hits = (0..10_000).filter(|_| f.check("X", None).is_some()).count();
        assert!((2_000..3_000).contains(&hits), "{hits}");
    }
}
