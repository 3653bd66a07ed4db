//! Dead-letter wiring as the engine obeys it: a queue's RedrivePolicy (where messages go after
//! too many receives) and RedriveAllowPolicy (which sources may use a queue as their
//! dead-letter queue). The JSON documents are parsed by the API layer; the raw text is kept
//! so GetQueueAttributes returns exactly what was set.

use super::ids::QueueId;

/// A parsed RedrivePolicy.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct RedrivePolicy {
    /// The document as it was set.
    pub raw: String,
    pub dead_letter_target: QueueId,
    /// Receives allowed before the next one moves the message (1–1000).
    pub max_receive_count: u32,
}

impl RedrivePolicy {
    /// The policy as AWS returns it: compact, `maxReceiveCount` a number.
    pub(crate) fn document(target_arn: &str, max_receive_count: u32) -> String {
        format!(
            r#"{{"deadLetterTargetArn":{},"maxReceiveCount":{max_receive_count}}}"#,
            serde_json::Value::from(target_arn)
        )
    }
}

/// Who may use a queue as a dead-letter queue.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum RedrivePermission {
    AllowAll,
    DenyAll,
    /// Only these source queue ARNs.
    ByQueue(Vec<String>),
}

/// A parsed RedriveAllowPolicy.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct RedriveAllowPolicy {
    /// The document as it was set.
    pub raw: String,
    pub permission: RedrivePermission,
}

impl RedriveAllowPolicy {
    /// Whether a queue with this ARN may send its dead letters here.
    pub(crate) fn allows(&self, source_arn: &str) -> bool {
        match &self.permission {
            RedrivePermission::AllowAll => true,
            RedrivePermission::DenyAll => false,
            RedrivePermission::ByQueue(arns) => arns.iter().any(|a| a == source_arn),
        }
    }
}
