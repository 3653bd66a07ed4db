//! A small XML writer for query-protocol replies. It escapes the way SQS does, including CR
//! as `&#xD;`, which XML parsers would otherwise turn into LF and so break body MD5 checks.

/// Builds an XML document into a byte buffer.
#[derive(Debug, Default)]
pub(crate) struct XmlWriter {
    buf: Vec<u8>,
}

impl XmlWriter {
    /// An empty writer with room for `capacity` bytes.
    pub(crate) fn with_capacity(capacity: usize) -> XmlWriter {
        XmlWriter {
            buf: Vec::with_capacity(capacity),
        }
    }

    /// Appends markup as is.
    pub(crate) fn raw(&mut self, s: &str) {
        self.buf.extend_from_slice(s.as_bytes());
    }

    /// `<tag>`.
    pub(crate) fn open(&mut self, tag: &str) {
        self.buf.push(b'<');
        self.raw(tag);
        self.buf.push(b'>');
    }

    /// `</tag>`.
    pub(crate) fn close(&mut self, tag: &str) {
        self.raw("</");
        self.raw(tag);
        self.buf.push(b'>');
    }

    /// `<tag>escaped text</tag>`.
    pub(crate) fn elem(&mut self, tag: &str, text: &str) {
        self.open(tag);
        self.text(text);
        self.close(tag);
    }

    /// `<tag>value</tag>` for values that never need escaping (ids, digests, numbers).
    pub(crate) fn elem_plain(&mut self, tag: &str, value: impl std::fmt::Display) {
        use std::io::Write as _;
        self.open(tag);
        let _ = write!(self.buf, "{value}");
        self.close(tag);
    }

    /// `<tag>text</tag>` for text that never needs escaping, already formatted.
    pub(crate) fn elem_raw(&mut self, tag: &str, text: &str) {
        self.open(tag);
        self.raw(text);
        self.close(tag);
    }

    /// An element for an optional value; nothing when `None`.
    pub(crate) fn opt(&mut self, tag: &str, text: Option<&str>) {
        if let Some(t) = text {
            self.elem(tag, t);
        }
    }

    /// `<Entry><Name>k</Name><Value>v</Value></Entry>` for each map entry.
    pub(crate) fn name_value<'a>(
        &mut self,
        entry: &str,
        key_tag: &str,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) {
        for (k, v) in pairs {
            self.open(entry);
            self.elem(key_tag, k);
            self.elem("Value", v);
            self.close(entry);
        }
    }

    /// Escaped character data.
    pub(crate) fn text(&mut self, s: &str) {
        let bytes = s.as_bytes();
        let mut start = 0;
        for (i, &b) in bytes.iter().enumerate() {
            let rep: &[u8] = match b {
                b'&' => b"&amp;",
                b'<' => b"&lt;",
                b'>' => b"&gt;",
                b'"' => b"&quot;",
                b'\r' => b"&#xD;",
                _ => continue,
            };
            self.buf.extend_from_slice(&bytes[start..i]);
            self.buf.extend_from_slice(rep);
            start = i + 1;
        }
        self.buf.extend_from_slice(&bytes[start..]);
    }

    /// Bytes written so far.
    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }

    /// Drops what was written after the first `len` bytes.
    pub(crate) fn truncate(&mut self, len: usize) {
        self.buf.truncate(len);
    }

    /// The document so far.
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_sqs() {
        let mut w = XmlWriter::default();
        w.elem("Body", "a&b<c>\"d\"\r\ne'");
        assert_eq!(
            String::from_utf8(w.into_bytes()).unwrap(),
            "<Body>a&amp;b&lt;c&gt;&quot;d&quot;&#xD;\ne'</Body>"
        );
    }
}
