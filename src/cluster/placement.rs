//! Where a queue lives: its shard (a stable hash of its id, the same on every node and every
//! version) and each shard's owner among the live nodes (rendezvous hashing with bounded
//! loads: each shard goes to the node whose hash with it is highest among those not yet
//! holding their share, so the nodes serve equal numbers of shards, give or take one, and a
//! node joining or leaving moves mostly its own share).

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

/// Each shard's preferred node among `members` (`None` when there is none), the same on
/// every node that sees the same members. Pairs of (shard, node) are taken by their hash,
/// highest first, and a node takes its share (⌊shards / nodes⌋, one more for as many nodes
/// as the division leaves over) and no more: plain rendezvous hashing
/// would give one node of six about 1.4 times its share of 16 shards, and the busiest node
/// bounds what the cluster carries.
pub(crate) fn owners(shards: u32, members: &[String]) -> Vec<Option<&str>> {
    let mut out = vec![None; shards as usize];
    if members.is_empty() {
        return out;
    }
    // `shards` = base × nodes + extra: `extra` nodes take one more than the others.
    let (base, mut extra) = (shards / members.len() as u32, shards % members.len() as u32);
    let mut pairs: Vec<(u64, &str, u32)> = (0..shards)
        .flat_map(|s| {
            members
                .iter()
                .map(move |m| (mix(fnv(&[m.as_bytes(), &s.to_le_bytes()])), m.as_str(), s))
        })
        .collect();
    pairs.sort_unstable_by(|a, b| b.cmp(a));
    let mut load: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    for (_, m, s) in pairs {
        let taken = load.entry(m).or_default();
        if out[s as usize].is_some() || *taken > base || (*taken == base && extra == 0) {
            continue;
        }
        if *taken == base {
            extra -= 1;
        }
        out[s as usize] = Some(m);
        *taken += 1;
    }
    out
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
    fn shards_spread_evenly_over_nodes_and_a_leaving_node_moves_mostly_its_own() {
        let owned = |shards: u32, members: &[String]| -> Vec<String> {
            owners(shards, members)
                .into_iter()
                .map(|o| o.expect("every shard has an owner").to_string())
                .collect()
        };
        let count = |owned: &[String], n: &str| owned.iter().filter(|o| *o == n).count();
        // Equal shares, give or take one, at every size up to ten nodes.
        for size in 1..=10 {
            let members: Vec<String> = (0..size).map(|i| format!("n{i}")).collect();
            for shards in [16, 32, 48] {
                let got = owned(shards, &members);
                let counts: Vec<usize> = members.iter().map(|m| count(&got, m)).collect();
                let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
                assert!(hi - lo <= 1, "{shards} shards on {size} nodes: {counts:?}");
            }
        }
        let three = nodes(&["a", "b", "c"]);
        let before = owned(48, &three);
        // The same members in another order: the same owners (every node agrees).
        assert_eq!(owned(48, &nodes(&["c", "a", "b"])), before);
        // A node leaves: its shards move, and few others do.
        let two = nodes(&["a", "c"]);
        let after = owned(48, &two);
        let moved = (0..48)
            .filter(|&s| before[s] != "b" && after[s] != before[s])
            .count();
        assert!(moved <= 4, "{moved} shards of the staying nodes moved");
        // A node joins: it takes shards from the others, about its share, few besides.
        let four = nodes(&["a", "b", "c", "d"]);
        let joined = owned(48, &four);
        let shuffled = (0..48)
            .filter(|&s| joined[s] != before[s] && joined[s] != "d")
            .count();
        assert_eq!(count(&joined, "d"), 12);
        assert!(
            shuffled <= 4,
            "{shuffled} shards moved between the old nodes"
        );
        assert_eq!(owners(3, &[]), vec![None, None, None]);
    }
}
