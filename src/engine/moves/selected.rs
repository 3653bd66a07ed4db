//! Messages picked by hand moved to another queue: the console's "move selected", most often
//! out of a dead-letter queue back to its source. Only visible messages move (one a consumer
//! holds stays with it), arriving as a redrive brings them: receive count reset, no
//! dead-letter source. Both queues must be served by this engine: across shards in cluster
//! mode a message move task carries them.

use crate::engine::ids::QueueId;
use crate::engine::receive::Transfer;
use crate::engine::Engine;

/// What a move of selected messages did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Moved {
    /// Messages now in the destination.
    pub moved: usize,
    /// Selected messages that stayed: in flight, delayed, or gone already.
    pub stayed: usize,
}

/// Why selected messages could not be moved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum MoveSelectedError {
    #[error("no such queue")]
    NoSource,
    #[error("no such destination queue")]
    NoDestination,
    #[error("the destination is the queue the messages are in")]
    SameQueue,
    #[error("the destination is served by another node: use a message move task")]
    Elsewhere,
}

impl Engine {
    /// Moves the visible messages among `ids` from `from` to `to`.
    pub(crate) fn move_selected(
        &self,
        from: &QueueId,
        ids: &[uuid::Uuid],
        to: &QueueId,
    ) -> Result<Moved, MoveSelectedError> {
        if from == to {
            return Err(MoveSelectedError::SameQueue);
        }
        let source = self.queue(from).ok_or(MoveSelectedError::NoSource)?;
        if !self.serves(to) {
            return Err(MoveSelectedError::Elsewhere);
        }
        let destination = self
            .queue(to)
            .filter(|q| !q.is_deleted())
            .ok_or(MoveSelectedError::NoDestination)?;
        let now = self.now_ms();
        let taken = source.take_by_ids(ids, now);
        let moved = taken.len();
        destination.accept(taken, Transfer::Redrive, now);
        // Their removal from the source is logged with their arrival there.
        source.changed_at(destination.last_lsn());
        Ok(Moved {
            moved,
            stayed: ids.len() - moved,
        })
    }
}
