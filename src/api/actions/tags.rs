//! TagQueue, UntagQueue and ListQueueTags (and the checks CreateQueue's `tags` share).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::api::{Context, Empty};
use crate::error::SqsError;
use crate::protocol::{Member, Shape, XmlResult, XmlWriter};

use super::get_queue_attributes::as_map;

/// Most tags a queue may carry.
pub(crate) const MAX_TAGS: usize = 50;

fn valid_tag_text(s: &str) -> bool {
    s.chars().all(|c| {
        c.is_alphanumeric()
            || c == ' '
            || matches!(c, '_' | '.' | ':' | '/' | '=' | '+' | '-' | '@')
    })
}

/// Checks tags about to be set on queue `queue`; `total` is how many it would then have.
pub(crate) fn check_new_tags(
    queue: &str,
    tags: &HashMap<String, String>,
    total: usize,
) -> Result<(), SqsError> {
    for (k, v) in tags {
        if k.is_empty() || k.chars().count() > 128 || !valid_tag_text(k) {
            return Err(SqsError::invalid(format!(
                "Tag key '{k}' is invalid. Keys are 1 to 128 Unicode letters, digits, white space, or _ . : / = + - @."
            )));
        }
        if k.to_ascii_lowercase().starts_with("aws:") {
            return Err(SqsError::invalid(format!(
                "Tag key '{k}' is invalid. The aws: prefix is reserved."
            )));
        }
        if v.chars().count() > 256 || !valid_tag_text(v) {
            return Err(SqsError::invalid(format!(
                "Tag value for key '{k}' is invalid. Values are 0 to 256 Unicode letters, digits, white space, or _ . : / = + - @."
            )));
        }
    }
    if total > MAX_TAGS {
        // AWS documents no text for it; this is the one moto and Yandex's SQS-compatible
        // YMQ both give, counted over the queue's tags after the change, as YMQ counts
        // (docs/fidelity-research.md, point 5).
        return Err(SqsError::invalid(format!(
            "Too many tags added for queue {queue}."
        )));
    }
    Ok(())
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct TagInput {
    pub queue_url: Option<String>,
    pub tags: Option<HashMap<String, String>>,
}

pub(crate) fn tag(ctx: &Context, input: TagInput) -> Result<Empty, SqsError> {
    let queue = ctx.queue(input.queue_url.as_deref())?;
    // An empty map counts as absent (moto does the same; AWS's own answer is unrecorded).
    let tags = input
        .tags
        .filter(|t| !t.is_empty())
        .ok_or_else(|| SqsError::missing("Tags"))?;
    let adding = crate::engine::tags_footprint(&tags);
    ctx.engine
        .admit_bytes(adding)
        .map_err(crate::api::engine_error)?;
    queue.update_tags(|current| {
        let new_keys = tags.keys().filter(|k| !current.contains_key(*k)).count();
        check_new_tags(queue.name(), &tags, current.len() + new_keys)?;
        current.extend(tags);
        Ok(())
    })?;
    Ok(Empty {})
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct UntagInput {
    pub queue_url: Option<String>,
    pub tag_keys: Option<Vec<String>>,
}

pub(crate) fn untag(ctx: &Context, input: UntagInput) -> Result<Empty, SqsError> {
    let queue = ctx.queue(input.queue_url.as_deref())?;
    let keys = input.tag_keys.ok_or_else(|| SqsError::missing("TagKeys"))?;
    // AWS checks the keys' length, and an empty list fails that check (recorded through
    // boto, getmoto/moto#1686).
    if keys.is_empty() || keys.iter().any(|k| k.is_empty() || k.chars().count() > 128) {
        return Err(SqsError::invalid(
            "Tag keys must be between 1 and 128 characters in length.",
        ));
    }
    queue.update_tags(|current| {
        for k in &keys {
            current.remove(k);
        }
    });
    Ok(Empty {})
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct ListInput {
    pub queue_url: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct ListOutput {
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "as_map")]
    pub tags: Vec<(String, String)>,
}

impl XmlResult for ListOutput {
    fn write_xml(&self, w: &mut XmlWriter) {
        w.name_value(
            "Tag",
            "Key",
            self.tags.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        );
    }
    /// Unconfirmed: no capture of this reply exists. A list of `{"Key","Value"}`, as the
    /// XML's `<Tag>` entries and GetQueueAttributes' `Attributes` suggest.
    const SHAPE: Option<&'static Shape> =
        Some(&Shape::Struct(&[Member::new("Tags", Shape::Pairs("Key"))]));
}

pub(crate) fn list(ctx: &Context, input: ListInput) -> Result<ListOutput, SqsError> {
    let queue = ctx.queue(input.queue_url.as_deref())?;
    Ok(ListOutput {
        tags: queue.tags().into_iter().collect(),
    })
}
