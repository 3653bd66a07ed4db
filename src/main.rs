//! The `sqsim` binary: parse flags, set up logging, serve until SIGINT or SIGTERM.

use clap::Parser;

/// mimalloc: request handling allocates many short-lived buffers across worker threads, which
/// it serves faster and with less fragmentation than the system allocator. It is built
/// without transparent huge pages (`no_thp`): with them its first arena costs several MiB of
/// resident memory before the first request, and `make bench`'s send scenario measured about
/// 285k against 445k messages/s, the huge pages' zeroing showing at the top of the profile.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::process::ExitCode;

use sqsim::config::Flags;
use sqsim::server::shutdown_signal;

/// An Amazon SQS-compatible server.
#[derive(Debug, Parser)]
#[command(name = "sqsim", version, about)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    flags: Flags,
    /// Log lines as `text` or `json` (one object per line).
    #[arg(long, env = "SQSIM_LOG_FORMAT", value_parser = ["text", "json"], default_value = "text")]
    log_format: String,
    /// Log filter (tracing syntax); RUST_LOG wins when set.
    #[arg(long, env = "SQSIM_LOG_LEVEL", default_value = "info")]
    log_level: String,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Push messages from SQS queues to an HTTP application, like Elastic Beanstalk's sqsd.
    #[cfg(feature = "worker")]
    Worker(Box<sqsim::worker::cli::WorkerArgs>),
    /// Exit 0 if the sqsim on this machine (the port from --port/SQSIM_PORT, as the server
    /// reads it) is healthy: a container health check that needs no curl.
    Health,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&args.log_level));
    // Colours only for a terminal: a log file or a container log gets plain text.
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    if args.log_format == "json" {
        logs.json().flatten_event(true).init();
    } else {
        logs.init();
    }
    match args.command {
        #[cfg(feature = "worker")]
        Some(Command::Worker(w)) => {
            return sqsim::worker::cli::run(*w, async { shutdown_signal().await })
        }
        Some(Command::Health) => {
            let port = args
                .flags
                .port
                .unwrap_or(sqsim::config::default_port(args.flags.compat.as_deref()));
            return match sqsim::server::probe::health(port) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("sqsim health: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        None => {}
    }
    let (config, file) = match sqsim::config_file::load(args.flags) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("sqsim: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sqsim: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The signal handlers exist before the listen line is printed.
    let shutdown = {
        let _inside = runtime.enter();
        shutdown_signal()
    };
    match runtime.block_on(sqsim::server::run(config, file, shutdown)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sqsim: {e}");
            ExitCode::from(2)
        }
    }
}
