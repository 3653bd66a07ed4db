//! sqsim: an Amazon SQS-compatible server.
//!
//! # Layout
//! - [`protocol`]: bytes in and out for both wire protocols (AWS JSON 1.0 and query/XML).
//! - [`api`]: one handler per SQS action: typed input → validation → engine → typed output.
//! - [`engine`]: queue semantics with no HTTP; time only from its [`engine::Clock`].
//! - [`server`]: the hyper service, the accept loop, shutdown, and the embeddable [`Server`].
//! - [`error`]: the one SQS error table both protocols render from.
//!
//! # Embedding
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! let server = sqsim::Server::builder().start().await?;
//! println!("point your SDK at {}", server.endpoint());
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```

pub mod api;
pub mod config;
pub mod config_file;
pub mod engine;
pub mod error;
pub mod protocol;
pub mod server;
pub mod worker;

pub use config::Config;
pub use engine::Clock;
pub use server::{Server, ServerBuilder};
