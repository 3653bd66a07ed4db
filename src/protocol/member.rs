//! One top-level member of a JSON body, read without building the rest: cluster mode reads
//! the queue a request names before the request is decoded (on the node it arrives at),
//! and a `serde_json::Value` of a whole SendMessageBatch (ten bodies and their attributes)
//! cost as much as decoding the request itself. Other members are checked and skipped.

use std::fmt;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};

/// The string value of top-level member `name` of the JSON object `body`; `None` when the
/// body is not a JSON object, lacks the member, or its value is not a string. A member named
/// twice counts by its last value, as in a parsed `serde_json::Map`.
pub(crate) fn string_member(body: &[u8], name: &str) -> Option<String> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let found = serde::Deserializer::deserialize_map(&mut de, Find(name)).ok()?;
    de.end().ok()?;
    found?.as_str().map(str::to_string)
}

/// Looks for one member of an object.
struct Find<'n>(&'n str);

impl<'de> Visitor<'de> for Find<'_> {
    type Value = Option<serde_json::Value>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(is_it) = map.next_key_seed(Key(self.0))? {
            if is_it {
                found = Some(map.next_value::<serde_json::Value>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// Whether a key is the member looked for, read without copying it.
struct Key<'n>(&'n str);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = bool;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<bool, E> {
        Ok(key == self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::string_member;

    /// What reading the whole body as a map gives: the behaviour this keeps.
    fn by_map(body: &[u8], name: &str) -> Option<String> {
        let map: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(body).ok()?;
        map.get(name)?.as_str().map(str::to_string)
    }

    #[test]
    fn finds_the_member_as_a_parsed_map_would() {
        let bodies: &[&[u8]] = &[
            br#"{"QueueUrl":"http://h/1/q","Entries":[{"Id":"a","MessageBody":"x"}]}"#,
            br#"{"Entries":[{"QueueUrl":"inner"}],"QueueUrl":"outer"}"#,
            br#"{"QueueUrl":"first","QueueUrl":"last"}"#,
            br#"{"QueueUrl":5}"#,
            br#"{"QueueUrl":{"a":"b"}}"#,
            br#"{"Queue\u0055rl":"escaped name","x":"\"q\""}"#,
            br#"{"QueueUrl":"caf\u00e9"}"#,
            br#"{}"#,
            br#"  {"QueueUrl" : "spaced"}  "#,
            br#"{"QueueUrl":"x"} trailing"#,
            br#"{"QueueUrl":"x""#,
            br#"{"QueueUrl":"x",}"#,
            br#"["QueueUrl","x"]"#,
            b"not json",
            b"",
        ];
        for body in bodies {
            assert_eq!(
                string_member(body, "QueueUrl"),
                by_map(body, "QueueUrl"),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        assert_eq!(
            string_member(br#"{"QueueUrl":"http://h/1/q"}"#, "QueueUrl").as_deref(),
            Some("http://h/1/q")
        );
    }
}
