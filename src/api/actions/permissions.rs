//! AddPermission and RemovePermission: each label is one statement of the queue's `Policy`
//! document, built the way SQS builds it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::api::{required, Context, Empty};
use crate::error::{ErrorCode, SqsError};
use crate::protocol::Action;

/// Most actions one AddPermission may grant.
const MAX_ACTIONS: usize = 7;

/// Whether a queue owner may share the action named `name` with other accounts (`*`
/// shares them all).
fn shareable(name: &str) -> bool {
    use Action::*;
    name == "*"
        || matches!(
            Action::from_name(name),
            Some(
                ChangeMessageVisibility
                    | DeleteMessage
                    | GetQueueAttributes
                    | GetQueueUrl
                    | ListDeadLetterSourceQueues
                    | PurgeQueue
                    | ReceiveMessage
                    | SendMessage
            )
        )
}

#[derive(Debug, Serialize, Deserialize)]
struct PolicyDocument {
    #[serde(rename = "Version", default = "default_version")]
    version: String,
    #[serde(rename = "Id", skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    #[serde(rename = "Statement", default)]
    statement: Vec<Statement>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

fn default_version() -> String {
    "2008-10-17".into()
}

#[derive(Debug, Serialize, Deserialize)]
struct Statement {
    #[serde(rename = "Sid", skip_serializing_if = "Option::is_none")]
    sid: Option<String>,
    #[serde(rename = "Effect", skip_serializing_if = "Option::is_none")]
    effect: Option<String>,
    #[serde(rename = "Principal", skip_serializing_if = "Option::is_none")]
    principal: Option<Value>,
    #[serde(rename = "Action", skip_serializing_if = "Option::is_none")]
    action: Option<Value>,
    #[serde(rename = "Resource", skip_serializing_if = "Option::is_none")]
    resource: Option<Value>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// One string, or an array when there are several.
fn one_or_many(items: Vec<String>) -> Value {
    if items.len() == 1 {
        Value::String(items.into_iter().next().unwrap_or_default())
    } else {
        Value::Array(items.into_iter().map(Value::String).collect())
    }
}

fn bad_label(label: &str, reason: &str) -> SqsError {
    SqsError::invalid_value(label, "Label", reason)
}

fn check_label(label: &str) -> Result<(), SqsError> {
    let ok = label.len() <= 80
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(bad_label(label, "Must match ^[a-zA-Z0-9_-]{1,80}$"))
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct AddInput {
    pub queue_url: Option<String>,
    pub label: Option<String>,
    #[serde(rename = "AWSAccountIds")]
    pub aws_account_ids: Option<Vec<String>>,
    pub actions: Option<Vec<String>>,
}

pub(crate) fn add(ctx: &Context, input: AddInput) -> Result<Empty, SqsError> {
    let queue = ctx.queue(input.queue_url.as_deref())?;
    let label = required(&input.label, "Label")?;
    check_label(label)?;
    let accounts = input
        .aws_account_ids
        .filter(|a| !a.is_empty())
        .ok_or_else(|| SqsError::missing("AWSAccountIds"))?;
    let actions = input
        .actions
        .filter(|a| !a.is_empty())
        .ok_or_else(|| SqsError::missing("Actions"))?;
    if actions.len() > MAX_ACTIONS {
        return Err(SqsError::new(
            ErrorCode::OverLimit,
            format!(
                "{} Actions were found, maximum allowed is {MAX_ACTIONS}.",
                actions.len()
            ),
        ));
    }
    if let Some(bad) = actions.iter().find(|a| !shareable(a)) {
        return Err(SqsError::invalid_value(
            format!("SQS:{bad}"),
            "ActionName",
            "Please refer to the appropriate WSDL for a list of valid actions.",
        ));
    }
    if let Some(bad) = accounts.iter().find(|a| !crate::config::is_account_id(a)) {
        return Err(SqsError::invalid_value(
            bad,
            "AWSAccountId",
            "Must be a 12-digit AWS account id.",
        ));
    }
    let statement = Statement {
        sid: Some(label.to_string()),
        effect: Some("Allow".into()),
        principal: Some(serde_json::json!({
            "AWS": one_or_many(accounts.iter().map(|a| format!("arn:aws:iam::{a}:root")).collect())
        })),
        action: Some(one_or_many(
            actions.iter().map(|a| format!("SQS:{a}")).collect(),
        )),
        resource: Some(Value::String(queue.arn.clone())),
        rest: Map::new(),
    };
    let arn = queue.arn.clone();
    queue.update_settings(ctx.engine.now_ms(), |s| {
        let mut doc = match &s.policy {
            Some(p) => serde_json::from_str::<PolicyDocument>(p).map_err(|_| {
                SqsError::new(
                    ErrorCode::InvalidAttributeValue,
                    "The queue's Policy cannot be amended.",
                )
            })?,
            None => PolicyDocument {
                version: default_version(),
                id: Some(format!("{arn}/SQSDefaultPolicy")),
                statement: Vec::new(),
                rest: Map::new(),
            },
        };
        if doc
            .statement
            .iter()
            .any(|st| st.sid.as_deref() == Some(label))
        {
            return Err(bad_label(label, "Already exists."));
        }
        doc.statement.push(statement);
        let policy = serde_json::to_string(&doc).unwrap_or_default();
        if policy.len() > crate::api::attributes::MAX_POLICY_BYTES {
            return Err(crate::api::attributes::policy_too_large());
        }
        s.policy = Some(policy);
        Ok(())
    })?;
    Ok(Empty {})
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct RemoveInput {
    pub queue_url: Option<String>,
    pub label: Option<String>,
}

pub(crate) fn remove(ctx: &Context, input: RemoveInput) -> Result<Empty, SqsError> {
    let queue = ctx.queue(input.queue_url.as_deref())?;
    let label = required(&input.label, "Label")?;
    queue.update_settings(ctx.engine.now_ms(), |s| {
        let mut doc = s
            .policy
            .as_deref()
            .and_then(|p| serde_json::from_str::<PolicyDocument>(p).ok())
            .ok_or_else(|| bad_label(label, "can't find label."))?;
        let before = doc.statement.len();
        doc.statement.retain(|st| st.sid.as_deref() != Some(label));
        if doc.statement.len() == before {
            return Err(bad_label(label, "can't find label."));
        }
        // Removing the last statement removes the policy.
        s.policy = if doc.statement.is_empty() {
            None
        } else {
            Some(serde_json::to_string(&doc).unwrap_or_default())
        };
        Ok(())
    })?;
    Ok(Empty {})
}
