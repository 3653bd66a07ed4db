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
        let state = match run_one(script, env, shim.as_ref()) {
            Ok(output) => {
                log_output(&name, &output.stdout, &output.stderr);
                if output.status.success() {
                    tracing::info!(script = %name, "init hook finished");
                    ScriptState::Successful
                } else {
                    tracing::error!(script = %name, status = %output.status, "init hook failed");
                    ScriptState::Error
                }
            }
            Err(e) => {
                tracing::error!(script = %name, error = %e, "init hook could not be started");
                ScriptState::Error
            }
        };
        status.update(|p| p.scripts[i].state = state);
    }
}

fn run_one(
    script: &Path,
    env: &HookEnv,
    shim: Option<&AwsLocalShim>,
) -> std::io::Result<std::process::Output> {
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
    cmd.output()
}

fn log_output(name: &str, stdout: &[u8], stderr: &[u8]) {
    for line in String::from_utf8_lossy(stdout).lines() {
        tracing::info!(script = %name, "{line}");
    }
    for line in String::from_utf8_lossy(stderr).lines() {
        tracing::warn!(script = %name, "{line}");
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
        let dir = std::env::temp_dir().join(format!("sqsim-awslocal-{}", std::process::id()));
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
