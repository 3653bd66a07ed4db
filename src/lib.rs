//! sqsim: an Amazon SQS-compatible server.
//!
//! # Layout
//! Each layer uses only the ones listed after it; every module but the embedding API
//! ([`Server`], [`config`] with [`Durability`], [`config_file`], [`worker`]) is private to the
//! crate.
//! - `server` — the hyper service and accept loop, and the embeddable [`Server`]:
//!   `service` (the request path in stages), `auth` (SigV4), `admin` (`/_sqsim/` test
//!   controls), `console` (the web console and its assets), `faults` (injected errors,
//!   latency and dropped connections), `metrics` (`GET /metrics`), `request_log` (a line
//!   per request).
//! - `api` — one handler per SQS action (`actions/*`), and what several share: `context`
//!   (who asks, where), `attributes` (queue attributes), `message_attributes`, `batch`,
//!   `queue_url`.
//! - `protocol` — bytes in and out of both wire protocols: `form` (form decoding), `query`
//!   (query keys rebuilt into JSON's shape), `query_json` (query replies rendered as JSON when
//!   asked), `xml` (the XML writer).
//! - `engine` — queue semantics, no HTTP, time only from its clock: `mod` (the `Engine`:
//!   every queue, move tasks), `queue` (one queue's lock and waiters), `state` (what is under
//!   that lock), `slab` (stored messages), `fair` and `fifo` (delivery order), `ids`,
//!   `message`, `attribute`, `digest` and `md5_lanes` (MD5s), `receipt` (handles), `receive`,
//!   `view`, `settings`, `redrive`, `move_task`, `clock`, `random`, `error`; for durable mode
//!   `change` (the recorded changes), `journal` (handing them to the store), `replay` and
//!   `restore` (recovery and snapshots).
//! - `store` — durable mode's seam: `mod` (the `Store` trait), `log` (the data directory's
//!   log, snapshots and writer), `frame` (the file format), `memory` (tests), `suite` (the one
//!   suite every store passes).
//! - `error` — the one SQS error table both protocols render from.
//! - [`config`] and [`config_file`] — settings from code, flags and a TOML file.
//! - [`worker`] — the sqsd-style worker: `cli`, `deliver` (HTTP to the app), `batch`, `cron`.
//! # Embedding
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! let server = sqsim::Server::builder().start().await?;
//! println!("point your SDK at {}", server.endpoint());
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```

pub(crate) mod api;
pub mod config;
pub mod config_file;
pub(crate) mod engine;
pub(crate) mod error;
pub(crate) mod protocol;
pub mod server;
mod simd;
pub(crate) mod store;
pub mod worker;

pub use config::{Config, Durability, SyncMode};
pub use engine::clock::MAX_EPOCH_MS;
pub use engine::{Clock, EngineSettings};
pub use server::{Server, ServerBuilder};
