//! The `sqsim` binary: parse flags, set up logging, serve until SIGINT or SIGTERM.

use clap::Parser;

/// mimalloc: request handling allocates many short-lived buffers across worker threads, which
/// it serves faster and with less fragmentation than the system allocator. It is built
/// without transparent huge pages (`no_thp`): with them its first arena costs several MiB of
/// resident memory before the first request, and `make bench`'s send scenario measured about
/// 285k against 445k messages/s, the huge pages' zeroing showing at the top of the profile.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::process::ExitCode;

use sqsim::config::{Config, Flags, UrlStyle};
use sqsim::config_file::LoadedConfig;

/// An Amazon SQS-compatible server.
#[derive(Debug, Parser)]
#[command(name = "sqsim", version, about)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// Config file: server settings and queues to create at start (flags win over it). TOML,
    /// or an ElasticMQ `elasticmq.conf` (HOCON) when the name ends in `.conf`.
    #[arg(long, env = "SQSIM_CONFIG")]
    config: Option<String>,
    /// Behave like LocalStack's SQS for setups written for it: port 4566, its queue URLs
    /// (SQS_ENDPOINT_STRATEGY, LOCALSTACK_HOST), /_localstack/health, /_aws/sqs/messages,
    /// ready.d init hooks, and a clear error for other AWS services.
    #[arg(long, env = "SQSIM_COMPAT", value_parser = ["localstack"])]
    compat: Option<String>,
    /// Run the executable scripts in this directory once, in name order, when the server
    /// answers [default with --compat localstack: /etc/localstack/init/ready.d if present].
    #[arg(long, env = "SQSIM_INIT_DIR")]
    init_dir: Option<std::path::PathBuf>,
    /// Address to listen on; `0.0.0.0` (or `::`) reaches every interface [default:
    /// 127.0.0.1, and ::1 where the machine has it].
    #[arg(long, env = "SQSIM_HOST")]
    host: Option<String>,
    /// Port to listen on; 0 picks a free port and prints it [default: 9324].
    #[arg(long, env = "SQSIM_PORT")]
    port: Option<u16>,
    /// Region used when a request carries no SigV4 credential scope [default: us-east-1].
    #[arg(long, env = "SQSIM_REGION")]
    region: Option<String>,
    /// Account id that owns queues by default [default: 000000000000].
    #[arg(long, env = "SQSIM_ACCOUNT_ID")]
    account_id: Option<String>,
    /// Base of queue URLs, e.g. http://sqs.local:9324 (default: from each request's Host).
    #[arg(long, env = "SQSIM_ADVERTISED_URL")]
    advertised_url: Option<String>,
    /// Queue URL style: `path` (http://host:port/account/name) or `region-host`
    /// (http://sqs.<region>.localhost:port/account/name, unambiguous across regions).
    #[arg(long, env = "SQSIM_URL_STYLE", value_parser = ["path", "region-host"])]
    url_style: Option<String>,
    /// SigV4 checking: `off` accepts any credentials; `verify` checks signatures against the
    /// keys from --credentials and the config file [default: off].
    #[arg(long, env = "SQSIM_AUTH", value_parser = ["off", "verify"])]
    auth: Option<String>,
    /// A key for --auth verify, as ACCESS_KEY:SECRET[:ACCOUNT_ID][:admin] (`admin`: it may
    /// use the control plane); repeatable. Visible in `ps`: prefer --credentials-file.
    #[arg(long = "credentials", env = "SQSIM_CREDENTIALS", value_delimiter = ',')]
    credentials: Vec<String>,
    /// A file of keys for --auth verify, one ACCESS_KEY:SECRET[:ACCOUNT_ID][:admin] a line.
    #[arg(long, env = "SQSIM_CREDENTIALS_FILE")]
    credentials_file: Option<String>,
    /// Origins (e.g. http://localhost:3000) whose web pages may call sqsim; pages of every
    /// other origin are refused; comma-separated [default: none].
    #[arg(long, env = "SQSIM_ALLOWED_ORIGINS", value_delimiter = ',')]
    allowed_origins: Vec<String>,
    /// Host names the control plane (and browsers) may reach sqsim by, besides localhost,
    /// *.localhost, IP addresses, single-label names and the advertised URL's host;
    /// comma-separated.
    #[arg(long, env = "SQSIM_ALLOWED_HOSTS", value_delimiter = ',')]
    allowed_hosts: Vec<String>,
    /// A token (16+ characters) the control plane requires as `Authorization: Bearer
    /// <token>`; the console asks for it once [default: none; with --auth verify, one is
    /// made up and printed at start].
    #[arg(long, env = "SQSIM_ADMIN_TOKEN")]
    admin_token: Option<String>,
    /// `off` removes the control plane (admin API, console, metrics, LocalStack's developer
    /// endpoints); only the SQS API and the health check remain [default: on].
    #[arg(long, env = "SQSIM_ADMIN", value_parser = ["on", "off"])]
    admin: Option<String>,
    /// Durable mode: keep queues and messages in this directory across restarts (created if
    /// missing; one process per directory). Without it nothing touches the disk.
    #[arg(long, env = "SQSIM_DATA_DIR")]
    data_dir: Option<std::path::PathBuf>,
    /// What durable mode promises before answering: `fsync` (on disk; survives a power cut)
    /// or `os` (handed to the OS; survives a crash of sqsim, not of the machine)
    /// [default: fsync].
    #[arg(long, env = "SQSIM_SYNC", value_parser = ["fsync", "os"])]
    sync: Option<String>,
    /// Start even if the data directory holds a corrupt record: keep everything before it
    /// (the damaged file is kept aside as *.salvaged).
    #[arg(long, env = "SQSIM_SALVAGE")]
    salvage: bool,
    /// Durable mode: once the log passes this many bytes (and the last snapshot's size), a
    /// snapshot replaces it [default: 67108864].
    #[arg(long, env = "SQSIM_COMPACT_AFTER")]
    compact_after: Option<u64>,
    /// Queues labelled one by one in /metrics; the rest are summed as queue="_other"
    /// [default: 1000].
    #[arg(long, env = "SQSIM_METRICS_QUEUE_LIMIT")]
    metrics_queue_limit: Option<usize>,
    /// Connections open at once; more are closed on arrival. Lowered to fit the open-file
    /// limit [default: 16384].
    #[arg(long, env = "SQSIM_MAX_CONNECTIONS")]
    max_connections: Option<usize>,
    /// Seconds a request's headers, and then its body, may take to arrive (slow clients are
    /// disconnected); also how long an HTTP/1.1 connection may wait for its next request
    /// [default: 30].
    #[arg(long, env = "SQSIM_READ_TIMEOUT")]
    read_timeout: Option<u64>,
    /// Seconds a connection stays open with no request running (since its last answer)
    /// [default: 60].
    #[arg(long, env = "SQSIM_IDLE_TIMEOUT")]
    idle_timeout: Option<u64>,
    /// ReceiveMessage long polls waiting at once; one more gets ServiceUnavailable (503)
    /// [default: 16384].
    #[arg(long, env = "SQSIM_MAX_LONG_POLLS")]
    max_long_polls: Option<usize>,
    /// Bytes of messages the process may hold (bodies, attributes and 256 bytes each), as
    /// a number with an optional K/M/G/KiB/MiB/GiB suffix; a send past it gets
    /// ServiceUnavailable (503), which SDKs retry; `0` for no limit [default: half the
    /// machine's (or cgroup's) memory].
    #[arg(long, env = "SQSIM_MAX_STORED_BYTES")]
    max_stored_bytes: Option<String>,
    /// AWS-realism mode: `aws` turns on every behaviour of the distributed SQS (short-poll
    /// sampling, best-effort order, duplicates, lagging counts, propagation delays,
    /// throughput quotas); or a list such as `short_poll,duplicates=0.2` [default: off].
    #[arg(long, env = "SQSIM_REALISM")]
    realism: Option<String>,
    /// The seed realism draws from: the same seed and requests replay the same run
    /// [default: from the time, printed at start].
    #[arg(long, env = "SQSIM_SEED")]
    seed: Option<u64>,
    /// Cluster mode: NATS JetStream server URLs (comma-separated); queues spread over every
    /// sqsim node on the same JetStream, any node answers for any queue.
    #[arg(long, env = "SQSIM_CLUSTER")]
    cluster: Option<String>,
    /// This node's name in the cluster [default: HOST-PORT].
    #[arg(long, env = "SQSIM_NODE_ID")]
    node_id: Option<String>,
    /// The URL other nodes reach this one at [default: http://127.0.0.1:PORT].
    #[arg(long, env = "SQSIM_PEER_URL")]
    peer_url: Option<String>,
    /// Shards queues are hashed into; the same on every node [default: 16].
    #[arg(long, env = "SQSIM_CLUSTER_SHARDS")]
    cluster_shards: Option<u32>,
    /// Copies JetStream keeps of each shard's log [default: 3].
    #[arg(long, env = "SQSIM_CLUSTER_REPLICAS")]
    cluster_replicas: Option<usize>,
    /// A node's lease on its shards, in milliseconds: how soon a dead node's queues are
    /// served elsewhere [default: 2500].
    #[arg(long, env = "SQSIM_CLUSTER_LEASE")]
    cluster_lease: Option<u64>,
    /// Cluster mode: serve no shard, only route requests to the nodes that do.
    #[arg(long, env = "SQSIM_CLUSTER_GATEWAY")]
    cluster_gateway: bool,
    /// Log lines as `text` or `json` (one object per line).
    #[arg(long, env = "SQSIM_LOG_FORMAT", value_parser = ["text", "json"], default_value = "text")]
    log_format: String,
    /// Log filter (tracing syntax); RUST_LOG wins when set.
    #[arg(long, env = "SQSIM_LOG_LEVEL", default_value = "info")]
    log_level: String,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Push messages from SQS queues to an HTTP application, like Elastic Beanstalk's sqsd.
    Worker(Box<sqsim::worker::cli::WorkerArgs>),
    /// Exit 0 if the sqsim on this machine (the port from --port/SQSIM_PORT, as the server
    /// reads it) is healthy: a container health check that needs no curl.
    Health,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&args.log_level));
    // Colours only for a terminal: a log file or a container log gets plain text.
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    if args.log_format == "json" {
        logs.json().flatten_event(true).init();
    } else {
        logs.init();
    }
    match args.command {
        Some(Command::Worker(w)) => return sqsim::worker::cli::run(*w, shutdown_signal()),
        Some(Command::Health) => {
            let port = args.port.unwrap_or(default_port(args.compat.as_deref()));
            return match sqsim::server::probe::health(port) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("sqsim health: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        None => {}
    }
    let mut config = Config::server_defaults();
    if args.compat.as_deref() == Some("localstack") {
        match localstack_settings() {
            Ok(ls) => config.localstack = Some(ls),
            Err(e) => {
                eprintln!("sqsim: {e}");
                return ExitCode::from(2);
            }
        }
        config.port = default_port(args.compat.as_deref());
        let ready = std::path::Path::new(sqsim::config::LOCALSTACK_READY_DIR);
        config.init_dir = ready.is_dir().then(|| ready.to_path_buf());
        // LocalStack's PERSISTENCE=1 keeps state under its volume; so does sqsim (durable
        // mode there) unless --data-dir says otherwise.
        if matches!(
            std::env::var("PERSISTENCE").as_deref(),
            Ok("1" | "true" | "True")
        ) {
            config.durability = Some(sqsim::Durability::new(
                sqsim::config::LOCALSTACK_PERSISTENCE_DIR,
            ));
        }
    }
    let file = match &args.config {
        Some(path) => match LoadedConfig::read(path).and_then(|f| {
            f.apply_server(&mut config)?;
            Ok(f)
        }) {
            Ok(f) => {
                for w in &f.warnings {
                    tracing::warn!(config = %f.path, "{w}");
                }
                Some(f)
            }
            Err(e) => {
                eprintln!("sqsim: config error: {e}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let flags = Flags {
        host: args.host,
        port: args.port,
        region: args.region,
        account_id: args.account_id,
        advertised_url: args.advertised_url,
        url_style: args.url_style.map(|v| {
            if v == "region-host" {
                UrlStyle::RegionHost
            } else {
                UrlStyle::Path
            }
        }),
        verify: args.auth.map(|a| a == "verify"),
        credentials: args.credentials,
        data_dir: args.data_dir,
        sync: args.sync.and_then(|s| s.parse().ok()),
        salvage: args.salvage,
        compact_after_bytes: args.compact_after,
        metrics_queue_limit: args.metrics_queue_limit,
        max_connections: args.max_connections,
        read_timeout_secs: args.read_timeout,
        idle_timeout_secs: args.idle_timeout,
        max_long_polls: args.max_long_polls,
        max_stored_bytes: args.max_stored_bytes,
        realism: args.realism,
        seed: args.seed,
        cluster: args.cluster,
        node_id: args.node_id,
        peer_url: args.peer_url,
        cluster_shards: args.cluster_shards,
        cluster_replicas: args.cluster_replicas,
        cluster_lease_ms: args.cluster_lease,
        cluster_gateway: args.cluster_gateway,
        credentials_file: args.credentials_file,
        allowed_origins: args.allowed_origins,
        allowed_hosts: args.allowed_hosts,
        admin_token: args.admin_token,
        admin: args.admin.map(|a| a == "on"),
    };
    if args.init_dir.is_some() {
        config.init_dir = args.init_dir;
    }
    // The file's keys were validated by apply_server.
    let file_keys = file
        .as_ref()
        .and_then(|f| f.credentials().ok())
        .unwrap_or_default();
    if let Err(e) = flags.apply(&mut config, file_keys) {
        eprintln!("sqsim: {e}");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sqsim: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(sqsim::server::run(config, file, shutdown_signal())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sqsim: {e}");
            ExitCode::from(2)
        }
    }
}

/// The port when none is given: LocalStack's with `--compat localstack`, else 9324.
fn default_port(compat: Option<&str>) -> u16 {
    match compat {
        Some("localstack") => sqsim::config::LOCALSTACK_PORT,
        _ => sqsim::config::DEFAULT_PORT,
    }
}

/// LocalStack's own environment variables for SQS queue URLs, so that a docker-compose file
/// written for LocalStack keeps its meaning.
fn localstack_settings() -> Result<sqsim::config::LocalStack, String> {
    let strategy = match std::env::var("SQS_ENDPOINT_STRATEGY") {
        Ok(s) if !s.is_empty() => s.parse()?,
        _ => Default::default(),
    };
    let host = std::env::var("LOCALSTACK_HOST")
        .ok()
        .filter(|h| !h.is_empty());
    Ok(sqsim::config::LocalStack { strategy, host })
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
