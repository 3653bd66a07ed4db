//! `application/x-www-form-urlencoded` decoding, kept small and fast: most query-protocol
//! keys and values (member names, bodies, ids, URLs without spaces) need no decoding at all,
//! so they are only checked for UTF-8 and borrowed from the input.

use std::borrow::Cow;

/// A decoded key/value pair, borrowing from the input where nothing needed decoding.
pub(crate) type Pair<'a> = (Cow<'a, str>, Cow<'a, str>);

/// Pairs that no longer borrow from their input.
pub(crate) fn into_owned(pairs: Vec<Pair<'_>>) -> Vec<(String, String)> {
    pairs
        .into_iter()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// Splits a form or query string into decoded key/value pairs (`+` is a space).
pub(crate) fn parse(input: &[u8]) -> Vec<Pair<'_>> {
    pairs(input, true)
}

/// Splits `k=v&…` into decoded pairs; `plus_is_space` as in [`decode`] (SigV4 canonical
/// query strings keep `+` literal).
pub(crate) fn pairs(input: &[u8], plus_is_space: bool) -> Vec<Pair<'_>> {
    // Valid UTF-8 (nearly every request) is checked once; one vectorized pass then finds
    // every `&`, `=`, `%` and `+`, so keys and values are sliced out without rescanning.
    if let Ok(text) = std::str::from_utf8(input) {
        let mut out = Vec::new();
        let mut start = 0;
        let mut eq = None;
        let mut escaped = [false; 2];
        let mut emit = |start: usize, end: usize, eq: Option<usize>, escaped: [bool; 2]| {
            if start == end {
                return;
            }
            let (key, value) = match eq {
                Some(e) => (&text[start..e], &text[e + 1..end]),
                None => (&text[start..end], ""),
            };
            out.push((
                decoded_if(key, escaped[0], plus_is_space),
                decoded_if(value, escaped[1], plus_is_space),
            ));
        };
        for_each_special(input, |i, b| match b {
            b'&' => {
                emit(start, i, eq, escaped);
                start = i + 1;
                eq = None;
                escaped = [false; 2];
            }
            b'=' if eq.is_none() => eq = Some(i),
            b'%' => escaped[eq.is_some() as usize] = true,
            b'+' if plus_is_space => escaped[eq.is_some() as usize] = true,
            _ => {}
        });
        emit(start, input.len(), eq, escaped);
        return out;
    }
    pairs_of_bytes(input, plus_is_space)
}

/// [`pairs`] for input that is not valid UTF-8.
fn pairs_of_bytes(input: &[u8], plus_is_space: bool) -> Vec<Pair<'_>> {
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

/// `s` itself, or decoded when it holds escapes.
fn decoded_if(s: &str, escaped: bool, plus_is_space: bool) -> Cow<'_, str> {
    if escaped {
        decode(s.as_bytes(), plus_is_space)
    } else {
        Cow::Borrowed(s)
    }
}

/// Calls `f(index, byte)` for every `&`, `=`, `%` and `+` in `input`, in order.
fn for_each_special(input: &[u8], mut f: impl FnMut(usize, u8)) {
    let special = |b: u8| matches!(b, b'&' | b'=' | b'%' | b'+');
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    if crate::simd::enabled(crate::simd::Simd::FormScan) {
        use std::arch::x86_64::*;
        // SSE2 is part of x86_64, so no run-time check is needed.
        // SAFETY: every load reads 16 bytes inside `input` (i + 16 <= len).
        unsafe {
            let wanted = [b'&', b'=', b'%', b'+'].map(|c| _mm_set1_epi8(c as i8));
            while i + 16 <= input.len() {
                let chunk = _mm_loadu_si128(input.as_ptr().add(i).cast());
                let hits = wanted.iter().fold(_mm_setzero_si128(), |acc, w| {
                    _mm_or_si128(acc, _mm_cmpeq_epi8(chunk, *w))
                });
                let mut mask = _mm_movemask_epi8(hits) as u32;
                while mask != 0 {
                    let j = i + mask.trailing_zeros() as usize;
                    f(j, input[j]);
                    mask &= mask - 1;
                }
                i += 16;
            }
        }
    }
    for (j, &b) in input.iter().enumerate().skip(i) {
        if special(b) {
            f(j, b);
        }
    }
}

fn needs_decoding(bytes: &[u8], plus_is_space: bool) -> bool {
    bytes.contains(&b'%') || (plus_is_space && bytes.contains(&b'+'))
}

/// Percent-decodes `bytes` (and `+` as a space when `plus_is_space`); invalid UTF-8 becomes
/// U+FFFD, invalid escapes are kept as they are.
pub(crate) fn decode(bytes: &[u8], plus_is_space: bool) -> Cow<'_, str> {
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
    fn the_vectorized_split_agrees_with_the_plain_one() {
        let alphabet: &[&str] = &[
            "a", "bc", "&", "=", "%", "%2", "%41", "+", " ", "\u{e9}", "x",
        ];
        let mut rng = 0x853c49e6748fea9bu64;
        for _ in 0..3000 {
            let mut text = String::new();
            crate::engine::random::next(&mut rng);
            for k in 0..(rng % 60) {
                text.push_str(alphabet[((rng >> (k % 50)) as usize + k as usize) % alphabet.len()]);
            }
            for plus in [true, false] {
                assert_eq!(
                    pairs(text.as_bytes(), plus),
                    pairs_of_bytes(text.as_bytes(), plus),
                    "{text:?}"
                );
            }
        }
    }

    #[test]
    fn decodes_like_a_browser() {
        assert_eq!(
            into_owned(parse(
                b"Action=SendMessage&MessageBody=a+b%26c%3D%0D%C3%A9&Empty=&Flag&%zz=1%"
            )),
            vec![
                ("Action".to_string(), "SendMessage".to_string()),
                ("MessageBody".to_string(), "a b&c=\r\u{e9}".to_string()),
                ("Empty".to_string(), String::new()),
                ("Flag".to_string(), String::new()),
                ("%zz".to_string(), "1%".to_string()),
            ]
        );
        assert_eq!(
            into_owned(parse(b"a=\xff+x&b=c%20d")),
            vec![
                ("a".to_string(), "\u{fffd} x".to_string()),
                ("b".to_string(), "c d".to_string()),
            ]
        );
        assert_eq!(decode(b"a+b", false), "a+b");
        assert_eq!(decode(b"%ff", true), "\u{fffd}");
    }
}
