//! ElasticMQ's `elasticmq.conf` (HOCON, read with the `hocon-parser` crate) turned into the
//! same [`FileConfig`] the TOML file fills, so both go through one set of checks and one
//! way of creating queues. What ElasticMQ reads (its `reference.conf` and
//! `ElasticMQServerConfig`/`QueueConfigUtil`) is mapped; every key sqsim does not honour is
//! named in a warning, never dropped silently.
//!
//! | ElasticMQ | sqsim |
//! |---|---|
//! | `rest-sqs.bind-hostname` / `bind-port` | `host` / `port` |
//! | `node-address` (`protocol://host:port/context-path`) | `advertised_url` (`host = "*"` or `generate-node-address = true`: from each request's Host) |
//! | `aws.region` / `aws.accountId` | `region` / `account_id`; one namespace whatever region a client signs with, as in ElasticMQ |
//! | `queues.<name>` `defaultVisibilityTimeout`, `delay`, `receiveMessageWait` | `VisibilityTimeout`, `DelaySeconds`, `ReceiveMessageWaitTimeSeconds` (durations: `10 seconds`; a bare number is milliseconds) |
//! | `fifo = true` (adds `.fifo` to the name), `contentBasedDeduplication` | a FIFO queue, `ContentBasedDeduplication` |
//! | `deadLettersQueue { name, maxReceiveCount }` | the dead-letter wiring |
//! | `tags` | tags (values as strings) |

use std::collections::BTreeMap;
use std::time::Duration;

use hocon::{Config as Hocon, HoconValue};
use toml::Spanned;

use super::{ConfigError, DeadLetter, FileConfig, QueueSection};
use crate::config::Flags;

/// A parsed ElasticMQ config: the settings and queues it declares, and what was ignored.
#[derive(Debug)]
pub(super) struct Translated {
    pub file: FileConfig,
    pub warnings: Vec<String>,
}

/// Whether `path` names an ElasticMQ config (a `.conf` file) rather than a TOML one.
pub(super) fn is_elasticmq(path: &str) -> bool {
    std::path::Path::new(path)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("conf"))
}

/// Reads ElasticMQ config text.
pub(super) fn translate(path: &str, text: &str) -> Result<Translated, ConfigError> {
    let fail = |message: String| ConfigError {
        path: path.to_string(),
        message,
    };
    let root = hocon::parse(&without_classpath_includes(text))
        .map_err(|e| fail(format!("not valid HOCON: {e}")))?;
    let mut t = Translator {
        warnings: Vec::new(),
        file: FileConfig::default(),
    };
    t.read(&root).map_err(fail)?;
    Ok(Translated {
        file: t.file,
        warnings: t.warnings,
    })
}

/// ElasticMQ's configs start with `include classpath("application.conf")`: that file holds
/// only its HTTP framework's settings, and no Rust parser resolves classpath includes. The
/// line is blanked so that line numbers in parse errors stay right.
fn without_classpath_includes(text: &str) -> String {
    text.lines()
        .map(|line| {
            let t = line.trim_start();
            if t.starts_with("include") && t.contains("classpath(") {
                ""
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

struct Translator {
    warnings: Vec<String>,
    file: FileConfig,
}

/// The object at `key` of `parent` as a config of its own (keys with dots or dashes need
/// no quoting that way), or `None` when absent.
fn section(parent: &Hocon, key: &str) -> Result<Option<Hocon>, String> {
    match parent.get(&quoted(key)) {
        None => Ok(None),
        Some(HoconValue::Object(map)) => Ok(Some(Hocon::new(map.clone()))),
        Some(_) => Err(format!("{key}: expected an object")),
    }
}

/// A path segment quoted, so that a name like `events.fifo` stays one key.
fn quoted(key: &str) -> String {
    format!("\"{}\"", key.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Whole seconds of a duration, as ElasticMQ truncates them.
fn seconds(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

impl Translator {
    fn warn(&mut self, key: &str, why: &str) {
        self.warnings.push(format!("{key}: {why}"));
    }

    fn read(&mut self, root: &Hocon) -> Result<(), String> {
        let mut server = Flags::default();
        for key in root.keys() {
            match key {
                "node-address" | "generate-node-address" | "rest-sqs" | "aws" | "queues" => {}
                "rest-stats" => self.warn(key, "not served: queue statistics are in /_sqsim/stats and /metrics (ElasticMQ 1.7 dropped rest-stats too)"),
                "queues-storage" | "messages-storage" => {
                    if section(root, key)?.and_then(|s| s.get_bool("enabled").ok()) == Some(true) {
                        self.warn(key, "ignored: for queues and messages that survive restarts, run sqsim with --data-dir DIR");
                    }
                }
                "auto-create-queues" => {
                    if section(root, key)?.and_then(|s| s.get_bool("enabled").ok()) == Some(true) {
                        self.warn(key, "not supported: queues must be created (as on AWS) or declared under queues");
                    }
                }
                "pekko" | "akka" => self.warn(key, "ignored: ElasticMQ's HTTP framework settings have no meaning for sqsim"),
                other => self.warn(other, "unknown key, ignored"),
            }
        }
        self.read_rest_sqs(root, &mut server)?;
        self.read_node_address(root, &mut server)?;
        if let Some(aws) = section(root, "aws")? {
            for key in aws.keys() {
                match key {
                    "region" => {
                        server.region = Some(
                            aws.get_string(key)
                                .map_err(|e| format!("aws.region: {e}"))?,
                        )
                    }
                    "accountId" => {
                        server.account_id = Some(
                            aws.get_string(key)
                                .map_err(|e| format!("aws.accountId: {e}"))?,
                        )
                    }
                    other => self.warn(&format!("aws.{other}"), "unknown key, ignored"),
                }
            }
        }
        // ElasticMQ has one namespace: a client signing for any region sees these queues.
        server.single_region = Some(true);
        self.file.server = server;
        if let Some(queues) = section(root, "queues")? {
            self.read_queues(&queues)?;
        }
        Ok(())
    }

    fn read_rest_sqs(&mut self, root: &Hocon, server: &mut Flags) -> Result<(), String> {
        let Some(rest) = section(root, "rest-sqs")? else {
            return Ok(());
        };
        for key in rest.keys() {
            let name = format!("rest-sqs.{key}");
            let bad = |e: hocon::ConfigError| format!("{name}: {e}");
            match key {
                "bind-hostname" => server.host = Some(rest.get_string(key).map_err(bad)?),
                "bind-port" => {
                    let port = rest.get_i64(key).map_err(bad)?;
                    server.port = Some(
                        u16::try_from(port).map_err(|_| format!("{name}: {port} is not a port"))?,
                    );
                }
                "enabled" => {
                    if !rest.get_bool(key).map_err(bad)? {
                        self.warn(&name, "ignored: sqsim always serves the SQS API");
                    }
                }
                "sqs-limits" => {
                    let v = rest.get_string(key).map_err(bad)?;
                    match v.to_ascii_lowercase().as_str() {
                        "strict" => {}
                        "relaxed" => self.warn(
                            &name,
                            "relaxed is not supported: sqsim enforces AWS's limits",
                        ),
                        _ => {
                            return Err(format!(
                                "{name}: unknown sqs-limits name {v:?} (strict or relaxed)"
                            ))
                        }
                    }
                }
                other => self.warn(&format!("rest-sqs.{other}"), "unknown key, ignored"),
            }
        }
        Ok(())
    }

    /// `node-address` sets the base of queue URLs, unless its host is `*` or
    /// `generate-node-address` is on, which both mean "from the request" here.
    fn read_node_address(&mut self, root: &Hocon, server: &mut Flags) -> Result<(), String> {
        let generate = match root.get("generate-node-address") {
            None => false,
            Some(_) => root
                .get_bool("generate-node-address")
                .map_err(|e| format!("generate-node-address: {e}"))?,
        };
        let Some(node) = section(root, "node-address")? else {
            return Ok(());
        };
        let (mut protocol, mut host, mut port, mut context) = (
            "http".to_string(),
            "localhost".to_string(),
            9324i64,
            String::new(),
        );
        for key in node.keys() {
            let bad = |e: hocon::ConfigError| format!("node-address.{key}: {e}");
            match key {
                "protocol" => protocol = node.get_string(key).map_err(bad)?,
                "host" => host = node.get_string(key).map_err(bad)?,
                "port" => port = node.get_i64(key).map_err(bad)?,
                "context-path" => context = node.get_string(key).map_err(bad)?,
                other => self.warn(&format!("node-address.{other}"), "unknown key, ignored"),
            }
        }
        if generate || host == "*" {
            return Ok(());
        }
        let context = context.trim().trim_matches('/');
        let suffix = if context.is_empty() {
            String::new()
        } else {
            format!("/{context}")
        };
        server.advertised_url = Some(format!("{protocol}://{host}:{port}{suffix}"));
        Ok(())
    }

    fn read_queues(&mut self, queues: &Hocon) -> Result<(), String> {
        let mut declared = BTreeMap::new();
        let mut dead_letters = Vec::new();
        for name in queues.keys() {
            let key = format!("queues.{name}");
            let Some(q) = section(queues, name)? else {
                continue;
            };
            let bad = |k: &str, e: hocon::ConfigError| format!("{key}.{k}: {e}");
            let fifo = match q.get("fifo") {
                Some(_) => q.get_bool("fifo").map_err(|e| bad("fifo", e))?,
                None => false,
            };
            let full_name = if fifo && !name.ends_with(".fifo") {
                format!("{name}.fifo")
            } else {
                name.to_string()
            };
            let mut queue = QueueSection::default();
            let mut attr = |n: &str, v: toml::Value| {
                queue
                    .attributes
                    .insert(n.to_string(), Spanned::new(0..0, v));
            };
            for k in q.keys() {
                match k {
                    "defaultVisibilityTimeout" | "delay" | "receiveMessageWait" => {
                        let d = q.get_duration(k).map_err(|e| bad(k, e))?;
                        let attribute = match k {
                            "defaultVisibilityTimeout" => "VisibilityTimeout",
                            "delay" => "DelaySeconds",
                            _ => "ReceiveMessageWaitTimeSeconds",
                        };
                        attr(attribute, toml::Value::Integer(seconds(d)));
                    }
                    "fifo" => {}
                    "contentBasedDeduplication" => {
                        let on = q.get_bool(k).map_err(|e| bad(k, e))?;
                        if full_name.ends_with(".fifo") {
                            attr("ContentBasedDeduplication", toml::Value::Boolean(on));
                        } else if on {
                            self.warn(
                                &format!("{key}.{k}"),
                                "ignored: only FIFO queues deduplicate",
                            );
                        }
                    }
                    "deadLettersQueue" => {
                        let dl = section(&q, k)?
                            .ok_or_else(|| format!("{key}.{k}: expected an object"))?;
                        let target = dl
                            .get_string("name")
                            .map_err(|e| bad("deadLettersQueue.name", e))?;
                        let count = dl
                            .get_i64("maxReceiveCount")
                            .map_err(|e| bad("deadLettersQueue.maxReceiveCount", e))?;
                        let count = u32::try_from(count).map_err(|_| {
                            format!("{key}.deadLettersQueue.maxReceiveCount: {count} is not between 1 and 1000")
                        })?;
                        dead_letters.push((full_name.clone(), target, count));
                    }
                    "tags" => {
                        let tags = section(&q, k)?
                            .ok_or_else(|| format!("{key}.tags: expected an object"))?;
                        for tag in tags.keys() {
                            let v = tags
                                .get_string(&quoted(tag))
                                .map_err(|e| format!("{key}.tags.{tag}: {e}"))?;
                            queue.tags.insert(tag.to_string(), v);
                        }
                    }
                    "copyTo" | "moveTo" => self.warn(
                        &format!("{key}.{k}"),
                        "not supported (an ElasticMQ extension, not an SQS feature); ignored",
                    ),
                    "created" | "lastModified" => self.warn(
                        &format!("{key}.{k}"),
                        "ignored: sqsim sets creation and modification times itself",
                    ),
                    other => self.warn(&format!("{key}.{other}"), "unknown key, ignored"),
                }
            }
            declared.insert(full_name, queue);
        }
        // Dead-letter queues are named as they are finally called (`.fifo` included), as in
        // ElasticMQ; one that is not declared is reported and left out, as ElasticMQ does.
        for (source, target, count) in dead_letters {
            if !declared.contains_key(&target) {
                self.warn(
                    &format!("queues.{source}.deadLettersQueue.name"),
                    &format!(
                        "no queue named {target:?} is declared; the dead-letter queue is left out"
                    ),
                );
                continue;
            }
            if let Some(q) = declared.get_mut(&source) {
                q.dead_letter = Some(Spanned::new(
                    0..0,
                    DeadLetter {
                        queue: target,
                        max_receive_count: count,
                    },
                ));
            }
        }
        self.file.queues = declared
            .into_iter()
            .map(|(name, q)| (name, Spanned::new(0..0, q)))
            .collect();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONF: &str = r#"
include classpath("application.conf")

node-address { protocol = http, host = sqs.local, port = 9324, context-path = "/sqs/" }
rest-sqs { enabled = true, bind-port = 9500, bind-hostname = "127.0.0.1", sqs-limits = strict }
rest-stats { enabled = true, bind-port = 9325 }

queues {
  orders {
    defaultVisibilityTimeout = 10 seconds
    delay = 5 seconds
    receiveMessageWait = 1500   // milliseconds: whole seconds are kept
    deadLettersQueue { name = "orders-dlq", maxReceiveCount = 3 }
    copyTo = "audit"
    tags { team = core, tier = 1 }
  }
  orders-dlq { }
  events { fifo = true, contentBasedDeduplication = true }
  lost { deadLettersQueue { name = "nowhere", maxReceiveCount = 2 }, colour = blue }
}
aws { region = eu-west-1, accountId = 123456789012 }
"#;

    #[test]
    fn a_realistic_config_is_read_and_the_rest_is_named() {
        let t = translate("elasticmq.conf", CONF).unwrap();
        let s = &t.file.server;
        assert_eq!(s.host.as_deref(), Some("127.0.0.1"));
        assert_eq!(s.port, Some(9500));
        assert_eq!(s.region.as_deref(), Some("eu-west-1"));
        assert_eq!(s.account_id.as_deref(), Some("123456789012"));
        assert_eq!(
            s.advertised_url.as_deref(),
            Some("http://sqs.local:9324/sqs")
        );
        assert_eq!(s.single_region, Some(true));
        let names: Vec<_> = t.file.queues.keys().cloned().collect();
        assert_eq!(names, ["events.fifo", "lost", "orders", "orders-dlq"]);
        let orders = t.file.queues["orders"].get_ref();
        let attr = |n: &str| orders.attributes[n].get_ref().clone();
        assert_eq!(attr("VisibilityTimeout"), toml::Value::Integer(10));
        assert_eq!(attr("DelaySeconds"), toml::Value::Integer(5));
        assert_eq!(
            attr("ReceiveMessageWaitTimeSeconds"),
            toml::Value::Integer(1)
        );
        let dl = orders.dead_letter.as_ref().unwrap().get_ref();
        assert_eq!((dl.queue.as_str(), dl.max_receive_count), ("orders-dlq", 3));
        assert_eq!(orders.tags["tier"], "1");
        let events = t.file.queues["events.fifo"].get_ref();
        assert_eq!(
            events.attributes["ContentBasedDeduplication"].get_ref(),
            &toml::Value::Boolean(true)
        );
        assert!(t.file.queues["lost"].get_ref().dead_letter.is_none());
        let warned = t.warnings.join("\n");
        for key in [
            "rest-stats",
            "queues.orders.copyTo",
            "queues.lost.colour",
            "queues.lost.deadLettersQueue.name",
        ] {
            assert!(warned.contains(key), "{key} not named in {warned}");
        }
        assert_eq!(t.warnings.len(), 4, "{warned}");
    }

    #[test]
    fn errors_name_the_key() {
        let e = translate("x.conf", "queues { q { delay = soon } }").unwrap_err();
        assert!(e.message.contains("queues.q.delay"), "{e}");
        let e = translate("x.conf", "rest-sqs { sqs-limits = loose }").unwrap_err();
        assert!(e.message.contains("sqs-limits"), "{e}");
        let e = translate("x.conf", "queues { q { ").unwrap_err();
        assert!(e.message.contains("not valid HOCON"), "{e}");
        assert!(is_elasticmq("/etc/elasticmq.conf") && !is_elasticmq("sqsim.toml"));
    }
}
