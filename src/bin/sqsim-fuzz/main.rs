//! sqsim-fuzz: throws millions of mutated SQS requests at sqsim's real request path in
//! process (both wire protocols, SigV4 checking on and off) and checks every answer is a
//! well-formed AWS success or error: no panic, no hang, no 5xx, no malformed body. Inputs
//! start from the real SDK requests in `fixtures/wire`. A failing input is written to
//! `--save` as a wire file and the run fails; `--replay` plays such files back (the
//! regression test runs `fixtures/fuzz`).

mod check;
mod mutate;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use futures_util::FutureExt;
use mutate::{Input, Rng};
use sqsim::server::in_process::{parse_wire, InProcess};
use sqsim::Config;

#[derive(Parser)]
#[command(about = "Fuzz sqsim's request path in process")]
struct Args {
    /// How many mutated requests to send.
    #[arg(long, default_value_t = 100_000)]
    inputs: u64,
    /// The seed (a run is reproduced by its seed); random when not given.
    #[arg(long)]
    seed: Option<u64>,
    /// Where the wire files to start from are.
    #[arg(long, default_value = "fixtures/wire")]
    corpus: PathBuf,
    /// Replay the wire files in this directory (each request must get an acceptable answer).
    #[arg(long)]
    replay: Option<PathBuf>,
    /// Where a failing input is written.
    #[arg(long, default_value = "fixtures/fuzz")]
    save: PathBuf,
    /// Seconds without progress that count as a hang.
    #[arg(long, default_value_t = 30)]
    hang_after: u64,
}

/// Reads every request of the `.http` files in `dir`.
fn load(dir: &Path) -> Vec<Input> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    for f in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "http"))
    {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        for (r, _) in parse_wire(&text).1 {
            out.push(Input {
                method: r.method.into_bytes(),
                uri: r.path,
                headers: r
                    .headers
                    .into_iter()
                    .map(|(k, v)| (k, v.into_bytes()))
                    .collect(),
                body: r.body.into_bytes(),
            });
        }
    }
    out
}

/// Writes `x` as a wire file that `--replay` (and the regression test) plays back.
fn save(dir: &Path, seed: u64, n: u64, x: &Input, why: &str) -> PathBuf {
    let _ = std::fs::create_dir_all(dir);
    let path = dir.join(format!("crash-{seed}-{n}.http"));
    let mut text = format!(
        "# sqsim-fuzz seed {seed}, input {n}: {why}\n>>> {} {}\n",
        String::from_utf8_lossy(&x.method),
        x.uri
    );
    for (k, v) in &x.headers {
        text.push_str(&format!("{k}: {}\n", String::from_utf8_lossy(v)));
    }
    text.push('\n');
    text.push_str(&String::from_utf8_lossy(&x.body));
    text.push_str("\n<<< (any well-formed answer)\n");
    let _ = std::fs::write(&path, text);
    path
}

/// Collects receipt handles from answers so later inputs can use real ones.
fn harvest(body: &[u8], handles: &mut Vec<String>) {
    let text = String::from_utf8_lossy(body);
    for marker in ["\"ReceiptHandle\":\"", "<ReceiptHandle>"] {
        for part in text.split(marker).skip(1) {
            if let Some(end) = part.find(['"', '<']) {
                if handles.len() >= 256 {
                    handles.swap_remove(0);
                }
                handles.push(part[..end].to_string());
            }
        }
    }
}

/// Two targets: signatures off (every decoder reached), and on (the SigV4 parsers).
fn targets() -> [InProcess; 2] {
    let open = InProcess::new(Config::default()).expect("server state");
    let mut verify = Config::default();
    let mut keys = std::collections::HashMap::new();
    let cred = sqsim::config::Credential::parse("AKIDGOLDEN:golden-secret").expect("key");
    keys.insert(cred.access_key.clone(), cred);
    verify.auth = sqsim::config::AuthMode::Verify(keys);
    [open, InProcess::new(verify).expect("server state")]
}

/// Sends one input; returns how it was answered (`"2xx"`, `"4xx"`, or why not), or what
/// was wrong with the answer.
async fn send(
    target: &InProcess,
    x: &Input,
    handles: &mut Vec<String>,
) -> Result<&'static str, String> {
    let fut = target.request(&x.method, &x.uri, &x.headers, Bytes::from(x.body.clone()));
    let answer = match std::panic::AssertUnwindSafe(fut).catch_unwind().await {
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            return Err(format!("panic: {what}"));
        }
        // Not expressible as HTTP: no client could send it.
        Ok(Err(_)) => return Ok("not HTTP"),
        Ok(Ok(None)) => return Ok("dropped"),
        Ok(Ok(Some(a))) => a,
    };
    if let Some(p) = check::problem(&answer) {
        return Err(format!(
            "{p}; body {:?}",
            String::from_utf8_lossy(&answer.body[..answer.body.len().min(300)])
        ));
    }
    harvest(&answer.body, handles);
    Ok(if answer.status < 300 { "2xx" } else { "4xx" })
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    std::panic::set_hook(Box::new(|_| {})); // panics are reported with their input
                                            // Long polls answer at once in process (see `InProcess::new`).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let progress = Arc::new(AtomicU64::new(0));
    {
        let (progress, limit) = (Arc::clone(&progress), args.hang_after);
        std::thread::spawn(move || {
            let mut last = u64::MAX;
            loop {
                std::thread::sleep(Duration::from_secs(limit));
                let now = progress.load(Ordering::Relaxed);
                if now == last {
                    eprintln!("sqsim-fuzz: no answer for {limit} s at input {now}: a hang");
                    std::process::exit(3);
                }
                last = now;
            }
        });
    }
    rt.block_on(async move {
        let targets = targets();
        let mut handles = Vec::new();
        if let Some(dir) = &args.replay {
            let inputs = load(dir);
            for (i, x) in inputs.iter().enumerate() {
                for t in &targets {
                    if let Err(e) = send(t, x, &mut handles).await {
                        eprintln!("sqsim-fuzz: replay {} input {i}: {e}", dir.display());
                        return std::process::ExitCode::FAILURE;
                    }
                }
            }
            println!("sqsim-fuzz: replayed {} inputs from {}: all answered well", inputs.len(), dir.display());
            return std::process::ExitCode::SUCCESS;
        }
        let corpus = load(&args.corpus);
        if corpus.is_empty() {
            eprintln!("sqsim-fuzz: no requests in {}", args.corpus.display());
            return std::process::ExitCode::FAILURE;
        }
        let seed = args.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
        println!("sqsim-fuzz: seed {seed}, {} inputs, {} seed requests", args.inputs, corpus.len());
        let mut rng = Rng::new(seed);
        let started = Instant::now();
        let mut statuses = std::collections::BTreeMap::<&str, u64>::new();
        for n in 0..args.inputs {
            // Fresh state now and then, so queues and messages do not pile up.
            if n % 20_000 == 0 {
                targets.iter().for_each(InProcess::reset);
                handles.clear();
                for x in &corpus {
                    let _ = send(&targets[0], x, &mut handles).await;
                }
            }
            let seed_input = rng.pick(&corpus).clone();
            let x = if rng.chance(50) { seed_input } else { mutate::mutate(&mut rng, &seed_input, &corpus, &handles) };
            let target = &targets[usize::from(rng.chance(4))];
            match send(target, &x, &mut handles).await {
                Ok(how) => *statuses.entry(how).or_default() += 1,
                Err(e) => {
                    let path = save(&args.save, seed, n, &x, &e);
                    eprintln!("sqsim-fuzz: input {n} (seed {seed}): {e}\n  saved as {}", path.display());
                    return std::process::ExitCode::FAILURE;
                }
            }
            progress.store(n + 1, Ordering::Relaxed);
            if (n + 1) % 1_000_000 == 0 {
                println!("sqsim-fuzz: {} inputs, {:.0} s", n + 1, started.elapsed().as_secs_f64());
            }
        }
        let secs = started.elapsed().as_secs_f64();
        println!(
            "sqsim-fuzz: {} inputs in {secs:.1} s ({:.0}/s), seed {seed}: no panic, hang, 5xx or malformed answer; {statuses:?}",
            args.inputs,
            args.inputs as f64 / secs
        );
        std::process::ExitCode::SUCCESS
    })
}
