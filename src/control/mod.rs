//! The control plane: sqsim's own endpoints beside the SQS API, with their own error type
//! (`error`): `admin` (`/_sqsim/` test controls), `console` (the web console, `login` its
//! sign-in), `faults` (injected errors, latency and dropped connections), `realism`
//! (`/_sqsim/realism`), `metrics` (`GET /metrics`), `request_log` (a line per request),
//! `localstack` (`--compat localstack`'s endpoints), `init_hooks` (`--init-dir` scripts).
//! [`Plane`] is the state they share with the SQS path.

pub(crate) mod admin;
pub(crate) mod console;
pub(crate) mod error;
pub(crate) mod faults;
pub(crate) mod init_hooks;
pub(crate) mod localstack;
pub(crate) mod metrics;
pub(crate) mod peek;
pub(crate) mod realism;
pub(crate) mod request_log;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;

use crate::config::Config;
use crate::engine::journal;
use crate::engine::{Clock, Engine};

/// What the control plane and the SQS path share: the engine, the settings, injected
/// faults, the request counters, and the operator's credentials.
#[derive(Debug)]
pub(crate) struct Plane {
    pub engine: Arc<Engine>,
    /// Injected faults (admin API), applied before a request reaches the engine.
    pub faults: faults::FaultSet,
    pub config: Config,
    pub local_addr: SocketAddr,
    /// Workers started with the server (config file), by name, for `/_sqsim/stats`.
    pub workers: std::sync::Mutex<Vec<(String, Arc<crate::worker::WorkerStats>)>>,
    /// Request counters and connection gauges for `/metrics`.
    pub metrics: metrics::RequestMetrics,
    /// What request bodies arriving may hold, every connection together
    /// (`max_incoming_bytes`).
    pub bodies: Arc<crate::http::BodyBudget>,
    /// The init hooks' progress (`--init-dir`), for `/_localstack/init`.
    pub init: Arc<init_hooks::InitStatus>,
    /// When this server started, for `/_localstack/info`.
    pub started: Started,
    /// The token the control plane asks for (`--admin-token`, or made up at start under
    /// `--auth verify`); `None`: the control plane is open to whoever passes the browser
    /// and host checks (the laptop default).
    pub admin_token: Option<String>,
    /// Whether `admin_token` was made up here (then it is printed at start).
    pub admin_token_generated: bool,
    /// Console logins.
    pub sessions: console::login::Sessions,
}

/// When and as which session a server started.
#[derive(Debug)]
pub(crate) struct Started {
    pub at: std::time::Instant,
    pub session_id: String,
}

impl Plane {
    /// State for a server bound to `local_addr`, with an engine on `clock`: a fresh one in
    /// memory, or in durable mode the one its data directory holds.
    pub(crate) fn open(
        config: Config,
        clock: Arc<Clock>,
        local_addr: SocketAddr,
    ) -> Result<Plane, crate::store::StoreError> {
        let engine = match &config.durability {
            None => Engine::new(clock, config.engine.clone()),
            Some(d) => {
                let started = std::time::Instant::now();
                let store = crate::store::log::LogStore::open(&d.data_dir, d.sync, d.salvage)
                    .map_err(|e| match e {
                        // The others name their file already.
                        crate::store::StoreError::Io(why) => crate::store::StoreError::Io(
                            format!("data directory {}: {why}", d.data_dir.display()).into(),
                        ),
                        other => other,
                    })?;
                let (engine, report) = Engine::open(clock, config.engine.clone(), Arc::new(store))?;
                tracing::info!(
                    data_dir = %d.data_dir.display(),
                    sync = %d.sync,
                    records = report.records,
                    torn_bytes = report.torn_bytes,
                    salvaged = ?report.salvaged,
                    millis = started.elapsed().as_millis() as u64,
                    "durable state recovered"
                );
                engine
            }
        };
        let engine = Arc::new(engine);
        if let Some(d) = &config.durability {
            crate::engine::spawn_compactor(Arc::downgrade(&engine), d.compact_after_bytes);
            crate::engine::moves::task::resume(&engine);
        }
        let generated = config.security.admin_token.is_none()
            && matches!(config.auth, crate::config::AuthMode::Verify(_));
        let admin_token = config
            .security
            .admin_token
            .clone()
            .or_else(|| generated.then(crate::config::new_secret));
        Ok(Plane {
            engine,
            bodies: crate::http::BodyBudget::new(config.limits.max_incoming_bytes),
            faults: faults::FaultSet::default(),
            admin_token,
            admin_token_generated: generated,
            sessions: Default::default(),
            config,
            local_addr,
            workers: Default::default(),
            metrics: Default::default(),
            init: Default::default(),
            started: Started {
                at: std::time::Instant::now(),
                session_id: uuid::Uuid::new_v4().to_string(),
            },
        })
    }

    /// Runs the init hooks of `--init-dir`, if set, once the server answers; `done` is
    /// called after the last one (at once when there is no directory).
    pub(crate) fn start_init_hooks(&self, done: impl FnOnce() + Send + 'static) {
        init_hooks::start(
            self.config.init_dir.clone(),
            init_hooks::HookEnv {
                endpoint: crate::http::loopback_url(self.local_addr),
                region: self.config.region.clone(),
            },
            Arc::clone(&self.init),
            done,
        );
    }

    /// Everything back to a fresh server: queues, messages, move tasks, cooldowns and fault
    /// rules.
    pub(crate) fn reset_all(&self) {
        self.engine.reset(None);
        self.faults.clear();
    }
}

/// Runs a control request's `work`, answering once what it relies on is kept (or that it
/// could not be): admin changes (reset, clock) are acknowledged like any SQS change.
pub(crate) async fn kept_on(
    work: impl Future<Output = Response<Full<Bytes>>>,
) -> Response<Full<Bytes>> {
    match journal::track(work).await.kept().await {
        (resp, Ok(())) => resp,
        (_, Err(e)) => error::ControlError::not_kept(e).reply(),
    }
}

/// The id a queue URL names, the way the SQS API would read it for the default namespace.
pub(crate) fn queue_id_of(
    state: &Plane,
    url: &str,
    region: Option<&str>,
) -> Option<crate::engine::QueueId> {
    let r = crate::api::queue_url::parse(url)?;
    Some(crate::engine::QueueId {
        region: r
            .region
            .or(region)
            .unwrap_or(&state.config.region)
            .to_string(),
        account: r.account.unwrap_or(&state.config.account_id).to_string(),
        name: r.name.to_string(),
    })
}

/// Finds a queue from a URL, the way the SQS API would for the default namespace.
pub(crate) fn queue_of(
    state: &Plane,
    url: &str,
    region: Option<&str>,
) -> Option<Arc<crate::engine::Queue>> {
    state.engine.queue(&queue_id_of(state, url, region)?)
}
