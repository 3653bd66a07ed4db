//! Query-protocol input: flattened, 1-indexed form keys (`Attribute.1.Name`,
//! `SendMessageBatchRequestEntry.2.MessageAttribute.1.Value.StringValue`) are rebuilt into
//! the same JSON shape the JSON protocol sends, so one typed input serves both.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::error::SqsError;

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

#[derive(Debug, Default)]
enum Node {
    #[default]
    Empty,
    Leaf(String),
    Object(BTreeMap<String, Node>),
    /// Indices are read numerically (`.10` after `.9`); gaps are tolerated.
    List(BTreeMap<u32, Node>),
}

impl Node {
    fn put(&mut self, segments: &[&str], value: String) {
        let Some((first, rest)) = segments.split_first() else {
            *self = Node::Leaf(value);
            return;
        };
        if let Ok(index) = first.parse::<u32>() {
            if !matches!(self, Node::List(_)) {
                *self = Node::List(BTreeMap::new());
            }
            if let Node::List(items) = self {
                items.entry(index).or_default().put(rest, value);
            }
        } else {
            if !matches!(self, Node::Object(_)) {
                *self = Node::Object(BTreeMap::new());
            }
            if let Node::Object(fields) = self {
                fields
                    .entry((*first).to_string())
                    .or_default()
                    .put(rest, value);
            }
        }
    }

    fn into_items(self) -> Vec<Node> {
        match self {
            Node::List(items) => items.into_values().collect(),
            _ => Vec::new(),
        }
    }

    fn take_field(&mut self, name: &str) -> Node {
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

/// Rebuilds form pairs into the JSON-protocol input object.
pub fn to_json_input(pairs: Vec<(String, String)>) -> Result<Map<String, Value>, SqsError> {
    let mut root = Node::Object(BTreeMap::new());
    for (key, value) in pairs {
        if key.is_empty() {
            continue;
        }
        let segments: Vec<&str> = key.split('.').collect();
        root.put(&segments, value);
    }
    match object_to_json(root)? {
        Value::Object(map) => Ok(map),
        _ => Ok(Map::new()),
    }
}

fn object_to_json(node: Node) -> Result<Value, SqsError> {
    let fields = match node {
        Node::Object(fields) => fields,
        other => return Ok(plain(other)),
    };
    let mut out = Map::new();
    for (key, child) in fields {
        match key.as_str() {
            "Attribute" => {
                out.insert("Attributes".into(), pairs_to_map(child, "Name", plain));
            }
            "MessageAttribute" | "MessageSystemAttribute" => {
                let value = pairs_to_map(child, "Name", |v| object_to_json(v).unwrap_or_default());
                out.insert(format!("{key}s"), value);
            }
            "Tag" => {
                let tags = pairs_to_map(child, "Key", plain);
                out.insert("Tags".into(), tags.clone());
                out.insert("tags".into(), tags);
            }
            "AttributeName" | "MessageAttributeName" | "TagKey" | "AWSAccountId" => {
                out.insert(format!("{key}s"), string_list(child));
            }
            "ActionName" => {
                out.insert("Actions".into(), string_list(child));
            }
            k if k.ends_with("BatchRequestEntry") => {
                let entries = child
                    .into_items()
                    .into_iter()
                    .map(object_to_json)
                    .collect::<Result<Vec<_>, _>>()?;
                out.insert("Entries".into(), Value::Array(entries));
            }
            // An empty list or map is sent as its bare member name with no value.
            k if EMPTY_LIST_MEMBERS.contains(&k)
                && matches!(&child, Node::Leaf(v) if v.is_empty()) =>
            {
                out.insert(key, Value::Array(Vec::new()));
            }
            k if EMPTY_MAP_MEMBERS.contains(&k)
                && matches!(&child, Node::Leaf(v) if v.is_empty()) =>
            {
                out.insert(key, Value::Object(Map::new()));
            }
            k if INTEGER_MEMBERS.contains(&k) => {
                out.insert(key.clone(), integer(&key, child)?);
            }
            _ => {
                out.insert(key, object_to_json(child)?);
            }
        }
    }
    Ok(Value::Object(out))
}

fn plain(node: Node) -> Value {
    match node {
        Node::Empty => Value::Null,
        Node::Leaf(s) => Value::String(s),
        Node::List(items) => Value::Array(items.into_values().map(plain).collect()),
        Node::Object(fields) => {
            Value::Object(fields.into_iter().map(|(k, v)| (k, plain(v))).collect())
        }
    }
}

fn integer(name: &str, node: Node) -> Result<Value, SqsError> {
    let text = node.into_string().unwrap_or_default();
    match text.trim().parse::<i64>() {
        Ok(n) => Ok(Value::from(n)),
        Err(_) => Err(SqsError::invalid_value(
            &text,
            name,
            "Must be an integer value.",
        )),
    }
}

fn string_list(node: Node) -> Value {
    Value::Array(
        node.into_items()
            .into_iter()
            .filter_map(Node::into_string)
            .map(Value::String)
            .collect(),
    )
}

/// `Entry.N.<key_tag>` / `Entry.N.Value` lists become a `{key: value}` object.
fn pairs_to_map(node: Node, key_tag: &str, value: impl Fn(Node) -> Value) -> Value {
    let mut map = Map::new();
    for mut item in node.into_items() {
        let key = item.take_field(key_tag).into_string();
        let val = item.take_field("Value");
        if let Some(key) = key {
            map.insert(key, value(val));
        }
    }
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn conv(s: &str) -> Value {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(s).unwrap();
        Value::Object(to_json_input(pairs).unwrap())
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
        let pairs = vec![("WaitTimeSeconds".to_string(), "abc".to_string())];
        let err = to_json_input(pairs).unwrap_err();
        assert_eq!(err.code, crate::error::ErrorCode::InvalidParameterValue);
    }
}
