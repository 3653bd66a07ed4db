//! Receipt handles: opaque to clients, but they carry which queue incarnation, which message
//! and which receive issued them, so garbage, foreign and stale handles can be told apart.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

use super::ids::MessageKey;

/// AWS handles start like this; some tools eyeball it.
const PREFIX: &str = "AQEB";
const RAW_LEN: usize = 32;

/// FNV-1a over a handle's fields: keeps most corrupted handles from decoding as another
/// message's.
fn checksum(fields: &[u8]) -> u32 {
    fields.iter().fold(0x811c9dc5u32, |h, b| {
        (h ^ *b as u32).wrapping_mul(0x01000193)
    })
}

/// What a receipt handle says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Receipt {
    /// The queue incarnation that issued it (a re-created queue gets a new one).
    pub queue_uid: u64,
    pub key: MessageKey,
    /// The message's receive count at the receive that issued this handle.
    pub receive_number: u32,
}

impl Receipt {
    /// The handle's text.
    pub(crate) fn encode(&self) -> String {
        let mut raw = [0u8; RAW_LEN];
        raw[0..8].copy_from_slice(&self.queue_uid.to_be_bytes());
        raw[8..16].copy_from_slice(&self.key.sent_ms.to_be_bytes());
        raw[16..24].copy_from_slice(&self.key.seq.to_be_bytes());
        raw[24..28].copy_from_slice(&self.receive_number.to_be_bytes());
        let check = checksum(&raw[..28]);
        raw[28..32].copy_from_slice(&check.to_be_bytes());
        let mut s = String::with_capacity(PREFIX.len() + 44);
        s.push_str(PREFIX);
        STANDARD.encode_string(raw, &mut s);
        s
    }

    /// Parses a handle; `None` if it is not one of ours.
    pub(crate) fn decode(handle: &str) -> Option<Receipt> {
        let body = handle.strip_prefix(PREFIX)?;
        let mut raw = [0u8; RAW_LEN + 2];
        let n = STANDARD.decode_slice(body, &mut raw).ok()?;
        if n != RAW_LEN {
            return None;
        }
        if raw[28..32] != checksum(&raw[..28]).to_be_bytes() {
            return None;
        }
        let u64_at = |i: usize| u64::from_be_bytes(raw[i..i + 8].try_into().unwrap_or([0; 8]));
        Some(Receipt {
            queue_uid: u64_at(0),
            key: MessageKey {
                sent_ms: u64_at(8),
                seq: u64_at(16),
            },
            receive_number: u32::from_be_bytes(raw[24..28].try_into().unwrap_or([0; 4])),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let r = Receipt {
            queue_uid: 7,
            key: MessageKey {
                sent_ms: 1_700_000_000_000,
                seq: 42,
            },
            receive_number: 3,
        };
        let h = r.encode();
        assert!(h.starts_with("AQEB"));
        assert_eq!(Receipt::decode(&h), Some(r));
        assert_eq!(Receipt::decode("garbage"), None);
        assert_eq!(Receipt::decode("AQEB"), None);
        let mut bad = h.clone();
        bad.replace_range(10..11, if &h[10..11] == "A" { "B" } else { "A" });
        assert_eq!(Receipt::decode(&bad), None);
    }
}
