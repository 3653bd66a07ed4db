//! Moving a stream's leadership to a chosen JetStream server between two writes
//! ([`super::JetStreamStore::lead_on`]).

use async_nats::jetstream;

use super::{io_error, Writer};
use crate::store::StoreError;

/// How long a leadership move waits for the new leader to answer before writing goes on
/// (an election that does not settle is JetStream's to finish; writes then retry as usual).
const LEAD_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl Writer {
    /// The stream's leader as JetStream reports it now (`None` while it elects one: the
    /// leader answers the question).
    pub(super) async fn leader(&self, js: &jetstream::Context) -> Option<String> {
        let asked =
            js.request::<_, _, serde_json::Value>(format!("STREAM.INFO.{}", self.stream()), &());
        let info = tokio::time::timeout(std::time::Duration::from_millis(250), asked)
            .await
            .ok()?
            .ok()?;
        Some(info.pointer("/cluster/leader")?.as_str()?.to_string())
    }

    /// See [`JetStreamStore::lead_on`]; called with nothing in flight.
    pub(super) async fn lead(
        &self,
        js: &jetstream::Context,
        server: &str,
    ) -> Result<bool, StoreError> {
        let before = self.leader(js).await;
        if before.as_deref() == Some(server) {
            return Ok(true);
        }
        let asked: serde_json::Value = js
            .request(
                format!("STREAM.LEADER.STEPDOWN.{}", self.stream()),
                &serde_json::json!({ "placement": { "preferred": server } }),
            )
            .await
            .map_err(|e| io_error(format!("cannot move the stream's leader: {e}")))?;
        if let Some(e) = asked.get("error") {
            return Err(io_error(format!(
                "JetStream did not move the stream's leader: {e}"
            )));
        }
        let deadline = std::time::Instant::now() + LEAD_WAIT;
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            let now = self.leader(js).await;
            if now.as_deref() == Some(server) {
                return Ok(true);
            }
            // Another server was elected: the preference was not followed.
            if now.is_some() && now != before {
                return Ok(false);
            }
            if std::time::Instant::now() >= deadline {
                return Ok(false);
            }
        }
    }
}
