//! What the console reads and does on one queue beyond SQS: its messages as they are
//! (peeked, paged, searched) without receiving them, and a delete by message id.

use std::sync::Arc;

use super::Queue;
use crate::engine::search::{Budget, Filter, Found};
use crate::engine::view::PeekedMessage;

impl Queue {
    /// Every stored message in delivery-key order, as it is; nothing changes.
    #[cfg(test)]
    pub(crate) fn peek(&self, now_ms: u64) -> Vec<PeekedMessage> {
        self.peek_page(now_ms, 0, usize::MAX, u64::MAX).0
    }

    /// Up to `limit` stored messages from the `offset`-th on (delivery-key order), and how
    /// many are stored in all; nothing changes. Costs the page, not the queue.
    pub(crate) fn peek_page(
        &self,
        now_ms: u64,
        offset: usize,
        limit: usize,
        max_bytes: u64,
    ) -> (Vec<PeekedMessage>, usize) {
        let budget = Budget {
            messages: limit,
            bytes: u64::MAX,
            page: limit,
            page_bytes: max_bytes,
        };
        let found = self.search_page(now_ms, &Filter::default(), offset, budget);
        (found.messages, found.total)
    }

    /// The stored messages from the `offset`-th on (delivery-key order) that match
    /// `filter`, examining no more than `budget` allows; nothing changes. The lock is held
    /// for the scan, which the budget bounds.
    pub(crate) fn search_page(
        &self,
        now_ms: u64,
        filter: &Filter,
        offset: usize,
        budget: Budget,
    ) -> Found {
        self.with_state(now_ms, |st, _, _| {
            let total = st.visible + st.in_flight + st.delayed;
            let (mut messages, mut scanned, mut next) = (Vec::new(), 0, None);
            let (mut scanned_bytes, mut page_bytes) = (0u64, 0u64);
            for (_, m) in st.messages.iter().skip(offset) {
                let full = messages.len() >= budget.page
                    || (!messages.is_empty() && page_bytes >= budget.page_bytes);
                let spent =
                    scanned >= budget.messages || (scanned > 0 && scanned_bytes >= budget.bytes);
                if full || spent {
                    next = Some(offset + scanned);
                    break;
                }
                scanned += 1;
                scanned_bytes += m.payload.body.len() as u64;
                if !filter.matches(&m.payload, m.delivery) {
                    continue;
                }
                // At least one message, then as many as fit in the page's bytes, so a page
                // of 256 KiB messages stays bounded in memory.
                let size = m.footprint();
                if !messages.is_empty() && page_bytes + size > budget.page_bytes {
                    scanned -= 1; // examined again by the next page
                    next = Some(offset + scanned);
                    break;
                }
                page_bytes += size;
                messages.push(PeekedMessage {
                    payload: Arc::clone(&m.payload),
                    delivery: m.delivery,
                    receive_count: m.receive_count,
                    first_receive_ms: m.first_receive_ms.map(|t| t.get()),
                });
            }
            Found {
                messages,
                scanned,
                next,
                total,
            }
        })
    }

    /// Deletes the message with this MessageId whatever its state, without a receipt handle
    /// (the console's delete); false when no such message is stored.
    pub(crate) fn delete_by_id(&self, message_id: uuid::Uuid, now_ms: u64) -> bool {
        self.with_state(now_ms, |st, _, _| {
            let key = st
                .messages
                .iter()
                .find(|(_, m)| m.payload.message_id == message_id)
                .map(|(k, _)| k);
            key.is_some_and(|k| st.remove_deleted(&k))
        })
    }
}
