//! How queue URLs are spelled: sqsim's own styles, LocalStack's endpoint strategies, and
//! what a request's `Host` says about the machine it reached.

use super::{Config, LOCALSTACK_DOMAIN};

/// How queue URLs are spelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UrlStyle {
    /// `http://<host>/<account>/<name>`: works everywhere.
    #[default]
    Path,
    /// `http://sqs.<region>.localhost:<port>/<account>/<name>`: unambiguous across regions
    /// (`*.localhost` resolves to the loopback address on most systems).
    RegionHost,
}

/// LocalStack's `SQS_ENDPOINT_STRATEGY`: how queue URLs are spelled in `--compat localstack`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LocalStackStrategy {
    /// `http://sqs.<region>.localhost.localstack.cloud:4566/<account>/<name>` (LocalStack's
    /// default since 3.0).
    #[default]
    Standard,
    /// `http://<region>.queue.localhost.localstack.cloud:4566/<account>/<name>`, without
    /// the `<region>.` for us-east-1.
    Domain,
    /// `http://localhost.localstack.cloud:4566/queue/<region>/<account>/<name>`.
    Path,
    /// `http://localhost.localstack.cloud:4566/<account>/<name>` (no region).
    Off,
    /// One of the others, guessed from the request's Host (`sqs.…` standard, `queue.…` or
    /// `<region>.queue.…` domain, anything else path), keeping that host.
    Dynamic,
}

impl std::str::FromStr for LocalStackStrategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "standard" => Ok(Self::Standard),
            "domain" => Ok(Self::Domain),
            "path" => Ok(Self::Path),
            "off" => Ok(Self::Off),
            "dynamic" => Ok(Self::Dynamic),
            other => Err(format!(
                "SQS_ENDPOINT_STRATEGY must be standard, domain, path, off or dynamic, got {other:?}"
            )),
        }
    }
}

impl Config {
    /// The first part of queue URLs (everything before `/<account>/<name>`) for a request
    /// that arrived with `host` (its Host header) in `region`, on a server listening on
    /// `local`. The advertised URL wins; then LocalStack's strategy; then the URL style.
    pub fn queue_base_url(
        &self,
        host: Option<&str>,
        region: &str,
        local: std::net::SocketAddr,
    ) -> String {
        if let Some(u) = &self.advertised_url {
            return u.trim_end_matches('/').to_string();
        }
        let port = || {
            host.and_then(|h| host_port(h).1)
                .map_or_else(|| local.port().to_string(), str::to_string)
        };
        // A port-less address or localhost gets the port the request arrived on
        // ([`host_with_port`]).
        let request_host = || match host {
            Some(h) => host_with_port(h, local.port()).unwrap_or_else(|| h.to_string()),
            None => local.to_string(),
        };
        if let Some(ls) = &self.localstack {
            let configured = || match &ls.host {
                Some(h) if h.contains(':') => h.clone(),
                Some(h) => format!("{h}:{}", local.port()),
                None => format!("{LOCALSTACK_DOMAIN}:{}", local.port()),
            };
            let (strategy, h) = match ls.strategy {
                LocalStackStrategy::Dynamic => guess_strategy(&request_host()),
                s => (s, configured()),
            };
            return match strategy {
                LocalStackStrategy::Standard => format!("http://sqs.{region}.{h}"),
                LocalStackStrategy::Domain if region == "us-east-1" => format!("http://queue.{h}"),
                LocalStackStrategy::Domain => format!("http://{region}.queue.{h}"),
                LocalStackStrategy::Path | LocalStackStrategy::Dynamic => {
                    format!("http://{h}/queue/{region}")
                }
                LocalStackStrategy::Off => format!("http://{h}"),
            };
        }
        match self.url_style {
            UrlStyle::RegionHost => format!("http://sqs.{region}.localhost:{}", port()),
            UrlStyle::Path => format!("http://{}", request_host()),
        }
    }
}

/// LocalStack's `dynamic` strategy: the strategy a request's `host[:port]` implies, and
/// the host to keep for its queue URLs.
fn guess_strategy(host: &str) -> (LocalStackStrategy, String) {
    let labels: Vec<&str> = host.split('.').collect();
    let rest = |from: usize| labels.get(from..).map(|l| l.join(".")).unwrap_or_default();
    match labels[..] {
        ["sqs", _, _, ..] => (LocalStackStrategy::Standard, rest(2)),
        ["queue", _, ..] => (LocalStackStrategy::Domain, rest(1)),
        [_, "queue", _, ..] => (LocalStackStrategy::Domain, rest(2)),
        _ => (LocalStackStrategy::Path, host.to_string()),
    }
}

/// `host` with `port` added, when it needs one: an address or localhost without a port
/// (the Ruby SDK v1 sends `Host: 127.0.0.1`) was reached directly, on `port`, and a URL
/// without it would reach nothing; a name without one is a proxy's (port 80 or 443).
pub(crate) fn host_with_port(host: &str, port: u16) -> Option<String> {
    (host_port(host).1.is_none() && names_this_machine(host) && port != 80)
        .then(|| format!("{host}:{port}"))
}

/// Whether a host (without its port; an IPv6 literal with or without its brackets) names
/// this machine directly: an IP address, `localhost` or a name under `.localhost`.
pub(crate) fn names_this_machine(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.parse::<std::net::IpAddr>().is_ok()
        || h.eq_ignore_ascii_case("localhost")
        || h.to_ascii_lowercase().ends_with(".localhost")
}

/// A `Host` header's host and its port, if it names one (`[::1]:9324`, `localhost`,
/// `[::1]`); a suffix that is not digits is no port.
pub(crate) fn host_port(host: &str) -> (&str, Option<&str>) {
    let split = match host.rfind(']') {
        // An IPv6 literal: a port may only follow its closing bracket.
        Some(close) => host[close..].rfind(':').map(|i| close + i),
        None => host.rfind(':'),
    };
    match split {
        Some(i)
            if !host[i + 1..].is_empty() && host[i + 1..].bytes().all(|b| b.is_ascii_digit()) =>
        {
            (&host[..i], Some(&host[i + 1..]))
        }
        _ => (host, None),
    }
}
