//! The server's settings as the binary takes them: ONE struct, [`Flags`], read by clap from
//! the command line and the `SQSIM_*` environment, and by serde from the config file's
//! `[server]` section (same names, `snake_case` there). Each field's doc comment is its
//! `--help` text. Adding a setting means adding a field here and a line in [`Flags::apply`];
//! the file and the flags go through that same `apply`, file first, flags over it.

use std::collections::HashMap;

use clap::builder::PossibleValuesParser;
use serde::Deserialize;

use super::{
    is_account_id, parse_size, AuthMode, Cluster, Config, Credential, Durability, SyncMode,
    UrlStyle,
};

/// The server settings, from the command line (and its environment variables) or from the
/// config file's `[server]` section; `None` leaves the value set before.
#[derive(Debug, Clone, Default, clap::Args, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Flags {
    /// Config file (TOML, or ElasticMQ .conf).
    ///
    /// Config file: server settings and queues to create at start (flags win over it). TOML,
    /// or an ElasticMQ `elasticmq.conf` (HOCON) when the name ends in `.conf`.
    #[arg(help_heading = "Server", long, env = "SQSIM_CONFIG")]
    #[serde(skip)]
    pub config: Option<String>,
    /// Behave like LocalStack's or ElasticMQ's SQS.
    ///
    /// Behave like another SQS server for setups written for it. `localstack`: port 4566,
    /// its queue URLs (SQS_ENDPOINT_STRATEGY, LOCALSTACK_HOST), /_localstack/health,
    /// /_aws/sqs/messages, ready.d init hooks, and a clear error for other AWS services.
    /// `elasticmq`: /opt/elasticmq.conf read when present and no --config is given, the
    /// console on port 9325 too, and one namespace whatever region a client signs with.
    #[arg(help_heading = "Server", long, env = "SQSIM_COMPAT", value_parser = ["localstack", "elasticmq"])]
    #[serde(skip)]
    pub compat: Option<String>,
    /// Scripts to run once the server answers.
    ///
    /// Run the scripts in this directory (executables, and `*.sh` files through `sh`) once,
    /// in name order, when the server answers [default with --compat localstack:
    /// /etc/localstack/init/ready.d if present].
    #[arg(help_heading = "Server", long, env = "SQSIM_INIT_DIR")]
    pub init_dir: Option<std::path::PathBuf>,
    /// Address to listen on [default: 127.0.0.1].
    ///
    /// Address to listen on; `0.0.0.0` (or `::`) reaches every interface [default:
    /// 127.0.0.1, and ::1 where the machine has it].
    #[arg(help_heading = "Server", long, env = "SQSIM_HOST")]
    pub host: Option<String>,
    /// Port to listen on [default: 9324].
    ///
    /// Port to listen on; 0 picks a free port, printed on stdout as `sqsim listening on
    /// http://…` [default: 9324, 4566 with --compat localstack].
    #[arg(help_heading = "Server", long, env = "SQSIM_PORT")]
    pub port: Option<u16>,
    /// A second port serving the same server, for the console [default: none].
    ///
    /// A second port on the same address, serving the same server: the console (a browser
    /// at / is sent to it), the SQS API and the control plane; ElasticMQ's images serve
    /// their UI on 9325 [default: none; 9325 with --compat elasticmq].
    #[arg(help_heading = "Server", long, env = "SQSIM_CONSOLE_PORT")]
    pub console_port: Option<u16>,
    /// Default region [default: us-east-1].
    ///
    /// Region used when a request carries no SigV4 credential scope [default: us-east-1].
    #[arg(help_heading = "Server", long, env = "SQSIM_REGION")]
    pub region: Option<String>,
    /// Default account id [default: 000000000000].
    ///
    /// Account id (12 digits) that owns queues by default [default: 000000000000].
    #[arg(help_heading = "Server", long, env = "SQSIM_ACCOUNT_ID")]
    pub account_id: Option<String>,
    /// Base of queue URLs [default: from each request's Host].
    ///
    /// Base of queue URLs, e.g. http://sqs.local:9324 [default: from each request's Host].
    #[arg(help_heading = "Server", long, env = "SQSIM_ADVERTISED_URL")]
    pub advertised_url: Option<String>,
    /// Queue URL style: path or region-host.
    ///
    /// Queue URL style: `path` (http://host:port/account/name) or `region-host`
    /// (http://sqs.<region>.localhost:port/account/name, unambiguous across regions)
    /// [default: path].
    #[arg(help_heading = "Server", long, env = "SQSIM_URL_STYLE", value_parser = PossibleValuesParser::new(["path", "region-host"]))]
    pub url_style: Option<String>,
    /// SigV4 checking: off or verify [default: off].
    ///
    /// SigV4 checking: `off` accepts any credentials; `verify` checks signatures against the
    /// keys from --credentials and the config file [default: off].
    #[arg(help_heading = "Security", long, env = "SQSIM_AUTH", value_parser = PossibleValuesParser::new(["off", "verify"]))]
    pub auth: Option<String>,
    /// A key for --auth verify (repeatable).
    ///
    /// A key for --auth verify, as ACCESS_KEY:SECRET[:ACCOUNT_ID][:admin] (`admin`: it may
    /// use the control plane); repeatable, comma-separated in the environment variable.
    /// Visible in `ps`: prefer --credentials-file.
    #[arg(
        help_heading = "Security",
        long,
        env = "SQSIM_CREDENTIALS",
        value_delimiter = ','
    )]
    #[serde(skip)]
    pub credentials: Vec<String>,
    /// A file of keys for --auth verify.
    ///
    /// A file of keys for --auth verify, one ACCESS_KEY:SECRET[:ACCOUNT_ID][:admin] a line;
    /// lines starting with `#` are comments.
    #[arg(help_heading = "Security", long, env = "SQSIM_CREDENTIALS_FILE")]
    pub credentials_file: Option<String>,
    /// Web origins that may call sqsim.
    ///
    /// Origins (e.g. http://localhost:3000) whose web pages may call sqsim, answered with
    /// CORS headers; pages of every other origin are refused; comma-separated [default:
    /// none].
    #[arg(
        help_heading = "Security",
        long,
        env = "SQSIM_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    pub allowed_origins: Vec<String>,
    /// More host names sqsim answers to.
    ///
    /// Host names the control plane (and browsers) may reach sqsim by, besides localhost,
    /// *.localhost, IP addresses, single-label names and the advertised URL's host;
    /// comma-separated.
    #[arg(
        help_heading = "Security",
        long,
        env = "SQSIM_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub allowed_hosts: Vec<String>,
    /// Token the control plane requires.
    ///
    /// A token (16+ characters) the control plane requires as `Authorization: Bearer
    /// <token>`; the console asks for it once [default: none; with --auth verify, one is
    /// made up and printed at start].
    #[arg(help_heading = "Security", long, env = "SQSIM_ADMIN_TOKEN")]
    pub admin_token: Option<String>,
    /// on or off: the control plane [default: on].
    ///
    /// `off` removes the control plane (admin API, console, metrics, LocalStack's developer
    /// endpoints); only the SQS API and the health check remain [default: on].
    #[arg(help_heading = "Security", long, env = "SQSIM_ADMIN", value_parser = PossibleValuesParser::new(["on", "off"]))]
    pub admin: Option<String>,
    /// Durable mode: keep state in this directory.
    ///
    /// Durable mode: keep queues and messages in this directory across restarts (created if
    /// missing; one process per directory). Without it nothing touches the disk.
    #[arg(help_heading = "Durability", long, env = "SQSIM_DATA_DIR")]
    pub data_dir: Option<std::path::PathBuf>,
    /// fsync or os: durability before answering [default: fsync].
    ///
    /// What durable mode promises before answering: `fsync` (on disk; survives a power cut)
    /// or `os` (handed to the OS; survives a crash of sqsim, not of the machine)
    /// [default: fsync].
    #[arg(help_heading = "Durability", long, env = "SQSIM_SYNC", value_parser = PossibleValuesParser::new(["fsync", "os"]))]
    pub sync: Option<String>,
    /// Start past a corrupt record, keeping what precedes it.
    ///
    /// Start even if the data directory holds a corrupt record: keep everything before it
    /// (the damaged file is kept aside as *.salvaged).
    #[arg(help_heading = "Durability", long, env = "SQSIM_SALVAGE")]
    pub salvage: bool,
    /// Log bytes before a snapshot replaces it.
    ///
    /// Durable mode: once the log passes this many bytes (and a snapshot would about halve
    /// what a start reads), a snapshot replaces it [default: 67108864].
    #[arg(help_heading = "Durability", long, env = "SQSIM_COMPACT_AFTER")]
    pub compact_after: Option<u64>,
    /// Queues labelled one by one in /metrics [default: 1000].
    ///
    /// Queues labelled one by one in /metrics; the rest are summed as queue="_other"
    /// [default: 1000].
    #[arg(help_heading = "Limits", long, env = "SQSIM_METRICS_QUEUE_LIMIT")]
    pub metrics_queue_limit: Option<usize>,
    /// Connections open at once [default: 16384].
    ///
    /// Connections open at once; more are closed on arrival. Lowered to fit the open-file
    /// limit [default: 16384].
    #[arg(help_heading = "Limits", long, env = "SQSIM_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Seconds a request may take to arrive [default: 30].
    ///
    /// Seconds a request's headers, and then its body, may take to arrive (slow clients are
    /// disconnected); also how long an HTTP/1.1 connection may wait for its next request
    /// [default: 30].
    #[arg(help_heading = "Limits", long, env = "SQSIM_READ_TIMEOUT")]
    pub read_timeout: Option<u64>,
    /// Seconds an idle connection stays open [default: 60].
    ///
    /// Seconds a connection stays open with no request running (since its last answer)
    /// [default: 60].
    #[arg(help_heading = "Limits", long, env = "SQSIM_IDLE_TIMEOUT")]
    pub idle_timeout: Option<u64>,
    /// Bytes of request bodies held while they arrive [default: 128MiB].
    ///
    /// Bytes of request bodies the server holds while they arrive, all connections together,
    /// as a number with an optional K/M/G/KiB/MiB/GiB suffix: bodies over 64 KiB take at
    /// most three quarters of it, and one that does not fit waits for room (HTTP/1.1) or gets
    /// ServiceUnavailable (503, HTTP/2); smaller ones get 503 when even the last quarter is
    /// full. At least 16MiB, or `0` for no limit [default: 128MiB].
    #[arg(help_heading = "Limits", long, env = "SQSIM_MAX_INCOMING_BYTES")]
    #[serde(deserialize_with = "size_text")]
    pub max_incoming_bytes: Option<String>,
    /// Long polls waiting at once [default: 16384].
    ///
    /// ReceiveMessage long polls waiting at once; one more gets ServiceUnavailable (503)
    /// [default: 16384].
    #[arg(help_heading = "Limits", long, env = "SQSIM_MAX_LONG_POLLS")]
    pub max_long_polls: Option<usize>,
    /// Bytes the process may hold for its clients.
    ///
    /// Bytes the process may hold for its clients — messages, FIFO groups and deduplication
    /// memory, queues with their settings and tags — at their heap cost, as a number with
    /// an optional K/M/G/KiB/MiB/GiB suffix; a send, CreateQueue, SetQueueAttributes or
    /// TagQueue past it gets ServiceUnavailable (503), which SDKs retry; `0` for no limit
    /// [default: half of what the process may use (machine, cgroup v1/v2 at every level,
    /// RLIMIT_AS/DATA)].
    #[arg(help_heading = "Limits", long, env = "SQSIM_MAX_STORED_BYTES")]
    #[serde(deserialize_with = "size_text")]
    pub max_stored_bytes: Option<String>,
    /// AWS-realism mode: aws, or a list [default: off].
    ///
    /// AWS-realism mode: `aws` turns on every behaviour of the distributed SQS (short-poll
    /// sampling, best-effort order, duplicates, lagging counts, propagation delays,
    /// throughput quotas); or a list such as `short_poll,duplicates=0.2` [default: off].
    #[arg(help_heading = "Realism", long, env = "SQSIM_REALISM")]
    pub realism: Option<String>,
    /// Seed of realism's draws.
    ///
    /// The seed realism draws from: the same seed and requests replay the same run
    /// [default: from the time, printed at start].
    #[arg(help_heading = "Realism", long, env = "SQSIM_SEED")]
    pub seed: Option<u64>,
    /// Cluster mode: NATS JetStream URLs.
    ///
    /// Cluster mode: NATS JetStream server URLs (comma-separated); queues spread over every
    /// sqsim node on the same JetStream, any node answers for any queue.
    #[arg(help_heading = "Cluster", long, env = "SQSIM_CLUSTER")]
    pub cluster: Option<String>,
    /// This node's name in the cluster.
    ///
    /// This node's name in the cluster [default: HOST-PORT].
    #[arg(help_heading = "Cluster", long, env = "SQSIM_NODE_ID")]
    pub node_id: Option<String>,
    /// URL other nodes reach this one at.
    ///
    /// The URL other nodes reach this one at [default: http://127.0.0.1:PORT].
    #[arg(help_heading = "Cluster", long, env = "SQSIM_PEER_URL")]
    pub peer_url: Option<String>,
    /// Shards queues are hashed into [default: 48].
    ///
    /// Shards queues are hashed into; the same on every node. Nodes serve equal numbers of
    /// shards, so the default spreads evenly over clusters of up to about ten nodes
    /// [default: 48].
    #[arg(help_heading = "Cluster", long, env = "SQSIM_CLUSTER_SHARDS")]
    pub cluster_shards: Option<u32>,
    /// Copies of each shard's log [default: 3].
    ///
    /// Copies JetStream keeps of each shard's log and of the leases [default: 3].
    #[arg(help_heading = "Cluster", long, env = "SQSIM_CLUSTER_REPLICAS")]
    pub cluster_replicas: Option<usize>,
    /// A node's lease on its shards, in ms [default: 2500].
    ///
    /// A node's lease on its shards, in milliseconds: how soon a dead node's queues are
    /// served elsewhere [default: 2500].
    #[arg(help_heading = "Cluster", long, env = "SQSIM_CLUSTER_LEASE")]
    pub cluster_lease: Option<u64>,
    /// Serve no shard, only route.
    ///
    /// Cluster mode: serve no shard, only route requests to the nodes that do.
    #[arg(help_heading = "Cluster", long, env = "SQSIM_CLUSTER_GATEWAY")]
    pub cluster_gateway: bool,
    /// Leave stream leaders where JetStream elects them.
    ///
    /// Cluster mode: leave each shard stream's leader where JetStream's elections put it.
    /// By default the nodes move the leaders so that every JetStream server leads an equal
    /// share of the streams it keeps (nats-server 2.11 or newer).
    #[arg(help_heading = "Cluster", long, env = "SQSIM_CLUSTER_KEEP_LEADERS")]
    pub cluster_keep_leaders: bool,
    /// Config file only: PurgeQueue refuses a second purge within 60 seconds, as AWS does
    /// [default: true].
    #[arg(skip)]
    pub purge_cooldown: Option<bool>,
    /// Config file only: a deleted queue's name cannot be reused for 60 seconds, as on AWS
    /// [default: true].
    #[arg(skip)]
    pub deleted_queue_cooldown: Option<bool>,
    /// Config file only: one namespace per account, every request acting in `region`
    /// whatever region its signature names (ElasticMQ's behaviour, set for its configs)
    /// [default: false].
    #[arg(skip)]
    pub single_region: Option<bool>,
}

/// The cluster settings, applied together.
struct ClusterFlags {
    nats: Option<String>,
    node_id: Option<String>,
    peer_url: Option<String>,
    shards: Option<u32>,
    replicas: Option<usize>,
    lease_ms: Option<u64>,
    gateway: bool,
    keep_leaders: bool,
}

impl ClusterFlags {
    fn apply(self, config: &mut Config, source: Source) -> Result<(), Invalid> {
        let name = |key: &str| source.name(key);
        let nats = self.nats.filter(|n| !n.is_empty());
        let any = self.node_id.is_some()
            || self.peer_url.is_some()
            || self.shards.is_some()
            || self.replicas.is_some()
            || self.lease_ms.is_some()
            || self.gateway
            || self.keep_leaders;
        if nats.is_none() && !any {
            return Ok(());
        }
        if config.durability.is_some() {
            return Err(Invalid::of(
                "cluster",
                format!(
                    "{} keeps state in JetStream; it does not take {}",
                    name("cluster"),
                    name("data_dir")
                ),
            ));
        }
        if config.localstack.is_some() {
            return Err(Invalid::of(
                "cluster",
                format!(
                    "{} and --compat localstack cannot be combined",
                    name("cluster")
                ),
            ));
        }
        let mut cluster = match (nats, config.cluster.take()) {
            (Some(nats), _) => {
                let node_id = self.node_id.clone().unwrap_or_else(|| {
                    format!("{}-{}", config.host, config.port)
                        .replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "-")
                });
                Cluster::new(nats, node_id)
            }
            (None, Some(earlier)) => earlier,
            (None, None) => {
                return Err(Invalid {
                    key: None,
                    message: format!(
                        "{}, {} and {}-* need cluster mode: give {} nats://HOST:PORT",
                        name("node_id"),
                        name("peer_url"),
                        name("cluster"),
                        name("cluster")
                    ),
                })
            }
        };
        if let Some(id) = self.node_id {
            cluster.node_id = id;
        }
        let id = &cluster.node_id;
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(Invalid::of(
                "node_id",
                format!(
                    "{} must be letters, digits, '-' and '_', got {id:?}",
                    name("node_id")
                ),
            ));
        }
        cluster.peer_url = self.peer_url.or(cluster.peer_url);
        if let Some(n) = self.shards {
            if !(1..=1024).contains(&n) {
                return Err(Invalid::of(
                    "cluster_shards",
                    format!("{} must be 1 to 1024, got {n}", name("cluster_shards")),
                ));
            }
            cluster.shards = n;
        }
        if let Some(r) = self.replicas {
            if !(1..=5).contains(&r) {
                return Err(Invalid::of(
                    "cluster_replicas",
                    format!("{} must be 1 to 5, got {r}", name("cluster_replicas")),
                ));
            }
            cluster.replicas = r;
        }
        if let Some(ms) = self.lease_ms {
            if !(500..=60_000).contains(&ms) {
                return Err(Invalid::of(
                    "cluster_lease",
                    format!(
                        "{} must be 500 to 60000 ms, got {ms}",
                        name("cluster_lease")
                    ),
                ));
            }
            cluster.lease = std::time::Duration::from_millis(ms);
        }
        cluster.gateway |= self.gateway;
        cluster.keep_leaders |= self.keep_leaders;
        config.cluster = Some(cluster);
        Ok(())
    }
}

/// Where a [`Flags`] came from, for the names its errors use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The command line or the environment: settings are `--kebab-case`.
    Flags,
    /// The config file's `[server]` section: settings are `snake_case` keys.
    File,
}

impl Source {
    /// How a person writes the setting `key` (its field name) in this source.
    fn name(self, key: &str) -> String {
        match self {
            Source::Flags => format!("--{}", key.replace('_', "-")),
            Source::File => key.to_string(),
        }
    }
}

/// A setting that cannot be taken: the field it is (`None` when it is a combination) and a
/// message that reads alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub key: Option<&'static str>,
    pub message: String,
}

impl Invalid {
    fn of(key: &'static str, message: impl Into<String>) -> Invalid {
        Invalid {
            key: Some(key),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// `"a" is not one of "b", "c"`, or the value mapped.
fn one_of<T: Copy>(key: &'static str, value: &str, choices: &[(&str, T)]) -> Result<T, Invalid> {
    choices
        .iter()
        .find(|(name, _)| *name == value)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<String> = choices.iter().map(|(n, _)| format!("{n:?}")).collect();
            Invalid::of(key, format!("{value:?} is not one of {}", names.join(", ")))
        })
}

/// `max_stored_bytes` or `max_incoming_bytes` in a file: a number of bytes, or a string
/// with a unit.
fn size_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Size {
        Bytes(u64),
        Text(String),
    }
    Ok(Option::<Size>::deserialize(d)?.map(|s| match s {
        Size::Bytes(n) => n.to_string(),
        Size::Text(t) => t,
    }))
}

impl Flags {
    /// Applies these settings over `config` (the defaults, or what an earlier source set).
    /// `file_keys` are the config file's `[[credentials]]`, the keys `auth = verify` uses
    /// when no other keys are given. Checks that need every source ([`Flags::finish`]) come
    /// after the last one.
    pub fn apply(
        self,
        config: &mut Config,
        file_keys: &HashMap<String, Credential>,
        source: Source,
    ) -> Result<(), Invalid> {
        let name = |key: &str| source.name(key);
        macro_rules! set {
            ($($field:ident),*) => {$(if let Some(v) = self.$field { config.$field = v; })*};
        }
        set!(host, port, region, account_id, metrics_queue_limit);
        config.advertised_url = self.advertised_url.or(config.advertised_url.take());
        config.init_dir = self.init_dir.or(config.init_dir.take());
        config.console_port = self.console_port.or(config.console_port);
        if let Some(v) = &self.url_style {
            let styles = [
                ("path", UrlStyle::Path),
                ("region-host", UrlStyle::RegionHost),
            ];
            config.url_style = one_of("url_style", v, &styles)?;
        }
        let limit = |key, r: Result<(), String>| r.map_err(|e| Invalid::of(key, e));
        limit(
            "max_connections",
            config.limits.apply(self.max_connections, None, None),
        )?;
        limit(
            "read_timeout",
            config.limits.apply(None, self.read_timeout, None),
        )?;
        limit(
            "idle_timeout",
            config.limits.apply(None, None, self.idle_timeout),
        )?;
        if let Some(v) = &self.max_incoming_bytes {
            let bytes = parse_size(v).map_err(|e| {
                Invalid::of(
                    "max_incoming_bytes",
                    format!("{}: {e}", name("max_incoming_bytes")),
                )
            })?;
            limit(
                "max_incoming_bytes",
                config.limits.set_max_incoming_bytes(bytes),
            )?;
        }
        if let Some(v) = &self.max_stored_bytes {
            config.engine.max_stored_bytes = parse_size(v).map_err(|e| {
                Invalid::of(
                    "max_stored_bytes",
                    format!("{}: {e}", name("max_stored_bytes")),
                )
            })?;
        }
        if let Some(v) = self.max_long_polls {
            limit("max_long_polls", config.engine.set_max_long_polls(v))?;
        }
        if let Some(spec) = &self.realism {
            config.engine.realism =
                crate::engine::Realism::parse(spec).map_err(|e| Invalid::of("realism", e))?;
        }
        config.engine.seed = self.seed.or(config.engine.seed);
        if let Some(v) = self.purge_cooldown {
            config.engine.purge_cooldown = v;
        }
        if let Some(v) = self.deleted_queue_cooldown {
            config.engine.deleted_queue_cooldown = v;
        }
        if let Some(v) = self.single_region {
            config.single_region = v;
        }
        if let Some(dir) = self.data_dir {
            let sync = config.durability.as_ref().map(|d| d.sync);
            config.durability = Some(Durability {
                sync: sync.unwrap_or_default(),
                ..Durability::new(dir)
            });
        }
        let cluster = ClusterFlags {
            nats: self.cluster,
            node_id: self.node_id,
            peer_url: self.peer_url,
            shards: self.cluster_shards,
            replicas: self.cluster_replicas,
            lease_ms: self.cluster_lease,
            gateway: self.cluster_gateway,
            keep_leaders: self.cluster_keep_leaders,
        };
        cluster.apply(config, source)?;
        let durable_only = [
            ("sync", self.sync.is_some()),
            ("salvage", self.salvage),
            ("compact_after", self.compact_after.is_some()),
        ];
        match &mut config.durability {
            Some(d) => {
                if let Some(s) = &self.sync {
                    let modes = [("fsync", SyncMode::Fsync), ("os", SyncMode::Os)];
                    d.sync = one_of("sync", s, &modes)?;
                }
                d.salvage |= self.salvage;
                d.compact_after_bytes = self.compact_after.unwrap_or(d.compact_after_bytes);
            }
            None => {
                if let Some((key, _)) = durable_only.iter().find(|(_, set)| *set) {
                    return Err(Invalid::of(
                        key,
                        format!(
                            "{} needs durable mode: set {} too",
                            name(key),
                            name("data_dir")
                        ),
                    ));
                }
            }
        }
        let verifying = matches!(config.auth, AuthMode::Verify(_));
        let mut keys = match std::mem::take(&mut config.auth) {
            AuthMode::Verify(keys) => keys,
            AuthMode::Off => file_keys.clone(),
        };
        for c in &self.credentials {
            let cred = Credential::parse(c).ok_or_else(|| {
                Invalid::of("credentials", format!(
                    "--credentials must be ACCESS_KEY:SECRET[:ACCOUNT_ID][:admin] (12 digits), got {c:?}"
                ))
            })?;
            keys.insert(cred.access_key.clone(), cred);
        }
        if let Some(path) = &self.credentials_file {
            for cred in
                Credential::read_file(path).map_err(|e| Invalid::of("credentials_file", e))?
            {
                keys.insert(cred.access_key.clone(), cred);
            }
        }
        let verify = match &self.auth {
            Some(a) => one_of("auth", a, &[("off", false), ("verify", true)])?,
            None => verifying,
        };
        config.auth = if verify {
            AuthMode::Verify(keys)
        } else {
            AuthMode::Off
        };
        let security = &mut config.security;
        for o in &self.allowed_origins {
            let o = o.trim().trim_end_matches('/');
            if o == "*" || !(o.starts_with("http://") || o.starts_with("https://")) {
                return Err(Invalid::of(
                    "allowed_origins",
                    format!(
                        "{} takes origins such as http://localhost:3000 (no wildcard), got {o:?}",
                        name("allowed_origins")
                    ),
                ));
            }
            security.allowed_origins.push(o.to_ascii_lowercase());
        }
        for h in &self.allowed_hosts {
            let h = h.trim();
            if h.is_empty() || h == "*" || h.contains('/') {
                return Err(Invalid::of(
                    "allowed_hosts",
                    format!(
                        "{} takes host names such as sqs.internal (no wildcard), got {h:?}",
                        name("allowed_hosts")
                    ),
                ));
            }
            security.allowed_hosts.push(h.to_ascii_lowercase());
        }
        if let Some(t) = &self.admin_token {
            if t.len() < 16 {
                return Err(Invalid::of(
                    "admin_token",
                    format!("{} must be at least 16 characters", name("admin_token")),
                ));
            }
            security.admin_token = Some(t.clone());
        }
        if let Some(on) = &self.admin {
            security.admin = one_of("admin", on, &[("on", true), ("off", false)])?;
        }
        Ok(())
    }

    /// The checks that hold over every source together, once the last one is applied.
    pub fn finish(config: &Config) -> Result<(), String> {
        if matches!(&config.auth, AuthMode::Verify(keys) if keys.is_empty()) {
            return Err("--auth verify needs at least one key (--credentials or [[credentials]] in the config file)".into());
        }
        if !is_account_id(&config.account_id) {
            return Err(format!(
                "the account id must be 12 digits, got {:?}",
                config.account_id
            ));
        }
        Ok(())
    }
}
