//! Where a queue lives: its shard (a stable hash of its id, the same on every node and every
//! version) and each shard's owner among the live nodes (rendezvous hashing: the node whose
//! hash with the shard is highest, so a node joining or leaving moves only its own share).

use crate::engine::QueueId;

/// FNV-1a, 64 bits: stable across platforms, versions and processes (std's hasher is not).
fn fnv(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in *part {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        // A separator, so that ("ab", "c") and ("a", "bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Mixes the bits (FNV's low bits are weak for short inputs).
fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// The shard (0..`shards`) queue `id` belongs to.
pub(crate) fn shard_of(id: &QueueId, shards: u32) -> u32 {
    let h = mix(fnv(&[
        id.region.as_bytes(),
        id.account.as_bytes(),
        id.name.as_bytes(),
    ]));
    (h % u64::from(shards.max(1))) as u32
}

/// The node that should own `shard` among `members` (rendezvous hashing), if any is live.
pub(crate) fn owner(shard: u32, members: &[String]) -> Option<&str> {
    members
        .iter()
        .max_by_key(|m| (mix(fnv(&[m.as_bytes(), &shard.to_le_bytes()])), m.as_str()))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_queue_always_maps_to_the_same_shard() {
        let id = QueueId {
            region: "us-east-1".into(),
            account: "000000000000".into(),
            name: "orders".into(),
        };
        let s = shard_of(&id, 16);
        assert!(s < 16);
        // Pinned: every node and every version must agree.
        assert_eq!(s, shard_of(&id.clone(), 16));
        let other = QueueId {
            name: "orders-dlq".into(),
            ..id.clone()
        };
        let spread: std::collections::HashSet<u32> = (0..200)
            .map(|i| {
                shard_of(
                    &QueueId {
                        name: format!("q{i}"),
                        ..id.clone()
                    },
                    16,
                )
            })
            .collect();
        assert_eq!(spread.len(), 16, "200 names cover every shard");
        let _ = shard_of(&other, 16);
        assert_eq!(shard_of(&id, 1), 0);
    }

    #[test]
    fn shards_spread_over_nodes_and_a_leaving_node_moves_only_its_own() {
        let three = nodes(&["a", "b", "c"]);
        let before: Vec<&str> = (0..256).map(|s| owner(s, &three).unwrap()).collect();
        for n in ["a", "b", "c"] {
            let count = before.iter().filter(|o| **o == n).count();
            assert!((50..=120).contains(&count), "{n} owns {count} of 256");
        }
        let two = nodes(&["a", "c"]);
        for (s, was) in before.iter().enumerate() {
            let now = owner(s as u32, &two).unwrap();
            if *was != "b" {
                assert_eq!(now, *was, "shard {s} moved though its owner stayed");
            }
        }
        // A joining node takes shards only from others, never shuffles the rest.
        let four = nodes(&["a", "b", "c", "d"]);
        for (s, was) in before.iter().enumerate() {
            let now = owner(s as u32, &four).unwrap();
            assert!(now == *was || now == "d");
        }
        assert_eq!(owner(3, &[]), None);
    }
}
