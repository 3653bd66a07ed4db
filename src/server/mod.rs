//! The runtime: binding, the accept loop, graceful shutdown, and the [`Server`] handle that
//! embedders and tests use to run sqsim in-process.

pub(crate) mod auth;
mod embed;
pub(crate) mod guard;
#[doc(hidden)]
pub mod in_process;
pub(crate) mod limits;
mod listeners;
pub mod probe;
mod router;
mod service;
mod startup;
#[cfg(test)]
mod tests;

pub use self::embed::{shutdown_signal, Server, ServerBuilder};
pub(crate) use self::listeners::Listeners;
use self::startup::{banner, bind_error, say};

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
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
                let io = TokioIo::new(limits::Counted::new(stream, Arc::clone(&activity)));
                let conn_activity = Arc::clone(&activity);
                let read_timeout = limits.read_timeout;
                let bodies = Arc::clone(&state.bodies);
                let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let running = conn_activity.request(req.version());
                    // A HEAD answer's body is never written: it is owed nothing.
                    let head = req.method() == hyper::Method::HEAD;
                    let render = service::render_of(req.headers(), req.uri().query());
                    let version = req.version();
                    let req = req.map(|b| crate::http::RequestBody::new(b, read_timeout, &bodies, version));
                    // Boxed once: the fence and hyper then move a pointer, not the future.
                    let handling = Box::pin(handler(Arc::clone(&state), req));
                    async move {
                        let answer = router::guarded(render, handling).await;
                        if let (Ok(a), false) = (&answer, head) {
                            let bytes = hyper::body::Body::size_hint(a.body()).lower();
                            running.activity().answered(bytes);
                        }
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
