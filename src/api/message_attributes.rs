//! Message attributes and message bodies on the wire: validation as SQS does it, conversion to
//! the engine's types, and the receive-side name filters.

use std::collections::HashMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::Deserialize;

use crate::engine::message::Attributes;
use crate::engine::{AttributeData, AttributeValue};
use crate::error::{ErrorCode, SqsError};

/// Most message attributes one message may carry.
pub(crate) const MAX_ATTRIBUTES: usize = 10;

/// A message attribute value as both protocols send it.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct MessageAttributeValueInput {
    pub string_value: Option<String>,
    /// Base64 in both protocols.
    pub binary_value: Option<String>,
    pub data_type: Option<String>,
    pub string_list_values: Option<Vec<String>>,
    pub binary_list_values: Option<Vec<String>>,
}

/// Whether `c` may appear in a message body or string attribute.
pub(crate) fn is_valid_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// Whether every character of `s` is allowed. Works on bytes, eight at a time: in UTF-8 the
/// only disallowed characters are control bytes below 0x20 (other than TAB, LF, CR) and
/// U+FFFE/U+FFFF, which both start with 0xEF (surrogates cannot occur in a `str`).
pub(crate) fn is_valid_text(s: &str) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let bytes = s.as_bytes();
    let mut suspect = false;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let x = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        // A byte below 0x20, or a byte equal to 0xEF, somewhere in these eight.
        let below_space = x.wrapping_sub(ONES * 0x20) & !x & HIGHS;
        let ef = x ^ (ONES * 0xEF);
        let has_ef = ef.wrapping_sub(ONES) & !ef & HIGHS;
        if below_space | has_ef != 0 {
            suspect = true;
            break;
        }
    }
    if !suspect && chunks.remainder().iter().all(|&b| b >= 0x20 && b != 0xEF) {
        return true;
    }
    s.chars().all(is_valid_char)
}

/// Checks a message body's characters.
pub(crate) fn check_body(body: &str) -> Result<(), SqsError> {
    if is_valid_text(body) {
        Ok(())
    } else {
        Err(SqsError::new(
            ErrorCode::InvalidMessageContents,
            "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF",
        ))
    }
}

fn valid_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    !name.is_empty()
        && name.chars().count() <= 256
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !name.starts_with('.')
        && !name.ends_with('.')
        && !name.contains("..")
        && !lower.starts_with("aws.")
        && !lower.starts_with("amazon.")
}

fn valid_number(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits_ok = |d: &str| d.chars().all(|c| c.is_ascii_digit());
    let all_digits = format!("{int}{frac}");
    let leading_zeros = all_digits.len() - all_digits.trim_start_matches('0').len();
    let significant = all_digits.trim_start_matches('0').trim_end_matches('0');
    let exp: Option<i64> = match exponent {
        None => Some(0),
        Some(e) if !e.is_empty() && e.len() <= 6 => e.parse().ok(),
        Some(_) => None,
    };
    let shape_ok = !(int.is_empty() && frac.is_empty())
        && digits_ok(int)
        && digits_ok(frac)
        && significant.len() <= 38;
    let Some(exp) = exp.filter(|_| shape_ok) else {
        return false;
    };
    if significant.is_empty() {
        return true; // zero
    }
    // The value is d.ddd × 10^magnitude; SQS accepts 10^-128 to 10^126.
    let magnitude = int.len() as i64 - 1 - leading_zeros as i64 + exp;
    (-128..=126).contains(&magnitude)
}

/// Validates and converts message attributes; the result is sorted by name.
/// `system` selects the rules for MessageSystemAttributes.
pub(crate) fn convert(
    input: Option<HashMap<String, MessageAttributeValueInput>>,
    system: bool,
) -> Result<Attributes, SqsError> {
    let Some(input) = input else {
        return Ok(Vec::new());
    };
    if !system && input.len() > MAX_ATTRIBUTES {
        return Err(SqsError::invalid(format!(
            "Number of message attributes [{}] exceeds the allowed maximum [{MAX_ATTRIBUTES}].",
            input.len()
        )));
    }
    let kind = if system { "system" } else { "user" };
    let mut out: Attributes = Vec::with_capacity(input.len());
    for (name, v) in input {
        if system {
            if name != "AWSTraceHeader" {
                return Err(SqsError::invalid(format!(
                    "Message system attribute name '{name}' is invalid."
                )));
            }
        } else if !valid_name(&name) {
            return Err(SqsError::invalid(format!(
                "Message (user) attribute name '{name}' is invalid. Reason: Invalid characters or format."
            )));
        }
        let data_type = v.data_type.unwrap_or_default();
        if data_type.is_empty() {
            return Err(SqsError::invalid(format!(
                "The message attribute '{name}' must contain a non-empty message attribute type."
            )));
        }
        let base = data_type.split('.').next().unwrap_or_default();
        if data_type.len() > 256 || !matches!(base, "String" | "Number" | "Binary") {
            return Err(SqsError::invalid(format!(
                "The type of message ({kind}) attribute '{name}' is invalid. You must use only the following supported type prefixes: Binary, Number, String."
            )));
        }
        if v.string_list_values.as_ref().is_some_and(|l| !l.is_empty())
            || v.binary_list_values.as_ref().is_some_and(|l| !l.is_empty())
        {
            return Err(SqsError::invalid(format!(
                "Message ({kind}) attribute '{name}' uses list values, which are reserved for future use."
            )));
        }
        let empty = || {
            SqsError::invalid(format!(
                "Message ({kind}) attribute '{name}' must contain a non-empty value of type '{base}'."
            ))
        };
        let data = if base == "Binary" {
            let encoded = v.binary_value.filter(|b| !b.is_empty()).ok_or_else(empty)?;
            let bytes = STANDARD.decode(encoded.trim()).map_err(|_| {
                SqsError::invalid(format!(
                    "Message ({kind}) attribute '{name}' has an invalid base64 Binary value."
                ))
            })?;
            if bytes.is_empty() {
                return Err(empty());
            }
            AttributeData::Binary(bytes)
        } else {
            let s = v.string_value.filter(|s| !s.is_empty()).ok_or_else(empty)?;
            if !is_valid_text(&s) {
                return Err(SqsError::invalid(format!(
                    "Message ({kind}) attribute '{name}' contains invalid characters. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF"
                )));
            }
            if base == "Number" && !valid_number(s.trim()) {
                return Err(SqsError::invalid(format!(
                    "Value {s} for parameter MessageAttributes.{name}.StringValue is invalid. Reason: Can't convert to a number with at most 38 significant digits."
                )));
            }
            AttributeData::String(s)
        };
        out.push((name, AttributeValue { data_type, data }));
    }
    out.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    Ok(out)
}

/// A receive's MessageAttributeNames: which attributes to return.
#[derive(Debug, Default)]
pub(crate) struct NameFilter {
    all: bool,
    exact: Vec<String>,
    prefixes: Vec<String>,
}

impl NameFilter {
    /// Builds the filter: `All`, `.*` and `*` select everything, `prefix.*` by prefix.
    pub(crate) fn new(names: &[String]) -> NameFilter {
        let mut f = NameFilter::default();
        for n in names {
            match n.as_str() {
                "All" | ".*" | "*" => f.all = true,
                _ => match n.strip_suffix(".*") {
                    Some(p) => f.prefixes.push(p.to_string()),
                    None => f.exact.push(n.clone()),
                },
            }
        }
        f
    }

    /// Whether nothing can match (no attributes are returned).
    pub(crate) fn is_empty(&self) -> bool {
        !self.all && self.exact.is_empty() && self.prefixes.is_empty()
    }

    /// Whether `name` is selected.
    pub(crate) fn matches(&self, name: &str) -> bool {
        self.all
            || self.exact.iter().any(|e| e == name)
            || self.prefixes.iter().any(|p| name.starts_with(p.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        for ok in [
            "1",
            "-1.5",
            "0.000",
            "1e10",
            "12345678901234567890123456789012345678",
        ] {
            assert!(valid_number(ok), "{ok}");
        }
        for bad in [
            "",
            "abc",
            "1.2.3",
            "1e",
            "123456789012345678901234567890123456789",
            ".",
        ] {
            assert!(!valid_number(bad), "{bad}");
        }
    }

    #[test]
    fn text_validation_matches_the_char_rule() {
        for s in [
            "plain",
            "tab\tnl\ncr\r",
            "ünïcødé 🚀",
            "\u{E000}\u{FFFD}",
            "\u{10FFFF}",
        ] {
            assert!(is_valid_text(s), "{s:?}");
        }
        for s in ["\u{0}", "a\u{8}b", "\u{1F}", "x\u{FFFE}", "\u{FFFF}y"] {
            assert!(!is_valid_text(s), "{s:?}");
        }
    }

    #[test]
    fn names() {
        assert!(valid_name("attr.1øßä"));
        assert!(valid_name("Foo_Bar-1"));
        for bad in ["", ".a", "a.", "a..b", "AWS.x", "amazon.y", "a b"] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn filter() {
        let f = NameFilter::new(&["Hel.*".to_string(), "General".to_string()]);
        assert!(f.matches("Hello") && f.matches("Help.Me") && f.matches("General"));
        assert!(!f.matches("Other"));
        assert!(NameFilter::new(&[]).is_empty());
    }
}
