//! Server configuration: one struct built directly by embedders and tests, or by the binary
//! from its defaults, the config file and then its flags ([`Flags`]), in that order.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::engine::EngineSettings;
pub use crate::store::SyncMode;

mod flags;
pub use flags::{Flags, Invalid, Source};

/// Port `make run` serves on (ElasticMQ's, so existing local setups keep working).
pub const DEFAULT_PORT: u16 = 9324;
/// Region used when a request carries no SigV4 scope.
pub const DEFAULT_REGION: &str = "us-east-1";
/// Account used when nothing else names one.
pub const DEFAULT_ACCOUNT_ID: &str = "000000000000";

/// Whether `s` has the shape of an AWS account id: exactly twelve ASCII digits.
pub fn is_account_id(s: &str) -> bool {
    s.len() == 12 && s.bytes().all(|b| b.is_ascii_digit())
}
/// Largest request body accepted: a full batch with JSON or base64 overhead fits easily.
pub const DEFAULT_MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

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

/// LocalStack's port: `--compat localstack` serves on it unless a port is given.
pub const LOCALSTACK_PORT: u16 = 4566;
/// The host LocalStack puts in queue URLs (`LOCALSTACK_HOST` without its port); its public
/// DNS record, and every subdomain's, resolves to 127.0.0.1.
pub const LOCALSTACK_DOMAIN: &str = "localhost.localstack.cloud";
/// Where `--compat localstack` keeps its state when LocalStack's `PERSISTENCE=1` is set
/// (under LocalStack's own volume, `/var/lib/localstack`).
pub const LOCALSTACK_PERSISTENCE_DIR: &str = "/var/lib/localstack/state/sqsim";
/// Where LocalStack's image looks for scripts to run once it is ready.
pub const LOCALSTACK_READY_DIR: &str = "/etc/localstack/init/ready.d";
/// The config file ElasticMQ's images read (`-Dconfig.file=/opt/elasticmq.conf`), which
/// compose files mount; `--compat elasticmq` reads it when no `--config` is given.
pub const ELASTICMQ_CONF: &str = "/opt/elasticmq.conf";
/// The port ElasticMQ's images serve their UI on; `--compat elasticmq` serves there too.
pub const ELASTICMQ_UI_PORT: u16 = 9325;

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

/// `--compat localstack`: what a LocalStack user's setup expects besides SQS itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalStack {
    /// How queue URLs are spelled (LocalStack's `SQS_ENDPOINT_STRATEGY`).
    pub strategy: LocalStackStrategy,
    /// `host[:port]` in queue URLs (LocalStack's `LOCALSTACK_HOST`); by default
    /// `localhost.localstack.cloud` and the port sqsim listens on.
    pub host: Option<String>,
}

/// Everything a server needs to know.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to bind.
    pub host: String,
    /// Port to bind; 0 picks a free one.
    pub port: u16,
    /// Default region.
    pub region: String,
    /// Default account id.
    pub account_id: String,
    /// Base of queue URLs (`http://host:port`); `None` derives it from each request's Host.
    pub advertised_url: Option<String>,
    /// Request body size limit.
    pub max_body_bytes: usize,
    /// How queue URLs are spelled when no advertised URL is set.
    pub url_style: UrlStyle,
    /// Whether SigV4 signatures are checked, and against which keys.
    pub auth: AuthMode,
    /// Engine knobs.
    pub engine: EngineSettings,
    /// Durable mode: `None` keeps everything in memory and never touches the disk.
    pub durability: Option<Durability>,
    /// How many queues `/metrics` labels one by one; the rest are summed into one series
    /// labelled `queue="_other"`, so a test suite that creates thousands of queues cannot
    /// swamp a Prometheus server.
    pub metrics_queue_limit: usize,
    /// What one client may hold of the server: connections, time to send a request, idle
    /// time (long polls waiting are capped in [`EngineSettings::max_long_polls`]).
    pub limits: Limits,
    /// LocalStack compatibility (`--compat localstack`): its queue URLs, its health,
    /// init-status and message-peeking endpoints, and a clear error for other services.
    pub localstack: Option<LocalStack>,
    /// Executable scripts run once, in name order, as soon as the server answers
    /// (LocalStack's `ready.d` convention); their output is logged.
    pub init_dir: Option<PathBuf>,
    /// Every request acts in [`Config::region`], whatever region its signature names: one
    /// namespace per account, as ElasticMQ has (set by an ElasticMQ config). Off by
    /// default: regions are separate namespaces, as on AWS.
    pub single_region: bool,
    /// A second port the binary serves everything on too (`--console-port`; ElasticMQ's UI
    /// port with `--compat elasticmq`).
    pub console_port: Option<u16>,
    /// Cluster mode (`--cluster`): queues spread over the nodes, their logs in NATS
    /// JetStream. `None`: one process, as always.
    pub cluster: Option<Cluster>,
    /// The control plane's protection and the browser checks.
    pub security: Security,
}

/// Cluster mode: where JetStream is and who this node is; see `docs/scale-out.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// NATS server URLs, comma-separated (any of them; the client finds the rest).
    pub nats: String,
    /// This node's name, unique in the cluster.
    pub node_id: String,
    /// The URL other nodes reach this one at; `http://127.0.0.1:<port>` when `None`.
    pub peer_url: Option<String>,
    /// How many shards queues are hashed into (each one JetStream stream, owned by one node
    /// at a time). Every node of a cluster must use the same number.
    pub shards: u32,
    /// Copies JetStream keeps of every stream and lease (3 in a real cluster).
    pub replicas: usize,
    /// How long a node's lease on a shard (and its membership) lasts without renewal: the
    /// time a dead node's shards wait before another node serves them.
    pub lease: std::time::Duration,
    /// A gateway node serves no shard: it only routes requests to the nodes that do (a
    /// stateless front, and the way to test forwarding for every request).
    pub gateway: bool,
    /// Leaves the shard streams' leaders where JetStream's elections put them, instead of
    /// moving them to an even share per JetStream server (for operators who place leaders
    /// themselves).
    pub keep_leaders: bool,
}

/// Shards by default: divides evenly (or nearly) among 1 to 10 nodes, few enough JetStream
/// streams (each a Raft group) for a small cluster.
pub const DEFAULT_CLUSTER_SHARDS: u32 = 48;
/// Lease length by default.
pub const DEFAULT_CLUSTER_LEASE: std::time::Duration = std::time::Duration::from_millis(2500);

impl Cluster {
    /// Cluster mode on `nats` as node `node_id`, with the defaults.
    pub fn new(nats: impl Into<String>, node_id: impl Into<String>) -> Cluster {
        Cluster {
            nats: nats.into(),
            node_id: node_id.into(),
            peer_url: None,
            shards: DEFAULT_CLUSTER_SHARDS,
            replicas: 3,
            lease: DEFAULT_CLUSTER_LEASE,
            gateway: false,
            keep_leaders: false,
        }
    }
}

/// Connection limits: a slow, idle or greedy client cannot hold what others need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once; one more is closed as soon as it is accepted (SDKs retry a
    /// closed connection), so a flood of idle sockets cannot exhaust file descriptors.
    /// The binary (`server::run`) raises its open-file limit and lowers this to fit it; an
    /// embedder sets a value that fits its own process.
    pub max_connections: usize,
    /// A request's headers, and then its body, must each arrive within this time, or the
    /// connection is closed (slowloris). For HTTP/1.1 the wait for the next request on a
    /// kept-alive connection counts as reading its headers.
    pub read_timeout: std::time::Duration,
    /// A connection with no request running for this long (since its last answer was ready,
    /// or since it opened) is closed: a silent socket, an idle HTTP/2 connection, a client
    /// that never reads its answers. Bytes do not count, so trickling them keeps nothing
    /// open; a running request does, so a waiting long poll is never cut.
    pub idle_timeout: std::time::Duration,
}

/// Connections open at once by default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 16_384;
/// Seconds a request's head or body may take to arrive, by default.
pub const DEFAULT_READ_TIMEOUT_SECS: u64 = 30;
/// Seconds a connection may sit idle, by default.
pub const DEFAULT_IDLE_TIMEOUT_SECS: u64 = 60;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            read_timeout: std::time::Duration::from_secs(DEFAULT_READ_TIMEOUT_SECS),
            idle_timeout: std::time::Duration::from_secs(DEFAULT_IDLE_TIMEOUT_SECS),
        }
    }
}

/// Queues labelled one by one in `/metrics` by default.
pub const DEFAULT_METRICS_QUEUE_LIMIT: usize = 1000;

/// Durable mode: where queues and messages are kept across restarts, and what "kept" means
/// before a change is acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Durability {
    /// The data directory (created if missing; one process at a time).
    pub data_dir: PathBuf,
    pub sync: SyncMode,
    /// Start past a corrupt record with everything before it, instead of refusing to start.
    pub salvage: bool,
    /// Once the log passes this many bytes (and a snapshot would about halve what a start
    /// reads), a snapshot of the current state replaces it, so steady traffic keeps the data
    /// directory bounded.
    pub compact_after_bytes: u64,
}

/// The address the binary listens on by default: loopback only (`::1` too where the
/// machine has it). A server on the network is one flag away: `--host 0.0.0.0`.
pub const DEFAULT_HOST: &str = "127.0.0.1";

/// Log size that triggers a snapshot by default.
pub const DEFAULT_COMPACT_AFTER_BYTES: u64 = 64 << 20;

impl Durability {
    /// Durable mode in `data_dir` with the default (fsync) promise.
    pub fn new(data_dir: impl Into<PathBuf>) -> Durability {
        Durability {
            data_dir: data_dir.into(),
            sync: SyncMode::Fsync,
            salvage: false,
            compact_after_bytes: DEFAULT_COMPACT_AFTER_BYTES,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            host: "127.0.0.1".to_string(),
            port: 0,
            region: DEFAULT_REGION.to_string(),
            account_id: DEFAULT_ACCOUNT_ID.to_string(),
            advertised_url: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            url_style: UrlStyle::Path,
            auth: AuthMode::Off,
            engine: EngineSettings::default(),
            durability: None,
            metrics_queue_limit: DEFAULT_METRICS_QUEUE_LIMIT,
            limits: Limits::default(),
            localstack: None,
            init_dir: None,
            single_region: false,
            console_port: None,
            cluster: None,
            security: Security::default(),
        }
    }
}

/// A known access key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub access_key: String,
    pub secret_key: String,
    /// The account this key acts as; the server default when `None`.
    pub account_id: Option<String>,
    /// Whether requests signed with it may use the control plane (admin API, console,
    /// metrics) under `--auth verify`.
    pub admin: bool,
}

impl Credential {
    /// Parses `ACCESS_KEY:SECRET[:ACCOUNT_ID][:admin]`.
    pub fn parse(s: &str) -> Option<Credential> {
        let parts: Vec<&str> = s.trim().split(':').collect();
        let (access_key, secret_key, rest) = match parts.as_slice() {
            [a, s, rest @ ..] if !a.is_empty() && !s.is_empty() && rest.len() <= 2 => {
                (a.to_string(), s.to_string(), rest)
            }
            _ => return None,
        };
        let (account_id, admin) = match rest {
            [] => (None, false),
            ["admin"] => (None, true),
            [a] => (Some(a.to_string()), false),
            [a, "admin"] => (Some(a.to_string()), true),
            _ => return None,
        };
        if account_id.as_ref().is_some_and(|a| !is_account_id(a)) {
            return None;
        }
        Some(Credential {
            access_key,
            secret_key,
            account_id,
            admin,
        })
    }

    /// Reads a credentials file: one `ACCESS_KEY:SECRET[:ACCOUNT_ID][:admin]` a line;
    /// blank lines and lines starting with `#` are skipped. Keeps secrets out of `ps`.
    pub fn read_file(path: &str) -> Result<Vec<Credential>, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the credentials file {path}: {e}"))?;
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            out.push(Credential::parse(line).ok_or_else(|| {
                format!(
                    "{path} line {}: expected ACCESS_KEY:SECRET[:ACCOUNT_ID][:admin]",
                    i + 1
                )
            })?);
        }
        Ok(out)
    }
}

/// Who may reach sqsim's control plane (admin API, console, metrics, LocalStack's
/// developer endpoints) and from which web pages; see docs/security.md.
#[derive(Debug, Clone)]
pub struct Security {
    /// Origins (`scheme://host[:port]`) whose web pages may call sqsim (answered with CORS
    /// headers naming them); no page of any other origin can, whatever it sends.
    pub allowed_origins: Vec<String>,
    /// Host names, besides loopback names, IP addresses, single-label names and the advertised
    /// URL's host, that requests to the control plane (and requests from browsers) may name
    /// in `Host`: what stops DNS rebinding.
    pub allowed_hosts: Vec<String>,
    /// `Authorization: Bearer <token>` that opens the control plane, and the console's login.
    /// With `--auth verify` and no token, one is made up at start and printed.
    pub admin_token: Option<String>,
    /// Whether the control plane is served at all (`--admin off` removes it: only the SQS
    /// API and the health check remain).
    pub admin: bool,
}

impl Default for Security {
    fn default() -> Self {
        Security {
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            admin_token: None,
            admin: true,
        }
    }
}

/// Whether and how requests are authenticated.
#[derive(Debug, Clone, Default)]
pub enum AuthMode {
    /// Any credentials (or none) are accepted, as every peer emulator does.
    #[default]
    Off,
    /// Signatures are checked against these keys.
    Verify(HashMap<String, Credential>),
}

impl Config {
    /// What the binary starts from before the config file and flags: the loopback
    /// interface (nothing on the network reaches it), port 9324.
    pub fn server_defaults() -> Config {
        Config {
            host: DEFAULT_HOST.to_string(),
            port: DEFAULT_PORT,
            ..Config::default()
        }
    }

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

impl Limits {
    /// Sets the limits given, each checked: zero connections or a zero timeout would make a
    /// server that answers nobody. The error is a one-line message naming the setting.
    pub fn apply(
        &mut self,
        max_connections: Option<usize>,
        read_timeout_secs: Option<u64>,
        idle_timeout_secs: Option<u64>,
    ) -> Result<(), String> {
        // A day is far beyond any sane timeout and keeps every deadline sum small.
        const MAX_SECS: u64 = 86_400;
        if let Some(n) = max_connections {
            if n == 0 {
                return Err("max_connections must be at least 1".into());
            }
            self.max_connections = n;
        }
        for (name, v, field) in [
            ("read_timeout", read_timeout_secs, &mut self.read_timeout),
            ("idle_timeout", idle_timeout_secs, &mut self.idle_timeout),
        ] {
            if let Some(s) = v {
                if !(1..=MAX_SECS).contains(&s) {
                    return Err(format!("{name} must be 1 to {MAX_SECS} seconds, got {s}"));
                }
                *field = std::time::Duration::from_secs(s);
            }
        }
        Ok(())
    }
}

/// A byte size: a number with an optional `K`, `M`, `G` (powers of 1000) or `KiB`, `MiB`,
/// `GiB` (powers of 1024) suffix.
pub fn parse_size(v: &str) -> Result<u64, String> {
    let v = v.trim();
    let digits = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (n, unit) = v.split_at(digits);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{v:?} is not a size (a number of bytes, e.g. 512MiB)"))?;
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KB" => 1_000,
        "M" | "MB" => 1_000_000,
        "G" | "GB" => 1_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => return Err(format!("unknown size unit {other:?} in {v:?}")),
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("{v:?} is too large"))
}

/// A new secret (an admin token, a console session, the cluster's peer secret): 244 random
/// bits from the OS's generator (two v4 UUIDs), as 64 hex digits.
pub(crate) fn new_secret() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Constant-time comparison of two secrets (signatures, tokens): a mismatch takes as long
/// wherever it starts.
pub(crate) fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The port when none is given: LocalStack's with `--compat localstack`, else 9324.
pub fn default_port(compat: Option<&str>) -> u16 {
    match compat {
        Some("localstack") => LOCALSTACK_PORT,
        _ => DEFAULT_PORT,
    }
}

/// LocalStack's own environment variables for SQS queue URLs, so that a docker-compose file
/// written for LocalStack keeps its meaning.
pub(crate) fn localstack_settings() -> Result<LocalStack, String> {
    let strategy = match std::env::var("SQS_ENDPOINT_STRATEGY") {
        Ok(s) if !s.is_empty() => s.parse()?,
        _ => Default::default(),
    };
    let host = std::env::var("LOCALSTACK_HOST")
        .ok()
        .filter(|h| !h.is_empty());
    Ok(LocalStack { strategy, host })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_over_the_file_and_verification_needs_keys() {
        let none = HashMap::new();
        let mut c = Config::server_defaults();
        let flags = Flags {
            port: Some(1234),
            url_style: Some("region-host".into()),
            auth: Some("verify".into()),
            credentials: vec!["AK:SK:123456789012".into()],
            ..Flags::default()
        };
        flags.apply(&mut c, &none, Source::Flags).unwrap();
        Flags::finish(&c).unwrap();
        assert_eq!((c.host.as_str(), c.port), ("127.0.0.1", 1234));
        assert_eq!(c.url_style, UrlStyle::RegionHost);
        assert!(
            matches!(&c.auth, AuthMode::Verify(k) if k["AK"].account_id.as_deref() == Some("123456789012"))
        );

        let mut c = Config::server_defaults();
        let verify = Flags {
            auth: Some("verify".into()),
            ..Flags::default()
        };
        verify.clone().apply(&mut c, &none, Source::Flags).unwrap();
        assert!(Flags::finish(&c)
            .unwrap_err()
            .contains("needs at least one key"));
        let mut c = Config::server_defaults();
        let file_keys = HashMap::from([("F".to_string(), Credential::parse("F:S").unwrap())]);
        verify.apply(&mut c, &file_keys, Source::Flags).unwrap();
        Flags::finish(&c).unwrap();
        assert!(matches!(&c.auth, AuthMode::Verify(k) if k.contains_key("F")));

        let mut c = Config::server_defaults();
        let bad = Flags {
            account_id: Some("12".into()),
            ..Flags::default()
        };
        bad.apply(&mut c, &none, Source::Flags).unwrap();
        assert!(Flags::finish(&c).unwrap_err().contains("12 digits"));
        let bad = Flags {
            credentials: vec!["nocolon".into()],
            ..Flags::default()
        };
        let err = bad.apply(&mut c, &none, Source::Flags).unwrap_err();
        assert_eq!(err.key, Some("credentials"));
    }

    #[test]
    fn the_file_and_the_flags_name_a_setting_their_own_way() {
        let shards = Flags {
            cluster_shards: Some(0),
            ..Flags::default()
        };
        let mut c = Config::server_defaults();
        let err = shards
            .clone()
            .apply(&mut c, &HashMap::new(), Source::Flags)
            .unwrap_err();
        assert_eq!(err.key, None, "{err}");
        assert!(
            err.message
                .starts_with("--node-id, --peer-url and --cluster-* need cluster mode"),
            "{err}"
        );
        let with_nats = Flags {
            cluster: Some("nats://127.0.0.1:4222".into()),
            ..shards
        };
        let err = with_nats
            .clone()
            .apply(&mut c, &HashMap::new(), Source::Flags)
            .unwrap_err();
        assert_eq!(err.key, Some("cluster_shards"));
        assert_eq!(err.message, "--cluster-shards must be 1 to 1024, got 0");
        let err = with_nats
            .apply(&mut c, &HashMap::new(), Source::File)
            .unwrap_err();
        assert_eq!(err.message, "cluster_shards must be 1 to 1024, got 0");

        // A later source changes one cluster setting of an earlier one's cluster.
        let mut c = Config::server_defaults();
        let file = Flags {
            cluster: Some("nats://127.0.0.1:4222".into()),
            node_id: Some("a".into()),
            ..Flags::default()
        };
        file.apply(&mut c, &HashMap::new(), Source::File).unwrap();
        let cluster = c.cluster.clone().unwrap();
        assert!(
            !cluster.keep_leaders,
            "the nodes spread stream leaders by default"
        );
        let flags = Flags {
            cluster_shards: Some(4),
            cluster_keep_leaders: true,
            ..Flags::default()
        };
        flags.apply(&mut c, &HashMap::new(), Source::Flags).unwrap();
        let cluster = c.cluster.unwrap();
        assert_eq!((cluster.node_id.as_str(), cluster.shards), ("a", 4));
        assert!(cluster.keep_leaders);
        let alone = Flags {
            cluster_keep_leaders: true,
            ..Flags::default()
        };
        let err = alone
            .apply(
                &mut Config::server_defaults(),
                &HashMap::new(),
                Source::Flags,
            )
            .unwrap_err();
        assert!(err.message.contains("need cluster mode"), "{}", err.message);

        let sync = Flags {
            sync: Some("os".into()),
            ..Flags::default()
        };
        let err = sync
            .apply(
                &mut Config::server_defaults(),
                &HashMap::new(),
                Source::Flags,
            )
            .unwrap_err();
        assert_eq!(err.message, "--sync needs durable mode: set --data-dir too");
    }

    #[test]
    fn localstack_queue_urls() {
        let local: std::net::SocketAddr = "127.0.0.1:4566".parse().unwrap();
        let with = |strategy, host: Option<&str>| Config {
            localstack: Some(LocalStack {
                strategy,
                host: host.map(str::to_string),
            }),
            ..Config::default()
        };
        let base = |c: &Config, req_host, region| c.queue_base_url(Some(req_host), region, local);
        use LocalStackStrategy::*;
        let c = with(Standard, None);
        assert_eq!(
            base(&c, "localhost:4566", "eu-west-1"),
            "http://sqs.eu-west-1.localhost.localstack.cloud:4566"
        );
        let c = with(Domain, None);
        assert_eq!(
            base(&c, "x", "us-east-1"),
            "http://queue.localhost.localstack.cloud:4566"
        );
        assert_eq!(
            base(&c, "x", "eu-west-1"),
            "http://eu-west-1.queue.localhost.localstack.cloud:4566"
        );
        let c = with(Path, Some("localstack"));
        assert_eq!(
            base(&c, "x", "us-east-1"),
            "http://localstack:4566/queue/us-east-1"
        );
        let c = with(Off, Some("ls.example:1234"));
        assert_eq!(base(&c, "x", "us-east-1"), "http://ls.example:1234");
        let c = with(Dynamic, None);
        assert_eq!(
            base(
                &c,
                "sqs.us-east-1.localhost.localstack.cloud:4566",
                "eu-west-1"
            ),
            "http://sqs.eu-west-1.localhost.localstack.cloud:4566"
        );
        assert_eq!(
            base(
                &c,
                "eu-west-1.queue.localhost.localstack.cloud:4566",
                "eu-west-1"
            ),
            "http://eu-west-1.queue.localhost.localstack.cloud:4566"
        );
        assert_eq!(
            base(&c, "localhost:4566", "us-east-1"),
            "http://localhost:4566/queue/us-east-1"
        );
        // The advertised URL wins over everything.
        let mut c = with(Standard, None);
        c.advertised_url = Some("http://sqs.local:9/".into());
        assert_eq!(base(&c, "x", "us-east-1"), "http://sqs.local:9");
    }

    #[test]
    fn a_host_without_a_port_gets_the_port_the_request_arrived_on() {
        let local: std::net::SocketAddr = "127.0.0.1:9324".parse().unwrap();
        let c = Config::default();
        let base = |c: &Config, host| c.queue_base_url(Some(host), "us-east-1", local);
        assert_eq!(base(&c, "127.0.0.1"), "http://127.0.0.1:9324");
        assert_eq!(base(&c, "localhost:1234"), "http://localhost:1234");
        assert_eq!(base(&c, "[::1]"), "http://[::1]:9324");
        assert_eq!(base(&c, "[::1]:5"), "http://[::1]:5");
        let region_host = Config {
            url_style: UrlStyle::RegionHost,
            ..Config::default()
        };
        assert_eq!(
            base(&region_host, "[::1]"),
            "http://sqs.us-east-1.localhost:9324"
        );
        assert_eq!(base(&c, "localhost"), "http://localhost:9324");
        // A name without a port is a proxy's (port 80 or 443): left as it is.
        assert_eq!(base(&c, "sqs.example"), "http://sqs.example");
        // On port 80 a Host without a port is already right.
        let on80: std::net::SocketAddr = "0.0.0.0:80".parse().unwrap();
        assert_eq!(
            c.queue_base_url(Some("127.0.0.1"), "us-east-1", on80),
            "http://127.0.0.1"
        );
    }

    #[test]
    fn sizes_take_decimal_and_binary_units() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("2MiB"), Ok(2 << 20));
        assert_eq!(parse_size("3 G"), Ok(3_000_000_000));
        assert_eq!(parse_size("1KiB"), Ok(1024));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("5TB").is_err());
        assert!(parse_size("99999999999999GiB").is_err());
    }

    #[test]
    fn credentials_may_be_marked_admin_and_come_from_a_file() {
        let c = Credential::parse("AK:SK:123456789012:admin").unwrap();
        assert!(c.admin && c.account_id.as_deref() == Some("123456789012"));
        assert!(Credential::parse("AK:SK:admin").unwrap().admin);
        assert!(!Credential::parse("AK:SK").unwrap().admin);
        assert!(Credential::parse("AK:SK:123:admin").is_none());
        assert!(Credential::parse("AK:SK:123456789012:root").is_none());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys");
        std::fs::write(&path, "# keys\nA:1\n\nB:2:123456789012:admin\n").unwrap();
        let keys = Credential::read_file(path.to_str().unwrap()).unwrap();
        assert_eq!(keys.len(), 2);
        assert!(keys[1].admin);
        std::fs::write(&path, "bad line").unwrap();
        let err = Credential::read_file(path.to_str().unwrap()).unwrap_err();
        assert!(err.contains("line 1"), "{err}");
    }
}
