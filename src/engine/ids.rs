//! The names the engine files things under: [`QueueId`] for a queue (and its ARN), and
//! [`MessageKey`] for a message within one. Leaves every other engine module builds on.

/// Names a stored message: when it entered the queue, and its arrival number there.
/// Ordering by it is oldest first.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub(crate) struct MessageKey {
    pub sent_ms: u64,
    pub seq: u64,
}

/// Where a queue lives and what it is called.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub(crate) struct QueueId {
    pub region: String,
    pub account: String,
    pub name: String,
}

impl QueueId {
    /// `arn:aws:sqs:<region>:<account>:<name>`.
    pub(crate) fn arn(&self) -> String {
        format!("arn:aws:sqs:{}:{}:{}", self.region, self.account, self.name)
    }

    /// Parses `arn:<partition>:sqs:<region>:<account>:<name>`.
    pub(crate) fn from_arn(arn: &str) -> Option<QueueId> {
        let mut parts = arn.split(':');
        let (Some("arn"), Some(_), Some("sqs"), Some(region), Some(account), Some(name), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return None;
        };
        if region.is_empty() || account.is_empty() || name.is_empty() {
            return None;
        }
        Some(QueueId {
            region: region.to_string(),
            account: account.to_string(),
            name: name.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arns() {
        let id = QueueId::from_arn("arn:aws:sqs:eu-west-1:123456789012:dlq.fifo").unwrap();
        assert_eq!(
            (id.region.as_str(), id.account.as_str(), id.name.as_str()),
            ("eu-west-1", "123456789012", "dlq.fifo")
        );
        assert_eq!(id.arn(), "arn:aws:sqs:eu-west-1:123456789012:dlq.fifo");
        for bad in [
            "",
            "arn:aws:sns:r:a:n",
            "arn:aws:sqs:r:a",
            "arn:aws:sqs:r:a:n:x",
            "nope",
        ] {
            assert!(QueueId::from_arn(bad).is_none(), "{bad}");
        }
    }
}
