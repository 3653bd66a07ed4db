//! `application/x-www-form-urlencoded` decoding, kept small and fast: most query-protocol
//! values (bodies, ids, URLs without spaces) need no decoding at all and are only checked for
//! UTF-8.

/// Splits a form or query string into decoded key/value pairs (`+` is a space).
pub fn parse(input: &[u8]) -> Vec<(String, String)> {
    pairs(input, true)
}

/// Splits `k=v&…` into decoded pairs; `plus_is_space` as in [`decode`] (SigV4 canonical
/// query strings keep `+` literal).
pub fn pairs(input: &[u8], plus_is_space: bool) -> Vec<(String, String)> {
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

/// Percent-decodes `bytes` (and `+` as a space when `plus_is_space`); invalid UTF-8 becomes
/// U+FFFD, invalid escapes are kept as they are.
pub fn decode(bytes: &[u8], plus_is_space: bool) -> String {
    let needs_work = bytes.contains(&b'%') || (plus_is_space && bytes.contains(&b'+'));
    if !needs_work {
        return match std::str::from_utf8(bytes) {
            Ok(s) => s.to_string(),
            Err(_) => String::from_utf8_lossy(bytes).into_owned(),
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
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_like_a_browser() {
        assert_eq!(
            parse(b"Action=SendMessage&MessageBody=a+b%26c%3D%0D%C3%A9&Empty=&Flag&%zz=1%"),
            vec![
                ("Action".to_string(), "SendMessage".to_string()),
                ("MessageBody".to_string(), "a b&c=\r\u{e9}".to_string()),
                ("Empty".to_string(), String::new()),
                ("Flag".to_string(), String::new()),
                ("%zz".to_string(), "1%".to_string()),
            ]
        );
        assert_eq!(decode(b"a+b", false), "a+b");
        assert_eq!(decode(b"%ff", true), "\u{fffd}");
    }
}
