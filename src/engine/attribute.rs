//! Message attributes as the engine keeps them: a data type and a string or binary value.

/// The value of one message attribute.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum AttributeData {
    /// `String` and `Number` types (and their custom subtypes).
    String(String),
    /// `Binary` types: raw bytes.
    Binary(Vec<u8>),
}

/// One message attribute: its full data type (e.g. `Number.int`) and value.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct AttributeValue {
    pub data_type: String,
    pub data: AttributeData,
}

impl AttributeValue {
    /// Bytes this attribute counts towards the message size (data type plus value).
    pub(crate) fn size(&self) -> usize {
        self.data_type.len()
            + match &self.data {
                AttributeData::String(s) => s.len(),
                AttributeData::Binary(b) => b.len(),
            }
    }
}

/// Named attributes, sorted by name bytes (the order the MD5 digest needs).
pub(crate) type Attributes = Vec<(String, AttributeValue)>;
