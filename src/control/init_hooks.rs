//! Init hooks (`--init-dir`, LocalStack's `ready.d` convention): the scripts in a directory
//! run once, one after another in name order, as soon as the server answers — typically to
//! create queues with the aws CLI. Their output is logged line by line; a failure is logged
//! with its exit status and shown in the status that `/_localstack/init` reports. The
//! server serves throughout: hooks run on their own thread.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// Where one script stands; the names are LocalStack's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScriptState {
    Unknown,
    Running,
    Successful,
    Error,
}

impl ScriptState {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ScriptState::Unknown => "UNKNOWN",
            ScriptState::Running => "RUNNING",
            ScriptState::Successful => "SUCCESSFUL",
            ScriptState::Error => "ERROR",
        }
    }
}

/// One script of the directory and its state.
#[derive(Debug, Clone)]
pub(crate) struct Script {
    pub name: String,
    pub state: ScriptState,
}

/// The hooks' progress, shared with the endpoints that report it.
#[derive(Debug, Default)]
pub(crate) struct InitStatus {
    inner: Mutex<Progress>,
}

#[derive(Debug, Default)]
struct Progress {
    scripts: Vec<Script>,
    completed: bool,
}

impl InitStatus {
    /// Every script found so far with its state, and whether all of them have run.
    pub(crate) fn snapshot(&self) -> (Vec<Script>, bool) {
        let p = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        (p.scripts.clone(), p.completed)
    }

    fn update(&self, f: impl FnOnce(&mut Progress)) {
        f(&mut self.inner.lock().unwrap_or_else(|e| e.into_inner()));
    }
}

/// What a hook's process is given besides sqsim's own environment: an SDK or the aws CLI
/// run by the script reaches this server with dummy credentials, and `awslocal` (the
/// LocalStack wrapper many scripts call) works when it is not installed.
#[derive(Debug, Clone)]
pub(crate) struct HookEnv {
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    pub region: String,
}

/// Runs the scripts of `dir` (if any) on a thread of their own, recording progress in
/// `status`, then marks the stage complete and calls `done` (the binary prints LocalStack's
/// `Ready.` line there). Without a directory the stage is complete at once, as LocalStack's
/// is when it has no scripts.
pub(crate) fn start(
    dir: Option<PathBuf>,
    env: HookEnv,
    status: std::sync::Arc<InitStatus>,
    done: impl FnOnce() + Send + 'static,
) {
    let Some(dir) = dir else {
        status.update(|p| p.completed = true);
        done();
        return;
    };
    // Scripts run in their own directory: a relative path must not be read from there.
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    let started = std::thread::Builder::new()
        .name("sqsim-init-hooks".into())
        .spawn(move || {
            run_all(&dir, &env, &status);
            status.update(|p| p.completed = true);
            done();
        });
    if let Err(e) = started {
        tracing::error!(error = %e, "cannot start the init hooks");
    }
}

/// The scripts of `dir` in name order: regular files that are executable, or end in `.sh`
/// (run with `sh`, as LocalStack does). Others are named in a warning and skipped.
fn scripts_of(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if !path.is_file() {
            continue;
        }
        if is_executable(&path) || path.extension().is_some_and(|e| e == "sh") {
            found.push(path);
        } else {
            tracing::warn!(script = %path.display(), "init hook skipped: neither executable nor a .sh file");
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(_: &Path) -> bool {
    false
}

fn run_all(dir: &Path, env: &HookEnv, status: &InitStatus) {
    let scripts = match scripts_of(dir) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(dir = %dir.display(), error = %e, "cannot read the init hook directory");
            return;
        }
    };
    let name_of = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    status.update(|p| {
        p.scripts = scripts
            .iter()
            .map(|s| Script {
                name: name_of(s),
                state: ScriptState::Unknown,
            })
            .collect();
    });
    let shim = AwsLocalShim::create();
    for (i, script) in scripts.iter().enumerate() {
        let name = name_of(script);
        status.update(|p| p.scripts[i].state = ScriptState::Running);
        tracing::info!(script = %name, "init hook running");
        let state = match run_one(script, &name, env, shim.as_ref()) {
            Ok(status) if status.success() => {
                tracing::info!(script = %name, "init hook finished");
                ScriptState::Successful
            }
            Ok(status) => {
                tracing::error!(script = %name, %status, "init hook failed");
                ScriptState::Error
            }
            Err(e) => {
                tracing::error!(script = %name, error = %e, "init hook could not be started");
                ScriptState::Error
            }
        };
        status.update(|p| p.scripts[i].state = state);
    }
}

/// Runs one script to its end, logging its output line by line as it comes; the script's
/// own exit ends the wait (a daemon it started may keep the output open).
fn run_one(
    script: &Path,
    name: &str,
    env: &HookEnv,
    shim: Option<&AwsLocalShim>,
) -> std::io::Result<std::process::ExitStatus> {
    let mut cmd = if is_executable(script) {
        Command::new(script)
    } else {
        let mut sh = Command::new("sh");
        sh.arg(script);
        sh
    };
    if let Some(dir) = script.parent() {
        cmd.current_dir(dir);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("AWS_ENDPOINT_URL", &env.endpoint)
        .env("AWS_DEFAULT_REGION", &env.region)
        .env("AWS_REGION", &env.region);
    for key in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] {
        if std::env::var_os(key).is_none() {
            cmd.env(key, "test");
        }
    }
    if let Some(shim) = shim {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![shim.dir.clone()];
        dirs.extend(std::env::split_paths(&path));
        if let Ok(joined) = std::env::join_paths(dirs) {
            cmd.env("PATH", joined);
        }
    }
    let mut child = cmd.spawn()?;
    let readers: Vec<_> = [
        child
            .stdout
            .take()
            .map(|o| Box::new(o) as Box<dyn std::io::Read + Send>),
        child
            .stderr
            .take()
            .map(|e| Box::new(e) as Box<dyn std::io::Read + Send>),
    ]
    .into_iter()
    .enumerate()
    .filter_map(|(i, pipe)| Some((i == 1, pipe?)))
    .map(|(is_stderr, pipe)| {
        let name = name.to_string();
        std::thread::spawn(move || log_lines(&name, pipe, is_stderr))
    })
    .collect();
    let status = child.wait()?;
    // The script's lines are logged before its end is; a pipe some daemon keeps open is
    // left to its thread.
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(200);
    for r in readers {
        while !r.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
    Ok(status)
}

/// Logs what a script writes, a line at a time: stdout at info, stderr at warn.
fn log_lines(name: &str, pipe: Box<dyn std::io::Read + Send>, is_stderr: bool) {
    use std::io::BufRead;
    for line in std::io::BufReader::new(pipe).lines() {
        let Ok(line) = line else {
            return;
        };
        if is_stderr {
            tracing::warn!(script = %name, "{line}");
        } else {
            tracing::info!(script = %name, "{line}");
        }
    }
}

/// A directory holding an `awslocal` that calls `aws` with this server's endpoint, put first
/// on the hooks' `PATH` when no `awslocal` is installed. Removed when dropped.
#[derive(Debug)]
struct AwsLocalShim {
    dir: PathBuf,
}

impl AwsLocalShim {
    fn create() -> Option<AwsLocalShim> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        if std::env::split_paths(&path).any(|d| d.join("awslocal").is_file()) {
            return None;
        }
        // One directory per run: servers in one process (embedded) must not share it.
        let dir = std::env::temp_dir().join(format!(
            "sqsim-awslocal-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let made = (|| {
            std::fs::create_dir_all(&dir)?;
            let file = dir.join("awslocal");
            std::fs::write(
                &file,
                "#!/bin/sh\n# sqsim: LocalStack's awslocal, the aws CLI pointed at this server.\nexec aws --endpoint-url \"$AWS_ENDPOINT_URL\" \"$@\"\n",
            )?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755))?;
            }
            Ok::<(), std::io::Error>(())
        })();
        match made {
            Ok(()) => Some(AwsLocalShim { dir }),
            Err(e) => {
                tracing::warn!(error = %e, "cannot provide awslocal to the init hooks");
                None
            }
        }
    }
}

impl Drop for AwsLocalShim {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A relative directory works (scripts run in it), and a script that leaves a process
    /// holding its output open still ends the stage when it exits itself.
    #[test]
    fn a_relative_directory_and_a_lingering_child_do_not_stop_the_stage() {
        let dir = tempfile::tempdir_in(".").unwrap();
        let out = dir.path().canonicalize().unwrap().join("ran.txt");
        let script = dir.path().join("10-daemon.sh");
        std::fs::write(
            &script,
            format!("#!/bin/sh\n(sleep 30) &\necho ran > {}\n", out.display()),
        )
        .unwrap();
        // tempdir_in gives the directory as an absolute path; the test wants it relative.
        let relative = std::path::Path::new(".").join(dir.path().file_name().unwrap());
        let status = std::sync::Arc::new(InitStatus::default());
        let (tx, rx) = std::sync::mpsc::channel();
        start(
            Some(relative),
            HookEnv {
                endpoint: "http://127.0.0.1:1".into(),
                region: "us-east-1".into(),
            },
            std::sync::Arc::clone(&status),
            move || {
                let _ = tx.send(());
            },
        );
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("the stage ends while the daemon still runs");
        let (scripts, completed) = status.snapshot();
        assert!(completed);
        assert_eq!(scripts[0].state, ScriptState::Successful);
        assert_eq!(std::fs::read_to_string(out).unwrap().trim(), "ran");
    }

    #[test]
    fn scripts_run_in_name_order_and_failures_are_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("order.txt");
        let write = |name: &str, body: &str, mode: u32| {
            let p = dir.path().join(name);
            std::fs::write(&p, body).unwrap();
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            }
        };
        let append = |tag: &str| format!("#!/bin/sh\necho {tag} >> {}\n", out.display());
        write("20-second.sh", &append("second"), 0o644); // not executable: run with sh
        write("10-first", &append("first"), 0o755);
        write("30-fails.sh", "#!/bin/sh\necho oops >&2\nexit 3\n", 0o755);
        write("40-endpoint.sh", &format!("#!/bin/sh\necho \"$AWS_ENDPOINT_URL $AWS_DEFAULT_REGION\" >> {}\ncommand -v awslocal >> {}\n", out.display(), out.display()), 0o755);
        write("notes.txt", "not a script", 0o644);
        let status = InitStatus::default();
        let env = HookEnv {
            endpoint: "http://127.0.0.1:1".into(),
            region: "eu-west-1".into(),
        };
        run_all(dir.path(), &env, &status);
        let lines: Vec<String> = std::fs::read_to_string(&out)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        assert_eq!(
            lines[..3],
            ["first", "second", "http://127.0.0.1:1 eu-west-1"]
        );
        assert!(lines[3].ends_with("/awslocal"), "{lines:?}");
        let (scripts, _) = status.snapshot();
        let states: Vec<_> = scripts.iter().map(|s| (s.name.as_str(), s.state)).collect();
        assert_eq!(
            states,
            [
                ("10-first", ScriptState::Successful),
                ("20-second.sh", ScriptState::Successful),
                ("30-fails.sh", ScriptState::Error),
                ("40-endpoint.sh", ScriptState::Successful),
            ]
        );
    }
}
