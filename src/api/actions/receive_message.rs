//! ReceiveMessage: validates a short or long poll, has the engine run it (the wait itself
//! is `engine::wait`), and renders the messages with the attributes asked for.

use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Deserialize, Serialize, Serializer};

use crate::api::message_attributes::NameFilter;
use crate::api::{check_range, engine_error, Context};
use crate::engine::digest::{md5_of_attributes, Digest16};
use crate::engine::message::Payload;
use crate::engine::realism::Family;
use crate::engine::{AttributeData, AttributeValue, ReceiveRequest, ReceivedMessage};
use crate::error::SqsError;
use crate::protocol::{AsStr, Empty, Member, Shape, XmlResult, XmlWriter};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Input {
    pub queue_url: Option<String>,
    pub attribute_names: Option<Vec<String>>,
    pub message_system_attribute_names: Option<Vec<String>>,
    pub message_attribute_names: Option<Vec<String>>,
    pub max_number_of_messages: Option<i64>,
    pub visibility_timeout: Option<i64>,
    pub wait_time_seconds: Option<i64>,
    pub receive_request_attempt_id: Option<String>,
}

/// Which system attributes to return.
#[derive(Debug, Default)]
struct SystemFilter {
    all: bool,
    names: Vec<String>,
}

impl SystemFilter {
    fn wants(&self, name: &str) -> bool {
        self.all || self.names.iter().any(|n| n == name)
    }
}

/// One message of the reply.
#[derive(Debug)]
pub(crate) struct OutMessage {
    payload: Arc<Payload>,
    receipt_handle: String,
    attributes: Vec<(&'static str, String)>,
    /// Indices into `payload.attributes` of the returned message attributes.
    selected: Vec<usize>,
    md5_of_attributes: Option<Digest16>,
}

impl OutMessage {
    fn build(m: ReceivedMessage, system: &SystemFilter, names: &NameFilter) -> OutMessage {
        let p = &m.payload;
        let mut attributes = Vec::new();
        let mut add = |name: &'static str, value: Option<String>| {
            if let Some(v) = value {
                if system.wants(name) {
                    attributes.push((name, v));
                }
            }
        };
        add("SenderId", Some(p.sender_id.to_string()));
        add("SentTimestamp", Some(p.sent_ms.to_string()));
        add("ApproximateReceiveCount", Some(m.receive_count.to_string()));
        add(
            "ApproximateFirstReceiveTimestamp",
            Some(m.first_receive_ms.to_string()),
        );
        add("AWSTraceHeader", p.aws_trace_header().map(str::to_string));
        add("SequenceNumber", p.sequence_number().map(str::to_string));
        add(
            "MessageDeduplicationId",
            p.deduplication_id().map(str::to_string),
        );
        add("MessageGroupId", p.group_id.as_deref().map(str::to_string));
        add(
            "DeadLetterQueueSourceArn",
            p.dead_letter_source_arn().map(str::to_string),
        );

        let selected: Vec<usize> = if names.is_empty() {
            Vec::new()
        } else {
            (0..p.attributes().len())
                .filter(|&i| names.matches(&p.attributes()[i].0))
                .collect()
        };
        let md5_of_attributes = if selected.len() == p.attributes().len() {
            p.md5_of_attributes()
        } else {
            md5_of_attributes(selected.iter().map(|&i| {
                let (n, v) = &p.attributes()[i];
                (n.as_str(), v)
            }))
        };
        OutMessage {
            payload: Arc::clone(&m.payload),
            receipt_handle: m.receipt_handle,
            attributes,
            selected,
            md5_of_attributes,
        }
    }

    fn selected_attributes(&self) -> impl Iterator<Item = &(String, AttributeValue)> {
        self.selected.iter().map(|&i| &self.payload.attributes()[i])
    }
}

/// A message attribute value in JSON: `{"StringValue"|"BinaryValue": …, "DataType": …}`.
struct JsonAttrValue<'a>(&'a AttributeValue);

impl Serialize for JsonAttrValue<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("MessageAttributeValue", 2)?;
        match &self.0.data {
            AttributeData::String(v) => st.serialize_field("StringValue", v)?,
            AttributeData::Binary(b) => st.serialize_field("BinaryValue", &STANDARD.encode(b))?,
        }
        st.serialize_field("DataType", &self.0.data_type)?;
        st.end()
    }
}

impl Serialize for OutMessage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let p = &self.payload;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("MessageId", &AsStr(p.message_id))?;
        m.serialize_entry("ReceiptHandle", &self.receipt_handle)?;
        m.serialize_entry("MD5OfBody", &AsStr(p.md5_of_body))?;
        m.serialize_entry("Body", &p.body)?;
        if !self.attributes.is_empty() {
            m.serialize_entry("Attributes", &AttrMap(&self.attributes))?;
        }
        if let Some(md5) = &self.md5_of_attributes {
            m.serialize_entry("MD5OfMessageAttributes", &AsStr(md5))?;
            m.serialize_entry("MessageAttributes", &MessageAttrMap(self))?;
        }
        m.end()
    }
}

struct AttrMap<'a>(&'a [(&'static str, String)]);

impl Serialize for AttrMap<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (*k, v)))
    }
}

struct MessageAttrMap<'a>(&'a OutMessage);

impl Serialize for MessageAttrMap<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(
            self.0
                .selected_attributes()
                .map(|(n, v)| (n.as_str(), JsonAttrValue(v))),
        )
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Output {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<OutMessage>,
}

impl XmlResult for Output {
    fn write_xml(&self, w: &mut XmlWriter) {
        for m in &self.messages {
            let p = &m.payload;
            w.open("Message");
            w.elem_plain("MessageId", p.message_id);
            w.elem("ReceiptHandle", &m.receipt_handle);
            w.elem_plain("MD5OfBody", p.md5_of_body);
            w.elem("Body", &p.body);
            w.name_value(
                "Attribute",
                "Name",
                m.attributes.iter().map(|(k, v)| (*k, v.as_str())),
            );
            if let Some(md5) = &m.md5_of_attributes {
                w.elem_plain("MD5OfMessageAttributes", md5);
                for (name, v) in m.selected_attributes() {
                    w.open("MessageAttribute");
                    w.elem("Name", name);
                    w.open("Value");
                    match &v.data {
                        AttributeData::String(s) => w.elem("StringValue", s),
                        AttributeData::Binary(b) => w.elem("BinaryValue", &STANDARD.encode(b)),
                    }
                    w.elem("DataType", &v.data_type);
                    w.close("Value");
                    w.close("MessageAttribute");
                }
            }
            w.close("Message");
        }
    }
    const SHAPE: Option<&'static Shape> = Some(&Shape::Struct(&[Member {
        from: "Messages",
        name: "messages",
        shape: Shape::List(&MESSAGE, Empty::Null),
    }]));
}

/// A received message, as captured from AWS: every member present, `Attributes` an object.
static MESSAGE: Shape = Shape::Struct(&[
    Member::new("Attributes", Shape::Map(&Shape::Scalar)),
    Member::scalar("Body"),
    Member::scalar("MD5OfBody"),
    Member::scalar("MD5OfMessageAttributes"),
    Member::new("MessageAttributes", Shape::Map(&ATTRIBUTE_VALUE)),
    Member::scalar("MessageId"),
    Member::scalar("ReceiptHandle"),
]);

/// A message attribute value. Unconfirmed (no capture): every member present, the list
/// members `[]` as AWS's model defaults them (as in Lambda's SQS events).
static ATTRIBUTE_VALUE: Shape = Shape::Struct(&[
    Member::new("BinaryListValues", Shape::List(&Shape::Scalar, Empty::List)),
    Member::scalar("BinaryValue"),
    Member::scalar("DataType"),
    Member::new("StringListValues", Shape::List(&Shape::Scalar, Empty::List)),
    Member::scalar("StringValue"),
]);

impl Output {
    /// A reply that lists messages without receiving them (LocalStack's developer endpoint):
    /// every system and message attribute, each message's `extra` attributes after them,
    /// and `receipt_handle` for all.
    pub(crate) fn listing(
        messages: impl IntoIterator<Item = (ReceivedMessage, Vec<(&'static str, String)>)>,
    ) -> Output {
        let system = SystemFilter {
            all: true,
            names: Vec::new(),
        };
        let names = NameFilter::new(&["All".to_string()]);
        let messages = messages
            .into_iter()
            .map(|(m, extra)| {
                let mut out = OutMessage::build(m, &system, &names);
                out.attributes.extend(extra);
                out
            })
            .collect();
        Output { messages }
    }
}

pub(crate) async fn handle(ctx: &Context, input: Input) -> Result<Output, SqsError> {
    let queue = ctx.queue(input.queue_url.as_deref())?;
    let max = check_range(
        input.max_number_of_messages,
        "MaxNumberOfMessages",
        1,
        10,
        "Must be between 1 and 10, if provided.",
    )?
    .unwrap_or(1) as usize;
    let visibility = check_range(
        input.visibility_timeout,
        "VisibilityTimeout",
        0,
        43_200,
        "Must be >= 0 and <= 43200, if provided.",
    )?
    .map(|v| v as u32);
    let wait = check_range(
        input.wait_time_seconds,
        "WaitTimeSeconds",
        0,
        20,
        "Must be >= 0 and <= 20, if provided.",
    )?;
    crate::api::admit(ctx, &queue, Family::Receive)?;
    let (default_wait_s, fifo) =
        queue.with_settings(|s| (s.receive_message_wait_time_seconds, s.fifo_queue));
    let wait_s = wait.map_or(default_wait_s as u64, |w| w as u64);
    let mut system = SystemFilter::default();
    for n in input
        .attribute_names
        .iter()
        .flatten()
        .chain(input.message_system_attribute_names.iter().flatten())
    {
        if n == "All" {
            system.all = true;
        } else {
            system.names.push(n.clone());
        }
    }
    let names = NameFilter::new(input.message_attribute_names.as_deref().unwrap_or_default());
    let attempt_id = match input.receive_request_attempt_id {
        Some(id) if fifo => {
            let ok = !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_graphic());
            if !ok {
                return Err(SqsError::invalid_value(
                    &id,
                    "ReceiveRequestAttemptId",
                    "ReceiveRequestAttemptId can only include alphanumeric and punctuation characters. 1 to 128 in length.",
                ));
            }
            Some(id)
        }
        // Standard queues ignore it.
        _ => None,
    };
    let req = ReceiveRequest {
        max_messages: max,
        visibility_timeout: visibility,
        max_in_flight: ctx.engine.settings().max_in_flight,
        attempt_id,
        short_poll: wait_s == 0,
    };
    let received = ctx
        .engine
        .receive_waiting(&queue, req, Duration::from_secs(wait_s))
        .await
        .map_err(engine_error)?;
    Ok(Output {
        messages: received
            .into_iter()
            .map(|m| OutMessage::build(m, &system, &names))
            .collect(),
    })
}
