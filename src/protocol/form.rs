//! `application/x-www-form-urlencoded` decoding, kept small and fast: most query-protocol
//! keys and values (member names, bodies, ids, URLs without spaces) need no decoding at all,
//! so they are only checked for UTF-8 and borrowed from the input.

use std::borrow::Cow;

/// A decoded key/value pair, borrowing from the input where nothing needed decoding.
pub type Pair<'a> = (Cow<'a, str>, Cow<'a, str>);

/// Splits a form or query string into decoded key/value pairs (`+` is a space).
pub fn parse(input: &[u8]) -> Vec<Pair<'_>> {
    pairs(input, true)
}

/// Splits `k=v&…` into decoded pairs; `plus_is_space` as in [`decode`] (SigV4 canonical
/// query strings keep `+` literal).
pub fn pairs(input: &[u8], plus_is_space: bool) -> Vec<Pair<'_>> {
    // Valid UTF-8 (nearly every request) is checked once, and then split and scanned with
    // the standard library's memchr-backed searches.
    if let Ok(text) = std::str::from_utf8(input) {
        return text
            .split('&')
            .filter(|part| !part.is_empty())
            .map(|part| {
                let (key, value) = part.split_once('=').unwrap_or((part, ""));
                (
                    decode_str(key, plus_is_space),
                    decode_str(value, plus_is_space),
                )
            })
            .collect();
    }
    input
        .split(|&b| b == b'&')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let (key, value) = match part.iter().position(|&b| b == b'=') {
                Some(i) => (&part[..i], &part[i + 1..]),
                None => (part, &[][..]),
            };
            (decode(key, plus_is_space), decode(value, plus_is_space))
        })
        .collect()
}

fn needs_decoding(bytes: &[u8], plus_is_space: bool) -> bool {
    bytes.contains(&b'%') || (plus_is_space && bytes.contains(&b'+'))
}

/// [`decode`] for text already known to be UTF-8.
fn decode_str(s: &str, plus_is_space: bool) -> Cow<'_, str> {
    if needs_decoding(s.as_bytes(), plus_is_space) {
        decode(s.as_bytes(), plus_is_space)
    } else {
        Cow::Borrowed(s)
    }
}

/// Percent-decodes `bytes` (and `+` as a space when `plus_is_space`); invalid UTF-8 becomes
/// U+FFFD, invalid escapes are kept as they are.
pub fn decode(bytes: &[u8], plus_is_space: bool) -> Cow<'_, str> {
    if !needs_decoding(bytes, plus_is_space) {
        return match std::str::from_utf8(bytes) {
            Ok(s) => Cow::Borrowed(s),
            Err(_) => String::from_utf8_lossy(bytes),
        };
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' if plus_is_space => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = |b: u8| (b as char).to_digit(16);
                match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 3;
                        continue;
                    }
                    _ => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    match String::from_utf8(out) {
        Ok(s) => Cow::Owned(s),
        Err(e) => Cow::Owned(String::from_utf8_lossy(e.as_bytes()).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_like_a_browser() {
        let owned: Vec<(String, String)> =
            parse(b"Action=SendMessage&MessageBody=a+b%26c%3D%0D%C3%A9&Empty=&Flag&%zz=1%")
                .into_iter()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
        assert_eq!(
            owned,
            vec![
                ("Action".to_string(), "SendMessage".to_string()),
                ("MessageBody".to_string(), "a b&c=\r\u{e9}".to_string()),
                ("Empty".to_string(), String::new()),
                ("Flag".to_string(), String::new()),
                ("%zz".to_string(), "1%".to_string()),
            ]
        );
        let raw: Vec<(String, String)> = parse(b"a=\xff+x&b=c%20d")
            .into_iter()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        assert_eq!(
            raw,
            vec![
                ("a".to_string(), "\u{fffd} x".to_string()),
                ("b".to_string(), "c d".to_string()),
            ]
        );
        assert_eq!(decode(b"a+b", false), "a+b");
        assert_eq!(decode(b"%ff", true), "\u{fffd}");
    }
}
