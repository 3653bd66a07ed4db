//! When a JetStream shard writer waits for more records before it publishes: group commit
//! with a delay, as MySQL's `binlog_group_commit_sync_delay` or PostgreSQL's `commit_delay`
//! with `commit_siblings`, but with the siblings counted rather than configured.
//!
//! JetStream's cost is per message, not per record: with `sync_interval: always` every
//! message is an fsync on every server keeping the stream (about 130 µs of one R1 server's
//! CPU, measured), and the node's client spends some 30 µs on each publish. Without waiting, a shard's records go out as soon as
//! the window allows, and with acks as quick as a one-server fsync, a shard serving eight
//! concurrent senders published about three records a message; waiting up to 2 ms for the
//! others gathered five to six, and one R1 node took 12–45% more messages a second on the
//! same two cores, with nats-server's CPU per message down by a quarter to two fifths
//! (docs/scale-out.md).
//!
//! Waiting pays only where there is someone to wait for. The writer counts the records not
//! yet durable (in flight and pending) each time it publishes — how many requests were
//! waiting on the shard together — and, when nothing is in flight, holds the next publish
//! only until that many are waiting again, at most [`DELAY`]. A lone or one-at-a-time
//! sender is never held (it was one record waiting, and one is there); eight concurrent
//! senders go out together as soon as the eighth arrives; when fewer come back than last
//! time, the writer waits [`DELAY`] once and then expects the fewer. With publishes in
//! flight the window's own rule gathers records, and the hold stays out of the way.

use std::time::{Duration, Instant};

/// The longest a record waits for others before it is published anyway: short against a
/// request's own latency through a cluster under load, and against SQS's (tens of ms).
pub(super) const DELAY: Duration = Duration::from_millis(2);

/// How many records the writer waits for: as many as were waiting together at its last
/// publish, and never more than one publish takes.
#[derive(Debug)]
pub(super) struct Hold {
    /// Records not yet durable (in flight and pending) at the last publish.
    together: usize,
    /// Most records the writer takes into one publish.
    most: usize,
}

impl Hold {
    /// A writer's hold; `most` records go out without waiting for more.
    pub(super) fn new(most: usize) -> Hold {
        Hold { together: 1, most }
    }

    /// With `pending` records waiting to be published (the oldest since `since`) and
    /// `in_flight` published and not yet acknowledged: `None` to publish now, or the
    /// instant until which to wait for more.
    pub(super) fn until(
        &self,
        pending: usize,
        in_flight: usize,
        since: Instant,
        now: Instant,
    ) -> Option<Instant> {
        let deadline = since + DELAY;
        // With a publish in flight, the window's own rule gathers records (the next message
        // waits for as many records as there are messages in flight); the hold is for the
        // moment the window is empty, when nothing else would make a record wait.
        if pending == 0
            || in_flight > 0
            || pending >= self.together.min(self.most)
            || now >= deadline
        {
            None
        } else {
            Some(deadline)
        }
    }

    /// The writer publishes `pending` records with `in_flight` still unacknowledged: that
    /// many were waiting together, and that many are expected next time.
    pub(super) fn sent(&mut self, pending: usize, in_flight: usize) {
        self.together = (pending + in_flight).max(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(base: Instant, micros: u64) -> Instant {
        base + Duration::from_micros(micros)
    }

    #[test]
    fn a_lone_or_serial_sender_is_never_held() {
        let mut hold = Hold::new(1_000);
        let t = Instant::now();
        assert_eq!(
            hold.until(1, 0, t, t),
            None,
            "the first record goes at once"
        );
        for i in 0..100 {
            hold.sent(1, 0);
            let since = at(t, i * 500);
            assert_eq!(
                hold.until(1, 0, since, since),
                None,
                "a sender that waits for each answer"
            );
        }
    }

    #[test]
    fn concurrent_senders_are_gathered_until_all_are_there() {
        let mut hold = Hold::new(1_000);
        let t = Instant::now();
        hold.sent(8, 0);
        // The first of the eight to come back waits, at most DELAY from its arrival.
        assert_eq!(hold.until(1, 0, t, at(t, 10)), Some(t + DELAY));
        assert_eq!(hold.until(7, 0, t, at(t, 300)), Some(t + DELAY));
        // The eighth: all are there, they go together.
        assert_eq!(hold.until(8, 0, t, at(t, 400)), None);
        // With a publish in flight, the window's rule decides, not the hold.
        assert_eq!(hold.until(3, 5, t, at(t, 10)), None);
        assert_eq!(hold.until(1, 1, t, at(t, 10)), None);
    }

    #[test]
    fn fewer_than_expected_wait_once_then_fewer_are_expected() {
        let mut hold = Hold::new(1_000);
        let t = Instant::now();
        hold.sent(8, 0);
        let late = t + DELAY;
        assert_eq!(hold.until(5, 0, t, late), None, "the delay is up");
        hold.sent(5, 0);
        let next = at(late, 1_000);
        assert_eq!(hold.until(5, 0, next, next), None, "five are expected now");
        assert_eq!(hold.until(4, 0, next, next), Some(next + DELAY));
    }

    #[test]
    fn a_full_publish_goes_without_waiting() {
        let mut hold = Hold::new(16);
        let t = Instant::now();
        hold.sent(10, 40);
        assert_eq!(hold.until(15, 0, t, t), Some(t + DELAY));
        assert_eq!(hold.until(16, 0, t, t), None, "16 is all one publish takes");
    }
}
