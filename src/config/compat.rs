//! `--compat localstack` and `--compat elasticmq`: where those images keep and expect
//! things, and LocalStack's own environment variables.

use super::{LocalStackStrategy, DEFAULT_PORT};

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

/// `--compat localstack`: what a LocalStack user's setup expects besides SQS itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalStack {
    /// How queue URLs are spelled (LocalStack's `SQS_ENDPOINT_STRATEGY`).
    pub strategy: LocalStackStrategy,
    /// `host[:port]` in queue URLs (LocalStack's `LOCALSTACK_HOST`); by default
    /// `localhost.localstack.cloud` and the port sqsim listens on.
    pub host: Option<String>,
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
