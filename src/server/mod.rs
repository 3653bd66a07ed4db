//! The runtime: binding, the accept loop, graceful shutdown, and the [`Server`] handle that
//! embedders and tests use to run sqsim in-process.

pub(crate) mod auth;
pub(crate) mod guard;
#[doc(hidden)]
pub mod in_process;
pub(crate) mod limits;
pub mod probe;
mod router;
mod service;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::control::Plane;
use crate::engine::{Clock, Engine};
use crate::http::loopback_url;

/// How long shutdown waits for open requests before closing connections.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
// HTTP/2 limits, pinned here (they are hyper 1.12's defaults) so that an upgrade cannot
// loosen them unnoticed.
/// HTTP/2 requests running at once on one connection: SDKs open few; a client cannot pile
/// up thousands of streams on one socket.
const H2_MAX_STREAMS: u32 = 200;
/// HTTP/2 header block size: SQS requests carry at most a few KiB of headers (SigV4).
const H2_MAX_HEADER_LIST: u32 = 16 * 1024;
/// HTTP/2 streams a client may reset before they are accepted (the "rapid reset" attack).
const H2_MAX_PENDING_RESETS: usize = 20;

/// State shared by every connection: the control plane's (engine, settings, faults,
/// metrics), and in cluster mode the cluster this node is part of.
#[derive(Debug)]
pub(crate) struct AppState {
    pub plane: Arc<Plane>,
    /// Cluster mode: the cluster this node is part of. The plane's engine then holds no
    /// queues (it answers what addresses none); each shard's engine is in the cluster.
    #[cfg(feature = "cluster")]
    pub link: Option<crate::cluster::route::Link>,
}

// The SQS path reads the plane's fields on every request (`state.config`, `state.engine`):
// an `AppState` is a plane with a cluster link.
impl std::ops::Deref for AppState {
    type Target = Plane;
    fn deref(&self) -> &Plane {
        &self.plane
    }
}

impl AppState {
    /// State for a server bound to `local_addr` (see [`Plane::open`]), not yet in a cluster.
    pub(crate) fn open(
        config: Config,
        clock: Arc<Clock>,
        local_addr: SocketAddr,
    ) -> Result<AppState, String> {
        let plane = Plane::open(config, clock, local_addr).map_err(|e| e.to_string())?;
        Ok(AppState {
            plane: Arc::new(plane),
            #[cfg(feature = "cluster")]
            link: None,
        })
    }

    /// [`AppState::open`], then (cluster mode) joins the cluster.
    async fn open_and_join(
        config: Config,
        clock: Arc<Clock>,
        local_addr: SocketAddr,
    ) -> Result<AppState, String> {
        #[cfg(feature = "cluster")]
        {
            let mut state = AppState::open(config, clock, local_addr)?;
            state.link = crate::cluster::route::Link::join(&state.plane).await?;
            Ok(state)
        }
        #[cfg(not(feature = "cluster"))]
        match config.cluster {
            Some(_) => {
                Err("this sqsim was built without cluster mode (cargo feature `cluster`)".into())
            }
            None => AppState::open(config, clock, local_addr),
        }
    }

    /// Whether this node is part of a cluster.
    pub(crate) fn in_cluster(&self) -> bool {
        #[cfg(feature = "cluster")]
        return self.link.is_some();
        #[cfg(not(feature = "cluster"))]
        false
    }

    /// The engines whose queues this process serves: its own, or in cluster mode those of
    /// the shards it serves.
    pub(crate) fn engines(&self) -> Vec<Arc<Engine>> {
        #[cfg(feature = "cluster")]
        if let Some(link) = &self.link {
            return link.cluster.engines();
        }
        vec![Arc::clone(&self.engine)]
    }

    /// The secret a node's peers send (cluster mode).
    pub(crate) fn peer_secret(&self) -> Option<&str> {
        #[cfg(feature = "cluster")]
        return self.link.as_ref().and_then(|l| l.cluster.peer_secret());
        #[cfg(not(feature = "cluster"))]
        None
    }

    /// Leaves the cluster, if in one: its shards are given back at once.
    async fn leave(&self) {
        #[cfg(feature = "cluster")]
        if let Some(link) = &self.link {
            link.cluster.leave().await;
        }
    }
}

/// The sockets a server accepts on: one, or the IPv4 and IPv6 loopback pair.
#[derive(Debug)]
pub(crate) struct Listeners(Vec<TcpListener>);

impl From<TcpListener> for Listeners {
    fn from(l: TcpListener) -> Listeners {
        Listeners(vec![l])
    }
}

impl Listeners {
    /// Binds `host:port`; for the loopback default (`127.0.0.1` or `localhost`) also
    /// `[::1]` on the same port where the machine has IPv6, so `http://localhost:PORT`
    /// answers whichever address a client tries first.
    pub(crate) async fn bind(host: &str, port: u16) -> std::io::Result<Listeners> {
        let first = TcpListener::bind((host, port)).await?;
        let mut all = vec![first];
        if matches!(host, "127.0.0.1" | "localhost") {
            let port = all[0].local_addr()?.port();
            match TcpListener::bind(("::1", port)).await {
                Ok(v6) => all.push(v6),
                Err(e) => {
                    tracing::debug!(error = %e, "no IPv6 loopback; listening on 127.0.0.1 only")
                }
            }
        }
        Ok(Listeners(all))
    }

    /// The first socket's address (the one printed and used for URLs).
    pub(crate) fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.0[0].local_addr()
    }

    /// The other sockets.
    fn extra(&self) -> &[TcpListener] {
        &self.0[1..]
    }

    async fn accept(&self) -> std::io::Result<(tokio::net::TcpStream, SocketAddr)> {
        if let [only] = self.0.as_slice() {
            return only.accept().await;
        }
        // `accept` is cancel-safe: the sockets not chosen lose nothing.
        let accepts = self.0.iter().map(|l| Box::pin(l.accept()));
        futures_util::future::select_all(accepts).await.0
    }
}

/// Serves `listener` until `shutdown` completes, then releases long polls and drains
/// open connections for a bounded time.
pub(crate) async fn serve(
    listener: impl Into<Listeners>,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()>,
) {
    serve_with(listener.into(), state, shutdown, router::handle).await
}

/// [`serve`] with the request handler given (tests swap in one that can misbehave).
async fn serve_with<H, F>(
    listener: Listeners,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()>,
    handler: H,
) where
    H: Fn(Arc<AppState>, hyper::Request<crate::http::RequestBody>) -> F
        + Copy
        + Send
        + Sync
        + 'static,
    F: Future<
            Output = Result<
                hyper::Response<http_body_util::Full<bytes::Bytes>>,
                service::DroppedConnection,
            >,
        > + Send
        + 'static,
{
    let limits = state.config.limits.clone();
    let permits = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // Pipelined requests are answered in order either way. hyper's `pipeline_flush` would
    // batch their replies, but it also loses the 431 hyper writes before closing on an
    // oversized head (tests/it/malformed.rs found it), so it stays off. A head that takes
    // too long is cut off by the connection's watch (`limits::Activity`), not by hyper's
    // header timer, which costs a timer on every request.
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(None);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(H2_MAX_STREAMS)
        .max_header_list_size(H2_MAX_HEADER_LIST)
        .max_pending_accept_reset_streams(H2_MAX_PENDING_RESETS);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, _) = match accepted {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                // Over the cap the connection is closed at once: a client retries, where
                // one left waiting in the backlog would hang.
                let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
                    state.metrics.connection_refused();
                    tracing::debug!("connection refused: max_connections reached");
                    drop(stream);
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let open = Arc::clone(&state);
                let state = Arc::clone(&state);
                let activity = limits::Activity::new(&limits);
                let io = TokioIo::new(stream);
                let conn_activity = Arc::clone(&activity);
                let read_timeout = limits.read_timeout;
                let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let running = conn_activity.request(req.version());
                    let render = service::render_of(req.headers(), req.uri().query());
                    let req = req.map(|b| crate::http::RequestBody::new(b, read_timeout));
                    // Boxed once: the fence and hyper then move a pointer, not the future.
                    let handling = Box::pin(handler(Arc::clone(&state), req));
                    async move {
                        let answer = router::guarded(render, handling).await;
                        drop(running);
                        answer
                    }
                });
                let conn = builder.serve_connection(io, svc).into_owned();
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    let _permit = permit;
                    let _open = open.metrics.connection();
                    tokio::select! {
                        ended = conn => if let Err(e) = ended {
                            tracing::debug!(error = %e, "connection ended with an error");
                        },
                        // Dropping the connection closes its socket.
                        () = limits::idle_expired(&activity) => {
                            tracing::debug!("idle connection closed");
                        }
                    }
                });
            }
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    state.engine.begin_shutdown();
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the drain timeout");
    }
    // Durable mode: everything acknowledged is written; release the data directory now,
    // not when the last background task lets go of the engine.
    if let Some(store) = state.engine.journal().store() {
        store.close();
    }
}

/// Starts workers that push this server's queues to applications; they stop when `stop`
/// turns true. Their counters show in `/_sqsim/stats`.
#[cfg(feature = "worker")]
pub(crate) fn start_workers(
    state: &Arc<AppState>,
    workers: Vec<(String, crate::worker::WorkerOptions)>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let endpoint = loopback_url(state.local_addr);
    // Under `--auth verify` the workers sign with a configured key like any other client.
    let (key, secret) = match &state.config.auth {
        crate::config::AuthMode::Verify(keys) => keys
            .values()
            .next()
            .map(|c| (c.access_key.clone(), c.secret_key.clone()))
            .unwrap_or_default(),
        crate::config::AuthMode::Off => ("sqsim-worker".to_string(), "sqsim-worker".to_string()),
    };
    workers
        .into_iter()
        .map(|(name, opts)| {
            let conf = aws_sdk_sqs::Config::builder()
                .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
                .endpoint_url(&endpoint)
                .region(aws_sdk_sqs::config::Region::new(
                    state.config.region.clone(),
                ))
                .credentials_provider(aws_sdk_sqs::config::Credentials::new(
                    key.clone(),
                    secret.clone(),
                    None,
                    None,
                    "sqsim",
                ))
                .build();
            let stats = Arc::new(crate::worker::WorkerStats::default());
            state
                .workers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((name, Arc::clone(&stats)));
            let mut stop = stop.clone();
            tokio::spawn(crate::worker::run(
                aws_sdk_sqs::Client::from_conf(conf),
                opts,
                stats,
                async move {
                    let _ = stop.wait_for(|s| *s).await;
                },
            ))
        })
        .collect()
}

/// Prints a line on stdout, flushed, ignoring a closed stdout: a parent that read the listen
/// line and closed the pipe (a test harness, a bench) must not make the next line's
/// `println!` panic and take the server down with it.
fn say(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// The line a person reads at start, after the listen line (and the admin token and the
/// realism seed, when there are): the version, where the state lives, whether signatures
/// are checked, and where the console is.
/// `console_at` is the address the console is offered on (`--console-port`'s when given).
fn banner(state: &AppState, console_at: SocketAddr) -> String {
    let config = &state.config;
    let mode = match (&config.durability, &config.cluster) {
        (_, Some(c)) => format!("cluster node {} on {}", c.node_id, c.nats),
        (Some(d), None) => format!("durable at {} ({})", d.data_dir.display(), d.sync),
        (None, None) => "in memory".to_string(),
    };
    let auth = match config.auth {
        crate::config::AuthMode::Verify(_) => "signatures verified",
        crate::config::AuthMode::Off => "any credentials accepted",
    };
    let console = if config.security.admin {
        format!(
            "; console {}{}",
            crate::http::loopback_url(console_at),
            crate::control::console::PREFIX
        )
    } else {
        String::new()
    };
    format!(
        "sqsim {}: {mode}, {auth}{console}",
        env!("CARGO_PKG_VERSION")
    )
}

/// Why the server cannot listen, worded with what to change.
/// `flag` is the port's flag (`--port`, `--console-port`).
fn bind_error(host: &str, port: u16, flag: &str, e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    let at = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    match e.kind() {
        ErrorKind::AddrInUse => format!(
            "cannot listen on {at}: the address is in use (another sqsim, or another program); \
             give another {flag}, or {flag} 0 for a free one"
        ),
        ErrorKind::PermissionDenied => format!(
            "cannot listen on {at}: permission denied (ports below 1024 need privileges); \
             give another {flag}"
        ),
        ErrorKind::AddrNotAvailable => format!(
            "cannot listen on {at}: no interface of this machine has that address; \
             give --host 127.0.0.1, or 0.0.0.0 for every interface"
        ),
        _ if host.parse::<std::net::IpAddr>().is_err() => format!(
            "cannot listen on {at}: --host {host:?} is not an address or a name this machine \
             resolves ({e}); give an address such as 127.0.0.1 or 0.0.0.0"
        ),
        _ => format!("cannot listen on {at}: {e}"),
    }
}

/// Runs the server the binary runs: binds, creates the config file's queues, starts its
/// workers, prints the listen line, and serves until `shutdown` completes.
pub async fn run(
    config: Config,
    file: Option<crate::config_file::LoadedConfig>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut config = config;
    // The binary owns its process: it may raise the open-file limit (an embedder decides
    // for its own process, and sets a cap that fits).
    config.limits.max_connections = limits::fit_connections(config.limits.max_connections);
    let mut listener = Listeners::bind(config.host.as_str(), config.port)
        .await
        .map_err(|e| bind_error(&config.host, config.port, "--port", &e))?;
    let mut console_addr = None;
    if let Some(port) = config.console_port {
        let console = Listeners::bind(config.host.as_str(), port)
            .await
            .map_err(|e| bind_error(&config.host, port, "--console-port", &e))?;
        console_addr = Some(console.local_addr()?);
        // One accept loop over every socket: the second port is the same server.
        listener.0.extend(console.0);
    }
    let local_addr = listener.local_addr()?;
    let extra_listeners: Vec<SocketAddr> = listener
        .extra()
        .iter()
        .filter_map(|l| l.local_addr().ok())
        .collect();
    let state =
        Arc::new(AppState::open_and_join(config, Arc::new(Clock::new()), local_addr).await?);
    if let Some(f) = &file {
        if state.in_cluster() && !f.file.queues.is_empty() {
            // The node's own engine holds no queues; they live in shards.
            return Err("config error: [queues] cannot be declared in cluster mode yet; create them with CreateQueue".into());
        }
        f.apply_queues(
            &state.engine,
            &state.config.region,
            &state.config.account_id,
        )
        .map_err(|e| format!("config error: {e}"))?;
    }
    let workers = match &file {
        Some(f) => f
            .workers(&loopback_url(local_addr), &state.config.account_id)
            .map_err(|e| format!("config error: {e}"))?,
        None => Vec::new(),
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    #[cfg(feature = "worker")]
    let worker_tasks = start_workers(&state, workers, stop_rx);
    #[cfg(not(feature = "worker"))]
    let worker_tasks: Vec<JoinHandle<()>> = if workers.is_empty() {
        drop(stop_rx);
        Vec::new()
    } else {
        return Err("config error: [workers] need the worker (cargo feature `worker`), which this sqsim was built without".into());
    };
    // Tests and scripts read this line to find the port.
    say(&format!("sqsim listening on http://{local_addr}"));
    tracing::info!(%local_addr, "sqsim listening");
    for a in &extra_listeners {
        tracing::info!(local_addr = %a, "sqsim listening");
    }
    if state.admin_token_generated {
        if let Some(t) = &state.admin_token {
            // Printed, not logged: a log shipper should not carry it.
            say(&format!("sqsim admin token: {t} (the console asks for it; scripts send it as Authorization: Bearer)"));
        }
    }
    if !local_addr.ip().is_loopback() && matches!(state.config.auth, crate::config::AuthMode::Off) {
        tracing::warn!(%local_addr, "listening beyond this machine with --auth off: anyone who can reach this address can read, send and delete every message; use --auth verify (and --admin-token) on a shared network");
    }
    let (realism, seed) = (state.engine.realism(), state.engine.seed());
    tracing::info!(realism = %realism.spec(), seed, "realism");
    if realism.is_on() {
        // The seed, so that a failing run can be replayed with --seed.
        say(&format!("sqsim realism {} seed {seed}", realism.spec()));
    }
    say(&banner(&state, console_addr.unwrap_or(local_addr)));
    let localstack = state.config.localstack.is_some();
    state.start_init_hooks(move || {
        // LocalStack prints this once its ready.d scripts have run; Testcontainers'
        // LocalStack modules wait for it (`.*Ready\.\n`).
        if localstack {
            say("Ready.");
        }
    });
    serve(listener, Arc::clone(&state), async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    })
    .await;
    for t in worker_tasks {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), t).await;
    }
    state.leave().await;
    tracing::info!("sqsim stopped");
    Ok(())
}

/// Builds an in-process server.
#[derive(Debug, Default)]
pub struct ServerBuilder {
    config: Config,
    clock: Option<Arc<Clock>>,
}

impl ServerBuilder {
    /// Uses `config` (host and port included; the default binds `127.0.0.1:0`).
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// Runs the engine on `clock` instead of a new one.
    pub fn clock(mut self, clock: Arc<Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Binds and starts serving in the background.
    pub async fn start(self) -> std::io::Result<Server> {
        let listener = TcpListener::bind((self.config.host.as_str(), self.config.port)).await?;
        let local_addr = listener.local_addr()?;
        let (region, account_id) = (self.config.region.clone(), self.config.account_id.clone());
        let clock = self.clock.unwrap_or_default();
        let state = AppState::open_and_join(self.config, clock, local_addr)
            .await
            .map_err(std::io::Error::other)?;
        let state = Arc::new(state);
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, Arc::clone(&state), async {
            let _ = rx.await;
        }));
        state.start_init_hooks(|| {});
        Ok(Server {
            local_addr,
            region,
            account_id,
            state,
            stop: Some(tx),
            task: Some(task),
        })
    }
}

/// Resolves on SIGINT or SIGTERM. The handlers are installed when this is called (within a
/// runtime), not when the future is first polled: a SIGTERM sent right after the listen
/// line would otherwise find no handler yet and kill the process without its graceful
/// shutdown (a test that stopped a server at once found it).
pub fn shutdown_signal() -> impl Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let handlers =
            signal(SignalKind::interrupt()).and_then(|i| Ok((i, signal(SignalKind::terminate())?)));
        async move {
            match handlers {
                Ok((mut interrupt, mut terminate)) => {
                    tokio::select! {
                        _ = interrupt.recv() => {}
                        _ = terminate.recv() => {}
                    }
                }
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// A running sqsim. Stops on [`Server::shutdown`] or when dropped.
#[derive(Debug)]
pub struct Server {
    local_addr: SocketAddr,
    region: String,
    account_id: String,
    state: Arc<AppState>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Server {
    /// A builder with default settings.
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `http://127.0.0.1:<port>`: what to give an SDK as its endpoint.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.local_addr)
    }

    /// The clock every timer of this server obeys.
    pub fn clock(&self) -> &Arc<Clock> {
        self.state.engine.clock()
    }

    /// Creates or updates the queues a config file declares (idempotent).
    pub fn apply_config(
        &self,
        file: &crate::config_file::LoadedConfig,
    ) -> Result<(), crate::config_file::ConfigError> {
        file.apply_queues(&self.state.engine, &self.region, &self.account_id)
    }

    /// Removes every queue, message, move task and fault: a fresh server for the next test.
    pub fn reset(&self) {
        self.state.reset_all();
    }

    /// Moves time forward and wakes long polls whose messages became visible.
    pub fn advance_clock(&self, by: Duration) {
        self.state.engine.advance_clock(by);
    }

    /// Stops accepting, releases long polls and waits for connections to drain.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        self.state.leave().await;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// One request over a fresh connection: (status line, body).
    async fn request(addr: SocketAddr, head: &str, body: &str) -> (String, String) {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let req = format!(
            "{head}\r\nHost: t\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.unwrap();
        let text = String::from_utf8_lossy(&buf).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        (
            head.lines().next().unwrap_or("").to_string(),
            body.to_string(),
        )
    }

    /// A handler that panics while holding every queue's lock when asked to (path `/panic`):
    /// the panicking request gets a 500 in its protocol, other requests and connections go
    /// on, and the queue it broke in is still usable.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_request_ends_only_itself() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(AppState::open(Config::default(), Arc::default(), addr).unwrap());
        let (tx, rx) = oneshot::channel::<()>();
        let server = tokio::spawn(serve_with(
            listener.into(),
            Arc::clone(&state),
            async {
                let _ = rx.await;
            },
            |state: Arc<AppState>, req: hyper::Request<crate::http::RequestBody>| async move {
                if req.uri().path() == "/panic" {
                    for q in state.engine.all_queues() {
                        q.update_tags(|_| -> () { panic!("a bug while holding the lock") });
                    }
                }
                router::handle(state, req).await
            },
        ));
        let json = |action: &str| {
            format!("POST / HTTP/1.1\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: AmazonSQS.{action}")
        };
        let (status, _) = request(addr, &json("CreateQueue"), r#"{"QueueName":"q"}"#).await;
        assert!(status.contains(" 200 "), "{status}");

        let (status, body) = request(
            addr,
            "POST /panic HTTP/1.1\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: AmazonSQS.ListQueues",
            "{}",
        )
        .await;
        assert!(status.contains(" 500 "), "{status}");
        assert!(body.contains("InternalFailure"), "{body}");
        let (status, body) = request(addr, "GET /panic?Action=ListQueues HTTP/1.1", "").await;
        assert!(status.contains(" 500 "), "{status}");
        assert!(body.contains("<Code>InternalFailure</Code>"), "{body}");

        // The lock the panic held is usable: tags, sends and receives on that queue work.
        let url = format!("http://{addr}/000000000000/q");
        let (status, body) = request(
            addr,
            &json("TagQueue"),
            &format!(r#"{{"QueueUrl":"{url}","Tags":{{"k":"v"}}}}"#),
        )
        .await;
        assert!(status.contains(" 200 "), "{status} {body}");
        let (status, _) = request(
            addr,
            &json("SendMessage"),
            &format!(r#"{{"QueueUrl":"{url}","MessageBody":"after"}}"#),
        )
        .await;
        assert!(status.contains(" 200 "), "{status}");
        let (_, body) = request(
            addr,
            &json("ReceiveMessage"),
            &format!(r#"{{"QueueUrl":"{url}"}}"#),
        )
        .await;
        assert!(body.contains("\"after\""), "{body}");
        let (_, body) = request(
            addr,
            &json("ListQueueTags"),
            &format!(r#"{{"QueueUrl":"{url}"}}"#),
        )
        .await;
        assert!(body.contains("\"k\":\"v\""), "{body}");

        let _ = tx.send(());
        server.await.unwrap();
    }
}
