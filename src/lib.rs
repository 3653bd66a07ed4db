//! sqsim: an Amazon SQS-compatible server.
//!
//! # Layout
//! The modules, top layer first. Each line's `uses:` names every other top-level module its
//! code reaches through `crate::` (its tests aside), and a module only uses modules listed
//! below it, so there are no cycles; `tests/it/readme.rs` checks the `uses:` lines against
//! the code. Everything is private to the crate except the embedding API: [`Server`] and
//! [`ServerBuilder`] (with [`server::run`] and [`server::in_process`], the request path
//! without sockets that the fuzzer drives), [`config`] with [`Durability`], [`Clock`] and
//! [`EngineSettings`], [`config_file`] and [`worker`].
//! - `server` (uses: api, cluster, control, config_file, worker, http, protocol, config, engine, error) —
//!   only HTTP: the accept loop (`mod`; `listeners`, the sockets it accepts on; `startup`,
//!   the listen line, banner and bind errors; `tests`), the embeddable [`Server`] (`embed`),
//!   `router` (the guard,
//!   then by path to the control plane or the SQS path; the panic fence), `service` (the SQS
//!   path in stages: body, signature, decoding, faults, context, routing, dispatch, the
//!   durability wait), `guard` (browsers, host names and the control plane's
//!   credentials, checked before anything else), `auth` (SigV4), `limits` (connection cap,
//!   idle connections, the open-file limit), `in_process` (the service driven without a
//!   socket), `probe` (`sqsim health`). It never touches the store: an answer waits on what
//!   the engine says it relies on.
//! - `cluster` (uses: control, api, http, protocol, config, engine, store, error) — cluster mode: `placement` (queue →
//!   shard → preferred node), `membership` (heartbeats and leases in JetStream key-value
//!   buckets: `buckets` opens them and reads a key at its leader, `step` is one control
//!   step, `read` its reads, `shards` the leases taken and given back, `settings` the
//!   clock and realism a node applies, publishes and follows, and the log format; `batch_read` reads many of their keys in one request, fenced by a
//!   heartbeat), `shard` (a served shard: an engine on its JetStream stream), `leaders` (each
//!   shard stream's leader moved to an even share per JetStream server), `route` (a
//!   request routed to its shard's engine or forwarded to the node serving it), `peers`
//!   (questions to every node: listings, stats, settings told), `admin` (the admin and
//!   peer endpoints in cluster mode), `status` (`/_sqsim/cluster` and health in cluster
//!   mode), `courier` (outbox parcels and queue settings between
//!   shards), `realism` (`/_sqsim/realism` for the whole cluster or one queue where it is
//!   served), `reset` (`/_sqsim/reset` on whichever node serves each shard).
//! - `control` (uses: api, worker, http, protocol, config, engine, store, error) — the control plane beside the SQS API,
//!   with its own error type (`error`): `admin` (`/_sqsim/` test controls), `peek` (a queue's
//!   messages without receiving them, and the search over them), `console` (the
//!   web console and its assets, `login` its sign-in), `faults` (injected errors, latency
//!   and dropped connections), `realism` (`/_sqsim/realism`), `metrics` (`GET /metrics`:
//!   counters in `mod`, the figures read by `scrape` and `process`, the two text formats in
//!   `format`), `request_log` (a line per request),
//!   `localstack` (`--compat localstack`: its `/_localstack/` endpoints, the `messages`
//!   developer endpoint, other services refused), `init_hooks` (`--init-dir` scripts).
//! - `config_file` (uses: api, engine, config, worker) — `load` (the binary's settings:
//!   defaults, `--compat`, the file, the flags; `cli` the command line), the TOML file: server settings,
//!   declared queues (checked by the same rules as CreateQueue), credentials and workers;
//!   `elasticmq` reads an ElasticMQ `elasticmq.conf` into the same structure.
//! - `worker` (uses: config) — the sqsd-style worker, an SQS client of any endpoint: `mod`
//!   (its settings and counters), `pump` (receiving, retries, scheduling; `batch`), `cli`,
//!   `deliver` (HTTP to the app), `cron`.
//! - `api` (uses: protocol, engine, error, config) — one handler per SQS action in `actions`
//!   (`create_queue`, `get_queue_url`, `list_queues`, `delete_queue`, `get_queue_attributes`,
//!   `set_queue_attributes`, `purge_queue`, `send_message`, `send_message_batch`,
//!   `receive_message`, `delete_message`, `delete_message_batch`,
//!   `change_message_visibility`, `change_message_visibility_batch`, `tags`, `permissions`,
//!   `list_dead_letter_source_queues`, `message_move_tasks`), and what several share: `context`
//!   (who asks, where), `access` (what another account's queue grants under `--auth
//!   verify`) with `condition` (IAM's condition operators), `attributes` (queue attributes), `message_attributes`, `batch`,
//!   `queue_url`, `target` (which queue a request is about, for cluster routing).
//! - `http` (uses: protocol) — the HTTP pieces every room shares: the request body with
//!   its read deadline and its share of what bodies arriving may hold (`budget`), headers,
//!   a credential scope, an encoded answer as a response.
//! - `protocol` (uses: error, simd) — bytes in and out of both wire protocols: `action` (the
//!   SQS actions as one enum, read off the wire once), `form` (form decoding), `query` (query keys rebuilt into JSON's shape), `query_json` (query replies
//!   rendered as JSON when asked), `member` (one member of a JSON body read without the rest: the
//!   queue cluster mode routes by), `xml` (the XML writer).
//! - `config` (uses: engine, store) — one [`Config`] from code, the config file and `flags`
//!   (one struct: every setting as a command-line flag, its environment variable and its `[server]` key, `--help` from its
//!   docs); it holds the engine's and the store's settings; `security` (access keys, the
//!   control plane's guard settings, secrets made and compared in constant time), `urls`
//!   (how queue URLs are spelled, LocalStack's strategies, what a `Host` names) and `compat`
//!   (where LocalStack's and ElasticMQ's images keep and expect things), with their `tests`.
//! - `engine` (uses: store, simd) — queue semantics, no HTTP, time only from its clock: `mod`
//!   (the `Engine`: its clock, move tasks, shutdown), `registry` (every queue: made, found,
//!   listed, deleted, reset; outboxes removed), `queue` (one queue's lock and waiters; its
//!   `console` views, its `transfer`s between queues, its `tests`), `state` (what is under
//!   that lock: `send`, `receive`, `settle` (deletes, visibility, purges), `transfer`:
//!   messages crossing between queues), `slab` (stored
//!   messages), `memory` (what `--max-stored-bytes` counts: messages, FIFO memory, queues), `fair` and `fifo` (delivery order), `ids`, `message`, `attribute`, `digest`
//!   and `md5_lanes` (MD5s), `receipt` (handles), `realism` (AWS-realism mode: which
//!   behaviours are on in `mode`, a leaf the settings hold; seeded draws in `mod`; what it
//!   does to a queue in `apply`), `receive` (and the engine's receive, dead letters
//!   included), `view`,
//!   `settings`, `redrive`, `clock`, `random`, `error`, `search` (the peek's filter and its bounded scan), `wait` (every wait: long polls, outbox
//!   delivery, a rate-limited move task — woken by what they wait for, never polling);
//!   `journal` (below the queue lock: handing recorded changes to the store and which
//!   records an answer relies on; `change`, the recorded changes); `durable` (above the
//!   registry: `replay` with its `tests`, and `restore`: recovery; `snapshot`, a snapshot
//!   made frame by frame as the store writes it; `compactor`, snapshots of a grown log;
//!   `durable_answers`, tests that no answer goes out before what it relies on is kept); `moves` (`task`: message move
//!   tasks; `outbox`: messages bound for a queue another shard serves, in cluster mode;
//!   `selected`: messages the console moves by hand).
//! - `store` (uses: nothing) — durable mode's seam: `mod` (the `Store` trait), `log` (the data
//!   directory's log and snapshots: `writer`, the group-commit thread; `replay`, the files
//!   played back on start-up; `dir`, the directory's guard (private modes, no symbolic links,
//!   the lock), with `dir_tests`; `tests`, and `torn_tests`: power cuts and the previous
//!   format), `frame` (the file format: units, frames, the reader; `tests`), `jetstream` (a NATS
//!   JetStream stream, fenced by expected sequences, several publishes in flight: its
//!   `publish` loop and window, `group` (records as log messages), `retry`, `recover`,
//!   `snapshot`, `lead` (moving a stream's leader) and `tests`), `hold`
//!   (when a JetStream writer waits for more records before it publishes), `nats_io` (the
//!   one I/O thread and shared connection of every JetStream store), `packed` (a JetStream
//!   store's messages compressed), `memory` (tests),
//!   `suite` (the one suite every store passes), `crash_point` (the crash tests'
//!   deterministic kills).
//! - `error` (uses: nothing) — the one SQS error table both protocols render from.
//! - `simd` (uses: nothing) — the switch for the two hand-written SIMD paths.
//! # Embedding
//! A test (or any program) can run sqsim in its own process: [`Server::builder`] binds
//! `127.0.0.1` on a free port and serves in the background on the caller's tokio runtime;
//! [`Server::endpoint`] is what an SDK takes as its endpoint URL. The test controls are
//! methods: [`Server::reset`], [`Server::advance_clock`], [`Server::clock`] (freeze it),
//! [`Server::apply_config`] (queues declared as a config file declares them). With
//! `default-features = false` the crate leaves out cluster mode and the worker (no NATS
//! client, no AWS SDK).
//! ```
//! use std::time::Duration;
//!
//! use sqsim::config_file::LoadedConfig;
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut config = sqsim::Config::default();
//! config.account_id = "123456789012".to_string();
//! let server = sqsim::Server::builder().config(config).start().await?;
//! assert!(server.endpoint().starts_with("http://127.0.0.1:"));
//!
//! // Queues a test needs, with their dead-letter wiring, as a config file declares them.
//! let queues = r#"
//!     [queues.jobs]
//!     attributes = { VisibilityTimeout = 60 }
//!     dead_letter = { queue = "jobs-dlq", max_receive_count = 3 }
//!     [queues.jobs-dlq]
//! "#;
//! server.apply_config(&LoadedConfig::parse("queues.toml", queues.to_string())?)?;
//!
//! // Timers run on the server's clock: frozen, it moves only when the test moves it.
//! server.clock().freeze();
//! let before = server.clock().now_ms();
//! server.advance_clock(Duration::from_secs(60)); // a visibility timeout passes, no sleep
//! assert_eq!(server.clock().now_ms(), before + 60_000);
//!
//! server.reset(); // every queue gone: a clean slate for the next test
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```

// A build without cluster mode or the worker (`--no-default-features`) leaves the helpers
// only they call unused; the default build is where dead code is caught.
#![cfg_attr(
    not(all(feature = "cluster", feature = "worker")),
    allow(dead_code, unused_imports)
)]

pub(crate) mod api;
#[cfg(feature = "cluster")]
pub(crate) mod cluster;
pub mod config;
pub mod config_file;
pub(crate) mod control;
pub(crate) mod engine;
pub(crate) mod error;
pub(crate) mod http;
pub(crate) mod protocol;
pub mod server;
mod simd;
pub(crate) mod store;
pub mod worker;

pub use config::{Config, Durability, SyncMode};
pub use engine::clock::MAX_EPOCH_MS;
pub use engine::{Clock, EngineSettings, Realism};
pub use server::{Server, ServerBuilder};
