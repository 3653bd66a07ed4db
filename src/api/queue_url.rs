//! Queue URLs as clients echo them back: AWS, legacy, LocalStack and our own styles all end in
//! `/<account>/<name>`; a region may be carried in the host (`sqs.<region>.…`,
//! `<region>.queue.…`) or, in LocalStack's path strategy, in the path
//! (`/queue/<region>/<account>/<name>`).

/// What a queue URL names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueueRef<'a> {
    pub region: Option<&'a str>,
    pub account: Option<&'a str>,
    pub name: &'a str,
}

/// Parses a QueueUrl (or a request path). A bare name without slashes is taken as a queue
/// name in the caller's account. `None` if it names no queue.
pub(crate) fn parse(url: &str) -> Option<QueueRef<'_>> {
    let url = url.trim();
    let (host, path) = match url.split_once("://") {
        Some((_, rest)) => match rest.find('/') {
            Some(i) => (Some(&rest[..i]), &rest[i..]),
            None => (Some(rest), ""),
        },
        None => (None, url),
    };
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let mut segments = path.rsplit('/').filter(|s| !s.is_empty());
    let name = segments.next()?;
    let account = segments.next();
    if account.is_none() && (host.is_some() || path.contains('/')) {
        return None;
    }
    // LocalStack's path strategy: `/queue/<region>/<account>/<name>`.
    let path_region = match (segments.next(), segments.next()) {
        (Some(region), Some("queue")) if looks_like_region(region) => Some(region),
        _ => None,
    };
    Some(QueueRef {
        region: path_region.or_else(|| host.and_then(region_of_host)),
        account,
        name,
    })
}

/// The region a host name carries, if any.
fn region_of_host(host: &str) -> Option<&str> {
    let host = host.split(':').next().unwrap_or(host);
    if let Some(rest) = host.strip_prefix("sqs.") {
        let region = rest.split('.').next()?;
        return looks_like_region(region).then_some(region);
    }
    // `queue.amazonaws.com` (and LocalStack's `queue.localhost.localstack.cloud`) is the
    // legacy us-east-1 endpoint: it names that region by naming none. Other `queue.` hosts
    // (a company's own name) name no region.
    if matches!(
        host,
        "queue.amazonaws.com" | "queue.localhost.localstack.cloud"
    ) {
        return Some("us-east-1");
    }
    let (first, rest) = host.split_once('.')?;
    (rest.starts_with("queue.") && looks_like_region(first)).then_some(first)
}

fn looks_like_region(s: &str) -> bool {
    // e.g. us-east-1, eu-central-2, us-gov-west-1
    s.contains('-')
        && s.ends_with(|c: char| c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn styles() {
        let r = parse("https://sqs.eu-west-1.amazonaws.com/123456789012/q1").unwrap();
        assert_eq!(
            (r.region, r.account, r.name),
            (Some("eu-west-1"), Some("123456789012"), "q1")
        );
        let r = parse("http://localhost:9324/000000000000/q.fifo").unwrap();
        assert_eq!(
            (r.region, r.account, r.name),
            (None, Some("000000000000"), "q.fifo")
        );
        let r = parse("http://localhost:4566/queue/eu-west-2/000000000000/q").unwrap();
        assert_eq!(
            (r.region, r.account, r.name),
            (Some("eu-west-2"), Some("000000000000"), "q")
        );
        let r = parse("http://eu-west-1.queue.localhost.localstack.cloud:4566/1/q").unwrap();
        assert_eq!(r.region, Some("eu-west-1"));
        let r = parse("http://sqs.ap-south-1.localhost.localstack.cloud:4566/1/q").unwrap();
        assert_eq!(r.region, Some("ap-south-1"));
        let r = parse("https://us-west-2.queue.amazonaws.com/1/q").unwrap();
        assert_eq!(r.region, Some("us-west-2"));
        let r = parse("https://queue.amazonaws.com/1/q").unwrap();
        assert_eq!(r.region, Some("us-east-1"));
        let r = parse("http://queue.localhost.localstack.cloud:4566/1/q").unwrap();
        assert_eq!(r.region, Some("us-east-1"));
        let r = parse("http://queue.internal:9324/1/q").unwrap();
        assert_eq!(r.region, None);
        let r = parse("q1").unwrap();
        assert_eq!((r.account, r.name), (None, "q1"));
        assert!(parse("http://localhost:9324/").is_none());
        assert!(parse("http://localhost:9324/q").is_none());
        assert!(parse("").is_none());
        let r = parse("http://sqs.localhost:9324/000000000000/q").unwrap();
        assert_eq!(r.region, None);
    }
}
