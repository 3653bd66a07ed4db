//! Server configuration: one struct built directly by embedders and tests, or by the binary
//! from its defaults, the config file and then its flags ([`Flags`]), in that order.

use std::path::PathBuf;

use crate::engine::EngineSettings;
pub use crate::store::SyncMode;

mod compat;
mod flags;
mod security;
mod urls;
pub(crate) use compat::localstack_settings;
pub use compat::{
    default_port, LocalStack, ELASTICMQ_CONF, ELASTICMQ_UI_PORT, LOCALSTACK_DOMAIN,
    LOCALSTACK_PERSISTENCE_DIR, LOCALSTACK_PORT, LOCALSTACK_READY_DIR,
};
pub use flags::{Flags, Invalid, Source};
pub(crate) use security::{new_secret, same_secret};
pub use security::{AuthMode, Credential, Security};
pub(crate) use urls::{host_port, names_this_machine};
pub use urls::{LocalStackStrategy, UrlStyle};

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
    /// Bytes of request bodies the server holds while they arrive, every connection and
    /// stream together (0: no limit). Bodies over 64 KiB take at most three quarters of it,
    /// each admitted whole (by its `Content-Length`) before it is read: on HTTP/1.1 one that
    /// does not fit waits for room (up to the read timeout), on HTTP/2 it is refused at once.
    /// Smaller ones take their bytes as they arrive, and are refused when those do not fit.
    /// Refused means ServiceUnavailable (503), which SDKs retry.
    pub max_incoming_bytes: u64,
}

/// Connections open at once by default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 16_384;
/// Seconds a request's head or body may take to arrive, by default.
pub const DEFAULT_READ_TIMEOUT_SECS: u64 = 30;
/// Seconds a connection may sit idle, by default.
pub const DEFAULT_IDLE_TIMEOUT_SECS: u64 = 60;
/// Bytes of request bodies held while they arrive, by default: 128 MiB. Bodies on a local
/// or data-centre network arrive within milliseconds of their heads, so thousands of
/// requests a second of 1 MiB messages hold a few MiB at any moment; this is twelve
/// largest (8 MiB) bodies at once in the large bodies' share, and what a flood of unfinished
/// bodies can make sqsim hold — before it was the body cap times every connection.
pub const DEFAULT_MAX_INCOMING_BYTES: u64 = 128 << 20;
/// The smallest `max_incoming_bytes` but 0: its large bodies' share (three quarters) must
/// fit the largest body, 8 MiB.
pub const MIN_MAX_INCOMING_BYTES: u64 = 16 << 20;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            read_timeout: std::time::Duration::from_secs(DEFAULT_READ_TIMEOUT_SECS),
            idle_timeout: std::time::Duration::from_secs(DEFAULT_IDLE_TIMEOUT_SECS),
            max_incoming_bytes: DEFAULT_MAX_INCOMING_BYTES,
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

    /// Sets `max_incoming_bytes`: 0 (no limit), or enough for the largest body.
    pub fn set_max_incoming_bytes(&mut self, bytes: u64) -> Result<(), String> {
        if bytes != 0 && bytes < MIN_MAX_INCOMING_BYTES {
            return Err(format!(
                "max_incoming_bytes must be 0 (no limit) or at least {MIN_MAX_INCOMING_BYTES} (16MiB: three quarters of it hold the largest body), got {bytes}"
            ));
        }
        self.max_incoming_bytes = bytes;
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

#[cfg(test)]
mod tests;
