//! What a starting server says: the listen line and banner on stdout, and a bind error
//! that names the flag to change.

use std::net::SocketAddr;

use super::AppState;

/// Prints a line on stdout, flushed, ignoring a closed stdout: a parent that read the listen
/// line and closed the pipe (a test harness, a bench) must not make the next line's
/// `println!` panic and take the server down with it.
pub(super) fn say(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// The line a person reads at start, after the listen line (and the admin token and the
/// realism seed, when there are): the version, where the state lives, whether signatures
/// are checked, and where the console is.
/// `console_at` is the address the console is offered on (`--console-port`'s when given).
pub(super) fn banner(state: &AppState, console_at: SocketAddr) -> String {
    let config = &state.config;
    let mode = match (&config.durability, &config.cluster) {
        (_, Some(c)) => format!("cluster node {} on {}", c.node_id, c.nats),
        (Some(d), None) => format!("durable at {} ({})", d.data_dir.display(), d.sync),
        (None, None) => "in memory".to_string(),
    };
    let auth = match config.auth {
        crate::config::AuthMode::Verify(_) => "signatures verified",
        crate::config::AuthMode::Off => "any credentials accepted",
    };
    let console = if config.security.admin {
        format!(
            "; console {}{}",
            crate::http::loopback_url(console_at),
            crate::control::console::PREFIX
        )
    } else {
        String::new()
    };
    format!(
        "sqsim {}: {mode}, {auth}{console}",
        env!("CARGO_PKG_VERSION")
    )
}

/// Why the server cannot listen, worded with what to change.
/// `flag` is the port's flag (`--port`, `--console-port`).
pub(super) fn bind_error(host: &str, port: u16, flag: &str, e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    let at = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    match e.kind() {
        ErrorKind::AddrInUse => format!(
            "cannot listen on {at}: the address is in use (another sqsim, or another program); \
             give another {flag}, or {flag} 0 for a free one"
        ),
        ErrorKind::PermissionDenied => format!(
            "cannot listen on {at}: permission denied (ports below 1024 need privileges); \
             give another {flag}"
        ),
        ErrorKind::AddrNotAvailable => format!(
            "cannot listen on {at}: no interface of this machine has that address; \
             give --host 127.0.0.1, or 0.0.0.0 for every interface"
        ),
        _ if host.parse::<std::net::IpAddr>().is_err() => format!(
            "cannot listen on {at}: --host {host:?} is not an address or a name this machine \
             resolves ({e}); give an address such as 127.0.0.1 or 0.0.0.0"
        ),
        _ => format!("cannot listen on {at}: {e}"),
    }
}
