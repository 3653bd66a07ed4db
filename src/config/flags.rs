//! The server's settings as the binary takes them: ONE struct, [`Flags`], read by clap from
//! the command line and the `SQSIM_*` environment, each field's doc comment its `--help`
//! text. Adding a setting means adding a field here (with its default in the doc) and a line
//! in [`Flags::apply`]; the config file's `[server]` keys go through the same `apply` rules
//! (`config_file`).

use std::collections::HashMap;

use clap::builder::{PossibleValuesParser, TypedValueParser};

use super::{
    is_account_id, parse_size, AuthMode, Cluster, Config, Credential, Durability, SyncMode,
    UrlStyle,
};

/// What the binary's flags (and their environment variables) can set; `None` leaves the
/// value from the config file or the defaults.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Flags {
    /// Config file: server settings and queues to create at start (flags win over it). TOML,
    /// or an ElasticMQ `elasticmq.conf` (HOCON) when the name ends in `.conf`.
    #[arg(long, env = "SQSIM_CONFIG")]
    pub config: Option<String>,
    /// Behave like LocalStack's SQS for setups written for it: port 4566, its queue URLs
    /// (SQS_ENDPOINT_STRATEGY, LOCALSTACK_HOST), /_localstack/health, /_aws/sqs/messages,
    /// ready.d init hooks, and a clear error for other AWS services.
    #[arg(long, env = "SQSIM_COMPAT", value_parser = ["localstack"])]
    pub compat: Option<String>,
    /// Run the executable scripts in this directory once, in name order, when the server
    /// answers [default with --compat localstack: /etc/localstack/init/ready.d if present].
    #[arg(long, env = "SQSIM_INIT_DIR")]
    pub init_dir: Option<std::path::PathBuf>,
    /// Address to listen on; `0.0.0.0` (or `::`) reaches every interface [default:
    /// 127.0.0.1, and ::1 where the machine has it].
    #[arg(long, env = "SQSIM_HOST")]
    pub host: Option<String>,
    /// Port to listen on; 0 picks a free port and prints it [default: 9324].
    #[arg(long, env = "SQSIM_PORT")]
    pub port: Option<u16>,
    /// Region used when a request carries no SigV4 credential scope [default: us-east-1].
    #[arg(long, env = "SQSIM_REGION")]
    pub region: Option<String>,
    /// Account id that owns queues by default [default: 000000000000].
    #[arg(long, env = "SQSIM_ACCOUNT_ID")]
    pub account_id: Option<String>,
    /// Base of queue URLs, e.g. http://sqs.local:9324 (default: from each request's Host).
    #[arg(long, env = "SQSIM_ADVERTISED_URL")]
    pub advertised_url: Option<String>,
    /// Queue URL style: `path` (http://host:port/account/name) or `region-host`
    /// (http://sqs.<region>.localhost:port/account/name, unambiguous across regions).
    #[arg(long, env = "SQSIM_URL_STYLE",
        value_parser = PossibleValuesParser::new(["path", "region-host"]).map(|v| if v == "region-host" { UrlStyle::RegionHost } else { UrlStyle::Path }))]
    pub url_style: Option<UrlStyle>,
    /// SigV4 checking: `off` accepts any credentials; `verify` checks signatures against the
    /// keys from --credentials and the config file [default: off].
    #[arg(long = "auth", env = "SQSIM_AUTH", value_name = "AUTH",
        value_parser = PossibleValuesParser::new(["off", "verify"]).map(|a| a == "verify"))]
    pub verify: Option<bool>,
    /// A key for --auth verify, as ACCESS_KEY:SECRET[:ACCOUNT_ID][:admin] (`admin`: it may
    /// use the control plane); repeatable. Visible in `ps`: prefer --credentials-file.
    #[arg(long, env = "SQSIM_CREDENTIALS", value_delimiter = ',')]
    pub credentials: Vec<String>,
    /// A file of keys for --auth verify, one ACCESS_KEY:SECRET[:ACCOUNT_ID][:admin] a line.
    #[arg(long, env = "SQSIM_CREDENTIALS_FILE")]
    pub credentials_file: Option<String>,
    /// Origins (e.g. http://localhost:3000) whose web pages may call sqsim; pages of every
    /// other origin are refused; comma-separated [default: none].
    #[arg(long, env = "SQSIM_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub allowed_origins: Vec<String>,
    /// Host names the control plane (and browsers) may reach sqsim by, besides localhost,
    /// *.localhost, IP addresses, single-label names and the advertised URL's host;
    /// comma-separated.
    #[arg(long, env = "SQSIM_ALLOWED_HOSTS", value_delimiter = ',')]
    pub allowed_hosts: Vec<String>,
    /// A token (16+ characters) the control plane requires as `Authorization: Bearer
    /// <token>`; the console asks for it once [default: none; with --auth verify, one is
    /// made up and printed at start].
    #[arg(long, env = "SQSIM_ADMIN_TOKEN")]
    pub admin_token: Option<String>,
    /// `off` removes the control plane (admin API, console, metrics, LocalStack's developer
    /// endpoints); only the SQS API and the health check remain [default: on].
    #[arg(long, env = "SQSIM_ADMIN",
        value_parser = PossibleValuesParser::new(["on", "off"]).map(|a| a == "on"))]
    pub admin: Option<bool>,
    /// Durable mode: keep queues and messages in this directory across restarts (created if
    /// missing; one process per directory). Without it nothing touches the disk.
    #[arg(long, env = "SQSIM_DATA_DIR")]
    pub data_dir: Option<std::path::PathBuf>,
    /// What durable mode promises before answering: `fsync` (on disk; survives a power cut)
    /// or `os` (handed to the OS; survives a crash of sqsim, not of the machine)
    /// [default: fsync].
    #[arg(long, env = "SQSIM_SYNC",
        value_parser = PossibleValuesParser::new(["fsync", "os"]).map(|s| if s == "os" { SyncMode::Os } else { SyncMode::Fsync }))]
    pub sync: Option<SyncMode>,
    /// Start even if the data directory holds a corrupt record: keep everything before it
    /// (the damaged file is kept aside as *.salvaged).
    #[arg(long, env = "SQSIM_SALVAGE")]
    pub salvage: bool,
    /// Durable mode: once the log passes this many bytes (and the last snapshot's size), a
    /// snapshot replaces it [default: 67108864].
    #[arg(
        long = "compact-after",
        env = "SQSIM_COMPACT_AFTER",
        value_name = "COMPACT_AFTER"
    )]
    pub compact_after_bytes: Option<u64>,
    /// Queues labelled one by one in /metrics; the rest are summed as queue="_other"
    /// [default: 1000].
    #[arg(long, env = "SQSIM_METRICS_QUEUE_LIMIT")]
    pub metrics_queue_limit: Option<usize>,
    /// Connections open at once; more are closed on arrival. Lowered to fit the open-file
    /// limit [default: 16384].
    #[arg(long, env = "SQSIM_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Seconds a request's headers, and then its body, may take to arrive (slow clients are
    /// disconnected); also how long an HTTP/1.1 connection may wait for its next request
    /// [default: 30].
    #[arg(
        long = "read-timeout",
        env = "SQSIM_READ_TIMEOUT",
        value_name = "READ_TIMEOUT"
    )]
    pub read_timeout_secs: Option<u64>,
    /// Seconds a connection stays open with no request running (since its last answer)
    /// [default: 60].
    #[arg(
        long = "idle-timeout",
        env = "SQSIM_IDLE_TIMEOUT",
        value_name = "IDLE_TIMEOUT"
    )]
    pub idle_timeout_secs: Option<u64>,
    /// ReceiveMessage long polls waiting at once; one more gets ServiceUnavailable (503)
    /// [default: 16384].
    #[arg(long, env = "SQSIM_MAX_LONG_POLLS")]
    pub max_long_polls: Option<usize>,
    /// Bytes of messages the process may hold (bodies, attributes and 256 bytes each), as
    /// a number with an optional K/M/G/KiB/MiB/GiB suffix; a send past it gets
    /// ServiceUnavailable (503), which SDKs retry; `0` for no limit [default: half the
    /// machine's (or cgroup's) memory].
    #[arg(long, env = "SQSIM_MAX_STORED_BYTES")]
    pub max_stored_bytes: Option<String>,
    /// AWS-realism mode: `aws` turns on every behaviour of the distributed SQS (short-poll
    /// sampling, best-effort order, duplicates, lagging counts, propagation delays,
    /// throughput quotas); or a list such as `short_poll,duplicates=0.2` [default: off].
    #[arg(long, env = "SQSIM_REALISM")]
    pub realism: Option<String>,
    /// The seed realism draws from: the same seed and requests replay the same run
    /// [default: from the time, printed at start].
    #[arg(long, env = "SQSIM_SEED")]
    pub seed: Option<u64>,
    /// Cluster mode: NATS JetStream server URLs (comma-separated); queues spread over every
    /// sqsim node on the same JetStream, any node answers for any queue.
    #[arg(long, env = "SQSIM_CLUSTER")]
    pub cluster: Option<String>,
    /// This node's name in the cluster [default: HOST-PORT].
    #[arg(long, env = "SQSIM_NODE_ID")]
    pub node_id: Option<String>,
    /// The URL other nodes reach this one at [default: http://127.0.0.1:PORT].
    #[arg(long, env = "SQSIM_PEER_URL")]
    pub peer_url: Option<String>,
    /// Shards queues are hashed into; the same on every node [default: 16].
    #[arg(long, env = "SQSIM_CLUSTER_SHARDS")]
    pub cluster_shards: Option<u32>,
    /// Copies JetStream keeps of each shard's log [default: 3].
    #[arg(long, env = "SQSIM_CLUSTER_REPLICAS")]
    pub cluster_replicas: Option<usize>,
    /// A node's lease on its shards, in milliseconds: how soon a dead node's queues are
    /// served elsewhere [default: 2500].
    #[arg(
        long = "cluster-lease",
        env = "SQSIM_CLUSTER_LEASE",
        value_name = "CLUSTER_LEASE"
    )]
    pub cluster_lease_ms: Option<u64>,
    /// Cluster mode: serve no shard, only route requests to the nodes that do.
    #[arg(long, env = "SQSIM_CLUSTER_GATEWAY")]
    pub cluster_gateway: bool,
}

/// The cluster flags, applied together.
struct ClusterFlags {
    nats: Option<String>,
    node_id: Option<String>,
    peer_url: Option<String>,
    shards: Option<u32>,
    replicas: Option<usize>,
    lease_ms: Option<u64>,
    gateway: bool,
}

impl ClusterFlags {
    fn apply(self, config: &mut Config) -> Result<(), String> {
        let Some(nats) = self.nats.filter(|n| !n.is_empty()) else {
            if self.node_id.is_some()
                || self.peer_url.is_some()
                || self.shards.is_some()
                || self.replicas.is_some()
                || self.lease_ms.is_some()
                || self.gateway
            {
                return Err("--node-id, --peer-url and --cluster-* need cluster mode: give --cluster nats://HOST:PORT".into());
            }
            return Ok(());
        };
        if config.durability.is_some() {
            return Err("--cluster keeps state in JetStream; it does not take --data-dir".into());
        }
        if config.localstack.is_some() {
            return Err("--cluster and --compat localstack cannot be combined".into());
        }
        let node_id = self.node_id.unwrap_or_else(|| {
            format!("{}-{}", config.host, config.port)
                .replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "-")
        });
        if node_id.is_empty()
            || !node_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!(
                "--node-id must be letters, digits, '-' and '_', got {node_id:?}"
            ));
        }
        let mut cluster = Cluster::new(nats, node_id);
        cluster.peer_url = self.peer_url;
        if let Some(n) = self.shards {
            if !(1..=1024).contains(&n) {
                return Err(format!("--cluster-shards must be 1 to 1024, got {n}"));
            }
            cluster.shards = n;
        }
        if let Some(r) = self.replicas {
            if !(1..=5).contains(&r) {
                return Err(format!("--cluster-replicas must be 1 to 5, got {r}"));
            }
            cluster.replicas = r;
        }
        if let Some(ms) = self.lease_ms {
            if !(500..=60_000).contains(&ms) {
                return Err(format!("--cluster-lease must be 500 to 60000 ms, got {ms}"));
            }
            cluster.lease = std::time::Duration::from_millis(ms);
        }
        cluster.gateway = self.gateway;
        config.cluster = Some(cluster);
        Ok(())
    }
}

impl Flags {
    /// Applies the flags over `config` (which already holds the config file's settings);
    /// `file_keys` are the keys the file declares, used when the flags turn verification on
    /// over a file that left it off. The error is a one-line message for the command line.
    pub fn apply(
        self,
        config: &mut Config,
        file_keys: HashMap<String, Credential>,
    ) -> Result<(), String> {
        if let Some(dir) = self.init_dir {
            config.init_dir = Some(dir);
        }
        macro_rules! set {
            ($($field:ident),*) => {$(if let Some(v) = self.$field { config.$field = v; })*};
        }
        set!(
            host,
            port,
            region,
            account_id,
            url_style,
            metrics_queue_limit
        );
        if let Some(v) = self.advertised_url {
            config.advertised_url = Some(v);
        }
        config.limits.apply(
            self.max_connections,
            self.read_timeout_secs,
            self.idle_timeout_secs,
        )?;
        if let Some(v) = &self.max_stored_bytes {
            config.engine.max_stored_bytes =
                parse_size(v).map_err(|e| format!("--max-stored-bytes: {e}"))?;
        }
        if let Some(v) = self.max_long_polls {
            config.engine.set_max_long_polls(v)?;
        }
        if let Some(spec) = &self.realism {
            config.engine.realism = crate::engine::Realism::parse(spec)?;
        }
        if let Some(seed) = self.seed {
            config.engine.seed = Some(seed);
        }
        if let Some(dir) = self.data_dir {
            let sync = config
                .durability
                .as_ref()
                .map(|d| d.sync)
                .unwrap_or_default();
            config.durability = Some(Durability {
                sync,
                ..Durability::new(dir)
            });
        }
        let cluster = ClusterFlags {
            nats: self.cluster,
            node_id: self.node_id,
            peer_url: self.peer_url,
            shards: self.cluster_shards,
            replicas: self.cluster_replicas,
            lease_ms: self.cluster_lease_ms,
            gateway: self.cluster_gateway,
        };
        cluster.apply(config)?;
        match &mut config.durability {
            Some(d) => {
                d.sync = self.sync.unwrap_or(d.sync);
                d.salvage |= self.salvage;
                d.compact_after_bytes = self.compact_after_bytes.unwrap_or(d.compact_after_bytes);
            }
            None if self.sync.is_some() || self.salvage || self.compact_after_bytes.is_some() => {
                return Err(
                    "--sync, --salvage and --compact-after need durable mode: give --data-dir DIR"
                        .into(),
                );
            }
            None => {}
        }
        let file_verifies = matches!(config.auth, AuthMode::Verify(_));
        let mut keys = match std::mem::take(&mut config.auth) {
            AuthMode::Verify(keys) => keys,
            AuthMode::Off => file_keys,
        };
        for c in &self.credentials {
            let cred = Credential::parse(c).ok_or_else(|| {
                format!(
                    "--credentials must be ACCESS_KEY:SECRET[:ACCOUNT_ID][:admin] (12 digits), got {c:?}"
                )
            })?;
            keys.insert(cred.access_key.clone(), cred);
        }
        if let Some(path) = &self.credentials_file {
            for cred in Credential::read_file(path)? {
                keys.insert(cred.access_key.clone(), cred);
            }
        }
        let security = &mut config.security;
        for o in &self.allowed_origins {
            let o = o.trim().trim_end_matches('/');
            if o == "*" || !(o.starts_with("http://") || o.starts_with("https://")) {
                return Err(format!(
                    "--allowed-origins takes origins such as http://localhost:3000 (no wildcard), got {o:?}"
                ));
            }
            security.allowed_origins.push(o.to_ascii_lowercase());
        }
        for h in &self.allowed_hosts {
            let h = h.trim();
            if h.is_empty() || h == "*" || h.contains('/') {
                return Err(format!(
                    "--allowed-hosts takes host names such as sqs.internal (no wildcard), got {h:?}"
                ));
            }
            security.allowed_hosts.push(h.to_ascii_lowercase());
        }
        if let Some(t) = &self.admin_token {
            if t.len() < 16 {
                return Err("--admin-token must be at least 16 characters".into());
            }
            security.admin_token = Some(t.clone());
        }
        if let Some(on) = self.admin {
            security.admin = on;
        }
        let verify = self.verify.unwrap_or(file_verifies);
        if verify && keys.is_empty() {
            return Err("--auth verify needs at least one key (--credentials or [[credentials]] in the config file)".into());
        }
        config.auth = if verify {
            AuthMode::Verify(keys)
        } else {
            AuthMode::Off
        };
        if !is_account_id(&config.account_id) {
            return Err(format!(
                "the account id must be 12 digits, got {:?}",
                config.account_id
            ));
        }
        Ok(())
    }
}
