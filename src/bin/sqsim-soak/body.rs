//! The soak's queues by role, and the message bodies that name every message uniquely: the
//! queue it was sent to, its producer and sequence number, and for group-carrying queues its
//! group (and, on FIFO, its index within the group). The oracle keys everything on this
//! identity, so nothing depends on ids the server hands out.

use std::fmt;

/// The role of each queue of the soak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum QueueKind {
    /// A plain standard queue.
    Standard,
    /// A standard queue whose sends carry MessageGroupId (tenants): a "fair queue".
    Fair,
    /// A FIFO queue with several message groups and explicit deduplication ids.
    Fifo,
    /// A standard queue with a RedrivePolicy to [`QueueKind::Dlq`].
    Source,
    /// The dead-letter queue of [`QueueKind::Source`]; nothing is sent to it directly.
    Dlq,
    /// A FIFO queue with a RedrivePolicy to [`QueueKind::FifoDlq`], groups as on
    /// [`QueueKind::Fifo`].
    FifoSource,
    /// The FIFO dead-letter queue of [`QueueKind::FifoSource`].
    FifoDlq,
}

impl QueueKind {
    /// How many queues a run has: the length of per-queue arrays.
    pub(crate) const N: usize = 7;

    /// Every queue, in the order of reports.
    pub(crate) const ALL: [QueueKind; QueueKind::N] = [
        QueueKind::Standard,
        QueueKind::Fair,
        QueueKind::Fifo,
        QueueKind::Source,
        QueueKind::Dlq,
        QueueKind::FifoSource,
        QueueKind::FifoDlq,
    ];

    /// The queues producers send to.
    pub(crate) const SENT_TO: [QueueKind; 5] = [
        QueueKind::Standard,
        QueueKind::Fair,
        QueueKind::Fifo,
        QueueKind::Source,
        QueueKind::FifoSource,
    ];

    /// The dead-letter queues.
    pub(crate) const DLQS: [QueueKind; 2] = [QueueKind::Dlq, QueueKind::FifoDlq];

    /// Short name, used in queue names and bodies.
    pub(crate) fn name(self) -> &'static str {
        match self {
            QueueKind::Standard => "std",
            QueueKind::Fair => "fair",
            QueueKind::Fifo => "fifo",
            QueueKind::Source => "src",
            QueueKind::Dlq => "dlq",
            QueueKind::FifoSource => "fsrc",
            QueueKind::FifoDlq => "fdlq",
        }
    }

    /// A FIFO queue (ordered groups, current receipt handles only).
    pub(crate) fn is_fifo(self) -> bool {
        matches!(
            self,
            QueueKind::Fifo | QueueKind::FifoSource | QueueKind::FifoDlq
        )
    }

    /// A queue producers send to with a MessageGroupId.
    pub(crate) fn has_groups(self) -> bool {
        matches!(
            self,
            QueueKind::Fair | QueueKind::Fifo | QueueKind::FifoSource
        )
    }

    /// A FIFO queue producers send to: its groups carry indexes and are ordered.
    pub(crate) fn is_ordered(self) -> bool {
        matches!(self, QueueKind::Fifo | QueueKind::FifoSource)
    }

    /// A queue with a RedrivePolicy (moves after maxReceiveCount receives).
    pub(crate) fn is_source(self) -> bool {
        self.dlq().is_some()
    }

    /// The dead-letter queue of a source queue.
    pub(crate) fn dlq(self) -> Option<QueueKind> {
        match self {
            QueueKind::Source => Some(QueueKind::Dlq),
            QueueKind::FifoSource => Some(QueueKind::FifoDlq),
            _ => None,
        }
    }

    /// Whether this is a dead-letter queue.
    pub(crate) fn is_dlq(self) -> bool {
        QueueKind::DLQS.contains(&self)
    }

    fn parse(s: &str) -> Option<QueueKind> {
        QueueKind::ALL.into_iter().find(|q| q.name() == s)
    }

    /// Index into per-queue arrays.
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for QueueKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A message's identity: the queue it was sent to, its producer (unique across queues) and
/// the producer's sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct MsgKey {
    pub queue: QueueKind,
    pub producer: u32,
    pub seq: u64,
}

impl fmt::Display for MsgKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/p{}/s{}", self.queue, self.producer, self.seq)
    }
}

/// A message's group: a tenant on the fair queue, a FIFO group (with the message's index
/// in it) on the FIFO queues. FIFO group numbers are unique across queues (they derive from
/// the producer, which sends to one queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GroupPos {
    pub group: u32,
    /// Position within the group in send order (FIFO only; 0 on the fair queue).
    pub index: u64,
}

/// What a body says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Body {
    pub key: MsgKey,
    pub group: Option<GroupPos>,
}

impl Body {
    /// The MessageGroupId this message is sent with.
    pub(crate) fn group_id(&self) -> Option<String> {
        self.group.map(|g| format!("g{}", g.group))
    }

    /// The MessageDeduplicationId: unique per message, so no send is ever dropped as a
    /// duplicate and every acknowledged FIFO send must be delivered.
    pub(crate) fn dedup_id(&self) -> String {
        format!("p{}-s{}", self.key.producer, self.key.seq)
    }

    /// The body text: the identity, then `pad` filler bytes so sizes vary.
    pub(crate) fn encode(&self, pad: usize) -> String {
        let (g, i) = self.group.map_or(("-".to_string(), "-".to_string()), |g| {
            (g.group.to_string(), g.index.to_string())
        });
        let mut s = format!(
            "soak|{}|{}|{}|{g}|{i}|",
            self.key.queue, self.key.producer, self.key.seq
        );
        s.extend(std::iter::repeat_n('x', pad));
        s
    }

    /// Reads a body written by [`Body::encode`]; `None` for anything else.
    pub(crate) fn parse(text: &str) -> Option<Body> {
        let mut f = text.split('|');
        if f.next()? != "soak" {
            return None;
        }
        let queue = QueueKind::parse(f.next()?)?;
        let producer = f.next()?.parse().ok()?;
        let seq = f.next()?.parse().ok()?;
        let (g, i) = (f.next()?, f.next()?);
        let group = match (g, i) {
            ("-", "-") => None,
            (g, i) => Some(GroupPos {
                group: g.parse().ok()?,
                index: i.parse().ok()?,
            }),
        };
        let pad = f.next()?;
        if f.next().is_some() || pad.bytes().any(|b| b != b'x') {
            return None;
        }
        Some(Body {
            key: MsgKey {
                queue,
                producer,
                seq,
            },
            group,
        })
    }
}
