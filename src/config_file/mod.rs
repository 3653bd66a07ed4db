//! The TOML config file (`--config`): server settings plus queues that must exist at start —
//! attributes, tags and dead-letter wiring by queue name, in any order. Applying it twice
//! changes nothing the second time. Errors name the line and the key. A `.conf` file is
//! read as ElasticMQ's `elasticmq.conf` instead ([`elasticmq`]), into the same structure.
//!
//! ```toml
//! [server]
//! port = 9324
//! region = "us-east-1"
//!
//! [queues.orders]
//! attributes = { VisibilityTimeout = 60 }
//! tags = { team = "core" }
//! dead_letter = { queue = "orders-dlq", max_receive_count = 3 }
//!
//! [queues.orders-dlq]
//!
//! [queues."events.fifo"]          # a .fifo name makes a FIFO queue
//! attributes = { ContentBasedDeduplication = true }
//! ```

pub mod cli;
mod elasticmq;

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
use toml::Spanned;

use crate::api::actions::create_queue::check_queue_name;
use crate::api::actions::tags::check_new_tags;
use crate::api::attributes::{apply, check_redrive_target};
use crate::config::{Config, Credential, Flags, Source};
use crate::engine::redrive::RedrivePolicy;
use crate::engine::{Engine, QueueId, QueueSettings};

/// A config file problem, worded for a person: where, which key, what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

/// The file's contents.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// `[server]`: the command line's settings under the same names (flags win).
    #[serde(default)]
    pub server: Flags,
    #[serde(default)]
    pub queues: BTreeMap<String, Spanned<QueueSection>>,
    /// Keys for `auth = "verify"`.
    #[serde(default)]
    pub credentials: Vec<Spanned<CredentialSection>>,
    /// Workers pushing this server's queues to applications (`sqsim worker` in-process).
    #[serde(default)]
    pub workers: Vec<Spanned<WorkerSection>>,
}

/// `[[workers]]`: the `sqsim worker` options, with queues named as in `[queues]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerSection {
    pub name: Option<String>,
    pub queues: Vec<String>,
    pub http_url: String,
    pub http_connections: Option<usize>,
    pub connect_timeout: Option<f64>,
    pub inactivity_timeout: Option<f64>,
    pub visibility_timeout: Option<u32>,
    pub error_visibility_timeout: Option<u32>,
    pub mime_type: Option<String>,
    pub retry_delay: Option<u32>,
    pub retry_backoff: Option<String>,
    pub retry_max_delay: Option<u32>,
    pub shutdown_timeout: Option<f64>,
    pub batch_size: Option<usize>,
    pub batch_window: Option<f64>,
    #[serde(default)]
    pub weights: BTreeMap<String, u32>,
}

/// `[[credentials]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialSection {
    pub access_key: String,
    pub secret_key: String,
    pub account_id: Option<String>,
    /// Whether it may use the control plane.
    #[serde(default)]
    pub admin: bool,
}

/// `[queues.<name>]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueSection {
    /// Namespace of the queue; the server defaults when absent.
    pub region: Option<String>,
    pub account_id: Option<String>,
    #[serde(default)]
    pub attributes: BTreeMap<String, Spanned<toml::Value>>,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    pub dead_letter: Option<Spanned<DeadLetter>>,
    /// This queue's own realism setting (wins over the server's).
    pub realism: Option<Spanned<String>>,
}

/// `dead_letter = { queue = "name", max_receive_count = 3 }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeadLetter {
    pub queue: String,
    pub max_receive_count: u32,
}

/// A parsed file and its text (for line numbers).
#[derive(Debug)]
pub struct LoadedConfig {
    pub path: String,
    /// The TOML text errors point into; empty for an ElasticMQ config, whose errors name
    /// keys only.
    pub text: String,
    pub file: FileConfig,
    /// Where each `[server]` key's value starts in `text`, for errors found when applying it.
    pub server_spans: HashMap<String, usize>,
    /// Keys that were read but are not honoured (an ElasticMQ config's `copyTo`, say), one
    /// line each, for the binary to log at start.
    pub warnings: Vec<String>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The binary's settings: the server defaults, then `--compat localstack`'s (its port,
/// init directory, queue URLs and `PERSISTENCE`) or `--compat elasticmq`'s (the UI port,
/// one namespace, `/opt/elasticmq.conf`), then the config file named by `--config`, then
/// the flags over it. The file comes back too (its queues and workers are
/// created once the server runs). The error is a one-line message for the command line.
pub fn load(flags: Flags) -> Result<(Config, Option<LoadedConfig>), String> {
    let mut config = Config::server_defaults();
    if flags.compat.as_deref() == Some("localstack") {
        config.localstack = Some(crate::config::localstack_settings()?);
        config.port = crate::config::default_port(flags.compat.as_deref());
        let ready = std::path::Path::new(crate::config::LOCALSTACK_READY_DIR);
        config.init_dir = ready.is_dir().then(|| ready.to_path_buf());
        // LocalStack's PERSISTENCE=1 keeps state under its volume; so does sqsim (durable
        // mode there) unless --data-dir says otherwise.
        if matches!(
            std::env::var("PERSISTENCE").as_deref(),
            Ok("1" | "true" | "True")
        ) {
            config.durability = Some(crate::config::Durability::new(
                crate::config::LOCALSTACK_PERSISTENCE_DIR,
            ));
        }
    }
    let mut config_path = flags.config.clone();
    if flags.compat.as_deref() == Some("elasticmq") {
        config.console_port = Some(crate::config::ELASTICMQ_UI_PORT);
        config.single_region = true;
        let mounted = std::path::Path::new(crate::config::ELASTICMQ_CONF);
        if config_path.is_none() && mounted.is_file() {
            config_path = Some(crate::config::ELASTICMQ_CONF.to_string());
        }
    }
    let file = match &config_path {
        Some(path) => {
            let f = LoadedConfig::read(path)
                .and_then(|f| {
                    f.apply_server(&mut config)?;
                    Ok(f)
                })
                .map_err(|e| format!("config error: {e}"))?;
            for w in &f.warnings {
                tracing::warn!(config = %f.path, "{w}");
            }
            Some(f)
        }
        None => None,
    };
    // The file's keys were validated by apply_server.
    let file_keys = file
        .as_ref()
        .and_then(|f| f.credentials().ok())
        .unwrap_or_default();
    flags
        .apply(&mut config, &file_keys, Source::Flags)
        .map_err(|e| e.message)?;
    Flags::finish(&config)?;
    Ok((config, file))
}

impl LoadedConfig {
    /// Reads and parses a config file: TOML, or ElasticMQ's HOCON when the name ends in
    /// `.conf`.
    pub fn read(path: &str) -> Result<LoadedConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            path: path.to_string(),
            message: format!("cannot read: {e}"),
        })?;
        if elasticmq::is_elasticmq(path) {
            return Self::parse_elasticmq(path, &text);
        }
        Self::parse(path, text)
    }

    /// Parses an ElasticMQ `elasticmq.conf` (`path` only names it in errors).
    pub fn parse_elasticmq(path: &str, text: &str) -> Result<LoadedConfig, ConfigError> {
        let t = elasticmq::translate(path, text)?;
        Ok(LoadedConfig {
            path: path.to_string(),
            text: String::new(),
            file: t.file,
            server_spans: HashMap::new(),
            warnings: t.warnings,
        })
    }

    /// Parses config text (`path` only names it in errors).
    pub fn parse(path: &str, text: String) -> Result<LoadedConfig, ConfigError> {
        let file: FileConfig = toml::from_str(&text).map_err(|e| {
            let mut message = match e.span() {
                Some(span) => format!("line {}: {}", line_of(&text, span.start), e.message()),
                None => e.message().to_string(),
            };
            if path.ends_with(".yaml") || path.ends_with(".yml") {
                message.push_str(
                    " (sqsim reads its config file as TOML, or as ElasticMQ's HOCON when the \
                     name ends in .conf; YAML is not read: see docs/config.md)",
                );
            }
            ConfigError {
                path: path.to_string(),
                message,
            }
        })?;
        // The same text again for the `[server]` values' places: `Flags` is shared with clap
        // and holds plain values, not spans.
        #[derive(Deserialize)]
        struct Places {
            #[serde(default)]
            server: HashMap<String, Spanned<serde::de::IgnoredAny>>,
        }
        let server_spans = toml::from_str::<Places>(&text)
            .map(|p| {
                p.server
                    .into_iter()
                    .map(|(k, v)| (k, v.span().start))
                    .collect()
            })
            .unwrap_or_default();
        Ok(LoadedConfig {
            path: path.to_string(),
            text,
            file,
            server_spans,
            warnings: Vec::new(),
        })
    }

    fn error(&self, offset: usize, key: &str, message: impl std::fmt::Display) -> ConfigError {
        let message = if self.text.is_empty() {
            format!("{key}: {message}")
        } else {
            format!("line {}: {key}: {message}", line_of(&self.text, offset))
        };
        ConfigError {
            path: self.path.clone(),
            message,
        }
    }

    /// Applies the `[server]` settings over `config` (the flags come after, over them).
    pub fn apply_server(&self, config: &mut Config) -> Result<(), ConfigError> {
        let keys = self.credentials()?;
        self.file
            .server
            .clone()
            .apply(config, &keys, Source::File)
            .map_err(|e| {
                match e
                    .key
                    .and_then(|k| self.server_spans.get(k).map(|at| (k, *at)))
                {
                    Some((key, at)) => self.error(at, &format!("server.{key}"), e.message),
                    None => ConfigError {
                        path: self.path.clone(),
                        message: match e.key {
                            Some(key) => format!("server.{key}: {}", e.message),
                            None => e.message,
                        },
                    },
                }
            })
    }

    /// The `[[credentials]]` keys, by access key.
    pub fn credentials(
        &self,
    ) -> Result<std::collections::HashMap<String, Credential>, ConfigError> {
        let mut keys = std::collections::HashMap::new();
        for c in &self.file.credentials {
            let c_ref = c.get_ref();
            let text = format!(
                "{}:{}{}{}",
                c_ref.access_key,
                c_ref.secret_key,
                c_ref
                    .account_id
                    .as_ref()
                    .map(|a| format!(":{a}"))
                    .unwrap_or_default(),
                if c_ref.admin { ":admin" } else { "" }
            );
            let cred = Credential::parse(&text).ok_or_else(|| {
                self.error(
                    c.span().start,
                    "credentials",
                    "needs access_key, secret_key and an optional 12-digit account_id",
                )
            })?;
            keys.insert(cred.access_key.clone(), cred);
        }
        Ok(keys)
    }

    /// The declared workers as (name, options), their queue URLs under `base_url`.
    pub fn workers(
        &self,
        base_url: &str,
        account: &str,
    ) -> Result<Vec<(String, crate::worker::WorkerOptions)>, ConfigError> {
        use crate::worker::{secs, Backoff, WorkerOptions, WorkerQueue};
        let mut out = Vec::new();
        for (i, w) in self.file.workers.iter().enumerate() {
            let at = w.span().start;
            let w = w.get_ref();
            let key = format!("workers[{i}]");
            if w.queues.is_empty() {
                return Err(self.error(at, &key, "needs at least one queue"));
            }
            let backoff = match w.retry_backoff.as_deref() {
                None => Backoff::Fixed,
                Some(name) => Backoff::parse(name).ok_or_else(|| {
                    self.error(
                        at,
                        &format!("{key}.retry_backoff"),
                        format!("{name:?} is not one of \"fixed\", \"exponential\""),
                    )
                })?,
            };
            if let Some(n) = w.batch_size.filter(|n| !(1..=10).contains(n)) {
                return Err(self.error(
                    at,
                    &format!("{key}.batch_size"),
                    format!("{n} is not between 1 and 10"),
                ));
            }
            let defaults = WorkerOptions::default();
            let queues = w
                .queues
                .iter()
                .map(|q| WorkerQueue {
                    url: if q.contains("://") {
                        q.clone()
                    } else {
                        format!("{base_url}/{account}/{q}")
                    },
                    weight: w.weights.get(q).copied().unwrap_or(1),
                })
                .collect();
            let opts = WorkerOptions {
                queues,
                http_url: w.http_url.clone(),
                http_connections: w
                    .http_connections
                    .unwrap_or(defaults.http_connections)
                    .max(1),
                connect_timeout: w
                    .connect_timeout
                    .map(secs)
                    .unwrap_or(defaults.connect_timeout),
                inactivity_timeout: w
                    .inactivity_timeout
                    .map(secs)
                    .unwrap_or(defaults.inactivity_timeout),
                visibility_timeout: w.visibility_timeout.unwrap_or(defaults.visibility_timeout),
                error_visibility_timeout: w.error_visibility_timeout,
                mime_type: w.mime_type.clone().unwrap_or(defaults.mime_type.clone()),
                retry_delay: w.retry_delay,
                retry_backoff: backoff,
                retry_max_delay: w.retry_max_delay.unwrap_or(defaults.retry_max_delay),
                shutdown_timeout: w
                    .shutdown_timeout
                    .map(secs)
                    .unwrap_or(defaults.shutdown_timeout),
                batch_size: w.batch_size.unwrap_or(1),
                batch_window: w.batch_window.map(secs).unwrap_or(defaults.batch_window),
                ..defaults
            };
            out.push((
                w.name.clone().unwrap_or_else(|| format!("worker-{i}")),
                opts,
            ));
        }
        Ok(out)
    }

    /// Creates (or updates) the declared queues, then wires dead-letter queues by name.
    /// Running it again leaves everything as it is.
    pub(crate) fn apply_queues(
        &self,
        engine: &Engine,
        default_region: &str,
        default_account: &str,
    ) -> Result<(), ConfigError> {
        let id_of = |name: &str, q: &QueueSection| QueueId {
            region: q
                .region
                .clone()
                .unwrap_or_else(|| default_region.to_string()),
            account: q
                .account_id
                .clone()
                .unwrap_or_else(|| default_account.to_string()),
            name: name.to_string(),
        };
        // First every queue with its own attributes, so wiring can refer to any of them.
        for (name, section) in &self.file.queues {
            let key = format!("queues.{name}");
            let at = section.span().start;
            let q = section.get_ref();
            let fifo = name.ends_with(".fifo");
            check_queue_name(name, fifo).map_err(|e| self.error(at, &key, e.message))?;
            let mut attrs = HashMap::new();
            for (attr, value) in &q.attributes {
                let text = match value.get_ref() {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Integer(i) => i.to_string(),
                    toml::Value::Boolean(b) => b.to_string(),
                    other => {
                        return Err(self.error(
                            value.span().start,
                            &format!("{key}.attributes.{attr}"),
                            format!(
                                "expected a string, integer or boolean, found {}",
                                other.type_str()
                            ),
                        ))
                    }
                };
                if attr == "RedrivePolicy" {
                    return Err(self.error(
                        value.span().start,
                        &format!("{key}.attributes.{attr}"),
                        "use dead_letter = { queue = \"name\", max_receive_count = N } instead",
                    ));
                }
                attrs.insert(attr.clone(), text);
            }
            if fifo {
                attrs.insert("FifoQueue".into(), "true".into());
            }
            let mut settings = QueueSettings {
                fifo_queue: fifo,
                ..QueueSettings::default()
            };
            apply(&mut settings, &attrs, fifo).map_err(|e| {
                let attr = q
                    .attributes
                    .iter()
                    .find(|(a, _)| e.message.contains(a.as_str()));
                let (offset, k) = match attr {
                    Some((a, v)) => (v.span().start, format!("{key}.attributes.{a}")),
                    None => (at, format!("{key}.attributes")),
                };
                self.error(offset, &k, e.message)
            })?;
            let realism = match &q.realism {
                Some(v) => Some(
                    crate::engine::Realism::parse(v.get_ref())
                        .map_err(|e| self.error(v.span().start, &format!("{key}.realism"), e))?,
                ),
                None => None,
            };
            let tags: HashMap<String, String> = q.tags.clone().into_iter().collect();
            check_new_tags(name, &tags, tags.len())
                .map_err(|e| self.error(at, &format!("{key}.tags"), e.message))?;
            let id = id_of(name, q);
            let (queue, created) = engine
                .declare_queue(id, settings.clone())
                .map_err(|e| self.error(at, &key, e))?;
            if !created {
                // Only a real change touches the queue (and its LastModifiedTimestamp).
                let current = queue.settings();
                let mut wanted = current.clone();
                apply(&mut wanted, &attrs, fifo).map_err(|e| self.error(at, &key, e.message))?;
                if wanted != current {
                    queue.update_settings(engine.now_ms(), |s| {
                        *s = wanted;
                        Ok::<(), ConfigError>(())
                    })?;
                }
            }
            queue.update_tags(|t| t.extend(tags));
            if let Some(r) = realism {
                engine.set_queue_realism(&queue, r, created);
            }
        }
        // Then the dead-letter wiring, by name, in any order.
        for (name, section) in &self.file.queues {
            let q = section.get_ref();
            let Some(dl) = &q.dead_letter else {
                continue;
            };
            let key = format!("queues.{name}.dead_letter");
            let at = dl.span().start;
            let source_id = id_of(name, q);
            let target_section = self.file.queues.get(&dl.get_ref().queue).ok_or_else(|| {
                self.error(
                    at,
                    &key,
                    format!("no queue named {:?} in this file", dl.get_ref().queue),
                )
            })?;
            let target = id_of(&dl.get_ref().queue, target_section.get_ref());
            let count = dl.get_ref().max_receive_count;
            let raw = RedrivePolicy::document(&target.arn(), count);
            if !(1..=1000).contains(&count) {
                return Err(self.error(at, &key, "max_receive_count must be between 1 and 1000"));
            }
            let policy = RedrivePolicy {
                raw,
                dead_letter_target: target,
                max_receive_count: count,
            };
            let source = engine
                .queue(&source_id)
                .ok_or_else(|| self.error(at, &key, "source queue vanished"))?;
            let mut candidate = source.settings();
            candidate.redrive_policy = Some(policy.clone());
            check_redrive_target(engine, &source_id, &candidate)
                .map_err(|e| self.error(at, &key, e.message))?;
            if source.settings().redrive_policy.as_ref() != Some(&policy) {
                source.update_settings(engine.now_ms(), |s| {
                    s.redrive_policy = Some(policy);
                    Ok::<(), ConfigError>(())
                })?;
            }
        }
        Ok(())
    }
}
