//! The TOML config file: queues declared at start with attributes, tags and dead-letter
//! wiring by name; idempotent re-application; errors that name the line and key.

use crate::common;

use std::process::Command;

use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use common::{sdk, start};
use sqsim::config_file::LoadedConfig;

const GOOD: &str = r#"
[server]
region = "us-east-1"

# The DLQ is declared after the queue that uses it: order does not matter.
[queues.orders]
attributes = { VisibilityTimeout = 60, DelaySeconds = "0" }
tags = { team = "core" }
dead_letter = { queue = "orders-dlq", max_receive_count = 1 }

[queues.orders-dlq]
attributes = { MessageRetentionPeriod = 1209600 }

[queues."events.fifo"]
attributes = { ContentBasedDeduplication = true }
"#;

#[tokio::test]
async fn declared_queues_exist_and_reapplying_changes_nothing() {
    let server = start().await;
    let file = LoadedConfig::parse("test.toml", GOOD.to_string()).unwrap();
    server.apply_config(&file).unwrap();
    let c = sdk(&server);
    let url = common::queue_url(&c, "orders").await;
    let attrs = |url: String| {
        let c = c.clone();
        async move {
            c.get_queue_attributes()
                .queue_url(url)
                .attribute_names(QueueAttributeName::All)
                .send()
                .await
                .unwrap()
                .attributes
                .unwrap()
        }
    };
    let before = attrs(url.clone()).await;
    assert_eq!(before[&QueueAttributeName::VisibilityTimeout], "60");
    assert!(before[&QueueAttributeName::RedrivePolicy].contains("orders-dlq"));
    let tags = common::queue_tags(&c, &url).await;
    assert_eq!(tags["team"], "core");
    let fifo = common::queue_url(&c, "events.fifo").await;
    assert_eq!(
        attrs(fifo).await[&QueueAttributeName::ContentBasedDeduplication],
        "true"
    );

    // Applying again is a no-op, even after time passed.
    server.advance_clock(std::time::Duration::from_secs(5));
    server.apply_config(&file).unwrap();
    assert_eq!(attrs(url.clone()).await, before);

    // The wiring works: maxReceiveCount 1 moves on the second receive.
    common::send(&c, &url, "m").await;
    c.receive_message()
        .queue_url(&url)
        .visibility_timeout(0)
        .send()
        .await
        .unwrap();
    assert!(common::receives_nothing(&c, &url).await);
    let dlq = common::queue_url(&c, "orders-dlq").await;
    let moved = c
        .receive_message()
        .queue_url(&dlq)
        .message_system_attribute_names(MessageSystemAttributeName::DeadLetterQueueSourceArn)
        .send()
        .await
        .unwrap();
    assert_eq!(moved.messages().len(), 1);
}

#[tokio::test]
async fn errors_name_the_line_and_key() {
    let cases = [
        ("[queues.orders]\nattributes = { VisibilityTimeout = 99999 }\n", "line 2: queues.orders.attributes.VisibilityTimeout: Invalid value for the parameter VisibilityTimeout."),
        ("[queues.orders]\natributes = { VisibilityTimeout = 1 }\n", "line 2: unknown field `atributes`"),
        ("[queues.orders]\ndead_letter = { queue = \"missing\", max_receive_count = 3 }\n", "line 2: queues.orders.dead_letter: no queue named \"missing\" in this file"),
        ("[queues.\"bad name\"]\n", "line 1: queues.bad name: Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length"),
        ("[queues.orders]\nattributes = { Color = \"blue\" }\n", "line 2: queues.orders.attributes.Color: Unknown Attribute Color."),
        ("[server]\nurl_style = \"sideways\"\n", "line 2: server.url_style: \"sideways\" is not one of"),
        ("[queues.orders\n", "line 1"),
        ("[server]\nread_timeout = 0\n", "line 2: server.read_timeout: read_timeout must be 1 to 86400 seconds, got 0"),
        ("[server]\nmax_connections = 0\n", "line 2: server.max_connections: max_connections must be at least 1"),
        ("[server]\nport = 0\n\ncluster = \"nats://127.0.0.1:4222\"\ncluster_shards = 0\n", "line 5: server.cluster_shards: cluster_shards must be 1 to 1024, got 0"),
        ("[server]\nsync = \"os\"\n", "line 2: server.sync: sync needs durable mode: set data_dir too"),
        ("[server]\nadmin = \"maybe\"\n", "line 2: server.admin: \"maybe\" is not one of \"on\", \"off\""),
        ("[server]\nmax_stored_bytes = \"lots\"\n", "line 2: server.max_stored_bytes: max_stored_bytes: \"lots\" is not a size"),
        ("[server]\nmax_incoming_bytes = \"1MiB\"\n", "line 2: server.max_incoming_bytes: max_incoming_bytes must be 0 (no limit) or at least 16777216"),
    ];
    let server = sqsim::Server::builder().start().await.unwrap();
    for (text, expected) in cases {
        let err = LoadedConfig::parse("bad.toml", text.to_string()).and_then(|f| {
            f.apply_server(&mut sqsim::Config::default())?;
            server.apply_config(&f)
        });
        let msg = err.expect_err(text).to_string();
        assert!(msg.starts_with("bad.toml: "), "{msg}");
        assert!(
            msg.contains(expected),
            "{text:?}\n  got: {msg}\n  want: {expected}"
        );
    }
}

#[test]
fn connection_limits_come_from_the_server_section() {
    let text =
        "[server]\nmax_connections = 50\nread_timeout = 5\nidle_timeout = 7\nmax_long_polls = 9\n\
                max_incoming_bytes = \"64MiB\"\n";
    let file = LoadedConfig::parse("limits.toml", text.to_string()).unwrap();
    let mut config = sqsim::Config::default();
    file.apply_server(&mut config).unwrap();
    assert_eq!(config.limits.max_connections, 50);
    assert_eq!(
        config.limits.read_timeout,
        std::time::Duration::from_secs(5)
    );
    assert_eq!(
        config.limits.idle_timeout,
        std::time::Duration::from_secs(7)
    );
    assert_eq!(config.engine.max_long_polls, 9);
    assert_eq!(config.limits.max_incoming_bytes, 64 << 20);
    // No limit, as a plain number.
    let file = LoadedConfig::parse("limits.toml", "[server]\nmax_incoming_bytes = 0\n".into());
    file.unwrap().apply_server(&mut config).unwrap();
    assert_eq!(config.limits.max_incoming_bytes, 0);
}

/// One struct holds the settings: every flag but the three that only make sense on a command
/// line is a `[server]` key of the same name, and means the same there.
#[test]
fn every_flag_is_a_server_key() {
    use clap::Args;
    let command = sqsim::config::Flags::augment_args(clap::Command::new("sqsim"));
    let mut keys = 0;
    for arg in command.get_arguments() {
        let key = arg.get_id().as_str();
        if ["config", "compat", "credentials"].contains(&key) {
            continue;
        }
        // A value of the wrong type is refused for its type, never as an unknown field.
        let text = format!("[server]\n{key} = {{}}\n");
        let err = LoadedConfig::parse("keys.toml", text)
            .expect_err(key)
            .to_string();
        assert!(!err.contains("unknown field"), "{key}: {err}");
        keys += 1;
    }
    assert!(keys >= 30, "only {keys} flags seen");
    let unknown = LoadedConfig::parse("keys.toml", "[server]\nverify = true\n".into());
    assert!(unknown
        .unwrap_err()
        .to_string()
        .contains("unknown field `verify`"));

    // And a few of them, applied: the same meaning as their flags.
    let text = "[server]\nallowed_hosts = [\"sqs.internal\"]\nadmin = \"off\"\ncompact_after = 1000\n\
                data_dir = \"/tmp/x\"\nsalvage = true\nmax_stored_bytes = \"1KiB\"\nurl_style = \"region-host\"\n";
    let file = LoadedConfig::parse("keys.toml", text.to_string()).unwrap();
    let mut config = sqsim::Config::default();
    file.apply_server(&mut config).unwrap();
    assert_eq!(config.security.allowed_hosts, ["sqs.internal"]);
    assert!(!config.security.admin);
    let durable = config.durability.unwrap();
    assert_eq!((durable.compact_after_bytes, durable.salvage), (1000, true));
    assert_eq!(config.engine.max_stored_bytes, 1024);
    assert_eq!(config.url_style, sqsim::config::UrlStyle::RegionHost);
}

#[test]
fn the_binary_exits_non_zero_on_a_bad_config() {
    let dir = std::env::temp_dir().join(format!("sqsim-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.toml");
    std::fs::write(
        &path,
        "[queues.orders]\nattributes = { DelaySeconds = 901 }\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sqsim"))
        .args(["--config", path.to_str().unwrap(), "--port", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("line 2: queues.orders.attributes.DelaySeconds"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
