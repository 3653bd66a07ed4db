//! What one client may hold of the server at the connection level: the open-file limit the
//! connection cap has to fit in and a watch on each connection's idleness. The accept loop
//! (`server::serve_with`) applies them; a body's read deadline and what bodies arriving may
//! hold together are in [`crate::http`], the body cap in `service`, the long-poll cap in
//! the engine.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// File descriptors kept back from the connection cap: log segments, snapshots, the
/// listener, a worker's client sockets.
const RESERVED_FDS: u64 = 256;

/// Raises the soft open-file limit to the hard one (as Go's runtime does) and returns the
/// connection cap that fits under it: `wanted`, or less with a warning.
pub(crate) fn fit_connections(wanted: usize) -> usize {
    let Ok((soft, hard)) = rlimit::Resource::NOFILE.get() else {
        return wanted;
    };
    let soft = if soft < hard && rlimit::Resource::NOFILE.set(hard, hard).is_ok() {
        hard
    } else {
        soft
    };
    let room = soft.saturating_sub(RESERVED_FDS).max(1);
    if (wanted as u64) > room {
        tracing::warn!(
            wanted,
            open_file_limit = soft,
            using = room,
            "max_connections lowered to fit the open-file limit"
        );
        return room as usize;
    }
    wanted
}

/// One connection's activity: how many requests are running, when the last one ended, and
/// how long it may stay without one. Bytes do not count: a client trickling a byte a minute
/// (or HTTP/2 pings) must not keep a connection, and the buffered answer it never reads,
/// forever.
///
/// For HTTP/1.1 the limit is the read timeout (when shorter than the idle timeout): a
/// request is not running until its whole head has arrived, so this one watch both ends a
/// keep-alive wait for the next request and cuts off a head sent a byte at a time. hyper's
/// own header timer would do the second, at the price of a timer set and cleared on every
/// request (measured: about 0.8 µs of CPU per request, a tenth of a small send's). An
/// HTTP/2 connection, known by its first request, gets the idle timeout.
#[derive(Debug)]
pub(crate) struct Activity {
    started: Instant,
    /// Milliseconds after `started` when the last request's answer was ready (0: none yet).
    last_end_ms: AtomicU64,
    running: AtomicUsize,
    /// How long the connection may go without a request running, in milliseconds.
    limit_ms: AtomicU64,
    /// The limit once the connection shows itself as HTTP/2.
    h2_limit_ms: u64,
    /// Answers handed to hyper against bytes written to the socket (see [`Unsent`]).
    unsent: std::sync::Mutex<Unsent>,
}

/// A connection's answers not yet written: bytes of answer bodies handed to hyper, bytes
/// the socket took, and since when some answer has been waiting. What it cannot see: an
/// HTTP/2 stream the client resets after its answer is ready leaves that answer owed for
/// good (paid back only by the framing of later answers), so a busy HTTP/2 connection that
/// cancels a large receive is closed an idle timeout later, and its client reconnects. A client that does not
/// read (an HTTP/2 stream's window left at zero, HTTP/1.1 pipelined requests never read)
/// leaves whole answers in memory, up to tens of MB each; a long poll kept running beside
/// them would excuse the connection from the idle watch for good.
#[derive(Debug, Default)]
struct Unsent {
    /// Answer bytes owed: counted from what was written when the backlog last emptied, so
    /// header and framing bytes written meanwhile do not pile up against later answers.
    owed: u64,
    written: u64,
    /// When the backlog last went from empty to not empty.
    since: Option<Instant>,
}

impl Activity {
    /// A new connection's activity under `limits`.
    pub(crate) fn new(limits: &crate::config::Limits) -> Arc<Activity> {
        let h1 = limits.read_timeout.min(limits.idle_timeout);
        Arc::new(Activity {
            started: Instant::now(),
            last_end_ms: AtomicU64::new(0),
            running: AtomicUsize::new(0),
            limit_ms: AtomicU64::new(h1.as_millis() as u64),
            h2_limit_ms: limits.idle_timeout.as_millis() as u64,
            unsent: std::sync::Mutex::default(),
        })
    }

    fn unsent(&self) -> std::sync::MutexGuard<'_, Unsent> {
        self.unsent.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An answer of `bytes` is ready to be written.
    pub(crate) fn answered(&self, bytes: u64) {
        let mut u = self.unsent();
        if u.owed <= u.written {
            u.owed = u.written;
            u.since = Some(Instant::now());
        }
        u.owed += bytes;
    }

    /// The socket took `bytes`.
    pub(crate) fn wrote(&self, bytes: usize) {
        let mut u = self.unsent();
        u.written += bytes as u64;
        if u.written >= u.owed {
            u.since = None;
        }
    }

    /// How long some answer of this connection has been waiting to be written (zero when
    /// none is).
    fn unsent_for(&self) -> Duration {
        self.unsent().since.map_or(Duration::ZERO, |t| t.elapsed())
    }

    /// Marks a request as running until the guard is dropped (its answer is ready, or the
    /// connection went away).
    pub(crate) fn request(self: &Arc<Self>, version: hyper::Version) -> Running {
        if version == hyper::Version::HTTP_2 {
            self.limit_ms.store(self.h2_limit_ms, Ordering::Relaxed);
        }
        self.running.fetch_add(1, Ordering::AcqRel);
        Running(Arc::clone(self))
    }

    /// How long the connection may go without a request running.
    fn limit(&self) -> Duration {
        Duration::from_millis(self.limit_ms.load(Ordering::Relaxed))
    }

    /// How long the connection has been idle: no request running since the last one ended
    /// (or since it opened). Zero while a request runs: a long poll legitimately moves
    /// nothing for 20 seconds.
    pub(crate) fn idle_for(&self) -> Duration {
        if self.running.load(Ordering::Acquire) > 0 {
            return Duration::ZERO;
        }
        let last = Duration::from_millis(self.last_end_ms.load(Ordering::Relaxed));
        self.started.elapsed().saturating_sub(last)
    }
}

/// A running request of a connection (see [`Activity::request`]).
#[derive(Debug)]
pub(crate) struct Running(Arc<Activity>);

impl Running {
    /// The connection's activity.
    pub(crate) fn activity(&self) -> &Activity {
        &self.0
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let a = &self.0;
        let ms = a.started.elapsed().as_millis() as u64;
        a.last_end_ms.store(ms, Ordering::Relaxed);
        a.running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Waits until `activity` has been idle for its limit, or has had an answer waiting to be
/// written for the idle timeout whatever else runs: the connection should then be closed.
pub(crate) async fn idle_expired(activity: &Activity) {
    let stall_limit = Duration::from_millis(activity.h2_limit_ms);
    loop {
        let idle = activity.idle_for();
        let limit = activity.limit();
        let unsent = activity.unsent_for();
        if idle >= limit || unsent >= stall_limit {
            return;
        }
        // Sleep until the earliest moment a limit could be reached, then look again.
        let next = match unsent.is_zero() {
            true => limit - idle,
            false => (limit - idle).min(stall_limit - unsent),
        };
        tokio::time::sleep(next).await;
    }
}

/// A connection's socket, counting what it writes into its [`Activity`].
#[derive(Debug)]
pub(crate) struct Counted<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Counted<S> {
    pub(crate) fn new(inner: S, activity: Arc<Activity>) -> Counted<S> {
        Counted { inner, activity }
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Counted<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        if let std::task::Poll::Ready(Ok(n)) = polled {
            self.activity.wrote(n);
        }
        polled
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let std::task::Poll::Ready(Ok(n)) = polled {
            self.activity.wrote(n);
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_request_is_never_idle_and_its_end_restarts_the_count() {
        let limits = crate::config::Limits {
            read_timeout: Duration::from_secs(3),
            idle_timeout: Duration::from_secs(7),
            ..Default::default()
        };
        let a = Activity::new(&limits);
        assert_eq!(
            a.limit(),
            Duration::from_secs(3),
            "HTTP/1.1: the read timeout"
        );
        std::thread::sleep(Duration::from_millis(30));
        assert!(a.idle_for() >= Duration::from_millis(30));
        drop(a.request(hyper::Version::HTTP_11));
        assert_eq!(a.limit(), Duration::from_secs(3));
        let running = a.request(hyper::Version::HTTP_2);
        assert_eq!(
            a.limit(),
            Duration::from_secs(7),
            "HTTP/2: the idle timeout"
        );
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(a.idle_for(), Duration::ZERO);
        drop(running);
        assert!(a.idle_for() < Duration::from_millis(30));
    }

    #[test]
    fn the_cap_fits_the_open_file_limit() {
        let fitted = fit_connections(usize::MAX) as u64;
        let (soft, _) = rlimit::Resource::NOFILE.get().unwrap();
        assert!(fitted < soft, "{fitted} connections under {soft} files");
        assert_eq!(fit_connections(10), 10);
    }
}
