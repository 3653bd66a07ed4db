//! Access between accounts under `--auth verify`, as SQS decides it: a queue's owner may do
//! anything with it; another account only what the queue's `Policy` allows (AddPermission
//! writes its grants there). A matching `Deny` beats any `Allow`; nothing matching is a
//! denial. Without `--auth verify` accounts are namespaces and nothing here runs.
//!
//! Conditions are IAM's ([`super::condition`]): a condition on a key or with an operator
//! sqsim does not evaluate makes an `Allow` grant nothing and a `Deny` deny (fail closed),
//! and setting such a policy logs a warning naming what is not evaluated.

use serde_json::Value;

use super::condition::{self, glob, Cond};

use crate::error::{ErrorCode, SqsError};
use crate::protocol::Action;

/// Whether another account can never be granted `action` (the AddPermission reference:
/// "cross-account permissions don't apply to" these).
fn owner_only(action: Action) -> bool {
    use Action::*;
    matches!(
        action,
        AddPermission
            | CancelMessageMoveTask
            | CreateQueue
            | DeleteQueue
            | ListMessageMoveTasks
            | ListQueues
            | ListQueueTags
            | RemovePermission
            | SetQueueAttributes
            | StartMessageMoveTask
            | TagQueue
            | UntagQueue
    )
}

/// The permission `action` needs ("Amazon SQS API permissions": a batch needs its single
/// action's permission).
pub(crate) fn permission(action: Action) -> Action {
    match action {
        Action::SendMessageBatch => Action::SendMessage,
        Action::DeleteMessageBatch => Action::DeleteMessage,
        Action::ChangeMessageVisibilityBatch => Action::ChangeMessageVisibility,
        other => other,
    }
}

/// What a policy says about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    Allow,
    /// No statement allows it.
    NoAllow,
    /// A statement denies it.
    Deny,
}

/// What the conditions can look at.
#[derive(Debug, Clone)]
pub(crate) struct Request<'a> {
    /// The caller's account.
    pub account: &'a str,
    /// The action (`SendMessageBatch`), mapped to its permission here.
    pub action: Action,
    /// The queue's ARN.
    pub resource: &'a str,
    /// The server clock, epoch milliseconds (`aws:CurrentTime`, `aws:EpochTime`).
    pub now_ms: u64,
}

/// Whether `req` may go ahead on a queue with `policy` (a JSON document, or none).
pub(crate) fn decide(policy: Option<&str>, req: &Request<'_>) -> Decision {
    if owner_only(req.action) {
        return Decision::NoAllow;
    }
    let Some(doc) = policy.and_then(|p| serde_json::from_str::<Value>(p).ok()) else {
        return Decision::NoAllow;
    };
    let statements = match doc.get("Statement") {
        Some(Value::Array(a)) => a.iter().collect(),
        Some(s @ Value::Object(_)) => vec![s],
        _ => Vec::new(),
    };
    let mut allowed = false;
    for s in statements {
        let effect = s.get("Effect").and_then(Value::as_str).unwrap_or_default();
        let applies = principal_matches(s, req.account)
            && action_matches(s, permission(req.action).name())
            && resource_matches(s, req.resource);
        if !applies {
            continue;
        }
        let facts = condition::Facts {
            account: req.account,
            now_ms: req.now_ms,
            source_arn: None,
        };
        match (effect, condition::evaluate(s.get("Condition"), &facts)) {
            ("Deny", Cond::Hold | Cond::Unknown) => return Decision::Deny,
            ("Allow", Cond::Hold) => allowed = true,
            _ => {}
        }
    }
    if allowed {
        Decision::Allow
    } else {
        Decision::NoAllow
    }
}

/// The error AWS answers a denied request with.
pub(crate) fn denied(req: &Request<'_>, decision: Decision) -> SqsError {
    let permission = format!("sqs:{}", permission(req.action).name().to_ascii_lowercase());
    let why = match decision {
        Decision::Deny => "with an explicit deny in a resource-based policy".to_string(),
        _ => format!("because no resource-based policy allows the {permission} action"),
    };
    SqsError::new(
        ErrorCode::AccessDenied,
        format!(
            "User: arn:aws:iam::{}:root is not authorized to perform: {permission} on resource: {} {why}",
            req.account, req.resource
        ),
    )
}

/// One string or an array of strings (anything else: none).
fn strings(v: Option<&Value>) -> Vec<&str> {
    match v {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Whether `principal` (one entry of a Principal) names the caller's account.
fn names_account(principal: &str, account: &str) -> bool {
    principal == "*" || principal == account || principal == format!("arn:aws:iam::{account}:root")
}

fn principal_matches(s: &Value, account: &str) -> bool {
    let named = |p: &Value| match p {
        Value::String(s) => s == "*",
        Value::Object(o) => strings(o.get("AWS"))
            .iter()
            .any(|p| names_account(p, account)),
        _ => false,
    };
    match (s.get("Principal"), s.get("NotPrincipal")) {
        (Some(p), _) => named(p),
        (None, Some(p)) => !named(p),
        (None, None) => false,
    }
}

fn action_matches(s: &Value, permission: &str) -> bool {
    let full = format!("sqs:{permission}");
    let any = |v: Option<&Value>| strings(v).iter().any(|a| *a == "*" || glob(a, &full, true));
    match (s.get("Action"), s.get("NotAction")) {
        (Some(_), _) => any(s.get("Action")),
        (None, Some(_)) => !any(s.get("NotAction")),
        (None, None) => false,
    }
}

fn resource_matches(s: &Value, arn: &str) -> bool {
    let any = |v: Option<&Value>| strings(v).iter().any(|r| glob(r, arn, false));
    match (s.get("Resource"), s.get("NotResource")) {
        (Some(_), _) => any(s.get("Resource")),
        (None, Some(_)) => !any(s.get("NotResource")),
        // SQS fills in the queue when a statement names no resource.
        (None, None) => true,
    }
}

/// What of `policy` (a valid JSON document) this module does not evaluate, one phrase
/// each, for the warning logged when it is set.
pub(crate) fn unevaluated(policy: &str) -> Vec<String> {
    let Ok(doc) = serde_json::from_str::<Value>(policy) else {
        return Vec::new();
    };
    let statements = match doc.get("Statement") {
        Some(Value::Array(a)) => a.clone(),
        Some(s) => vec![s.clone()],
        None => Vec::new(),
    };
    let mut out = Vec::new();
    for s in &statements {
        match s.get("Condition") {
            Some(Value::Object(block)) => out.extend(condition::unevaluated(block)),
            Some(_) => out.push("a Condition that is not an object".into()),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARN: &str = "arn:aws:sqs:us-east-1:111111111111:q";

    fn req<'a>(account: &'a str, action: &'a str) -> Request<'a> {
        Request {
            account,
            action: Action::from_name(action).expect("an SQS action"),
            resource: ARN,
            now_ms: 1_780_000_000_000,
        }
    }

    fn policy(statements: &str) -> String {
        format!(r#"{{"Version":"2012-10-17","Statement":[{statements}]}}"#)
    }

    #[test]
    fn nothing_granted_is_denied() {
        assert_eq!(
            decide(None, &req("222222222222", "SendMessage")),
            Decision::NoAllow
        );
        let p = policy(
            r#"{"Effect":"Allow","Principal":{"AWS":"333333333333"},"Action":"sqs:*","Resource":"*"}"#,
        );
        assert_eq!(
            decide(Some(&p), &req("222222222222", "SendMessage")),
            Decision::NoAllow
        );
    }

    #[test]
    fn principals_actions_and_resources_in_every_spelling() {
        for principal in [
            r#""*""#,
            r#"{"AWS":"*"}"#,
            r#"{"AWS":"222222222222"}"#,
            r#"{"AWS":["999999999999","arn:aws:iam::222222222222:root"]}"#,
        ] {
            for action in [
                r#""sqs:SendMessage""#,
                r#""SQS:*""#,
                r#""*""#,
                r#"["sqs:Send*"]"#,
            ] {
                for resource in [
                    format!("\"{ARN}\""),
                    "\"*\"".into(),
                    "\"arn:aws:sqs:*:111111111111:*\"".into(),
                ] {
                    let p = policy(&format!(
                        r#"{{"Effect":"Allow","Principal":{principal},"Action":{action},"Resource":{resource}}}"#
                    ));
                    assert_eq!(
                        decide(Some(&p), &req("222222222222", "SendMessageBatch")),
                        Decision::Allow,
                        "{p}"
                    );
                    assert_eq!(
                        decide(Some(&p), &req("222222222222", "ReceiveMessage")),
                        if action.contains("Send") {
                            Decision::NoAllow
                        } else {
                            Decision::Allow
                        },
                        "{p}"
                    );
                }
            }
        }
    }

    #[test]
    fn deny_beats_allow_and_owner_only_actions_are_never_granted() {
        let p = policy(
            r#"{"Effect":"Allow","Principal":"*","Action":"sqs:*","Resource":"*"},
               {"Effect":"Deny","Principal":{"AWS":"222222222222"},"Action":"sqs:DeleteMessage","Resource":"*"}"#,
        );
        assert_eq!(
            decide(Some(&p), &req("222222222222", "SendMessage")),
            Decision::Allow
        );
        assert_eq!(
            decide(Some(&p), &req("222222222222", "DeleteMessageBatch")),
            Decision::Deny
        );
        assert_eq!(
            decide(Some(&p), &req("333333333333", "DeleteMessage")),
            Decision::Allow
        );
        let owners: Vec<_> = Action::ALL.iter().filter(|a| owner_only(**a)).collect();
        assert_eq!(owners.len(), 12);
        for a in owners {
            assert_eq!(
                decide(Some(&p), &req("222222222222", a.name())),
                Decision::NoAllow,
                "{a}"
            );
        }
    }

    #[test]
    fn conditions_on_known_keys_and_unknown_ones_fail_closed() {
        let allow_if = |cond: &str| {
            policy(&format!(
                r#"{{"Effect":"Allow","Principal":"*","Action":"sqs:SendMessage","Resource":"*","Condition":{cond}}}"#
            ))
        };
        let r = req("222222222222", "SendMessage");
        let p = allow_if(r#"{"StringEquals":{"aws:PrincipalAccount":"222222222222"}}"#);
        assert_eq!(decide(Some(&p), &r), Decision::Allow);
        let p = allow_if(r#"{"StringEquals":{"aws:PrincipalAccount":["333333333333"]}}"#);
        assert_eq!(decide(Some(&p), &r), Decision::NoAllow);
        // A direct call has no source: a grant to SNS topics' deliveries is not the caller's.
        let p =
            allow_if(r#"{"ArnEquals":{"aws:SourceArn":"arn:aws:sns:us-east-1:222222222222:t"}}"#);
        assert_eq!(decide(Some(&p), &r), Decision::NoAllow);
        let p = allow_if(r#"{"ArnLikeIfExists":{"aws:SourceArn":"arn:aws:sns:*"}}"#);
        assert_eq!(decide(Some(&p), &r), Decision::Allow);
        let p = allow_if(r#"{"Bool":{"aws:MultiFactorAuthPresent":"true"}}"#);
        assert_eq!(
            decide(Some(&p), &r),
            Decision::NoAllow,
            "unknown key grants nothing"
        );
        assert_eq!(unevaluated(&p), ["Bool on aws:MultiFactorAuthPresent"]);
        let deny_if = |cond: &str| {
            policy(&format!(
                r#"{{"Effect":"Allow","Principal":"*","Action":"*","Resource":"*"}},
                   {{"Effect":"Deny","Principal":"*","Action":"*","Resource":"*","Condition":{cond}}}"#
            ))
        };
        let deny = deny_if(r#"{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}"#);
        assert_eq!(
            decide(Some(&deny), &r),
            Decision::Deny,
            "unknown key denies"
        );
        // A Deny whose condition holds when a key is absent denies a direct call, as AWS
        // does (these three once let another account through).
        for cond in [
            r#"{"Null":{"aws:SourceArn":"true"}}"#,
            r#"{"StringNotEqualsIgnoreCase":{"aws:SourceAccount":"111111111111"}}"#,
            r#"{"ForAllValues:StringEquals":{"aws:SourceAccount":["111111111111"]}}"#,
        ] {
            assert_eq!(decide(Some(&deny_if(cond)), &r), Decision::Deny, "{cond}");
        }
        assert_eq!(
            decide(Some(&deny_if(r#"{"Null":{"aws:SourceArn":"false"}}"#)), &r),
            Decision::Allow
        );
    }

    #[test]
    fn the_denial_reads_as_aws_words_it() {
        let r = req("222222222222", "SendMessageBatch");
        let e = denied(&r, Decision::NoAllow);
        assert_eq!(e.code, ErrorCode::AccessDenied);
        assert_eq!(
            e.message,
            format!("User: arn:aws:iam::222222222222:root is not authorized to perform: sqs:sendmessage on resource: {ARN} because no resource-based policy allows the sqs:sendmessage action")
        );
    }

    #[test]
    fn globs() {
        assert!(glob("sqs:*", "sqs:SendMessage", true));
        assert!(glob("SQS:send*", "sqs:SendMessage", true));
        assert!(glob("a?c*", "abcdef", false));
        assert!(!glob("a?c", "abcd", false));
        assert!(glob("*", "", false));
    }
}
