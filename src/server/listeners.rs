//! The sockets a server accepts on: one, or the IPv4 and IPv6 loopback pair that
//! `localhost` names.

use std::net::SocketAddr;

use tokio::net::TcpListener;

/// The sockets a server accepts on: one, or the IPv4 and IPv6 loopback pair.
#[derive(Debug)]
pub(crate) struct Listeners(pub(super) Vec<TcpListener>);

impl From<TcpListener> for Listeners {
    fn from(l: TcpListener) -> Listeners {
        Listeners(vec![l])
    }
}

impl Listeners {
    /// Binds `host:port`; for the loopback default (`127.0.0.1` or `localhost`) also
    /// `[::1]` on the same port where the machine has IPv6, so `http://localhost:PORT`
    /// answers whichever address a client tries first.
    pub(crate) async fn bind(host: &str, port: u16) -> std::io::Result<Listeners> {
        let first = TcpListener::bind((host, port)).await?;
        let mut all = vec![first];
        if matches!(host, "127.0.0.1" | "localhost") {
            let port = all[0].local_addr()?.port();
            match TcpListener::bind(("::1", port)).await {
                Ok(v6) => all.push(v6),
                Err(e) => {
                    tracing::debug!(error = %e, "no IPv6 loopback; listening on 127.0.0.1 only")
                }
            }
        }
        Ok(Listeners(all))
    }

    /// The first socket's address (the one printed and used for URLs).
    pub(crate) fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.0[0].local_addr()
    }

    /// The other sockets.
    pub(super) fn extra(&self) -> &[TcpListener] {
        &self.0[1..]
    }

    pub(super) async fn accept(&self) -> std::io::Result<(tokio::net::TcpStream, SocketAddr)> {
        if let [only] = self.0.as_slice() {
            return only.accept().await;
        }
        // `accept` is cancel-safe: the sockets not chosen lose nothing.
        let accepts = self.0.iter().map(|l| Box::pin(l.accept()));
        futures_util::future::select_all(accepts).await.0
    }
}
