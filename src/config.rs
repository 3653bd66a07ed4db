//! Server configuration: one struct filled from CLI flags and environment variables by
//! `main.rs`, or built directly by embedders and tests.

use crate::engine::EngineSettings;

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
    pub auth: crate::server::auth::AuthMode,
    /// Engine knobs.
    pub engine: EngineSettings,
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
            auth: crate::server::auth::AuthMode::Off,
            engine: EngineSettings::default(),
        }
    }
}
