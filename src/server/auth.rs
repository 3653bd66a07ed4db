//! SigV4 checking for `--auth verify`: rebuilds the canonical request from what arrived
//! (header-signed or presigned), derives the key with `aws-sigv4` and compares signatures.
//! Signatures use real time (never the test clock): clients sign with their wall clock.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hyper::header::HeaderMap;
use sha2::{Digest, Sha256};

use crate::error::{ErrorCode, SqsError};

/// The longest a presigned URL may be valid, as SigV4 defines it (seven days).
const MAX_PRESIGNED_SECONDS: u64 = 7 * 24 * 3600;
/// How far a request's signing time may be from ours.
const MAX_SKEW: Duration = Duration::from_secs(15 * 60);

pub(crate) use crate::config::same_secret;
use crate::config::Credential;

/// The parts of a request a signature covers.
pub(crate) struct SignedRequest<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub query: Option<&'a str>,
    pub headers: &'a HeaderMap,
    pub body: &'a [u8],
}

fn error(code: ErrorCode, message: impl Into<String>) -> SqsError {
    SqsError::new(code, message.into())
}

fn mismatch() -> SqsError {
    error(
        ErrorCode::SignatureDoesNotMatch,
        "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.",
    )
}

/// What the signature says about itself.
struct Claims {
    access_key: String,
    date: String,
    region: String,
    service: String,
    signed_headers: Vec<String>,
    signature: String,
    amz_date: String,
    /// Presigned: X-Amz-Expires seconds.
    expires: Option<u64>,
}

fn query_pairs(query: &str) -> Vec<(String, String)> {
    use crate::protocol::form;
    form::into_owned(form::pairs(query.as_bytes(), false))
}

/// RFC 3986 encoding: everything but unreserved characters (and `/` when `keep_slash`).
fn encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'_' | b'.' | b'~')
            || (keep_slash && b == b'/')
        {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Whether a request carries a signature, checked or not: an `Authorization` header of
/// SigV4 (or SigV2's `AWS `), or a presigned URL's signature parameter. Every AWS client
/// sends one (with dummy keys too); the browser guard reads a browser's user agent only
/// without it.
pub(super) fn carries_signature(headers: &hyper::HeaderMap, query: Option<&str>) -> bool {
    crate::http::header(headers, "authorization")
        .is_some_and(|a| a.starts_with("AWS4-HMAC-SHA256") || a.starts_with("AWS "))
        || query.is_some_and(|q| {
            query_pairs(q)
                .iter()
                .any(|(k, _)| k == "X-Amz-Signature" || k == "Signature")
        })
}

fn claims(req: &SignedRequest<'_>) -> Result<Claims, SqsError> {
    let header = |n: &str| crate::http::header(req.headers, n);
    if let Some(auth) = header("authorization") {
        let rest = auth.strip_prefix("AWS4-HMAC-SHA256").ok_or_else(|| {
            error(
                ErrorCode::IncompleteSignature,
                "Unsupported authorization type.",
            )
        })?;
        let mut fields = HashMap::new();
        for part in rest.split(',') {
            if let Some((k, v)) = part.trim().split_once('=') {
                // One credential per request: with two, another parser could read the one
                // that was not verified.
                if fields.insert(k.trim(), v.trim()).is_some() {
                    return Err(error(
                        ErrorCode::IncompleteSignature,
                        format!("The Authorization header names {} twice.", k.trim()),
                    ));
                }
            }
        }
        let (Some(cred), Some(signed), Some(sig)) = (
            fields.get("Credential"),
            fields.get("SignedHeaders"),
            fields.get("Signature"),
        ) else {
            return Err(error(
                ErrorCode::IncompleteSignature,
                "Authorization header requires Credential, SignedHeaders and Signature.",
            ));
        };
        let amz_date = header("x-amz-date").unwrap_or_default().to_string();
        return build_claims(cred, signed, sig, amz_date, None);
    }
    let pairs = req.query.map(query_pairs).unwrap_or_default();
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    match (
        get("X-Amz-Credential"),
        get("X-Amz-SignedHeaders"),
        get("X-Amz-Signature"),
    ) {
        (Some(cred), Some(signed), Some(sig)) => {
            // Absent: SigV4's default of 15 minutes. Present, it must be a number of
            // seconds (a value that does not parse is refused, never taken as the default).
            let expires = match get("X-Amz-Expires") {
                None => 900,
                Some(e) => e.parse().map_err(|_| {
                    error(
                        ErrorCode::IncompleteSignature,
                        "X-Amz-Expires should be a number",
                    )
                })?,
            };
            build_claims(
                &cred,
                &signed,
                &sig,
                get("X-Amz-Date").unwrap_or_default(),
                Some(expires),
            )
        }
        _ => Err(error(
            ErrorCode::MissingAuthenticationToken,
            "Request is missing Authentication Token",
        )),
    }
}

fn build_claims(
    cred: &str,
    signed: &str,
    sig: &str,
    amz_date: String,
    expires: Option<u64>,
) -> Result<Claims, SqsError> {
    let parts: Vec<&str> = cred.split('/').collect();
    let [access_key, date, region, service, "aws4_request"] = parts[..] else {
        return Err(error(
            ErrorCode::IncompleteSignature,
            format!("Credential is malformed: {cred}"),
        ));
    };
    Ok(Claims {
        access_key: access_key.to_string(),
        date: date.to_string(),
        region: region.to_string(),
        service: service.to_string(),
        signed_headers: signed.split(';').map(|h| h.to_ascii_lowercase()).collect(),
        signature: sig.to_string(),
        amz_date,
        expires,
    })
}

/// The SigV4 timestamp format, `YYYYMMDDTHHMMSSZ`.
const AMZ_DATE: &str = "%Y%m%dT%H%M%SZ";

/// Parses an `X-Amz-Date`; `None` for anything malformed or before 1970.
fn parse_amz_date(s: &str) -> Option<SystemTime> {
    if s.len() != 16 {
        return None;
    }
    let at = chrono::NaiveDateTime::parse_from_str(s, AMZ_DATE).ok()?;
    let secs = u64::try_from(at.and_utc().timestamp()).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(secs))
}

fn format_amz_date(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t)
        .format(AMZ_DATE)
        .to_string()
}

/// The canonical request, as SigV4 defines it for services other than S3.
pub(crate) fn canonical_request(
    req: &SignedRequest<'_>,
    signed_headers: &[String],
    payload_hash: &str,
    presigned: bool,
) -> String {
    let uri = encode(if req.path.is_empty() { "/" } else { req.path }, true);
    let mut query: Vec<(String, String)> = req
        .query
        .map(query_pairs)
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| !(presigned && k == "X-Amz-Signature"))
        .map(|(k, v)| (encode(&k, false), encode(&v, false)))
        .collect();
    query.sort();
    let query = query
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    let mut headers = String::new();
    for name in signed_headers {
        let values: Vec<String> = req
            .headers
            .get_all(name.as_str())
            .iter()
            .map(|v| {
                String::from_utf8_lossy(v.as_bytes())
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        headers.push_str(&format!("{name}:{}\n", values.join(",")));
    }
    format!(
        "{}\n{uri}\n{query}\n{headers}\n{}\n{payload_hash}",
        req.method,
        signed_headers.join(";")
    )
}

fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What a signature was computed over, besides the request itself.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scope<'a> {
    pub amz_date: &'a str,
    pub region: &'a str,
    pub service: &'a str,
    pub signed_headers: &'a [String],
    pub presigned: bool,
    pub payload_hash: &'a str,
}

/// The signature a request should carry for `secret`.
pub(crate) fn expected_signature(
    req: &SignedRequest<'_>,
    secret: &str,
    scope: &Scope<'_>,
) -> Option<String> {
    let Scope {
        amz_date,
        region,
        service,
        signed_headers,
        presigned,
        payload_hash,
    } = *scope;
    let time = parse_amz_date(amz_date)?;
    let canonical = canonical_request(req, signed_headers, payload_hash, presigned);
    let scope = format!("{}/{region}/{service}/aws4_request", &amz_date[..8]);
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        sha256_hex(canonical.as_bytes())
    );
    let key = aws_sigv4::sign::v4::generate_signing_key(secret, time, region, service);
    Some(aws_sigv4::sign::v4::calculate_signature(
        key,
        string_to_sign.as_bytes(),
    ))
}

/// The credential scope must name SQS, and the signed headers must include `host` (so a
/// signature cannot be replayed at another endpoint). The region is sqsim's namespace and
/// may be any, except that a request sent to a region's host name
/// (`sqs.<region>.…`) must be signed for that region, as AWS requires.
fn check_scope(req: &SignedRequest<'_>, c: &Claims) -> Result<(), SqsError> {
    if c.service != "sqs" {
        return Err(error(
            ErrorCode::SignatureDoesNotMatch,
            "Credential should be scoped to correct service: 'sqs'. ",
        ));
    }
    if !c
        .signed_headers
        .iter()
        .any(|h| h == "host" || h == ":authority")
    {
        return Err(error(
            ErrorCode::IncompleteSignature,
            "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.",
        ));
    }
    // A presigned URL's action is the one it was signed with: an `X-Amz-Target` header
    // would choose another (the JSON protocol's), so it must be signed too. (A
    // header-signed request's SDK signs it with the rest.)
    if c.expires.is_some()
        && req.headers.contains_key("x-amz-target")
        && !c.signed_headers.iter().any(|h| h == "x-amz-target")
    {
        return Err(error(
            ErrorCode::SignatureDoesNotMatch,
            "X-Amz-Target is not among the presigned request's X-Amz-SignedHeaders: a presigned URL runs only the action it was signed for.",
        ));
    }
    let host = crate::http::header(req.headers, hyper::header::HOST.as_str()).unwrap_or_default();
    if let Some(region) = host
        .strip_prefix("sqs.")
        .and_then(|rest| rest.split('.').next())
        .filter(|r| r.contains('-') && r.chars().any(|ch| ch.is_ascii_digit()))
    {
        if region != c.region {
            return Err(error(
                ErrorCode::SignatureDoesNotMatch,
                format!(
                    "Credential should be scoped to a valid region, not '{}'. ",
                    c.region
                ),
            ));
        }
    }
    Ok(())
}

/// Who signed a request, as its verified signature says: what a request acts as comes from
/// here alone, never from a second reading of its headers.
#[derive(Debug)]
pub(crate) struct Signer<'c> {
    pub credential: &'c Credential,
    /// The region of the verified credential scope.
    pub region: String,
}

/// Checks a request's signature; returns who signed it.
pub(crate) fn verify<'c>(
    req: &SignedRequest<'_>,
    keys: &'c HashMap<String, Credential>,
    now: SystemTime,
) -> Result<Signer<'c>, SqsError> {
    let c = claims(req)?;
    let presigned = c.expires.is_some();
    let cred = keys.get(&c.access_key).ok_or_else(|| {
        error(
            ErrorCode::InvalidClientTokenId,
            "The security token included in the request is invalid.",
        )
    })?;
    let signed_at = parse_amz_date(&c.amz_date)
        .filter(|_| c.amz_date.starts_with(&c.date))
        .ok_or_else(|| {
            error(
                ErrorCode::IncompleteSignature,
                "The request must contain a valid X-Amz-Date matching the credential scope date.",
            )
        })?;
    let now_s = || format_amz_date(now);
    if let Some(secs) = c.expires {
        // SigV4 presigned URLs live at most seven days; a larger value is refused before any
        // time arithmetic (it would overflow SystemTime).
        if secs > MAX_PRESIGNED_SECONDS {
            return Err(error(
                ErrorCode::IncompleteSignature,
                format!("X-Amz-Expires must be less than a week (in seconds) that is {MAX_PRESIGNED_SECONDS}."),
            ));
        }
        let expires = signed_at + Duration::from_secs(secs);
        if now > expires {
            return Err(error(
                ErrorCode::SignatureDoesNotMatch,
                format!(
                    "Signature expired: {} is now later than {} ({} + {secs} sec.)",
                    now_s(),
                    format_amz_date(expires),
                    c.amz_date,
                ),
            ));
        }
    } else if now > signed_at + MAX_SKEW {
        return Err(error(
            ErrorCode::SignatureDoesNotMatch,
            format!(
                "Signature expired: {} is now earlier than {} ({} - 15 min.)",
                c.amz_date,
                format_amz_date(now - MAX_SKEW),
                now_s()
            ),
        ));
    }
    // Signed in the future (header-signed or presigned): refused however long it would last.
    if signed_at > now + MAX_SKEW {
        return Err(error(
            ErrorCode::SignatureDoesNotMatch,
            format!(
                "Signature not yet current: {} is still later than {} ({} + 15 min.)",
                c.amz_date,
                format_amz_date(now + MAX_SKEW),
                now_s()
            ),
        ));
    }
    check_scope(req, &c)?;
    // The signature always covers the body that arrived: its hash is computed here, never
    // taken from the request. A hash the client names (`X-Amz-Content-Sha256`, which the
    // JavaScript and Ruby SDKs send) must be that hash: otherwise a captured signature could
    // be replayed over another body with the original hash in that header. SQS signs every
    // payload; `UNSIGNED-PAYLOAD` is accepted only for a presigned URL without a body
    // (nothing unsigned can then ride along).
    let body_hash = sha256_hex(req.body);
    let named = if presigned {
        let pairs = req.query.map(query_pairs).unwrap_or_default();
        pairs
            .iter()
            .find(|(k, _)| k == "X-Amz-Content-Sha256")
            .map(|(_, v)| v.clone())
    } else {
        req.headers
            .get("x-amz-content-sha256")
            .map(|v| v.to_str().unwrap_or_default().to_string())
    };
    let candidates: Vec<String> = match named.as_deref() {
        None if presigned && req.body.is_empty() => {
            vec![body_hash, "UNSIGNED-PAYLOAD".to_string()]
        }
        None => vec![body_hash],
        Some("UNSIGNED-PAYLOAD") if presigned && req.body.is_empty() => {
            vec!["UNSIGNED-PAYLOAD".to_string()]
        }
        Some(h) if h.eq_ignore_ascii_case(&body_hash) => vec![h.to_string()],
        Some(_) => {
            return Err(error(
                ErrorCode::SignatureDoesNotMatch,
                "The provided 'x-amz-content-sha256' header does not match what was computed.",
            ))
        }
    };
    let same = candidates.iter().any(|hash| {
        let scope = Scope {
            amz_date: &c.amz_date,
            region: &c.region,
            service: &c.service,
            signed_headers: &c.signed_headers,
            presigned,
            payload_hash: hash,
        };
        let Some(expected) = expected_signature(req, &cred.secret_key, &scope) else {
            return false;
        };
        same_secret(&expected, &c.signature)
    });
    if same {
        Ok(Signer {
            credential: cred,
            region: c.region,
        })
    } else {
        Err(mismatch())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

    fn vector(method: &str, query: Option<&str>) -> String {
        let mut h = HeaderMap::new();
        h.insert("host", HeaderValue::from_static("example.amazonaws.com"));
        h.insert("x-amz-date", HeaderValue::from_static("20150830T123600Z"));
        let req = SignedRequest {
            method,
            path: "/",
            query,
            headers: &h,
            body: b"",
        };
        let signed = vec!["host".to_string(), "x-amz-date".to_string()];
        let empty = sha256_hex(b"");
        let scope = Scope {
            amz_date: "20150830T123600Z",
            region: "us-east-1",
            service: "service",
            signed_headers: &signed,
            presigned: false,
            payload_hash: &empty,
        };
        expected_signature(&req, SECRET, &scope).unwrap()
    }

    /// AWS's published SigV4 test suite.
    #[test]
    fn aws_test_vectors() {
        assert_eq!(
            vector("GET", None),
            "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
        );
        assert_eq!(
            vector("POST", None),
            "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"
        );
        assert_eq!(
            vector("GET", Some("Param2=value2&Param1=value1")),
            "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"
        );
    }

    /// A header-signed request for `body` at `now`, signed over `signed_body`'s hash with
    /// the scope's `service`, and the hash header set to `named` when given.
    fn signed(
        body: &'static [u8],
        signed_body: &[u8],
        named: Option<&str>,
        service: &str,
        sign_host: bool,
    ) -> (HeaderMap, SystemTime) {
        let now = SystemTime::now();
        let amz_date = format_amz_date(now);
        let mut h = HeaderMap::new();
        h.insert("host", HeaderValue::from_static("127.0.0.1:9324"));
        h.insert("x-amz-date", HeaderValue::from_str(&amz_date).unwrap());
        if let Some(n) = named {
            h.insert("x-amz-content-sha256", HeaderValue::from_str(n).unwrap());
        }
        let mut names = vec!["x-amz-date".to_string()];
        if sign_host {
            names.insert(0, "host".to_string());
        }
        let hash = sha256_hex(signed_body);
        let req = SignedRequest {
            method: "POST",
            path: "/",
            query: None,
            headers: &h,
            body,
        };
        let scope = Scope {
            amz_date: &amz_date,
            region: "us-east-1",
            service,
            signed_headers: &names,
            presigned: false,
            payload_hash: &hash,
        };
        let sig = expected_signature(&req, SECRET, &scope).unwrap();
        let auth = format!(
            "AWS4-HMAC-SHA256 Credential=AKID/{}/us-east-1/{service}/aws4_request, SignedHeaders={}, Signature={sig}",
            &amz_date[..8],
            names.join(";")
        );
        h.insert("authorization", HeaderValue::from_str(&auth).unwrap());
        (h, now)
    }

    fn check(h: &HeaderMap, body: &[u8], now: SystemTime) -> Result<(), SqsError> {
        let keys: HashMap<String, Credential> = [(
            "AKID".to_string(),
            Credential::parse(&format!("AKID:{SECRET}")).unwrap(),
        )]
        .into_iter()
        .collect();
        let req = SignedRequest {
            method: "POST",
            path: "/",
            query: None,
            headers: h,
            body,
        };
        verify(&req, &keys, now).map(|_| ())
    }

    /// The body substitution attack: a captured signature over one body, replayed with
    /// another body and the first body's hash in `X-Amz-Content-Sha256`, is refused; the
    /// honest request (hash header or not) passes.
    #[test]
    fn the_signature_covers_the_body_that_arrived() {
        let original: &[u8] = b"Action=GetQueueAttributes&QueueUrl=q";
        let hash = sha256_hex(original);
        let (h, now) = signed(b"", original, Some(&hash), "sqs", true);
        assert!(check(&h, original, now).is_ok());
        let swapped = b"Action=DeleteQueue&QueueUrl=q";
        let err = check(&h, swapped, now).unwrap_err();
        assert_eq!(err.code, ErrorCode::SignatureDoesNotMatch);
        assert!(
            err.message.contains("x-amz-content-sha256"),
            "{}",
            err.message
        );
        // Without the header, the swapped body no longer matches the signature either.
        let (mut h, now) = signed(b"", original, None, "sqs", true);
        assert!(check(&h, original, now).is_ok());
        assert_eq!(
            check(&h, swapped, now).unwrap_err().code,
            ErrorCode::SignatureDoesNotMatch
        );
        // UNSIGNED-PAYLOAD is not SQS's: refused on a header-signed request.
        h.insert(
            "x-amz-content-sha256",
            HeaderValue::from_static("UNSIGNED-PAYLOAD"),
        );
        assert!(check(&h, original, now).is_err());
    }

    #[test]
    fn a_request_signed_in_the_future_or_long_ago_is_refused() {
        let body: &[u8] = b"Action=ListQueues";
        let (h, signed_at) = signed(b"", body, None, "sqs", true);
        let early = signed_at - Duration::from_secs(20 * 60);
        let err = check(&h, body, early).unwrap_err();
        assert!(
            err.message.starts_with("Signature not yet current"),
            "{}",
            err.message
        );
        let late = signed_at + Duration::from_secs(20 * 60);
        let err = check(&h, body, late).unwrap_err();
        assert!(
            err.message.starts_with("Signature expired"),
            "{}",
            err.message
        );
        assert!(check(&h, body, signed_at + Duration::from_secs(60)).is_ok());
    }

    #[test]
    fn the_scope_must_name_sqs_and_the_host_must_be_signed() {
        let body: &[u8] = b"Action=ListQueues";
        let (h, now) = signed(b"", body, None, "s3", true);
        let err = check(&h, body, now).unwrap_err();
        assert_eq!(
            err.message,
            "Credential should be scoped to correct service: 'sqs'. "
        );
        let (h, now) = signed(b"", body, None, "sqs", false);
        let err = check(&h, body, now).unwrap_err();
        assert_eq!(err.code, ErrorCode::IncompleteSignature);
    }

    /// AWS's `post-x-www-form-urlencoded` vector: how the query protocol sends every
    /// request (a form body whose hash the signature covers).
    #[test]
    fn aws_form_post_vector() {
        let mut h = HeaderMap::new();
        h.insert(
            "content-type",
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        h.insert("host", HeaderValue::from_static("example.amazonaws.com"));
        h.insert("x-amz-date", HeaderValue::from_static("20150830T123600Z"));
        let body: &[u8] = b"Param1=value1";
        let req = SignedRequest {
            method: "POST",
            path: "/",
            query: None,
            headers: &h,
            body,
        };
        let signed: Vec<String> = ["content-type", "host", "x-amz-date"]
            .map(String::from)
            .to_vec();
        let hash = sha256_hex(body);
        let scope = Scope {
            amz_date: "20150830T123600Z",
            region: "us-east-1",
            service: "service",
            signed_headers: &signed,
            presigned: false,
            payload_hash: &hash,
        };
        assert_eq!(
            expected_signature(&req, SECRET, &scope).unwrap(),
            "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"
        );
    }

    /// A presigned URL's X-Amz-Expires that is not a number of seconds is refused before
    /// anything else is looked at, never read as the 15-minute default.
    #[test]
    fn an_expiry_that_is_not_a_number_is_refused() {
        let h = HeaderMap::new();
        let keys = HashMap::from([(
            "AKID".to_string(),
            Credential::parse("AKID:secret").unwrap(),
        )]);
        for expires in ["abc", "12345678901234567890123", "-5", ""] {
            let query = format!(
                "Action=ListQueues&X-Amz-Algorithm=AWS4-HMAC-SHA256\
                 &X-Amz-Credential=AKID%2F20240101%2Fus-east-1%2Fsqs%2Faws4_request\
                 &X-Amz-Date=20240101T000000Z&X-Amz-Expires={expires}\
                 &X-Amz-SignedHeaders=host&X-Amz-Signature=00"
            );
            let req = SignedRequest {
                method: "GET",
                path: "/",
                query: Some(&query),
                headers: &h,
                body: b"",
            };
            let err = verify(&req, &keys, SystemTime::now()).unwrap_err();
            assert_eq!(err.code, ErrorCode::IncompleteSignature, "{expires:?}");
            assert!(
                err.message.contains("X-Amz-Expires"),
                "{expires:?}: {}",
                err.message
            );
        }
    }

    #[test]
    fn dates_round_trip() {
        let t = parse_amz_date("20150830T123600Z").unwrap();
        assert_eq!(
            t.duration_since(UNIX_EPOCH).unwrap().as_secs(),
            1_440_938_160
        );
        assert_eq!(format_amz_date(t), "20150830T123600Z");
        assert_eq!(
            format_amz_date(parse_amz_date("20240229T235959Z").unwrap()),
            "20240229T235959Z"
        );
        assert!(parse_amz_date("2015-08-30").is_none());
    }

    #[test]
    fn credentials_flag() {
        assert_eq!(
            Credential::parse("AKID:secret:123456789012")
                .unwrap()
                .account_id
                .as_deref(),
            Some("123456789012")
        );
        assert!(Credential::parse("AKID:secret")
            .unwrap()
            .account_id
            .is_none());
        assert!(Credential::parse("AKID").is_none());
        assert!(Credential::parse("AKID:secret:12").is_none());
    }
}
