//! The in-process server: [`ServerBuilder`] starts one, [`Server`] is its handle for
//! embedders and tests (endpoint, clock, reset, shutdown).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::{serve, AppState};
use crate::config::Config;
use crate::engine::Clock;

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
