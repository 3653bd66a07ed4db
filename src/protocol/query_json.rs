//! The JSON rendering of query-protocol replies. AWS sends it instead of XML when a query
//! request asks for JSON (`Accept: application/json`, or the parameter `ContentType=JSON`);
//! API Gateway's SQS integration and some SDKs (AWS.jl) depend on it.
//!
//! It is not the AWS JSON 1.0 protocol: the reply is wrapped as
//! `{"<Action>Response":{"<Action>Result":{…},"ResponseMetadata":{"RequestId":…}}}`, every
//! member of the result is present (`null` when unset), keys are sorted, and some members
//! keep the names of AWS's internal model (`messages`, `queueUrls`). Errors are
//! `{"Error":{"Code","Message","Type"},"RequestId"}` with the query error code.
//!
//! Each action describes its result with a [`Shape`]; the rendering is derived from the
//! action's JSON 1.0 body, so there is no third writer per action. The shapes record what
//! captures of real AWS show; where no capture exists the shape's comment says so.

use serde_json::{Map, Value};

/// How one value of a result is rendered.
#[derive(Debug)]
pub(crate) enum Shape {
    /// A string, number or boolean, copied as it is.
    Scalar,
    /// A list; an absent or empty one becomes `when_empty`.
    List(&'static Shape, Empty),
    /// An object with every member present.
    Struct(&'static [Member]),
    /// An object keyed by name (a message's `Attributes`); absent or empty becomes `null`.
    Map(&'static Shape),
    /// An object rendered as a list of `{<key>: name, "Value": value}` entries (as
    /// GetQueueAttributes' `Attributes`); absent or empty becomes `null`.
    Pairs(&'static str),
}

/// What an absent or empty list renders as.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Empty {
    Null,
    List,
}

/// A member of a [`Shape::Struct`].
#[derive(Debug)]
pub(crate) struct Member {
    /// Its name in the JSON 1.0 body.
    pub from: &'static str,
    /// Its name in the query JSON reply.
    pub name: &'static str,
    pub shape: Shape,
}

impl Member {
    /// A member with the same name in both renderings.
    pub(crate) const fn new(name: &'static str, shape: Shape) -> Member {
        Member {
            from: name,
            name,
            shape,
        }
    }

    /// A string, number or boolean member.
    pub(crate) const fn scalar(name: &'static str) -> Member {
        Member::new(name, Shape::Scalar)
    }
}

/// The JSON 1.0 rendering `value` (or its absence) rendered as `shape` prescribes.
pub(crate) fn render(value: Option<&Value>, shape: &Shape) -> Value {
    let value = value.filter(|v| !v.is_null());
    match shape {
        Shape::Scalar => value.cloned().unwrap_or(Value::Null),
        Shape::List(item, when_empty) => match value.and_then(Value::as_array) {
            Some(items) if !items.is_empty() => {
                Value::Array(items.iter().map(|v| render(Some(v), item)).collect())
            }
            _ => match when_empty {
                Empty::Null => Value::Null,
                Empty::List => Value::Array(Vec::new()),
            },
        },
        Shape::Struct(members) => match value {
            Some(v) => Value::Object(
                members
                    .iter()
                    .map(|m| (m.name.to_string(), render(v.get(m.from), &m.shape)))
                    .collect(),
            ),
            None => Value::Null,
        },
        Shape::Map(inner) => match value.and_then(Value::as_object) {
            Some(o) if !o.is_empty() => Value::Object(
                o.iter()
                    .map(|(k, v)| (k.clone(), render(Some(v), inner)))
                    .collect(),
            ),
            _ => Value::Null,
        },
        Shape::Pairs(key) => match value.and_then(Value::as_object) {
            Some(o) if !o.is_empty() => Value::Array(
                o.iter()
                    .map(|(k, v)| {
                        let mut entry = Map::new();
                        entry.insert((*key).to_string(), Value::String(k.clone()));
                        entry.insert("Value".to_string(), v.clone());
                        Value::Object(entry)
                    })
                    .collect(),
            ),
            _ => Value::Null,
        },
    }
}

/// The whole reply body: `result` (already rendered; `None` for actions without one) and
/// the request id under `{action}Response`.
pub(crate) fn reply(action: &str, request_id: &str, result: Option<Value>) -> Vec<u8> {
    let mut response = Map::new();
    if let Some(r) = result {
        response.insert(format!("{action}Result"), r);
    }
    response.insert("ResponseMetadata".to_string(), metadata(request_id));
    let mut body = Map::new();
    body.insert(format!("{action}Response"), Value::Object(response));
    serde_json::to_vec(&body).unwrap_or_default()
}

fn metadata(request_id: &str) -> Value {
    let mut m = Map::new();
    m.insert(
        "RequestId".to_string(),
        Value::String(request_id.to_string()),
    );
    Value::Object(m)
}

/// An error body: `{"Error":{"Code","Message","Type"},"RequestId"}` (no `ErrorResponse`
/// wrapper, unlike the XML).
pub(crate) fn error(code: &str, message: &str, fault: &str, request_id: &str) -> Vec<u8> {
    let body = serde_json::json!({
        "Error": {"Code": code, "Message": message, "Type": fault},
        "RequestId": request_id,
    });
    serde_json::to_vec(&body).unwrap_or_default()
}

/// Whether an `Accept` header asks for JSON over XML: `application/json` is listed with a
/// quality above zero and above that of any XML type. Wildcards count for neither, so
/// curl's `*/*` keeps XML while axios's `application/json, text/plain, */*` gets JSON.
pub(crate) fn accepts_json(accept: &str) -> bool {
    let (mut json, mut xml) = (0.0f32, 0.0f32);
    for range in accept.split(',') {
        let mut params = range.split(';');
        let media = params.next().unwrap_or("").trim();
        let q = params
            .filter_map(|p| p.trim().strip_prefix("q="))
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        if media.eq_ignore_ascii_case("application/json") {
            json = json.max(q);
        } else if media.eq_ignore_ascii_case("text/xml")
            || media.eq_ignore_ascii_case("application/xml")
        {
            xml = xml.max(q);
        }
    }
    json > 0.0 && json > xml
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    static ENTRY: Shape = Shape::Struct(&[
        Member::scalar("Id"),
        Member::scalar("SequenceNumber"),
        Member::new("Attributes", Shape::Map(&Shape::Scalar)),
    ]);
    static RESULT: Shape = Shape::Struct(&[
        Member {
            from: "Items",
            name: "items",
            shape: Shape::List(&ENTRY, Empty::Null),
        },
        Member::new("Failed", Shape::List(&Shape::Scalar, Empty::List)),
        Member::new("Pairs", Shape::Pairs("Name")),
    ]);

    #[test]
    fn every_member_is_present_renamed_and_reshaped() {
        let from = json!({"Items": [{"Id": "a", "Attributes": {"X": "1"}}], "Pairs": {"B": "2", "A": "1"}});
        let out = render(Some(&from), &RESULT);
        assert_eq!(
            out.to_string(),
            r#"{"Failed":[],"Pairs":[{"Name":"A","Value":"1"},{"Name":"B","Value":"2"}],"items":[{"Attributes":{"X":"1"},"Id":"a","SequenceNumber":null}]}"#
        );
    }

    #[test]
    fn absent_and_empty_collections() {
        let out = render(Some(&json!({"Items": [], "Pairs": {}})), &RESULT);
        assert_eq!(out, json!({"Failed": [], "Pairs": null, "items": null}));
        let entry = render(Some(&json!({"Id": "a", "Attributes": {}})), &ENTRY);
        assert_eq!(
            entry,
            json!({"Attributes": null, "Id": "a", "SequenceNumber": null})
        );
    }

    #[test]
    fn wrapper_and_error_bodies() {
        let body = reply("GetQueueUrl", "r-1", Some(json!({"QueueUrl": "u"})));
        assert_eq!(
            String::from_utf8(body).unwrap(),
            r#"{"GetQueueUrlResponse":{"GetQueueUrlResult":{"QueueUrl":"u"},"ResponseMetadata":{"RequestId":"r-1"}}}"#
        );
        let body = reply("DeleteQueue", "r-2", None);
        assert_eq!(
            String::from_utf8(body).unwrap(),
            r#"{"DeleteQueueResponse":{"ResponseMetadata":{"RequestId":"r-2"}}}"#
        );
        let body = error("AccessDenied", "no", "Sender", "r-3");
        assert_eq!(
            String::from_utf8(body).unwrap(),
            r#"{"Error":{"Code":"AccessDenied","Message":"no","Type":"Sender"},"RequestId":"r-3"}"#
        );
    }

    #[test]
    fn accept_negotiation() {
        assert!(accepts_json("application/json"));
        assert!(accepts_json("application/json, text/plain, */*"));
        assert!(accepts_json("text/xml;q=0.5, Application/JSON"));
        assert!(!accepts_json("*/*"));
        assert!(!accepts_json("text/xml"));
        assert!(!accepts_json("application/json;q=0"));
        assert!(!accepts_json("application/json;q=0.5, application/xml"));
        assert!(!accepts_json("application/json, text/xml"));
        assert!(!accepts_json(""));
    }
}
