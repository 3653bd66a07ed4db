//! The fuzzer's oracle: every answer is a well-formed AWS success or error in the shape its
//! content type says (JSON, or XML), never a 5xx for bad input.

use sqsim::server::in_process::Answer;

/// Why an answer is not acceptable, or `None` when it is.
pub(crate) fn problem(a: &Answer) -> Option<String> {
    if a.status >= 500 {
        return Some(format!("status {} for a client's input", a.status));
    }
    if !(200..300).contains(&a.status) && !(400..500).contains(&a.status) {
        return Some(format!("unexpected status {}", a.status));
    }
    let content_type = a
        .headers
        .iter()
        .find(|(k, _)| k == "content-type")
        .map(|(_, v)| v.as_str())
        .unwrap_or_default();
    let ok = a.status < 300;
    if content_type.contains("json") {
        let v: serde_json::Value = match serde_json::from_slice(&a.body) {
            Ok(v) => v,
            Err(e) => return Some(format!("malformed JSON body: {e}")),
        };
        if !ok {
            let awsjson = v.get("__type").and_then(|t| t.as_str()).is_some();
            let queryjson = v.pointer("/Error/Code").and_then(|c| c.as_str()).is_some();
            if !awsjson && !queryjson {
                return Some("a JSON error without __type or Error.Code".into());
            }
            if awsjson && !a.headers.iter().any(|(k, _)| k == "x-amzn-query-error") {
                return Some("an AWS JSON error without x-amzn-query-error".into());
            }
        }
        None
    } else if content_type.contains("xml") {
        if let Err(e) = well_formed_xml(&a.body) {
            return Some(format!("malformed XML body: {e}"));
        }
        let text = String::from_utf8_lossy(&a.body);
        if !ok && !text.contains("<Code>") && !text.contains("UnknownOperationException") {
            return Some("an XML error without a Code".into());
        }
        None
    } else {
        Some(format!("unexpected content type {content_type:?}"))
    }
}

/// Checks that tags nest and close, attribute quotes close, and text holds no raw `<` or bare
/// `&` (enough to catch a reply built from unescaped input).
pub(crate) fn well_formed_xml(body: &[u8]) -> Result<(), String> {
    let text = std::str::from_utf8(body).map_err(|e| e.to_string())?;
    let mut stack: Vec<&str> = Vec::new();
    let mut rest = text;
    let mut roots = 0;
    while let Some(open) = rest.find('<') {
        check_text(&rest[..open])?;
        let after = &rest[open + 1..];
        let close = after.find('>').ok_or("a tag is not closed")?;
        let tag = &after[..close];
        rest = &after[close + 1..];
        if tag.starts_with('?') || tag.starts_with('!') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            match stack.pop() {
                Some(open) if open == name.trim() => {}
                other => return Err(format!("</{name}> closes {other:?}")),
            }
            continue;
        }
        if tag.matches('"').count() % 2 != 0 {
            return Err(format!("unbalanced quotes in <{tag}>"));
        }
        let name = tag
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .trim_end_matches('/');
        if name.is_empty() || name.contains(['<', '&']) {
            return Err(format!("bad tag <{tag}>"));
        }
        if stack.is_empty() {
            roots += 1;
        }
        if !tag.ends_with('/') {
            stack.push(name);
        }
    }
    check_text(rest)?;
    if !stack.is_empty() {
        return Err(format!("unclosed {stack:?}"));
    }
    if roots != 1 {
        return Err(format!("{roots} root elements"));
    }
    Ok(())
}

fn check_text(t: &str) -> Result<(), String> {
    let mut rest = t;
    while let Some(i) = rest.find('&') {
        let after = &rest[i + 1..];
        let end = after.find(';').ok_or("a bare & in text")?;
        let entity = &after[..end];
        let known = matches!(entity, "lt" | "gt" | "amp" | "quot" | "apos")
            || entity
                .strip_prefix("#x")
                .is_some_and(|h| u32::from_str_radix(h, 16).is_ok())
            || entity
                .strip_prefix('#')
                .is_some_and(|d| d.parse::<u32>().is_ok());
        if !known {
            return Err(format!("unknown entity &{entity};"));
        }
        rest = &after[end + 1..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_checks() {
        assert!(well_formed_xml(b"<?xml version=\"1.0\"?><a x=\"1\"><b/>t&amp;u</a>").is_ok());
        assert!(well_formed_xml(b"<a><b></a>").is_err());
        assert!(well_formed_xml(b"<a>x & y</a>").is_err());
        assert!(well_formed_xml(b"<a></a><b></b>").is_err());
        assert!(well_formed_xml(b"<a>").is_err());
    }
}
