//! CreateQueue: validates the name and attributes, and is idempotent for an existing queue
//! as long as every supplied attribute equals its current value.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::api::attributes::{apply, setting_value};
use crate::api::{engine_error, required, Context};
use crate::engine::QueueSettings;
use crate::error::{ErrorCode, SqsError};
use crate::protocol::{Member, Shape, XmlResult, XmlWriter};

use super::tags::check_new_tags;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Input {
    pub queue_name: Option<String>,
    pub attributes: Option<HashMap<String, String>>,
    #[serde(rename = "tags")]
    pub tags: Option<HashMap<String, String>>,
}

/// The reply of CreateQueue and GetQueueUrl.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct QueueUrlOutput {
    pub queue_url: String,
}

impl XmlResult for QueueUrlOutput {
    fn write_xml(&self, w: &mut XmlWriter) {
        w.elem("QueueUrl", &self.queue_url);
    }
    const SHAPE: Option<&'static Shape> = Some(&QUEUE_URL);
}

static QUEUE_URL: Shape = Shape::Struct(&[Member::scalar("QueueUrl")]);

/// Checks a queue name: its characters and length, and that a FIFO queue's ends in `.fifo`.
pub(crate) fn check_queue_name(name: &str, fifo: bool) -> Result<(), SqsError> {
    let base = name.strip_suffix(".fifo").unwrap_or(name);
    let chars_ok = !base.is_empty()
        && name.len() <= 80
        && base
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if fifo != name.ends_with(".fifo") || (fifo && !chars_ok) {
        return Err(SqsError::invalid(
            "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length.",
        ));
    }
    if !chars_ok {
        return Err(SqsError::invalid(
            "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length",
        ));
    }
    Ok(())
}

pub(crate) async fn handle(ctx: &Context, input: Input) -> Result<QueueUrlOutput, SqsError> {
    ctx.require_service_endpoint()?;
    let name = required(&input.queue_name, "QueueName")?;
    let attrs = input.attributes.unwrap_or_default();
    let fifo = match attrs.get("FifoQueue") {
        Some(v) if v.eq_ignore_ascii_case("true") => true,
        Some(v) if v.eq_ignore_ascii_case("false") => false,
        Some(_) => {
            return Err(SqsError::new(
                ErrorCode::InvalidAttributeValue,
                "Invalid value for the parameter FifoQueue.",
            ))
        }
        None => false,
    };
    // `FifoQueue=false` on a standard name is reported as an unknown attribute by `apply`.
    check_queue_name(
        name,
        fifo || (name.ends_with(".fifo") && attrs.contains_key("FifoQueue")),
    )?;
    let mut settings = QueueSettings {
        fifo_queue: fifo,
        ..QueueSettings::default()
    };
    apply(&mut settings, &attrs, fifo)?;
    if attrs.contains_key("RedrivePolicy") {
        ctx.check_redrive(&ctx.own_queue_id(name), &settings)
            .await?;
    }
    let tags = input.tags.unwrap_or_default();
    check_new_tags(name, &tags, tags.len())?;

    if ctx.engine.queue(&ctx.own_queue_id(name)).is_none() {
        // A new queue holds memory of its own (its settings and tags above all): past
        // --max-stored-bytes it is refused as a send would be.
        let footprint = crate::engine::queue_footprint(&settings, &tags);
        ctx.engine.admit_bytes(footprint).map_err(engine_error)?;
    }
    let (queue, created) = ctx
        .engine
        .create_queue(ctx.own_queue_id(name), settings)
        .map_err(engine_error)?;
    if created {
        queue.update_tags(|t| t.extend(tags));
    } else {
        let current = queue.settings();
        let mut candidate = current.clone();
        apply(&mut candidate, &attrs, current.fifo_queue)?;
        let mut supplied: Vec<&String> = attrs.keys().collect();
        supplied.sort();
        if let Some(name) = supplied
            .into_iter()
            .find(|n| setting_value(&candidate, n) != setting_value(&current, n))
        {
            return Err(SqsError::new(
                ErrorCode::QueueNameExists,
                format!(
                    "A queue already exists with the same name and a different value for attribute {name}"
                ),
            ));
        }
    }
    Ok(QueueUrlOutput {
        queue_url: ctx.queue_url(&queue.id),
    })
}
