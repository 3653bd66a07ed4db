//! The `sqsim` binary: parse flags, set up logging, serve until SIGINT or SIGTERM.

use clap::{CommandFactory, Parser};

/// mimalloc, without transparent huge pages: request handling allocates many short-lived
/// buffers across threads (with huge pages, send measured 285k against 445k msgs/s).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::process::ExitCode;

use sqsim::config_file::cli::{Cli, Command};
use sqsim::server::shutdown_signal;

fn main() -> ExitCode {
    let args = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&args.log_level));
    // Colours only for a terminal: a log file or a container log gets plain text.
    // A log line that cannot be written (stderr on a full disk, or closed) is dropped: the
    // library would otherwise report it with `eprintln!`, which panics when stderr cannot
    // be written either, and so end whichever thread logged — the durable log's writer
    // included, after which no write was ever taken again.
    let logs = tracing_subscriber::fmt()
        .log_internal_errors(false)
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
        Some(Command::Completions { shell }) => {
            let mut out = std::io::stdout();
            clap_complete::generate(shell, &mut Cli::command(), "sqsim", &mut out);
            return ExitCode::SUCCESS;
        }
        Some(Command::Man) => {
            let page = clap_mangen::Man::new(Cli::command());
            return match page.render(&mut std::io::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(_) => ExitCode::FAILURE,
            };
        }
        Some(Command::Health { port }) => {
            let port = port
                .or(args.flags.port)
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
