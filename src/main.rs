//! The `sqsim` binary: parse flags, set up logging, serve until SIGINT or SIGTERM.

use clap::Parser;

/// mimalloc: request handling allocates many short-lived buffers across worker threads, which
/// it serves faster and with less fragmentation than the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use sqsim::config::{Config, UrlStyle, DEFAULT_ACCOUNT_ID, DEFAULT_PORT, DEFAULT_REGION};
use sqsim::server::AppState;

/// An Amazon SQS-compatible server.
#[derive(Debug, Parser)]
#[command(name = "sqsim", version, about)]
struct Args {
    /// Address to listen on.
    #[arg(long, env = "SQSIM_HOST", default_value = "0.0.0.0")]
    host: String,
    /// Port to listen on (0 picks a free port and prints it).
    #[arg(long, env = "SQSIM_PORT", default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Region used when a request carries no SigV4 credential scope.
    #[arg(long, env = "SQSIM_REGION", default_value = DEFAULT_REGION)]
    region: String,
    /// Account id that owns queues by default.
    #[arg(long, env = "SQSIM_ACCOUNT_ID", default_value = DEFAULT_ACCOUNT_ID)]
    account_id: String,
    /// Base of queue URLs, e.g. http://sqs.local:9324 (default: from each request's Host).
    #[arg(long, env = "SQSIM_ADVERTISED_URL")]
    advertised_url: Option<String>,
    /// Queue URL style: `path` (http://host:port/account/name) or `region-host`
    /// (http://sqs.<region>.localhost:port/account/name, unambiguous across regions).
    #[arg(long, env = "SQSIM_URL_STYLE", default_value = "path", value_parser = ["path", "region-host"])]
    url_style: String,
    /// Log filter (tracing syntax); RUST_LOG wins when set.
    #[arg(long, env = "SQSIM_LOG_LEVEL", default_value = "info")]
    log_level: String,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&args.log_level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    if args.account_id.len() != 12 || !args.account_id.bytes().all(|b| b.is_ascii_digit()) {
        eprintln!(
            "sqsim: --account-id must be 12 digits, got {:?}",
            args.account_id
        );
        return std::process::ExitCode::from(2);
    }
    let config = Config {
        host: args.host,
        port: args.port,
        region: args.region,
        account_id: args.account_id,
        advertised_url: args.advertised_url,
        url_style: if args.url_style == "region-host" {
            UrlStyle::RegionHost
        } else {
            UrlStyle::Path
        },
        ..Config::default()
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sqsim: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(config)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sqsim: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(config: Config) -> std::io::Result<()> {
    use std::sync::Arc;
    let listener = tokio::net::TcpListener::bind((config.host.as_str(), config.port)).await?;
    let local_addr = listener.local_addr()?;
    let engine = Arc::new(sqsim::engine::Engine::new(
        Arc::new(sqsim::Clock::new()),
        config.engine.clone(),
    ));
    let state = Arc::new(AppState {
        engine,
        config,
        local_addr,
    });
    // Tests and scripts read this line to find the port.
    println!("sqsim listening on http://{local_addr}");
    tracing::info!(%local_addr, "sqsim listening");
    sqsim::server::serve(listener, state, shutdown_signal()).await;
    tracing::info!("sqsim stopped");
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
