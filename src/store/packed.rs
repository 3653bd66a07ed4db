//! Cluster mode's log and snapshot messages, compressed before JetStream stores them.
//!
//! Every byte of a log message is copied into the stream leader's Raft log, sent to the
//! followers, written into their logs and into every replica's stream store, checksummed
//! and (with `sync_interval: always`) fsynced. A record's fields are compact already
//! (postcard); what repeats is across the messages of a group — sender ids, attribute
//! names, timestamps, and bodies that share a shape, such as JSON events — so a group of
//! records is compressed whole, with LZ4: about 1 GB/s per core here, 0.1–0.4 µs per
//! SQS message. Measured on this project's 2-vCPU VM (docs/scale-out.md, "Compressed log
//! messages"): JSON-like bodies go to half their size, random text to 80%; one
//! JetStream server's CPU per message falls by up to a third; three servers' (R3) do not
//! change measurably, their cost there being per message, not per byte; what JetStream
//! stores and sends between servers shrinks alike.
//!
//! A compressed message carries [`CODEC`] = `lz4` and its body is the uncompressed length
//! (u32 LE), the CRC-32 of the uncompressed bytes (u32 LE), then an LZ4 block. LZ4 has no
//! check of its own: a flipped bit in a block often still decodes, to other bytes of the
//! same length, so the checksum is what turns damage into an error. A message without the header is stored as it was
//! (what earlier versions wrote, and anything that compression would not shrink by an
//! eighth, or written while a node of a version before compression holds shards: see
//! [`FORMAT`]), so logs written before compression existed still read; a version before it
//! cannot read what this one compressed.

use bytes::Bytes;

/// The log format this version reads and writes, which every node of a cluster shows in its
/// leases and heartbeat (`cluster::Owner`): 1 since log messages may be compressed. A node
/// of a version before formats were named shows none (0) and cannot read them, so while one
/// holds shards the others write uncompressed messages.
pub(crate) const FORMAT: u32 = 1;
/// The first log format that reads compressed messages.
pub(crate) const COMPRESSED_SINCE: u32 = 1;
/// The header naming how a message's body is encoded; absent: as is.
pub(crate) const CODEC: &str = "Sqsim-Codec";
/// The one encoding written: an LZ4 block after its uncompressed length and checksum.
const LZ4: &str = "lz4";
/// Below this, compression saves too little to pay for its header.
const MIN_BYTES: usize = 256;
/// Bytes before an LZ4 block: its uncompressed length and checksum.
const HEADER: usize = 8;

/// A message body as it goes to JetStream.
pub(crate) struct Packed {
    pub body: Bytes,
    /// The value of [`CODEC`], if the body is encoded.
    pub codec: Option<&'static str>,
}

/// `raw` compressed when `compress` allows it (every node that may read it knows LZ4:
/// `cluster::Owner::format`) and that saves at least an eighth of it, else as it is (and as
/// it is past the largest record a reader takes: [`unpack`] would refuse its claimed length).
pub(crate) fn pack(raw: Vec<u8>, compress: bool) -> Packed {
    if compress && raw.len() >= MIN_BYTES && raw.len() <= super::frame::MAX_RECORD {
        let block = lz4_flex::block::compress(&raw);
        if HEADER + block.len() <= raw.len() - raw.len() / 8 {
            let mut packed = Vec::with_capacity(HEADER + block.len());
            packed.extend_from_slice(&(raw.len() as u32).to_le_bytes());
            packed.extend_from_slice(&crc32fast::hash(&raw).to_le_bytes());
            packed.extend_from_slice(&block);
            return Packed {
                body: Bytes::from(packed),
                codec: Some(LZ4),
            };
        }
    }
    Packed {
        body: Bytes::from(raw),
        codec: None,
    }
}

/// The bytes a message held before [`pack`]: `body` itself without a codec. A body that
/// does not decode, claims more than `max` bytes, or names a codec this build does not
/// know (a newer version's) is an error, never a guess.
pub(crate) fn unpack(codec: Option<&str>, body: Bytes, max: usize) -> Result<Bytes, String> {
    match codec {
        None => Ok(body),
        Some(LZ4) => {
            let (header, block) = body
                .split_first_chunk::<HEADER>()
                .ok_or("a compressed message is shorter than its header")?;
            let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
            let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
            if len > max {
                return Err(format!(
                    "a compressed message claims {len} bytes, more than {max}"
                ));
            }
            let raw = lz4_flex::block::decompress(block, len)
                .map_err(|e| format!("a compressed message does not decode: {e}"))?;
            if raw.len() != len {
                return Err(format!(
                    "a compressed message decodes to {} bytes, not the {len} it claims",
                    raw.len()
                ));
            }
            if crc32fast::hash(&raw) != crc {
                return Err("a compressed message does not match its checksum".into());
            }
            Ok(Bytes::from(raw))
        }
        Some(other) => Err(format!(
            "a message is encoded as {other:?}, which this version cannot read (written by a newer one?)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records_like_a_batch() -> Vec<u8> {
        let mut raw = Vec::new();
        for i in 0..10u32 {
            raw.extend_from_slice(&i.to_le_bytes());
            raw.extend_from_slice(b"AIDAEXAMPLESENDER0001");
            raw.extend_from_slice(format!("{{\"event\":\"order.created\",\"id\":{i}}}").as_bytes());
            raw.extend_from_slice(&[i as u8; 40]);
        }
        raw
    }

    #[test]
    fn a_repetitive_group_is_compressed_and_comes_back_whole() {
        let raw = records_like_a_batch();
        let p = pack(raw.clone(), true);
        assert_eq!(p.codec, Some(LZ4));
        assert!(
            p.body.len() < raw.len() / 2,
            "{} of {}",
            p.body.len(),
            raw.len()
        );
        let back = unpack(p.codec, p.body, 1 << 20).unwrap();
        assert_eq!(&back[..], &raw[..]);
    }

    #[test]
    fn what_would_not_shrink_goes_as_it_is() {
        // Bytes of an xorshift sequence: nothing for LZ4 to find.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let raw: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let p = pack(raw.clone(), true);
        assert_eq!(p.codec, None);
        assert_eq!(&p.body[..], &raw[..]);
        let small = pack(vec![0; MIN_BYTES - 1], true);
        assert_eq!(small.codec, None);
        // Not allowed (a node of an older version holds shards): as it is, however alike.
        let alike = vec![b'x'; 4096];
        let plain = pack(alike.clone(), false);
        assert_eq!((plain.codec, &plain.body[..]), (None, &alike[..]));
        assert_eq!(unpack(None, p.body.clone(), 0).unwrap(), p.body);
    }

    #[test]
    fn a_damaged_or_unknown_body_is_an_error() {
        let raw = records_like_a_batch();
        let p = pack(raw.clone(), true);
        // Claims more than allowed: refused before any allocation of that size.
        assert!(unpack(p.codec, p.body.clone(), raw.len() - 1)
            .unwrap_err()
            .contains("claims"));
        // Cut short.
        let cut = p.body.slice(..p.body.len() - 3);
        assert!(unpack(p.codec, cut, 1 << 20).is_err());
        // A length that does not match what the block holds.
        let mut wrong = p.body.to_vec();
        wrong[..4].copy_from_slice(&((raw.len() + 5) as u32).to_le_bytes());
        assert!(unpack(p.codec, Bytes::from(wrong), 1 << 20).is_err());
        assert!(unpack(p.codec, Bytes::from_static(b"ab"), 1 << 20).is_err());
        // Any one bit flipped, in the header or the block: an error, never other bytes (a
        // flip that still decodes to the same bytes, such as a match offset moved onto an
        // identical run, is no damage).
        for i in 0..p.body.len() {
            for bit in 0..8 {
                let mut flipped = p.body.to_vec();
                flipped[i] ^= 1 << bit;
                if let Ok(back) = unpack(p.codec, Bytes::from(flipped), 1 << 20) {
                    assert_eq!(
                        &back[..],
                        &raw[..],
                        "byte {i} bit {bit} flipped went unnoticed"
                    );
                }
            }
        }
        assert!(unpack(Some("zstd"), p.body, 1 << 20)
            .unwrap_err()
            .contains("newer"));
    }
}
