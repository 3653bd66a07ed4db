//! GetQueueAttributes: `All` or named attributes, with live message counts.

use serde::{Deserialize, Serialize, Serializer};

use crate::api::attributes::render;
use crate::api::Context;
use crate::error::SqsError;
use crate::protocol::{Member, Shape, XmlResult, XmlWriter};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Input {
    pub queue_url: Option<String>,
    pub attribute_names: Option<Vec<String>>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Output {
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "as_map")]
    pub attributes: Vec<(&'static str, String)>,
}

/// Serializes name/value pairs as a JSON object.
pub(crate) fn as_map<S: Serializer, K: AsRef<str>, V: AsRef<str>>(
    pairs: &[(K, V)],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_map(pairs.iter().map(|(k, v)| (k.as_ref(), v.as_ref())))
}

impl XmlResult for Output {
    fn write_xml(&self, w: &mut XmlWriter) {
        w.name_value(
            "Attribute",
            "Name",
            self.attributes.iter().map(|(k, v)| (*k, v.as_str())),
        );
    }
    /// A list of `{"Name","Value"}`, unlike a message's `Attributes` object (AWS.jl reads
    /// it so against AWS; LocalStack's AWS-validated test agrees).
    const SHAPE: Option<&'static Shape> = Some(&Shape::Struct(&[Member::new(
        "Attributes",
        Shape::Pairs("Name"),
    )]));
}

pub(crate) fn handle(ctx: &Context, input: Input) -> Result<Output, SqsError> {
    let queue = ctx.queue(input.queue_url.as_deref())?;
    let names = input.attribute_names.unwrap_or_default();
    // Under realism: the settings in effect and counts that lag, as GetQueueAttributes shows.
    let snap = queue.reported(ctx.engine.now_ms());
    Ok(Output {
        attributes: render(&snap, &queue.arn, &names)?,
    })
}
