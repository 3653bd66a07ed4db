//! The `sqsim worker` command line: options named after Elastic Beanstalk's worker settings,
//! turned into [`WorkerOptions`] and an SQS client for the endpoint.

use std::future::Future;
use std::process::ExitCode;

use super::{secs, Backoff, WorkerOptions, WorkerQueue, WorkerStats};

/// Options named after Elastic Beanstalk's worker environment settings.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// A queue to read (repeatable).
    #[arg(long = "queue-url", required = true)]
    pub queue_urls: Vec<String>,
    /// Receive weights by queue name, e.g. realtime=2,batch=1 (default 1 each).
    #[arg(long, value_delimiter = ',')]
    pub weights: Vec<String>,
    /// Where messages are POSTed.
    #[arg(long, default_value = "http://localhost:8080/")]
    pub http_url: String,
    /// Most POSTs in flight at once.
    #[arg(long, default_value_t = 50)]
    pub http_connections: usize,
    /// Seconds to wait for a connection to the application.
    #[arg(long, default_value_t = 5.0)]
    pub connect_timeout: f64,
    /// Seconds the application may take to answer.
    #[arg(long, default_value_t = 299.0)]
    pub inactivity_timeout: f64,
    /// Visibility timeout of received messages, kept up by a heartbeat while the app works.
    #[arg(long, default_value_t = 300)]
    pub visibility_timeout: u32,
    /// After a failed delivery, hide the message this many seconds.
    #[arg(long)]
    pub error_visibility_timeout: Option<u32>,
    /// Content-Type of the POST.
    #[arg(long, default_value = "application/json")]
    pub mime_type: String,
    /// Base delay in seconds before a failed message is retried (wins over the error
    /// visibility timeout; a Retry-After response header wins over both).
    #[arg(long)]
    pub retry_delay: Option<u32>,
    /// `fixed` or `exponential` (doubling with the receive count, capped, with jitter).
    #[arg(long, default_value = "fixed", value_parser = ["fixed", "exponential"])]
    pub retry_backoff: String,
    /// Longest retry delay in seconds.
    #[arg(long, default_value_t = 900)]
    pub retry_max_delay: u32,
    /// Seconds in-flight POSTs may finish after SIGTERM before their messages are released.
    #[arg(long, default_value_t = 30.0)]
    pub shutdown_timeout: f64,
    /// Deliver up to N (1–10) messages per POST as a JSON array.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=10))]
    pub batch_size: u8,
    /// Seconds a batch may wait to fill after its first message.
    #[arg(long, default_value_t = 1.0)]
    pub batch_window: f64,
    /// An Elastic Beanstalk cron.yaml with periodic tasks to POST on schedule.
    #[arg(long)]
    pub cron_file: Option<String>,
    /// SQS endpoint (default: the queue URL's scheme and host, unless it is AWS).
    #[arg(long)]
    pub endpoint_url: Option<String>,
    /// Region for signing (default: AWS_REGION, AWS_DEFAULT_REGION or us-east-1).
    #[arg(long)]
    pub region: Option<String>,
}

/// Runs `sqsim worker` until `shutdown`; the exit code to return.
pub fn run(w: WorkerArgs, shutdown: impl Future<Output = ()>) -> ExitCode {
    let mut weights = std::collections::HashMap::new();
    for pair in &w.weights {
        match pair
            .split_once('=')
            .and_then(|(n, v)| Some((n, v.parse::<u32>().ok()?)))
        {
            Some((n, v)) if v > 0 => {
                weights.insert(n.to_string(), v);
            }
            _ => {
                eprintln!("sqsim worker: --weights takes name=N pairs with N > 0, got {pair:?}");
                return ExitCode::from(2);
            }
        }
    }
    let queues = w
        .queue_urls
        .iter()
        .map(|url| {
            let name = super::queue_name(url);
            WorkerQueue {
                url: url.clone(),
                weight: weights.get(name.as_str()).copied().unwrap_or(1),
            }
        })
        .collect();
    let cron = match &w.cron_file {
        None => Vec::new(),
        Some(path) => match std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| super::cron::parse(&text))
        {
            Ok(tasks) => tasks,
            Err(e) => {
                eprintln!("sqsim worker: {path}: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let opts = WorkerOptions {
        queues,
        http_url: w.http_url,
        http_connections: w.http_connections.max(1),
        connect_timeout: secs(w.connect_timeout),
        inactivity_timeout: secs(w.inactivity_timeout),
        visibility_timeout: w.visibility_timeout,
        error_visibility_timeout: w.error_visibility_timeout,
        mime_type: w.mime_type,
        retry_delay: w.retry_delay,
        retry_backoff: Backoff::parse(&w.retry_backoff).unwrap_or_default(),
        retry_max_delay: w.retry_max_delay,
        shutdown_timeout: secs(w.shutdown_timeout),
        cron,
        batch_size: w.batch_size as usize,
        batch_window: secs(w.batch_window),
        ..WorkerOptions::default()
    };
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let region = w
        .region
        .or_else(|| env("AWS_REGION"))
        .or_else(|| env("AWS_DEFAULT_REGION"))
        .unwrap_or_else(|| crate::config::DEFAULT_REGION.to_string());
    let endpoint = w.endpoint_url.or_else(|| {
        let url = &opts.queues.first()?.url;
        url.contains("://")
            .then(|| super::cron::origin(url))
            .filter(|origin| !origin.ends_with("amazonaws.com"))
    });
    let creds = aws_sdk_sqs::config::Credentials::new(
        env("AWS_ACCESS_KEY_ID").unwrap_or_else(|| "test".into()),
        env("AWS_SECRET_ACCESS_KEY").unwrap_or_else(|| "test".into()),
        env("AWS_SESSION_TOKEN"),
        None,
        "environment",
    );
    let mut conf = aws_sdk_sqs::Config::builder()
        .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
        .region(aws_sdk_sqs::config::Region::new(region))
        .credentials_provider(creds);
    if let Some(e) = endpoint {
        conf = conf.endpoint_url(e);
    }
    let sqs = aws_sdk_sqs::Client::from_conf(conf.build());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sqsim worker: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let stats = std::sync::Arc::new(WorkerStats::default());
    runtime.block_on(super::run(sqs, opts, stats.clone(), shutdown));
    use std::sync::atomic::Ordering::Relaxed;
    tracing::info!(
        delivered = stats.delivered.load(Relaxed),
        failed = stats.failed.load(Relaxed),
        retried = stats.retried.load(Relaxed),
        released = stats.released.load(Relaxed),
        "worker stopped"
    );
    ExitCode::SUCCESS
}
