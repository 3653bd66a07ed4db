//! The MD5 digests SQS returns and SDKs verify: of the body, and of message (or message
//! system) attributes in AWS's length-prefixed encoding.

use md5::{Digest, Md5};

use super::attribute::{AttributeData, AttributeValue};

/// An MD5 digest; shown as 32 lowercase hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Digest16(pub [u8; 16]);

impl Digest16 {
    /// The hex form, written into `buf` (no allocation).
    pub(crate) fn encode<'b>(&self, buf: &'b mut [u8; 32]) -> &'b str {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        for (i, b) in self.0.iter().enumerate() {
            buf[2 * i] = DIGITS[(b >> 4) as usize];
            buf[2 * i + 1] = DIGITS[(b & 0xf) as usize];
        }
        // Only ASCII hex digits were written.
        std::str::from_utf8(buf).unwrap_or_default()
    }
}

impl std::fmt::Display for Digest16 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.encode(&mut [0; 32]))
    }
}

/// MD5 of `data`.
pub(crate) fn md5(data: &[u8]) -> Digest16 {
    Digest16(Md5::digest(data).into())
}

/// Lowercase hex MD5 of `data`.
#[cfg(test)]
pub(crate) fn md5_hex(data: &[u8]) -> String {
    md5(data).to_string()
}

/// MD5 of attributes, which must be sorted by name bytes. `None` when there are none.
pub(crate) fn md5_of_attributes<'a, I>(attributes: I) -> Option<Digest16>
where
    I: IntoIterator<Item = (&'a str, &'a AttributeValue)>,
{
    let mut hasher = Md5::new();
    let mut any = false;
    for (name, value) in attributes {
        any = true;
        let mut field = |bytes: &[u8]| {
            hasher.update((bytes.len() as u32).to_be_bytes());
            hasher.update(bytes);
        };
        field(name.as_bytes());
        field(value.data_type.as_bytes());
        match &value.data {
            AttributeData::String(s) => {
                hasher.update([1u8]);
                hasher.update((s.len() as u32).to_be_bytes());
                hasher.update(s.as_bytes());
            }
            AttributeData::Binary(b) => {
                hasher.update([2u8]);
                hasher.update((b.len() as u32).to_be_bytes());
                hasher.update(b);
            }
        }
    }
    any.then(|| Digest16(hasher.finalize().into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(name: &str, dt: &str, v: &str) -> (String, AttributeValue) {
        (
            name.to_string(),
            AttributeValue {
                data_type: dt.to_string(),
                data: AttributeData::String(v.to_string()),
            },
        )
    }

    fn md5(attrs: &[(String, AttributeValue)]) -> String {
        md5_of_attributes(attrs.iter().map(|(n, v)| (n.as_str(), v)))
            .unwrap()
            .to_string()
    }

    #[test]
    fn reference_vectors() {
        assert_eq!(md5_hex(b"hello"), "5d41402abc4b2a76b9719d911017c592");
        assert_eq!(
            md5(&[s("Foo", "String", "Bar")]),
            "ae7155c6026991b6d54b11589678bf9c"
        );
        assert_eq!(
            md5(&[s("MyAttribute", "String", "foobar")]),
            "adb59cd4678ea5a855436b949cd07ab6"
        );
        assert_eq!(
            md5(&[s("timestamp", "Number", "1493147359900")]),
            "235c5c510d26fb653d073faed50ae77c"
        );
        let three = [
            s("General", "String", "Kenobi"),
            s("Hello", "String", "There"),
            s("Help.Me", "String", "Me"),
        ];
        assert_eq!(md5(&three), "4c360f3fdafd970e05fae2f149d997f5");
        assert_eq!(md5(&three[..2]), "fca026605781cb4126a1e9044df24232");
        assert_eq!(md5(&three[1..]), "83fee93c1bcd8b9a5a923ffacdc636c7");
        assert_eq!(md5(&three[1..2]), "a311262e065454b75da111d535b8dacd");
        let bin = (
            "attr1".to_string(),
            AttributeValue {
                data_type: "Binary".into(),
                data: AttributeData::Binary(
                    b"traceparent\x1e00-774062d6c37081a5a0b9b5b88e30627c-2d2482211f6489da-01"
                        .to_vec(),
                ),
            },
        );
        assert_eq!(md5(&[bin]), "8cbe4db156db8a94db8b801b7addb984");
        assert_eq!(
            md5(&[s(
                "AWSTraceHeader",
                "String",
                "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
            )]),
            "5ae4d5d7636402d80f4eb6d213245a88"
        );
        assert!(md5_of_attributes(std::iter::empty()).is_none());
    }
}
