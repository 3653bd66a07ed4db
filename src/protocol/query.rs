//! Query-protocol input: flattened, 1-indexed form keys (`Attribute.1.Name`,
//! `SendMessageBatchRequestEntry.2.MessageAttribute.1.Value.StringValue`) are rebuilt into
//! the same shape the JSON protocol sends ([`Shaped`]), so one typed input serves both.

use std::collections::BTreeMap;

use std::borrow::Cow;

use serde::de;

use super::form::Pair;
use crate::error::{ErrorCode, SqsError};

/// Members that are integers wherever they appear in the SQS model.
const INTEGER_MEMBERS: &[&str] = &[
    "DelaySeconds",
    "MaxNumberOfMessages",
    "VisibilityTimeout",
    "WaitTimeSeconds",
    "MaxResults",
    "MaxNumberOfMessagesPerSecond",
];

/// List members, by their model names: botocore sends an empty one as `Name=`.
const EMPTY_LIST_MEMBERS: &[&str] = &[
    "Entries",
    "AttributeNames",
    "MessageAttributeNames",
    "MessageSystemAttributeNames",
    "TagKeys",
    "AWSAccountIds",
    "Actions",
];

/// Map members, by their model names: an empty one arrives as `Name=`.
const EMPTY_MAP_MEMBERS: &[&str] = &[
    "Attributes",
    "Tags",
    "MessageAttributes",
    "MessageSystemAttributes",
];

/// The key segments borrow from the request's keys; only values are owned.
#[derive(Debug, Default)]
enum Node<'k> {
    #[default]
    Empty,
    Leaf(String),
    Object(BTreeMap<&'k str, Node<'k>>),
    /// Indices are read numerically (`.10` after `.9`); gaps are tolerated.
    List(BTreeMap<u32, Node<'k>>),
}

impl<'k> Node<'k> {
    /// Files `value` under the path `segments`, walking down without recursion (the depth is
    /// bounded by [`check_bounds`] anyway, but nothing here relies on it).
    fn put(&mut self, segments: &[&'k str], value: String) {
        let mut node = self;
        for segment in segments {
            node = if let Ok(index) = segment.parse::<u32>() {
                if !matches!(node, Node::List(_)) {
                    *node = Node::List(BTreeMap::new());
                }
                match node {
                    Node::List(items) => items.entry(index).or_default(),
                    _ => unreachable!("made a list above"),
                }
            } else {
                if !matches!(node, Node::Object(_)) {
                    *node = Node::Object(BTreeMap::new());
                }
                match node {
                    Node::Object(fields) => fields.entry(*segment).or_default(),
                    _ => unreachable!("made an object above"),
                }
            };
        }
        *node = Node::Leaf(value);
    }

    fn into_items(self) -> Vec<Node<'k>> {
        match self {
            Node::List(items) => items.into_values().collect(),
            _ => Vec::new(),
        }
    }

    fn take_field(&mut self, name: &str) -> Node<'k> {
        match self {
            Node::Object(fields) => fields.remove(name).unwrap_or_default(),
            _ => Node::Empty,
        }
    }

    fn into_string(self) -> Option<String> {
        match self {
            Node::Leaf(s) => Some(s),
            _ => None,
        }
    }
}

/// Query input in the JSON protocol's shape: what typed inputs deserialize from, without a
/// detour through `serde_json::Value`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Shaped {
    Null,
    Str(String),
    Int(i64),
    Seq(Vec<Shaped>),
    Map(Vec<(Cow<'static, str>, Shaped)>),
}

impl Shaped {
    /// A member of a map.
    pub(crate) fn get(&self, key: &str) -> Option<&Shaped> {
        match self {
            Shaped::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

impl<'de> de::Deserializer<'de> for Shaped {
    type Error = de::value::Error;

    fn deserialize_any<V: de::Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self {
            Shaped::Null => v.visit_unit(),
            Shaped::Str(s) => v.visit_string(s),
            Shaped::Int(i) => v.visit_i64(i),
            Shaped::Seq(items) => v.visit_seq(de::value::SeqDeserializer::new(items.into_iter())),
            Shaped::Map(entries) => v.visit_map(Members {
                entries: entries.into_iter(),
                value: None,
            }),
        }
    }

    fn deserialize_option<V: de::Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self {
            Shaped::Null => v.visit_none(),
            other => v.visit_some(other),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier
        ignored_any
    }
}

/// A map's entries, as serde reads them; a value that does not fit its member fails naming
/// the member (the outermost, as the client spelled the request).
struct Members {
    entries: std::vec::IntoIter<(Cow<'static, str>, Shaped)>,
    value: Option<(Cow<'static, str>, Shaped)>,
}

/// Separates the member a decode failure is in from serde's words for it.
const MEMBER_SEP: char = '\u{1f}';

impl<'de> de::MapAccess<'de> for Members {
    type Error = de::value::Error;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        let k = seed.deserialize(de::value::StrDeserializer::<Self::Error>::new(&key))?;
        self.value = Some((key, value));
        Ok(Some(k))
    }

    fn next_value_seed<V: de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        let (key, value) = self
            .value
            .take()
            .unwrap_or((Cow::Borrowed(""), Shaped::Null));
        seed.deserialize(value).map_err(|e| {
            let text = e.to_string();
            let inner = text
                .split_once(MEMBER_SEP)
                .map_or(text.as_str(), |(_, r)| r);
            de::Error::custom(format!("{key}{MEMBER_SEP}{inner}"))
        })
    }
}

/// The error a query input that does not fit its action's shape gets: AWS's words, naming
/// the member, never serde's (`invalid type: sequence, expected a map`).
pub(crate) fn decode_error(e: &de::value::Error) -> SqsError {
    let text = e.to_string();
    match text.split_once(MEMBER_SEP) {
        Some((member, _)) => SqsError::invalid(format!(
            "Value for parameter {member} is invalid. Reason: Malformed input."
        )),
        None => SqsError::invalid("The request input is malformed."),
    }
}

impl<'de> de::IntoDeserializer<'de, de::value::Error> for Shaped {
    type Deserializer = Shaped;
    fn into_deserializer(self) -> Shaped {
        self
    }
}

/// The most pairs a query request may hold. The largest SQS request (a ten-entry
/// SendMessageBatch, every entry with ten message attributes) has about 450.
pub(crate) const MAX_PAIRS: usize = 10_000;
/// The longest key, in bytes; SDK keys stay under 80.
pub(crate) const MAX_KEY_BYTES: usize = 512;
/// The most dot-separated segments in a key; the deepest SQS key
/// (`SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue`) has six.
pub(crate) const MAX_KEY_SEGMENTS: usize = 16;

/// Refuses a form that no SQS request can be, before any work that grows with it: too many
/// pairs, or a key too long or too deep. What is shaped afterwards is at most
/// [`MAX_KEY_SEGMENTS`] deep, so no walk over it can exhaust the stack.
pub(crate) fn check_bounds(pairs: &[Pair<'_>]) -> Result<(), SqsError> {
    let malformed = |what: String| SqsError::new(ErrorCode::MalformedQueryString, what);
    if pairs.len() > MAX_PAIRS {
        return Err(malformed(format!(
            "The query string has {} parameters; at most {MAX_PAIRS} are accepted.",
            pairs.len()
        )));
    }
    for (key, _) in pairs {
        if key.len() > MAX_KEY_BYTES {
            return Err(malformed(format!(
                "A parameter name is {} bytes long; at most {MAX_KEY_BYTES} are accepted.",
                key.len()
            )));
        }
        // A key within the byte limit is short, so counting its dots is cheap.
        let segments = key.bytes().filter(|&b| b == b'.').count() + 1;
        if segments > MAX_KEY_SEGMENTS {
            return Err(malformed(format!(
                "A parameter name has {segments} dot-separated parts; at most {MAX_KEY_SEGMENTS} are accepted."
            )));
        }
    }
    Ok(())
}

/// Rebuilds form pairs into the JSON-protocol input shape. The pairs must have passed
/// [`check_bounds`].
pub(crate) fn shape_input(pairs: Vec<Pair<'_>>) -> Result<Shaped, SqsError> {
    let (keys, values): (Vec<Cow<str>>, Vec<Cow<str>>) = pairs.into_iter().unzip();
    let mut root = Node::Object(BTreeMap::new());
    let mut segments: Vec<&str> = Vec::with_capacity(8);
    for (key, value) in keys.iter().zip(values) {
        if key.is_empty() {
            continue;
        }
        segments.clear();
        segments.extend(key.split('.'));
        root.put(&segments, value.into_owned());
    }
    shape_object(root)
}

/// Member names that appear in SQS inputs; these keys cost no allocation.
const KNOWN_MEMBERS: &[&str] = &[
    "Action",
    "Version",
    "QueueUrl",
    "QueueName",
    "QueueNamePrefix",
    "QueueOwnerAWSAccountId",
    "Id",
    "MessageBody",
    "DelaySeconds",
    "MessageGroupId",
    "MessageDeduplicationId",
    "ReceiptHandle",
    "VisibilityTimeout",
    "MaxNumberOfMessages",
    "WaitTimeSeconds",
    "ReceiveRequestAttemptId",
    "DataType",
    "StringValue",
    "BinaryValue",
    "NextToken",
    "MaxResults",
    "Label",
    "SourceArn",
    "DestinationArn",
    "TaskHandle",
];

fn owned(key: &str) -> Cow<'static, str> {
    match KNOWN_MEMBERS.iter().find(|m| **m == key) {
        Some(m) => Cow::Borrowed(m),
        None => Cow::Owned(key.to_string()),
    }
}

fn shape_object(node: Node<'_>) -> Result<Shaped, SqsError> {
    let fields = match node {
        Node::Object(fields) => fields,
        other => return Ok(plain(other)),
    };
    let mut out: Vec<(Cow<'static, str>, Shaped)> = Vec::with_capacity(fields.len() + 1);
    for (key, child) in fields {
        match key {
            // Every spelling AWS's SDKs have sent is accepted (docs/query-spellings.md): the
            // member's locationName, numbered or (boto 2) bare, and for TagQueue also the
            // model name `Tags.N`, which the Java SDKs v1/v2, Ruby v3 and rusoto send.
            "Attribute" => out.push(("Attributes".into(), pairs_to_map(child, "Name", plain))),
            "MessageAttribute" | "MessageAttributes"
                if key == "MessageAttribute" || is_entry_list(&child) =>
            {
                out.push((
                    "MessageAttributes".into(),
                    pairs_to_map(child, "Name", |v| shape_object(v).unwrap_or(Shaped::Null)),
                ))
            }
            "MessageSystemAttribute" => out.push((
                "MessageSystemAttributes".into(),
                pairs_to_map(child, "Name", |v| shape_object(v).unwrap_or(Shaped::Null)),
            )),
            "Tag" | "Tags" if key == "Tag" || is_entry_list(&child) => {
                let tags = pairs_to_map(child, "Key", plain);
                out.push(("Tags".into(), tags.clone()));
                out.push(("tags".into(), tags));
            }
            "AttributeName" => out.push(("AttributeNames".into(), string_list(child))),
            "MessageAttributeName" => {
                out.push(("MessageAttributeNames".into(), string_list(child)))
            }
            "TagKey" => out.push(("TagKeys".into(), string_list(child))),
            "AWSAccountId" => out.push(("AWSAccountIds".into(), string_list(child))),
            "ActionName" => out.push(("Actions".into(), string_list(child))),
            k if k.ends_with("BatchRequestEntry") => {
                let entries = child
                    .into_items()
                    .into_iter()
                    .map(shape_object)
                    .collect::<Result<Vec<_>, _>>()?;
                out.push(("Entries".into(), Shaped::Seq(entries)));
            }
            // An empty list or map is sent as its bare member name with no value.
            k if EMPTY_LIST_MEMBERS.contains(&k)
                && matches!(&child, Node::Leaf(v) if v.is_empty()) =>
            {
                out.push((owned(k), Shaped::Seq(Vec::new())));
            }
            k if EMPTY_MAP_MEMBERS.contains(&k)
                && matches!(&child, Node::Leaf(v) if v.is_empty()) =>
            {
                out.push((owned(k), Shaped::Map(Vec::new())));
            }
            k if INTEGER_MEMBERS.contains(&k) => out.push((owned(k), integer(k, child)?)),
            k => out.push((owned(k), shape_object(child)?)),
        }
    }
    Ok(Shaped::Map(out))
}

fn plain(node: Node<'_>) -> Shaped {
    match node {
        Node::Empty => Shaped::Null,
        Node::Leaf(s) => Shaped::Str(s),
        Node::List(items) => Shaped::Seq(items.into_values().map(plain).collect()),
        Node::Object(fields) => Shaped::Map(
            fields
                .into_iter()
                .map(|(k, v)| (owned(k), plain(v)))
                .collect(),
        ),
    }
}

fn integer(name: &str, node: Node<'_>) -> Result<Shaped, SqsError> {
    let text = node.into_string().unwrap_or_default();
    match text.trim().parse::<i64>() {
        Ok(n) => Ok(Shaped::Int(n)),
        Err(_) => Err(SqsError::invalid_value(
            &text,
            name,
            "Must be an integer value.",
        )),
    }
}

/// `Name.N` values as a list; a bare `Name=value` (boto 2) is a list of that one value, and
/// a bare `Name=` (how the Go v1, JS v2, Java v2 and PHP SDKs send an empty list) is empty.
fn string_list(node: Node<'_>) -> Shaped {
    match node {
        Node::Leaf(v) if v.is_empty() => Shaped::Seq(Vec::new()),
        Node::Leaf(v) => Shaped::Seq(vec![Shaped::Str(v)]),
        other => Shaped::Seq(
            other
                .into_items()
                .into_iter()
                .filter_map(Node::into_string)
                .map(Shaped::Str)
                .collect(),
        ),
    }
}

/// Whether a member holds numbered entries (`Tags.1.Key=…`), not a bare value (`Tags=`).
fn is_entry_list(node: &Node<'_>) -> bool {
    matches!(node, Node::List(_))
}

/// `Entry.N.<key_tag>` / `Entry.N.Value` lists become a `{key: value}` map; so does one
/// unnumbered entry (`Attribute.Name=…&Attribute.Value=…`, as boto 2 sends it).
fn pairs_to_map<'k>(node: Node<'k>, key_tag: &str, value: impl Fn(Node<'k>) -> Shaped) -> Shaped {
    let mut map = Vec::new();
    let items = match node {
        one @ Node::Object(_) => vec![one],
        other => other.into_items(),
    };
    for mut item in items {
        let key = item.take_field(key_tag).into_string();
        let val = item.take_field("Value");
        if let Some(key) = key {
            map.push((Cow::Owned(key), value(val)));
        }
    }
    Shaped::Map(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn conv(s: &str) -> Value {
        use serde::Deserialize;
        let pairs = crate::protocol::form::parse(s.as_bytes());
        Value::deserialize(shape_input(pairs).unwrap()).unwrap()
    }

    #[test]
    fn flattened_members() {
        let v = conv(
            "Action=SendMessageBatch&QueueUrl=u\
             &SendMessageBatchRequestEntry.10.Id=b&SendMessageBatchRequestEntry.10.MessageBody=y\
             &SendMessageBatchRequestEntry.2.Id=a&SendMessageBatchRequestEntry.2.MessageBody=x\
             &SendMessageBatchRequestEntry.2.DelaySeconds=5\
             &SendMessageBatchRequestEntry.2.MessageAttribute.1.Name=Foo\
             &SendMessageBatchRequestEntry.2.MessageAttribute.1.Value.DataType=String\
             &SendMessageBatchRequestEntry.2.MessageAttribute.1.Value.StringValue=Bar",
        );
        assert_eq!(
            v,
            json!({"Action":"SendMessageBatch","QueueUrl":"u","Entries":[
                {"Id":"a","MessageBody":"x","DelaySeconds":5,
                 "MessageAttributes":{"Foo":{"DataType":"String","StringValue":"Bar"}}},
                {"Id":"b","MessageBody":"y"}]})
        );
    }

    #[test]
    fn every_spelling_an_sdk_sends() {
        // TagQueue as the Java SDKs v1/v2, Ruby v3 and rusoto send it (docs/query-spellings.md).
        let v = conv(
            "Action=TagQueue&QueueUrl=u&Tags.1.Key=a&Tags.1.Value=1&Tags.2.Key=b&Tags.2.Value=2",
        );
        assert_eq!(v["Tags"], json!({"a":"1","b":"2"}));
        // boto 2's unnumbered forms.
        let v = conv(
            "AttributeName=All&Attribute.Name=DelaySeconds&Attribute.Value=5\
             &AWSAccountId=123456789012&ActionName=SendMessage",
        );
        assert_eq!(v["AttributeNames"], json!(["All"]));
        assert_eq!(v["Attributes"], json!({"DelaySeconds":"5"}));
        assert_eq!(v["AWSAccountIds"], json!(["123456789012"]));
        assert_eq!(v["Actions"], json!(["SendMessage"]));
        // Empty lists and maps under their locationName (Go v1, JS v2, Java v2, PHP).
        let v =
            conv("TagKey=&AttributeName=&MessageAttributeName=&Tag=&Attribute=&MessageAttribute=");
        assert_eq!(v["TagKeys"], json!([]));
        assert_eq!(v["AttributeNames"], json!([]));
        assert_eq!(v["MessageAttributeNames"], json!([]));
        assert_eq!(v["Tags"], json!({}));
        assert_eq!(v["Attributes"], json!({}));
        assert_eq!(v["MessageAttributes"], json!({}));
        // Message attributes under their model name, as API Gateway templates send them.
        let v = conv(
            "MessageAttributes.1.Name=k&MessageAttributes.1.Value.DataType=String\
             &MessageAttributes.1.Value.StringValue=v",
        );
        assert_eq!(
            v["MessageAttributes"],
            json!({"k":{"DataType":"String","StringValue":"v"}})
        );
    }

    #[test]
    fn a_value_of_the_wrong_shape_is_refused_naming_its_member() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(rename_all = "PascalCase")]
        #[allow(dead_code)]
        struct Input {
            queue_url: Option<String>,
            tags: Option<std::collections::HashMap<String, String>>,
        }
        let parse = |s: &str| {
            let pairs = crate::protocol::form::parse(s.as_bytes());
            crate::protocol::Params::Query(shape_input(pairs).unwrap()).parse::<Input>()
        };
        let e = parse("QueueUrl.1=a&QueueUrl.2=b").unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidParameterValue);
        assert_eq!(
            e.message,
            "Value for parameter QueueUrl is invalid. Reason: Malformed input."
        );
        let e = parse("QueueUrl=u&Tags=x").unwrap_err();
        assert_eq!(
            e.message,
            "Value for parameter Tags is invalid. Reason: Malformed input."
        );
        assert!(parse("QueueUrl=u&Tags.1.Key=k&Tags.1.Value=v").is_ok());
    }

    #[test]
    fn maps_and_lists() {
        let v = conv(
            "Attribute.1.Name=DelaySeconds&Attribute.1.Value=5&AttributeName.1=All\
             &AttributeName.2=SenderId&MessageAttributeName.1=Foo&MaxNumberOfMessages=10\
             &Tag.1.Key=k&Tag.1.Value=v",
        );
        assert_eq!(v["Attributes"], json!({"DelaySeconds":"5"}));
        assert_eq!(v["AttributeNames"], json!(["All", "SenderId"]));
        assert_eq!(v["MessageAttributeNames"], json!(["Foo"]));
        assert_eq!(v["MaxNumberOfMessages"], json!(10));
        assert_eq!(v["tags"], json!({"k":"v"}));
    }

    #[test]
    fn empty_members() {
        let v = conv("Action=SendMessageBatch&Entries=&AttributeNames=&Attributes=");
        assert_eq!(v["Entries"], json!([]));
        assert_eq!(v["AttributeNames"], json!([]));
        assert_eq!(v["Attributes"], json!({}));
    }

    #[test]
    fn bad_integer() {
        let pairs = vec![("WaitTimeSeconds".into(), "abc".into())];
        let err = shape_input(pairs).unwrap_err();
        assert_eq!(err.code, crate::error::ErrorCode::InvalidParameterValue);
    }

    #[test]
    fn bounds_refuse_deep_long_and_numerous_keys() {
        let code = |form: &str| {
            check_bounds(&crate::protocol::form::parse(form.as_bytes()))
                .err()
                .map(|e| e.code)
        };
        let deepest = "SendMessageBatchRequestEntry.10.MessageAttribute.10.Value.StringValue=x";
        assert_eq!(code(deepest), None);
        let deep = format!("Action=ListQueues&{}a=x", "a.".repeat(3000));
        assert_eq!(code(&deep), Some(ErrorCode::MalformedQueryString));
        let numeric = format!("Action=ListQueues&{}1=x", "1.".repeat(MAX_KEY_SEGMENTS));
        assert_eq!(code(&numeric), Some(ErrorCode::MalformedQueryString));
        let long = format!("Action=ListQueues&{}=x", "k".repeat(MAX_KEY_BYTES + 1));
        assert_eq!(code(&long), Some(ErrorCode::MalformedQueryString));
        let many = "a=1&".repeat(MAX_PAIRS + 1);
        assert_eq!(code(&many), Some(ErrorCode::MalformedQueryString));
        assert_eq!(code(&"a=1&".repeat(MAX_PAIRS)), None);
    }

    #[test]
    fn the_deepest_allowed_key_shapes_without_trouble() {
        let key = vec!["a"; MAX_KEY_SEGMENTS].join(".");
        let form = format!("{key}=v");
        let pairs = crate::protocol::form::parse(form.as_bytes());
        check_bounds(&pairs).unwrap();
        let mut shaped = shape_input(pairs).unwrap();
        for _ in 0..MAX_KEY_SEGMENTS {
            shaped = shaped.get("a").cloned().expect("one level per segment");
        }
        assert_eq!(shaped, Shaped::Str("v".into()));
    }
}
