//! The command line as clap reads it: the server's settings ([`Flags`], shared with the
//! file's `[server]`), the logging flags and the subcommands. `main.rs` acts on it; the
//! completions, the man page and `docs/flags.md` (tests/it/docs.rs) are generated from it.

use clap::Parser;

use crate::config::Flags;

/// An Amazon SQS-compatible server.
#[derive(Debug, Parser)]
#[command(name = "sqsim", version, about)]
pub struct Cli {
    /// What to run instead of the server, if anything.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The server's settings.
    #[command(flatten)]
    pub flags: Flags,
    /// Log lines as `text` or `json` (one object per line).
    #[arg(long, env = "SQSIM_LOG_FORMAT", help_heading = "Logging", value_parser = ["text", "json"], default_value = "text")]
    pub log_format: String,
    /// Log filter (tracing syntax); RUST_LOG wins when set.
    ///
    /// Log filter in tracing's syntax (`warn`, `sqsim=debug`…); RUST_LOG wins when set;
    /// `debug` logs a line for every request.
    #[arg(
        long,
        env = "SQSIM_LOG_LEVEL",
        help_heading = "Logging",
        default_value = "info"
    )]
    pub log_level: String,
}

/// The subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Push messages from SQS queues to an HTTP application, like Elastic Beanstalk's sqsd.
    #[cfg(feature = "worker")]
    Worker(Box<crate::worker::cli::WorkerArgs>),
    /// Exit 0 if the sqsim on this machine is healthy: a container health check that needs
    /// no curl.
    Health {
        /// The port sqsim listens on [default: 9324, 4566 with --compat localstack].
        #[arg(long, env = "SQSIM_PORT")]
        port: Option<u16>,
    },
    /// Print a shell's completion script, e.g. `sqsim completions bash >
    /// /etc/bash_completion.d/sqsim`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), e.g. `sqsim man | man -l -`.
    Man,
}
