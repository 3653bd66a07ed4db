//! Shard stream leaders spread evenly over the JetStream servers. A stream's leader takes
//! every publish, replicates it and acknowledges it, so it works harder than the stream's
//! followers, and the busiest JetStream server bounds what the cluster carries. JetStream's
//! elections leave leaders where they fall (5 to 12 of 48 shard streams on one of six
//! servers, measured), so the nodes move them.
//!
//! Every node computes the same **target** leader for each shard stream from the streams'
//! replica sets alone ([`targets`]): each server gets an equal share of the streams it holds
//! a replica of. Targets do not depend on who leads now, so two nodes acting on reads taken
//! at different moments never undo each other's moves. Each node moves only the streams of
//! the shards it serves, a few per round, and only to a target that is up to date; the
//! move happens between two of the shard's writes ([`JetStreamStore::lead_on`]), so it
//! pauses that shard for about one round trip instead of losing the publishes in flight.
//!
//! [`JetStreamStore::lead_on`]: crate::store::jetstream::JetStreamStore::lead_on

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use futures_util::StreamExt;

use super::Cluster;

/// Most leaderships one node moves per round, one after the other: each pauses one shard
/// briefly. A node of three serving 16 of 48 shards moves at most all of them in one round.
const MOVES_PER_ROUND: usize = 16;

/// Whether a nats-server of this version (`2.15.1`) moves a stream's leader to the server
/// a step-down request prefers: 2.11 and newer. An older one elects at random, so the
/// nodes would move leaders round after round without ever evening them out.
fn takes_a_preferred_leader(version: &str) -> bool {
    let mut parts = version.split('.').map(|p| {
        p.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse::<u32>()
            .unwrap_or(0)
    });
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (2, 11)
}

/// A shard stream as one read of the stream list shows it.
#[derive(Debug)]
struct Seen {
    leader: String,
    /// Replicas up to date and online (the leader included): the ones a move may go to.
    current: BTreeSet<String>,
}

/// Each shard's target leader: shards in order, each to the server of its replica set that
/// was given the fewest so far, ties broken by a rotation on the shard number (so that
/// servers holding every stream take turns). Servers that hold a replica of the same number
/// of streams end up leading equal numbers of them, give or take one.
pub(super) fn targets(replicas: &BTreeMap<u32, Vec<String>>) -> BTreeMap<u32, String> {
    let mut given: BTreeMap<&str, usize> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for (&shard, servers) in replicas {
        let mut servers: Vec<&str> = servers.iter().map(String::as_str).collect();
        servers.sort_unstable();
        servers.dedup();
        let n = servers.len();
        let turn = shard as usize % n.max(1);
        let chosen = servers
            .iter()
            .enumerate()
            .min_by_key(|(i, s)| (given.get(**s).copied().unwrap_or(0), (i + n - turn) % n))
            .map(|(_, s)| *s);
        if let Some(server) = chosen {
            *given.entry(server).or_default() += 1;
            out.insert(shard, server.to_string());
        }
    }
    even_out(replicas, &mut out);
    out
}

/// Moves targets along chains until no server leads two or more streams than another one
/// it could hand work to: from a server leading the most, a shard it leads goes to another
/// of its replicas, that server hands one of its own on, and so on, until a server leading
/// at least two fewer takes the last. The greedy pass leaves such gaps when replica sets
/// differ (R3 over more than three servers).
fn even_out(replicas: &BTreeMap<u32, Vec<String>>, out: &mut BTreeMap<u32, String>) {
    loop {
        let mut led: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
        for servers in replicas.values() {
            for s in servers {
                led.entry(s.as_str()).or_default();
            }
        }
        for (shard, server) in out.iter() {
            led.entry(server.as_str()).or_default().push(*shard);
        }
        let most = led.values().map(Vec::len).max().unwrap_or(0);
        // Breadth first from every server leading `most`: through whom each was reached.
        let mut via: BTreeMap<&str, Option<(&str, u32)>> = led
            .iter()
            .filter(|(_, shards)| shards.len() == most)
            .map(|(s, _)| (*s, None))
            .collect();
        let mut queue: std::collections::VecDeque<&str> = via.keys().copied().collect();
        let mut end = None;
        while let Some(from) = queue.pop_front() {
            if led[from].len() + 2 <= most {
                end = Some(from);
                break;
            }
            for shard in &led[from] {
                for to in &replicas[shard] {
                    if !via.contains_key(to.as_str()) {
                        via.insert(to.as_str(), Some((from, *shard)));
                        queue.push_back(to.as_str());
                    }
                }
            }
        }
        let Some(mut at) = end else { return };
        let mut chain = Vec::new();
        while let Some(Some((from, shard))) = via.get(at).copied() {
            chain.push((shard, at.to_string()));
            at = from;
        }
        out.extend(chain);
    }
}

/// Starts the rounds: the first two leases after joining (nodes take their shards within
/// one), then every four, for as long as the node is in the cluster.
pub(super) fn spawn(cluster: Arc<Cluster>, client: async_nats::Client) {
    let c = &cluster.config;
    if c.gateway || c.keep_leaders || c.replicas < 2 {
        return;
    }
    let version = client.server_info().version;
    if !takes_a_preferred_leader(&version) {
        tracing::warn!(
            version,
            "this nats-server cannot move a stream's leader where asked (2.11 or newer can); \
             shard stream leaders stay where elections put them"
        );
        return;
    }
    tokio::spawn(async move {
        let js = jetstream::new(client);
        let mut stop = cluster.stop.subscribe();
        // Replica sets as last read: a stream electing a leader is missing from a read, and
        // the targets of all the others must not shift because of it.
        let mut known = BTreeMap::new();
        let mut wait = cluster.config.lease * 2;
        loop {
            if tokio::time::timeout(wait, stop.wait_for(|s| *s))
                .await
                .is_ok()
            {
                return;
            }
            wait = cluster.config.lease * 4;
            if let Err(e) = round(&cluster, &js, &mut known).await {
                tracing::debug!(error = %e, "could not read the shard streams' leaders");
            }
        }
    });
}

/// One round: reads every shard stream's replicas and leader, and moves the leadership of
/// the shards this node serves to their targets. A move that did not land (a replica still
/// catching up, an election elsewhere) is tried again next round.
async fn round(
    cluster: &Cluster,
    js: &jetstream::Context,
    known: &mut BTreeMap<u32, Vec<String>>,
) -> Result<(), String> {
    let seen = read(js, cluster.config.shards).await?;
    for (shard, (servers, _)) in &seen {
        known.insert(*shard, servers.clone());
    }
    let mut moved = 0;
    for (shard, target) in targets(known) {
        if moved == MOVES_PER_ROUND {
            break;
        }
        let Some((_, now)) = seen.get(&shard) else {
            continue;
        };
        if now.leader == target || !now.current.contains(&target) {
            continue;
        }
        let Some(served) = cluster.serving_shard(shard) else {
            continue;
        };
        match served.store.lead_on(&target).await {
            Ok(true) => {
                moved += 1;
                cluster.stats_mut().leader_moves += 1;
                tracing::info!(shard, from = %now.leader, to = %target, "moved the shard stream's leader");
            }
            Ok(false) => {
                tracing::info!(shard, to = %target, "the shard stream's leader went elsewhere; trying again next round")
            }
            Err(e) => {
                tracing::debug!(shard, error = %e, "could not move the shard stream's leader")
            }
        }
    }
    Ok(())
}

/// Every shard stream's replica set (sorted) and state, by shard, from one listing.
async fn read(
    js: &jetstream::Context,
    shards: u32,
) -> Result<BTreeMap<u32, (Vec<String>, Seen)>, String> {
    let listing = async {
        let mut out = BTreeMap::new();
        let mut streams = js.streams();
        while let Some(info) = streams.next().await {
            let info = info.map_err(|e| e.to_string())?;
            let Some(shard) =
                super::shard::shard_of_stream(&info.config.name).filter(|n| *n < shards)
            else {
                continue;
            };
            let Some(cluster) = info.cluster else {
                continue;
            };
            let Some(leader) = cluster.leader else {
                continue;
            };
            let mut servers = vec![leader.clone()];
            let mut current = BTreeSet::from([leader.clone()]);
            for peer in cluster.replicas {
                if peer.current && !peer.offline {
                    current.insert(peer.name.clone());
                }
                servers.push(peer.name);
            }
            servers.sort_unstable();
            let state = Seen { leader, current };
            out.insert(shard, (servers, state));
        }
        Ok::<_, String>(out)
    };
    tokio::time::timeout(Duration::from_secs(10), listing)
        .await
        .map_err(|_| "listing the streams timed out".to_string())?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(t: &BTreeMap<u32, String>) -> BTreeMap<String, usize> {
        let mut c = BTreeMap::new();
        for s in t.values() {
            *c.entry(s.clone()).or_default() += 1;
        }
        c
    }

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("js{i}")).collect()
    }

    #[test]
    fn shard_streams_are_told_from_the_others() {
        use super::super::shard::{shard_of_stream, stream_name};
        let name = crate::store::jetstream::stream_of(&stream_name(17));
        assert_eq!(shard_of_stream(&name), Some(17));
        for other in [
            "KV_sqsim_leases",
            "SQSIM_shard",
            "SQSIM_shard017",
            "SQSIM_grouped",
            "X_shard3",
        ] {
            assert_eq!(shard_of_stream(other), None, "{other}");
        }
    }

    #[test]
    fn only_servers_from_2_11_on_are_asked_to_move_leaders() {
        for (version, takes) in [
            ("2.15.1", true),
            ("2.11.0", true),
            ("2.11.0-RC.1", true),
            ("3.0.0", true),
            ("2.10.23", false),
            ("2.9.10", false),
            ("", false),
        ] {
            assert_eq!(takes_a_preferred_leader(version), takes, "{version}");
        }
    }

    #[test]
    fn servers_holding_every_stream_lead_equal_shares() {
        let replicas: BTreeMap<u32, Vec<String>> = (0..48).map(|s| (s, names(3))).collect();
        let t = targets(&replicas);
        assert_eq!(t.len(), 48);
        assert!(counts(&t).values().all(|&n| n == 16), "{:?}", counts(&t));
    }

    #[test]
    fn r3_streams_spread_over_six_servers_lead_within_one_of_even() {
        // Replica sets as JetStream places them: each stream on the three servers holding
        // the fewest so far, ties broken at random (each server ends up with 24 of 48).
        let all = names(6);
        let mut held = [0usize; 6];
        let mut seed = 0x2545_f491_u64;
        let replicas: BTreeMap<u32, Vec<String>> = (0..48u32)
            .map(|s| {
                let mut order: Vec<(usize, u64, usize)> = (0..6)
                    .map(|i| {
                        seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        (held[i], seed >> 33, i)
                    })
                    .collect();
                order.sort_unstable();
                let set: Vec<String> = order[..3]
                    .iter()
                    .map(|&(_, _, i)| {
                        held[i] += 1;
                        all[i].clone()
                    })
                    .collect();
                (s, set)
            })
            .collect();
        assert!(held.iter().all(|&h| h == 24), "{held:?}");
        let t = targets(&replicas);
        let c = counts(&t);
        let (lo, hi) = (c.values().min().unwrap(), c.values().max().unwrap());
        assert!(hi - lo <= 1, "{c:?}");
        for (shard, server) in &t {
            assert!(
                replicas[shard].contains(server),
                "a target outside the replicas"
            );
        }
    }

    #[test]
    fn targets_do_not_depend_on_the_order_replicas_are_named_in() {
        let mut a: BTreeMap<u32, Vec<String>> = (0..12).map(|s| (s, names(3))).collect();
        let before = targets(&a);
        for set in a.values_mut() {
            set.reverse();
        }
        assert_eq!(targets(&a), before);
        // A stream missing from one read is kept from the last one by the caller; with it
        // gone the others' targets may shift, but every target stays among its replicas.
        a.remove(&5);
        let t = targets(&a);
        assert!(t.iter().all(|(s, srv)| a[s].contains(srv)));
        assert!(targets(&BTreeMap::new()).is_empty());
    }
}
