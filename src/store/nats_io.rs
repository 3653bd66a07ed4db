//! The one thread on which every JetStream store of this process does its network I/O, and
//! one NATS connection per server list, shared by the stores using it. A node serving many
//! shards then sends their publishes and reads their acks in shared system calls, instead
//! of one thread, one connection and one wake-up chain per shard; the servers see one
//! client per node rather than one per shard.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::StoreError;

/// The I/O thread's runtime, and the connections it holds by server list with how many
/// stores use each (a connection closes when its last store is done with it).
pub(super) struct Io {
    pub(super) runtime: tokio::runtime::Handle,
    clients: tokio::sync::Mutex<HashMap<String, (async_nats::Client, usize)>>,
}

/// The process's I/O thread, started on first use.
pub(super) fn io() -> Result<&'static Io, StoreError> {
    static IO: OnceLock<Result<Io, String>> = OnceLock::new();
    IO.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("sqsim-jetstream".into())
            .spawn(move || {
                match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => {
                        let _ = tx.send(Ok(runtime.handle().clone()));
                        // Runs the stores' tasks for as long as the process lives.
                        runtime.block_on(std::future::pending::<()>());
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e.to_string()));
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        let runtime = rx
            .recv()
            .map_err(|_| "the JetStream I/O thread did not start".to_string())??;
        Ok(Io {
            runtime,
            clients: tokio::sync::Mutex::default(),
        })
    })
    .as_ref()
    .map_err(|e| StoreError::Io(std::sync::Arc::from(e.as_str())))
}

impl Io {
    /// The connection to `urls` (comma-separated), made on first use; each call counts one
    /// more user, to be given back with [`Io::release`].
    pub(super) async fn client(&self, urls: &str) -> Result<async_nats::Client, StoreError> {
        // Held across the connect on purpose (an async lock): stores opening together wait
        // for the one connection instead of each making its own; they would all wait on the
        // same servers anyway.
        let mut clients = self.clients.lock().await;
        if let Some((client, users)) = clients.get_mut(urls) {
            *users += 1;
            return Ok(client.clone());
        }
        let client = async_nats::connect(servers(urls)?).await.map_err(|e| {
            StoreError::Io(std::sync::Arc::from(format!(
                "cannot connect to NATS at {urls}: {e}"
            )))
        })?;
        clients.insert(urls.to_string(), (client.clone(), 1));
        Ok(client)
    }

    /// One user of the connection to `urls` is done with it; the last one closes it.
    pub(super) async fn release(&self, urls: &str) {
        let mut clients = self.clients.lock().await;
        if let Some((_, users)) = clients.get_mut(urls) {
            *users -= 1;
            if *users == 0 {
                clients.remove(urls);
            }
        }
    }
}

/// The servers of a comma-separated list of NATS URLs (any of them reaches the cluster; the
/// client fails over between them).
pub(crate) fn servers(urls: &str) -> Result<Vec<async_nats::ServerAddr>, StoreError> {
    urls.split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(|u| {
            u.parse().map_err(|e| {
                StoreError::Io(std::sync::Arc::from(format!("bad NATS URL {u:?}: {e}")))
            })
        })
        .collect()
}
