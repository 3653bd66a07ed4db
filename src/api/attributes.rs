//! Queue attributes on the wire: their names, how values are validated and applied to the
//! engine's [`QueueSettings`], and how current values are rendered back as strings.

use std::collections::HashMap;

use crate::engine::redrive::{RedriveAllowPolicy, RedrivePermission, RedrivePolicy};
use crate::engine::settings::{
    DeduplicationScope, FifoThroughputLimit, MAX_MESSAGE_SIZE, MAX_VISIBILITY_TIMEOUT_S,
};
use crate::engine::{Engine, QueueId, QueueSettings, QueueSnapshot};
use crate::error::{ErrorCode, SqsError};

/// Every attribute name GetQueueAttributes knows, in the order replies list them.
pub(crate) const ATTRIBUTE_NAMES: &[&str] = &[
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesDelayed",
    "ApproximateNumberOfMessagesNotVisible",
    "CreatedTimestamp",
    "DelaySeconds",
    "LastModifiedTimestamp",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "QueueArn",
    "ReceiveMessageWaitTimeSeconds",
    "SqsManagedSseEnabled",
    "VisibilityTimeout",
    "Policy",
    "RedrivePolicy",
    "RedriveAllowPolicy",
    "KmsMasterKeyId",
    "KmsDataKeyReusePeriodSeconds",
    "FifoQueue",
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "FifoThroughputLimit",
];

const FIFO_ONLY: &[&str] = &[
    "FifoQueue",
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "FifoThroughputLimit",
];

fn unknown(name: &str) -> SqsError {
    SqsError::new(
        ErrorCode::InvalidAttributeName,
        format!("Unknown Attribute {name}."),
    )
}

fn bad_value(name: &str) -> SqsError {
    SqsError::new(
        ErrorCode::InvalidAttributeValue,
        format!("Invalid value for the parameter {name}."),
    )
}

fn int_in(name: &str, value: &str, min: u32, max: u32) -> Result<u32, SqsError> {
    match value.trim().parse::<i64>() {
        Ok(n) if n >= min as i64 && n <= max as i64 => Ok(n as u32),
        _ => Err(bad_value(name)),
    }
}

fn boolean(name: &str, value: &str) -> Result<bool, SqsError> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(bad_value(name)),
    }
}

/// The largest queue Policy SQS takes, in bytes ("Amazon SQS policy quotas").
pub(crate) const MAX_POLICY_BYTES: usize = 8192;

/// Actions one statement of a queue Policy may name ("Amazon SQS policy quotas").
const MAX_POLICY_ACTIONS: usize = 7;

/// AWS's answer to a Policy over [`MAX_POLICY_BYTES`] (403 OverLimit, its text as SDK users
/// report it from SetQueueAttributes and AddPermission).
pub(crate) fn policy_too_large() -> SqsError {
    SqsError::new(
        ErrorCode::OverLimit,
        "Submitted policy is over max allowed size.",
    )
}

/// A queue Policy: a JSON object whose `Statement` is one statement or a list of them, each
/// with an `Effect` of `Allow` or `Deny` (what access control reads); anything else is
/// refused as AWS refuses it. Conditions it does not evaluate are logged, never silently
/// ignored (they grant nothing and deny everything they could).
fn policy_document(value: &str) -> Result<Option<String>, SqsError> {
    if value.is_empty() {
        return Ok(None);
    }
    if value.len() > MAX_POLICY_BYTES {
        return Err(policy_too_large());
    }
    let doc = json_map(value).ok_or_else(|| bad_value("Policy"))?;
    let statements = match doc.get("Statement") {
        Some(serde_json::Value::Array(a)) if !a.is_empty() => a.iter().collect(),
        Some(s @ serde_json::Value::Object(_)) => vec![s],
        _ => return Err(bad_value("Policy")),
    };
    let well_formed = statements.iter().all(|s| {
        s.is_object()
            && matches!(
                s.get("Effect").and_then(|e| e.as_str()),
                Some("Allow" | "Deny")
            )
    });
    if !well_formed {
        return Err(bad_value("Policy"));
    }
    for s in &statements {
        let actions = match s.get("Action").or_else(|| s.get("NotAction")) {
            Some(serde_json::Value::Array(a)) => a.len(),
            _ => 1,
        };
        if actions > MAX_POLICY_ACTIONS {
            return Err(SqsError::new(
                ErrorCode::OverLimit,
                format!("{actions} actions were found in a statement from the submitted policy, max allowed is {MAX_POLICY_ACTIONS}"),
            ));
        }
    }
    let unevaluated = super::access::unevaluated(value);
    if !unevaluated.is_empty() {
        tracing::warn!(
            conditions = %unevaluated.join(", "),
            "a queue Policy has conditions sqsim does not evaluate: statements with them grant nothing and deny what they match"
        );
    }
    Ok(Some(value.to_string()))
}

/// `value` parsed as a JSON object, if it is one.
fn json_map(value: &str) -> Option<serde_json::Value> {
    serde_json::from_str(value)
        .ok()
        .filter(serde_json::Value::is_object)
}

fn redrive_policy(value: &str) -> Result<Option<RedrivePolicy>, SqsError> {
    if value.is_empty() {
        return Ok(None);
    }
    let invalid = |reason: &str| SqsError::invalid_value(value, "RedrivePolicy", reason);
    let doc = json_map(value).ok_or_else(|| invalid("Redrive policy is not a valid JSON map."))?;
    let target = doc
        .get("deadLetterTargetArn")
        .and_then(|v| v.as_str())
        .ok_or_else(|| {
            invalid("Redrive policy does not contain mandatory attribute: deadLetterTargetArn.")
        })?;
    let dead_letter_target = QueueId::from_arn(target)
        .ok_or_else(|| invalid("Invalid value for deadLetterTargetArn."))?;
    let count = doc.get("maxReceiveCount").ok_or_else(|| {
        invalid("Redrive policy does not contain mandatory attribute: maxReceiveCount.")
    })?;
    let parsed = match count {
        serde_json::Value::Number(n) => n.as_i64(),
        serde_json::Value::String(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    match parsed {
        // Kept as AWS re-serialises it: compact, the count a number even when sent as text.
        Some(n) if (1..=1000).contains(&n) => Ok(Some(RedrivePolicy {
            raw: RedrivePolicy::document(target, n as u32),
            dead_letter_target,
            max_receive_count: n as u32,
        })),
        _ => Err(invalid(&format!(
            "Invalid value for maxReceiveCount: {count}, valid values are from 1 to 1000 both inclusive."
        ))),
    }
}

fn redrive_allow_policy(value: &str) -> Result<Option<RedriveAllowPolicy>, SqsError> {
    if value.is_empty() {
        return Ok(None);
    }
    let invalid = |reason: &str| SqsError::invalid_value(value, "RedriveAllowPolicy", reason);
    let doc =
        json_map(value).ok_or_else(|| invalid("Redrive allow policy is not a valid JSON map."))?;
    let arns = match doc.get("sourceQueueArns") {
        None => None,
        Some(serde_json::Value::Array(items)) => Some(
            items
                .iter()
                .map(|a| {
                    a.as_str()
                        .filter(|a| QueueId::from_arn(a).is_some())
                        .map(str::to_string)
                })
                .collect::<Option<Vec<String>>>()
                .ok_or_else(|| invalid("sourceQueueArns must be a list of queue ARNs."))?,
        ),
        Some(_) => return Err(invalid("sourceQueueArns must be a list of queue ARNs.")),
    };
    let permission = match (doc.get("redrivePermission").and_then(|v| v.as_str()), arns) {
        (Some("allowAll"), None) => RedrivePermission::AllowAll,
        (Some("denyAll"), None) => RedrivePermission::DenyAll,
        (Some("byQueue"), Some(a)) if (1..=10).contains(&a.len()) => RedrivePermission::ByQueue(a),
        (Some("byQueue"), _) => {
            return Err(invalid(
                "sourceQueueArns must list 1 to 10 queue ARNs when redrivePermission is byQueue.",
            ))
        }
        (Some("allowAll" | "denyAll"), Some(_)) => {
            return Err(invalid(
                "sourceQueueArns can only be given when redrivePermission is byQueue.",
            ))
        }
        _ => {
            return Err(invalid(
                "redrivePermission must be one of allowAll, denyAll or byQueue.",
            ))
        }
    };
    // Kept as AWS re-serialises it: compact, only the members that apply.
    let raw = match &permission {
        RedrivePermission::AllowAll => serde_json::json!({"redrivePermission": "allowAll"}),
        RedrivePermission::DenyAll => serde_json::json!({"redrivePermission": "denyAll"}),
        RedrivePermission::ByQueue(arns) => {
            serde_json::json!({"redrivePermission": "byQueue", "sourceQueueArns": arns})
        }
    }
    .to_string();
    Ok(Some(RedriveAllowPolicy { raw, permission }))
}

/// Validates `attrs` and applies them to `settings`. `fifo` is the queue's type.
pub(crate) fn apply(
    settings: &mut QueueSettings,
    attrs: &HashMap<String, String>,
    fifo: bool,
) -> Result<(), SqsError> {
    // Sorted so that the first bad attribute reported is stable.
    let mut names: Vec<&String> = attrs.keys().collect();
    names.sort();
    let kms_on = attrs.get("KmsMasterKeyId").is_some_and(|v| !v.is_empty());
    let sse_on = attrs
        .get("SqsManagedSseEnabled")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if kms_on && sse_on {
        return Err(SqsError::new(
            ErrorCode::InvalidAttributeName,
            "You can use one type of server-side encryption (SSE) at one time. You can either enable KMS SSE or SQS SSE.",
        ));
    }
    for name in names {
        let value = attrs[name].as_str();
        let name = name.as_str();
        if !fifo && FIFO_ONLY.contains(&name) {
            return Err(match name {
                "DeduplicationScope" | "FifoThroughputLimit" => SqsError::new(
                    ErrorCode::InvalidAttributeName,
                    format!("You can specify the {name} only when FifoQueue is set to true."),
                ),
                _ => unknown(name),
            });
        }
        match name {
            "DelaySeconds" => settings.delay_seconds = int_in(name, value, 0, 900)?,
            "MaximumMessageSize" => {
                settings.maximum_message_size = int_in(name, value, 1024, MAX_MESSAGE_SIZE)?
            }
            "MessageRetentionPeriod" => {
                settings.message_retention_period = int_in(name, value, 60, 1_209_600)?
            }
            "ReceiveMessageWaitTimeSeconds" => {
                settings.receive_message_wait_time_seconds = int_in(name, value, 0, 20)?
            }
            "VisibilityTimeout" => {
                settings.visibility_timeout = int_in(name, value, 0, MAX_VISIBILITY_TIMEOUT_S)?
            }
            "Policy" => settings.policy = policy_document(value)?,
            "RedrivePolicy" => settings.redrive_policy = redrive_policy(value)?,
            "RedriveAllowPolicy" => settings.redrive_allow_policy = redrive_allow_policy(value)?,
            "KmsMasterKeyId" => {
                if value.is_empty() {
                    settings.kms_master_key_id = None;
                } else {
                    settings.kms_master_key_id = Some(value.to_string());
                    settings.sqs_managed_sse_enabled = false;
                }
            }
            "KmsDataKeyReusePeriodSeconds" => {
                settings.kms_data_key_reuse_period_seconds = int_in(name, value, 60, 86_400)?
            }
            "SqsManagedSseEnabled" => {
                settings.sqs_managed_sse_enabled = boolean(name, value)?;
                if settings.sqs_managed_sse_enabled && !kms_on {
                    settings.kms_master_key_id = None;
                }
            }
            "FifoQueue" => {
                if !boolean(name, value)? {
                    return Err(SqsError::new(
                        ErrorCode::InvalidAttributeValue,
                        "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported.",
                    ));
                }
            }
            "ContentBasedDeduplication" => {
                settings.content_based_deduplication = boolean(name, value)?
            }
            "DeduplicationScope" => {
                settings.deduplication_scope = match value {
                    "queue" => DeduplicationScope::Queue,
                    "messageGroup" => DeduplicationScope::MessageGroup,
                    _ => return Err(bad_value(name)),
                }
            }
            "FifoThroughputLimit" => {
                settings.fifo_throughput_limit = match value {
                    "perQueue" => FifoThroughputLimit::PerQueue,
                    "perMessageGroupId" => FifoThroughputLimit::PerMessageGroupId,
                    _ => return Err(bad_value(name)),
                }
            }
            _ => return Err(unknown(name)),
        }
    }
    if settings.fifo_throughput_limit == FifoThroughputLimit::PerMessageGroupId
        && settings.deduplication_scope != DeduplicationScope::MessageGroup
    {
        return Err(SqsError::new(
            ErrorCode::InvalidAttributeValue,
            "Invalid value for the parameter FifoThroughputLimit. Reason: perMessageGroupId is allowed only when DeduplicationScope is messageGroup.",
        ));
    }
    Ok(())
}

/// The current value of a settable attribute, as the wire spells it; `None` when unset.
pub(crate) fn setting_value(s: &QueueSettings, name: &str) -> Option<String> {
    let v = match name {
        "DelaySeconds" => s.delay_seconds.to_string(),
        "MaximumMessageSize" => s.maximum_message_size.to_string(),
        "MessageRetentionPeriod" => s.message_retention_period.to_string(),
        "ReceiveMessageWaitTimeSeconds" => s.receive_message_wait_time_seconds.to_string(),
        "VisibilityTimeout" => s.visibility_timeout.to_string(),
        "Policy" => s.policy.clone()?,
        "RedrivePolicy" => s.redrive_policy.as_ref()?.raw.clone(),
        "RedriveAllowPolicy" => s.redrive_allow_policy.as_ref()?.raw.clone(),
        "KmsMasterKeyId" => s.kms_master_key_id.clone()?,
        "KmsDataKeyReusePeriodSeconds" => {
            s.kms_master_key_id.as_ref()?;
            s.kms_data_key_reuse_period_seconds.to_string()
        }
        "SqsManagedSseEnabled" => s.sqs_managed_sse_enabled.to_string(),
        "FifoQueue" if s.fifo_queue => "true".to_string(),
        "ContentBasedDeduplication" if s.fifo_queue => s.content_based_deduplication.to_string(),
        "DeduplicationScope" if s.fifo_queue => match s.deduplication_scope {
            DeduplicationScope::Queue => "queue",
            DeduplicationScope::MessageGroup => "messageGroup",
        }
        .to_string(),
        "FifoThroughputLimit" if s.fifo_queue => match s.fifo_throughput_limit {
            FifoThroughputLimit::PerQueue => "perQueue",
            FifoThroughputLimit::PerMessageGroupId => "perMessageGroupId",
        }
        .to_string(),
        _ => return None,
    };
    Some(v)
}

/// The requested attributes (`All` or names) of a queue, in reply order.
pub(crate) fn render(
    snap: &QueueSnapshot,
    arn: &str,
    requested: &[String],
) -> Result<Vec<(&'static str, String)>, SqsError> {
    let all = requested.iter().any(|n| n == "All");
    let mut wanted = Vec::new();
    for name in requested {
        if name == "All" {
            continue;
        }
        match ATTRIBUTE_NAMES.iter().find(|n| **n == name.as_str()) {
            Some(n) => wanted.push(*n),
            None => return Err(unknown(name)),
        }
    }
    let mut out = Vec::new();
    for &name in ATTRIBUTE_NAMES {
        if !all && !wanted.contains(&name) {
            continue;
        }
        let value = match name {
            "ApproximateNumberOfMessages" => Some(snap.counts.visible.to_string()),
            "ApproximateNumberOfMessagesDelayed" => Some(snap.counts.delayed.to_string()),
            "ApproximateNumberOfMessagesNotVisible" => Some(snap.counts.in_flight.to_string()),
            "CreatedTimestamp" => Some(snap.created_s.to_string()),
            "LastModifiedTimestamp" => Some(snap.last_modified_s.to_string()),
            "QueueArn" => Some(arn.to_string()),
            _ => setting_value(&snap.settings, name),
        };
        if let Some(v) = value {
            out.push((name, v));
        }
    }
    Ok(out)
}

/// Checks the RedrivePolicy in `settings` (see [`check_redrive_against`]) against the
/// target as `engine` has it.
pub(crate) fn check_redrive_target(
    engine: &Engine,
    source: &QueueId,
    settings: &QueueSettings,
) -> Result<(), SqsError> {
    let target = settings
        .redrive_policy
        .as_ref()
        .filter(|p| p.dead_letter_target != *source)
        .and_then(|p| engine.queue_settings(&p.dead_letter_target));
    check_redrive_against(source, settings, target.as_ref())
}

/// Checks that the RedrivePolicy in `settings` (the source's settings as they are about to
/// be) names a dead-letter queue that exists next to the source (same account and region),
/// is of the same type and lets the source use it. `target`: the dead-letter queue's
/// settings, `None` when it does not exist. The queue may name itself; its own
/// RedriveAllowPolicy is then the one in `settings`. Only called when the attribute is set.
pub(crate) fn check_redrive_against(
    source: &QueueId,
    settings: &QueueSettings,
    target: Option<&QueueSettings>,
) -> Result<(), SqsError> {
    let Some(policy) = &settings.redrive_policy else {
        return Ok(());
    };
    let invalid = |reason: &str| SqsError::invalid_value(&policy.raw, "RedrivePolicy", reason);
    let target_id = &policy.dead_letter_target;
    if target_id.region != source.region || target_id.account != source.account {
        return Err(invalid(
            "Dead-letter target must be in the same account and region as the source queue.",
        ));
    }
    let target = match target {
        _ if target_id == source => settings,
        Some(t) => t,
        None => return Err(invalid("Dead letter target does not exist.")),
    };
    if target.fifo_queue != settings.fifo_queue {
        return Err(invalid(
            "Dead-letter queue must be same type of queue as the source.",
        ));
    }
    if let Some(allow) = &target.redrive_allow_policy {
        if !allow.allows(&source.arn()) {
            return Err(invalid(&format!(
                "The RedriveAllowPolicy of {} does not allow this queue to use it as a dead-letter queue.",
                target_id.arn()
            )));
        }
    }
    Ok(())
}
