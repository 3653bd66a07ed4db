//! The configuration's tests: flags over the file, sizes, URLs, credentials and hosts.

use std::collections::HashMap;

use super::*;

#[test]
fn flags_win_over_the_file_and_verification_needs_keys() {
    let none = HashMap::new();
    let mut c = Config::server_defaults();
    let flags = Flags {
        port: Some(1234),
        url_style: Some("region-host".into()),
        auth: Some("verify".into()),
        credentials: vec!["AK:SK:123456789012".into()],
        ..Flags::default()
    };
    flags.apply(&mut c, &none, Source::Flags).unwrap();
    Flags::finish(&c).unwrap();
    assert_eq!((c.host.as_str(), c.port), ("127.0.0.1", 1234));
    assert_eq!(c.url_style, UrlStyle::RegionHost);
    assert!(
        matches!(&c.auth, AuthMode::Verify(k) if k["AK"].account_id.as_deref() == Some("123456789012"))
    );

    let mut c = Config::server_defaults();
    let verify = Flags {
        auth: Some("verify".into()),
        ..Flags::default()
    };
    verify.clone().apply(&mut c, &none, Source::Flags).unwrap();
    assert!(Flags::finish(&c)
        .unwrap_err()
        .contains("needs at least one key"));
    let mut c = Config::server_defaults();
    let file_keys = HashMap::from([("F".to_string(), Credential::parse("F:S").unwrap())]);
    verify.apply(&mut c, &file_keys, Source::Flags).unwrap();
    Flags::finish(&c).unwrap();
    assert!(matches!(&c.auth, AuthMode::Verify(k) if k.contains_key("F")));

    let mut c = Config::server_defaults();
    let bad = Flags {
        account_id: Some("12".into()),
        ..Flags::default()
    };
    bad.apply(&mut c, &none, Source::Flags).unwrap();
    assert!(Flags::finish(&c).unwrap_err().contains("12 digits"));
    let bad = Flags {
        credentials: vec!["nocolon".into()],
        ..Flags::default()
    };
    let err = bad.apply(&mut c, &none, Source::Flags).unwrap_err();
    assert_eq!(err.key, Some("credentials"));
}

#[test]
fn the_file_and_the_flags_name_a_setting_their_own_way() {
    let shards = Flags {
        cluster_shards: Some(0),
        ..Flags::default()
    };
    let mut c = Config::server_defaults();
    let err = shards
        .clone()
        .apply(&mut c, &HashMap::new(), Source::Flags)
        .unwrap_err();
    assert_eq!(err.key, None, "{err}");
    assert!(
        err.message
            .starts_with("--node-id, --peer-url and --cluster-* need cluster mode"),
        "{err}"
    );
    let with_nats = Flags {
        cluster: Some("nats://127.0.0.1:4222".into()),
        ..shards
    };
    let err = with_nats
        .clone()
        .apply(&mut c, &HashMap::new(), Source::Flags)
        .unwrap_err();
    assert_eq!(err.key, Some("cluster_shards"));
    assert_eq!(err.message, "--cluster-shards must be 1 to 1024, got 0");
    let err = with_nats
        .apply(&mut c, &HashMap::new(), Source::File)
        .unwrap_err();
    assert_eq!(err.message, "cluster_shards must be 1 to 1024, got 0");

    // A later source changes one cluster setting of an earlier one's cluster.
    let mut c = Config::server_defaults();
    let file = Flags {
        cluster: Some("nats://127.0.0.1:4222".into()),
        node_id: Some("a".into()),
        ..Flags::default()
    };
    file.apply(&mut c, &HashMap::new(), Source::File).unwrap();
    let cluster = c.cluster.clone().unwrap();
    assert!(
        !cluster.keep_leaders,
        "the nodes spread stream leaders by default"
    );
    let flags = Flags {
        cluster_shards: Some(4),
        cluster_keep_leaders: true,
        ..Flags::default()
    };
    flags.apply(&mut c, &HashMap::new(), Source::Flags).unwrap();
    let cluster = c.cluster.unwrap();
    assert_eq!((cluster.node_id.as_str(), cluster.shards), ("a", 4));
    assert!(cluster.keep_leaders);
    let alone = Flags {
        cluster_keep_leaders: true,
        ..Flags::default()
    };
    let err = alone
        .apply(
            &mut Config::server_defaults(),
            &HashMap::new(),
            Source::Flags,
        )
        .unwrap_err();
    assert!(err.message.contains("need cluster mode"), "{}", err.message);

    let sync = Flags {
        sync: Some("os".into()),
        ..Flags::default()
    };
    let err = sync
        .apply(
            &mut Config::server_defaults(),
            &HashMap::new(),
            Source::Flags,
        )
        .unwrap_err();
    assert_eq!(err.message, "--sync needs durable mode: set --data-dir too");
}

#[test]
fn localstack_queue_urls() {
    let local: std::net::SocketAddr = "127.0.0.1:4566".parse().unwrap();
    let with = |strategy, host: Option<&str>| Config {
        localstack: Some(LocalStack {
            strategy,
            host: host.map(str::to_string),
        }),
        ..Config::default()
    };
    let base = |c: &Config, req_host, region| c.queue_base_url(Some(req_host), region, local);
    use LocalStackStrategy::*;
    let c = with(Standard, None);
    assert_eq!(
        base(&c, "localhost:4566", "eu-west-1"),
        "http://sqs.eu-west-1.localhost.localstack.cloud:4566"
    );
    let c = with(Domain, None);
    assert_eq!(
        base(&c, "x", "us-east-1"),
        "http://queue.localhost.localstack.cloud:4566"
    );
    assert_eq!(
        base(&c, "x", "eu-west-1"),
        "http://eu-west-1.queue.localhost.localstack.cloud:4566"
    );
    let c = with(Path, Some("localstack"));
    assert_eq!(
        base(&c, "x", "us-east-1"),
        "http://localstack:4566/queue/us-east-1"
    );
    let c = with(Off, Some("ls.example:1234"));
    assert_eq!(base(&c, "x", "us-east-1"), "http://ls.example:1234");
    let c = with(Dynamic, None);
    assert_eq!(
        base(
            &c,
            "sqs.us-east-1.localhost.localstack.cloud:4566",
            "eu-west-1"
        ),
        "http://sqs.eu-west-1.localhost.localstack.cloud:4566"
    );
    assert_eq!(
        base(
            &c,
            "eu-west-1.queue.localhost.localstack.cloud:4566",
            "eu-west-1"
        ),
        "http://eu-west-1.queue.localhost.localstack.cloud:4566"
    );
    assert_eq!(
        base(&c, "localhost:4566", "us-east-1"),
        "http://localhost:4566/queue/us-east-1"
    );
    // The advertised URL wins over everything.
    let mut c = with(Standard, None);
    c.advertised_url = Some("http://sqs.local:9/".into());
    assert_eq!(base(&c, "x", "us-east-1"), "http://sqs.local:9");
}

#[test]
fn a_host_without_a_port_gets_the_port_the_request_arrived_on() {
    let local: std::net::SocketAddr = "127.0.0.1:9324".parse().unwrap();
    let c = Config::default();
    let base = |c: &Config, host| c.queue_base_url(Some(host), "us-east-1", local);
    assert_eq!(base(&c, "127.0.0.1"), "http://127.0.0.1:9324");
    assert_eq!(base(&c, "localhost:1234"), "http://localhost:1234");
    assert_eq!(base(&c, "[::1]"), "http://[::1]:9324");
    assert_eq!(base(&c, "[::1]:5"), "http://[::1]:5");
    let region_host = Config {
        url_style: UrlStyle::RegionHost,
        ..Config::default()
    };
    assert_eq!(
        base(&region_host, "[::1]"),
        "http://sqs.us-east-1.localhost:9324"
    );
    assert_eq!(base(&c, "localhost"), "http://localhost:9324");
    // A name without a port is a proxy's (port 80 or 443): left as it is.
    assert_eq!(base(&c, "sqs.example"), "http://sqs.example");
    // On port 80 a Host without a port is already right.
    let on80: std::net::SocketAddr = "0.0.0.0:80".parse().unwrap();
    assert_eq!(
        c.queue_base_url(Some("127.0.0.1"), "us-east-1", on80),
        "http://127.0.0.1"
    );
}

#[test]
fn sizes_take_decimal_and_binary_units() {
    assert_eq!(parse_size("512"), Ok(512));
    assert_eq!(parse_size("2MiB"), Ok(2 << 20));
    assert_eq!(parse_size("3 G"), Ok(3_000_000_000));
    assert_eq!(parse_size("1KiB"), Ok(1024));
    assert!(parse_size("lots").is_err());
    assert!(parse_size("5TB").is_err());
    assert!(parse_size("99999999999999GiB").is_err());
}

#[test]
fn credentials_may_be_marked_admin_and_come_from_a_file() {
    let c = Credential::parse("AK:SK:123456789012:admin").unwrap();
    assert!(c.admin && c.account_id.as_deref() == Some("123456789012"));
    assert!(Credential::parse("AK:SK:admin").unwrap().admin);
    assert!(!Credential::parse("AK:SK").unwrap().admin);
    assert!(Credential::parse("AK:SK:123:admin").is_none());
    assert!(Credential::parse("AK:SK:123456789012:root").is_none());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys");
    std::fs::write(&path, "# keys\nA:1\n\nB:2:123456789012:admin\n").unwrap();
    let keys = Credential::read_file(path.to_str().unwrap()).unwrap();
    assert_eq!(keys.len(), 2);
    assert!(keys[1].admin);
    std::fs::write(&path, "bad line").unwrap();
    let err = Credential::read_file(path.to_str().unwrap()).unwrap_err();
    assert!(err.contains("line 1"), "{err}");
}
