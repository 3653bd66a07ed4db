//! A policy statement's `Condition` block, evaluated as IAM's reference defines it ("IAM
//! JSON policy elements: Condition operators", "Single-valued vs. multivalued context
//! keys"): every operator, its `…IfExists` form, `Null`, and the `ForAllValues:`/
//! `ForAnyValue:` qualifiers, with IAM's rules for a key the request does not carry:
//!
//! - a positive operator (`StringEquals`, `ArnLike`, `NumericLessThan`, `Bool`…) is false;
//! - a negated one (`StringNotEquals`, `StringNotEqualsIgnoreCase`, `ArnNotLike`,
//!   `NumericNotEquals`, `DateNotEquals`, `NotIpAddress`) is true;
//! - `…IfExists` is true; `Null: true` is true and `Null: false` false;
//! - `ForAllValues:` is true (no value fails), `ForAnyValue:` false (no value matches).
//!
//! Whatever cannot be evaluated here — a key sqsim does not know for a request (the
//! caller's IP, its user, its tags), an operator it does not know, a policy variable
//! (`${aws:username}`), a value that does not parse for its operator — is [`Cond::Unknown`],
//! which the caller treats as failing closed: an `Allow` grants nothing, a `Deny` denies.

use serde_json::{Map, Value};

/// What a statement's conditions came to.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub(crate) enum Cond {
    Hold,
    Fail,
    /// A key, operator or value not evaluated here.
    Unknown,
}

/// What the condition keys can read of a request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Facts<'a> {
    /// The caller's account (`aws:PrincipalAccount`).
    pub account: &'a str,
    /// The server clock, epoch milliseconds (`aws:CurrentTime`, `aws:EpochTime`).
    pub now_ms: u64,
    /// The resource the request acts on, when a service acts for it (`aws:SourceArn`,
    /// `aws:SourceAccount`): `None` for a direct call.
    pub source_arn: Option<&'a str>,
}

/// The request's values for `key` (empty: the request does not carry it), or `None` when
/// sqsim does not know that key.
fn values_of(key: &str, facts: &Facts<'_>) -> Option<Vec<String>> {
    let one = |v: &str| vec![v.to_string()];
    Some(match key.to_ascii_lowercase().as_str() {
        "aws:principalaccount" => one(facts.account),
        "aws:sourcearn" => facts.source_arn.map(one).unwrap_or_default(),
        "aws:sourceaccount" => facts
            .source_arn
            .and_then(|arn| arn.split(':').nth(4))
            .map(one)
            .unwrap_or_default(),
        "aws:currenttime" => one(
            &chrono::DateTime::from_timestamp_millis(facts.now_ms as i64)
                .unwrap_or_default()
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        ),
        "aws:epochtime" => one(&(facts.now_ms / 1000).to_string()),
        // sqsim serves plain HTTP.
        "aws:securetransport" => one("false"),
        _ => return None,
    })
}

/// How an operator compares one request value with one policy value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compare {
    String,
    StringIgnoreCase,
    Like,
    Numeric(Ordering),
    Date(Ordering),
    Bool,
    Binary,
}

/// The numeric and date operators' comparisons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ordering {
    Equal,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

/// An operator's base name (no qualifier, no `IfExists`): its comparison and whether it is
/// negated. `Null` is handled on its own.
fn operator(base: &str) -> Option<(Compare, bool)> {
    use Compare::*;
    use Ordering::*;
    Some(match base {
        "StringEquals" | "ArnEquals" => (String, false),
        "StringNotEquals" | "ArnNotEquals" => (String, true),
        "StringEqualsIgnoreCase" => (StringIgnoreCase, false),
        "StringNotEqualsIgnoreCase" => (StringIgnoreCase, true),
        "StringLike" | "ArnLike" => (Like, false),
        "StringNotLike" | "ArnNotLike" => (Like, true),
        "NumericEquals" => (Numeric(Equal), false),
        "NumericNotEquals" => (Numeric(Equal), true),
        "NumericLessThan" => (Numeric(Less), false),
        "NumericLessThanEquals" => (Numeric(LessOrEqual), false),
        "NumericGreaterThan" => (Numeric(Greater), false),
        "NumericGreaterThanEquals" => (Numeric(GreaterOrEqual), false),
        "DateEquals" => (Date(Equal), false),
        "DateNotEquals" => (Date(Equal), true),
        "DateLessThan" => (Date(Less), false),
        "DateLessThanEquals" => (Date(LessOrEqual), false),
        "DateGreaterThan" => (Date(Greater), false),
        "DateGreaterThanEquals" => (Date(GreaterOrEqual), false),
        "Bool" => (Bool, false),
        "BinaryEquals" => (Binary, false),
        _ => return None,
    })
}

/// A set qualifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Set {
    None,
    ForAll,
    ForAny,
}

/// An operator as written: `ForAllValues:StringLikeIfExists` → (ForAll, "StringLike", true).
fn parse_operator(op: &str) -> (Set, &str, bool) {
    let (set, rest) = if let Some(r) = op.strip_prefix("ForAllValues:") {
        (Set::ForAll, r)
    } else if let Some(r) = op.strip_prefix("ForAnyValue:") {
        (Set::ForAny, r)
    } else {
        (Set::None, op)
    };
    match rest.strip_suffix("IfExists") {
        Some(base) => (set, base, true),
        None => (set, rest, false),
    }
}

/// A condition's policy values as text: a string, number or boolean, or an array of them.
fn policy_values(v: &Value) -> Option<Vec<String>> {
    let scalar = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    match v {
        Value::Array(a) => a.iter().map(scalar).collect(),
        other => scalar(other).map(|s| vec![s]),
    }
}

/// A date as IAM reads one: ISO 8601 (a date, or a date and time) or epoch seconds.
fn date_ms(text: &str) -> Option<i64> {
    if let Ok(secs) = text.parse::<i64>() {
        return secs.checked_mul(1000);
    }
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
        return Some(t.timestamp_millis());
    }
    if let Ok(t) = chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S") {
        return Some(t.and_utc().timestamp_millis());
    }
    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc().timestamp_millis())
}

fn ordered<T: PartialOrd>(ordering: Ordering, request: T, policy: T) -> bool {
    match ordering {
        Ordering::Equal => request == policy,
        Ordering::Less => request < policy,
        Ordering::LessOrEqual => request <= policy,
        Ordering::Greater => request > policy,
        Ordering::GreaterOrEqual => request >= policy,
    }
}

/// Whether `request` matches `policy` under `compare` (before negation); `None`: a value
/// does not parse for this comparison.
fn matches(compare: Compare, request: &str, policy: &str) -> Option<bool> {
    Some(match compare {
        Compare::String | Compare::Binary => request == policy,
        Compare::StringIgnoreCase => request.to_lowercase() == policy.to_lowercase(),
        Compare::Like => glob(policy, request, false),
        Compare::Numeric(o) => {
            ordered(o, request.parse::<f64>().ok()?, policy.parse::<f64>().ok()?)
        }
        Compare::Date(o) => ordered(o, date_ms(request)?, date_ms(policy)?),
        Compare::Bool => request.eq_ignore_ascii_case(policy),
    })
}

/// One key's test: `op` on the request's `request` values against the policy's `values`.
fn test(op: &str, request: &[String], values: &[String]) -> Cond {
    let held = |b: bool| if b { Cond::Hold } else { Cond::Fail };
    if values.iter().any(|v| v.contains("${")) {
        // A policy variable: its value is the caller's, which sqsim does not model.
        return Cond::Unknown;
    }
    if op == "Null" {
        let absent = request.is_empty();
        return match values {
            [v] if v.eq_ignore_ascii_case("true") => held(absent),
            [v] if v.eq_ignore_ascii_case("false") => held(!absent),
            _ => Cond::Unknown,
        };
    }
    let (set, base, if_exists) = parse_operator(op);
    let Some((compare, negated)) = operator(base) else {
        return Cond::Unknown;
    };
    if request.is_empty() {
        return held(if_exists || set == Set::ForAll || (set == Set::None && negated));
    }
    // One request value passes when it matches a policy value (positive operators) or
    // matches none of them (negated ones).
    let mut passes = Vec::with_capacity(request.len());
    for r in request {
        let mut any = false;
        for v in values {
            match matches(compare, r, v) {
                Some(m) => any |= m,
                None => return Cond::Unknown,
            }
        }
        passes.push(any != negated);
    }
    held(match set {
        Set::ForAll => passes.iter().all(|p| *p),
        Set::ForAny | Set::None => passes.iter().any(|p| *p),
    })
}

/// A statement's `Condition` block (absent: holds). Every operator and key must hold; one
/// that fails makes the block fail, and one not evaluated here makes it unknown.
pub(crate) fn evaluate(block: Option<&Value>, facts: &Facts<'_>) -> Cond {
    let Some(block) = block else {
        return Cond::Hold;
    };
    let Some(block) = block.as_object() else {
        return Cond::Unknown;
    };
    let mut out = Cond::Hold;
    for (op, tests) in block {
        let Some(tests) = tests.as_object() else {
            return Cond::Unknown;
        };
        for (key, values) in tests {
            let (Some(request), Some(values)) = (values_of(key, facts), policy_values(values))
            else {
                return Cond::Unknown;
            };
            match test(op, &request, &values) {
                Cond::Unknown => return Cond::Unknown,
                Cond::Fail => out = Cond::Fail,
                Cond::Hold => {}
            }
        }
    }
    out
}

/// What of a `Condition` block is not evaluated here, one phrase each (`Bool on
/// aws:MultiFactorAuthPresent`), for the warning logged when a policy is set.
pub(crate) fn unevaluated(block: &Map<String, Value>) -> Vec<String> {
    let facts = Facts {
        account: "000000000000",
        now_ms: 0,
        source_arn: None,
    };
    let mut out = Vec::new();
    for (op, tests) in block {
        let Some(tests) = tests.as_object() else {
            out.push(format!("{op} (not an object of keys)"));
            continue;
        };
        for (key, values) in tests {
            let one = Value::Object(Map::from_iter([(
                op.clone(),
                Value::Object(Map::from_iter([(key.clone(), values.clone())])),
            )]));
            if evaluate(Some(&one), &facts) == Cond::Unknown {
                out.push(format!("{op} on {key}"));
            }
        }
    }
    out
}

/// `pattern` with `*` and `?` wildcards against `text`, ignoring ASCII case when `fold`.
pub(super) fn glob(pattern: &str, text: &str, fold: bool) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = if fold {
        (
            pattern.to_ascii_lowercase().chars().collect(),
            text.to_ascii_lowercase().chars().collect(),
        )
    } else {
        (pattern.chars().collect(), text.chars().collect())
    };
    // Iterative matching with one backtrack point (the last `*`).
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < t.len() {
        if i < p.len() && (p[i] == '?' || p[i] == t[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW_MS: u64 = 1_780_000_000_000;

    fn direct() -> Facts<'static> {
        Facts {
            account: "222222222222",
            now_ms: NOW_MS,
            source_arn: None,
        }
    }

    fn eval(block: &str, facts: &Facts<'_>) -> Cond {
        let v: Value = serde_json::from_str(block).unwrap();
        evaluate(Some(&v), facts)
    }

    #[test]
    fn a_missing_key_follows_iams_rules() {
        let f = direct();
        let cases = [
            // Positive operators: false.
            (r#"{"StringEquals":{"aws:SourceAccount":"1"}}"#, Cond::Fail),
            (r#"{"ArnLike":{"aws:SourceArn":"arn:*"}}"#, Cond::Fail),
            (
                r#"{"StringEqualsIgnoreCase":{"aws:SourceAccount":"1"}}"#,
                Cond::Fail,
            ),
            // Negated operators: true.
            (
                r#"{"StringNotEquals":{"aws:SourceAccount":"1"}}"#,
                Cond::Hold,
            ),
            (
                r#"{"StringNotEqualsIgnoreCase":{"aws:SourceAccount":"1"}}"#,
                Cond::Hold,
            ),
            (r#"{"ArnNotLike":{"aws:SourceArn":"arn:*"}}"#, Cond::Hold),
            (
                r#"{"NumericNotEquals":{"aws:SourceAccount":"1"}}"#,
                Cond::Hold,
            ),
            // IfExists: true.
            (
                r#"{"ArnEqualsIfExists":{"aws:SourceArn":"arn:x"}}"#,
                Cond::Hold,
            ),
            // Null.
            (r#"{"Null":{"aws:SourceArn":"true"}}"#, Cond::Hold),
            (r#"{"Null":{"aws:SourceArn":true}}"#, Cond::Hold),
            (r#"{"Null":{"aws:SourceArn":"false"}}"#, Cond::Fail),
            (r#"{"Null":{"aws:PrincipalAccount":"true"}}"#, Cond::Fail),
            // Set qualifiers: ForAllValues true, ForAnyValue false.
            (
                r#"{"ForAllValues:StringEquals":{"aws:SourceAccount":["1"]}}"#,
                Cond::Hold,
            ),
            (
                r#"{"ForAnyValue:StringEquals":{"aws:SourceAccount":["1"]}}"#,
                Cond::Fail,
            ),
        ];
        for (block, want) in cases {
            assert_eq!(eval(block, &f), want, "{block}");
        }
    }

    #[test]
    fn present_keys_compare_by_their_operator() {
        let f = direct();
        let sns = Facts {
            source_arn: Some("arn:aws:sns:us-east-1:333333333333:topic"),
            ..direct()
        };
        let cases = [
            (
                r#"{"StringEquals":{"aws:PrincipalAccount":["1","222222222222"]}}"#,
                &f,
                Cond::Hold,
            ),
            (
                r#"{"StringEquals":{"aws:principalaccount":"1"}}"#,
                &f,
                Cond::Fail,
            ),
            (
                r#"{"StringNotEquals":{"aws:PrincipalAccount":"222222222222"}}"#,
                &f,
                Cond::Fail,
            ),
            (
                r#"{"ArnLike":{"aws:SourceArn":"arn:aws:sns:*:333333333333:*"}}"#,
                &sns,
                Cond::Hold,
            ),
            (
                r#"{"ArnNotLike":{"aws:SourceArn":"arn:aws:sns:*:333333333333:*"}}"#,
                &sns,
                Cond::Fail,
            ),
            (
                r#"{"StringEquals":{"aws:SourceAccount":"333333333333"}}"#,
                &sns,
                Cond::Hold,
            ),
            (r#"{"Null":{"aws:SourceArn":"false"}}"#, &sns, Cond::Hold),
            (
                r#"{"StringEqualsIgnoreCase":{"aws:SourceArn":"ARN:AWS:SNS:US-EAST-1:333333333333:TOPIC"}}"#,
                &sns,
                Cond::Hold,
            ),
            (
                r#"{"NumericLessThan":{"aws:EpochTime":1780000001}}"#,
                &f,
                Cond::Hold,
            ),
            (
                r#"{"NumericGreaterThanEquals":{"aws:EpochTime":"1780000001"}}"#,
                &f,
                Cond::Fail,
            ),
            (
                r#"{"DateLessThan":{"aws:CurrentTime":"2027-01-01T00:00:00Z"}}"#,
                &f,
                Cond::Hold,
            ),
            (
                r#"{"DateGreaterThan":{"aws:CurrentTime":"2027-01-01"}}"#,
                &f,
                Cond::Fail,
            ),
            (
                r#"{"DateLessThanEquals":{"aws:EpochTime":"1780000000"}}"#,
                &f,
                Cond::Hold,
            ),
            (
                r#"{"Bool":{"aws:SecureTransport":"false"}}"#,
                &f,
                Cond::Hold,
            ),
            (r#"{"Bool":{"aws:SecureTransport":true}}"#, &f, Cond::Fail),
            (
                r#"{"ForAllValues:StringEquals":{"aws:PrincipalAccount":["222222222222"]}}"#,
                &f,
                Cond::Hold,
            ),
            (
                r#"{"ForAnyValue:StringNotEquals":{"aws:PrincipalAccount":["1"]}}"#,
                &f,
                Cond::Hold,
            ),
            // Every operator and key must hold.
            (
                r#"{"StringEquals":{"aws:PrincipalAccount":"222222222222"},"Null":{"aws:SourceArn":"false"}}"#,
                &f,
                Cond::Fail,
            ),
        ];
        for (block, facts, want) in cases {
            assert_eq!(eval(block, facts), want, "{block}");
        }
    }

    #[test]
    fn what_is_not_evaluated_is_unknown() {
        let f = direct();
        for block in [
            r#"{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}"#,
            r#"{"StringEquals":{"aws:PrincipalOrgID":"o-1"}}"#,
            r#"{"StringLikeOperator":{"aws:PrincipalAccount":"1"}}"#,
            r#"{"StringLike":{"aws:PrincipalAccount":"${aws:username}"}}"#,
            r#"{"NumericLessThan":{"aws:EpochTime":"soon"}}"#,
            r#"{"Null":{"aws:SourceArn":"maybe"}}"#,
            r#"{"StringEquals":{"aws:PrincipalAccount":{"nested":1}}}"#,
            r#"{"StringEquals":"aws:PrincipalAccount"}"#,
            r#"[]"#,
        ] {
            assert_eq!(eval(block, &f), Cond::Unknown, "{block}");
        }
        let block: Value = serde_json::from_str(
            r#"{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"},"Null":{"aws:SourceArn":"true"}}"#,
        )
        .unwrap();
        assert_eq!(
            unevaluated(block.as_object().unwrap()),
            ["IpAddress on aws:SourceIp"]
        );
    }
}
