//! The reference pages no one maintains by hand: `docs/flags.md` is generated from the clap
//! definitions the binary parses (rewrite it with `SQSIM_BLESS=1 cargo test --features tools
//! --test it reference_docs`), and `docs/config.md`'s key tables are checked against the keys
//! the config file's parser takes.

use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::Path;

use clap::{Arg, CommandFactory};
use serde::de::DeserializeOwned;
use sqsim::config::Flags;
use sqsim::config_file::cli::Cli;
use sqsim::config_file::{CredentialSection, DeadLetter, QueueSection, WorkerSection};

fn docs(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(name)
}

#[test]
fn flags_md_is_generated_from_the_command_line() {
    let rendered = render_flags();
    let path = docs("flags.md");
    if std::env::var_os("SQSIM_BLESS").is_some() {
        std::fs::write(&path, &rendered).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == rendered,
        "docs/flags.md differs from the flags' definitions: regenerate it with \
         `SQSIM_BLESS=1 cargo test --features tools --test it reference_docs`"
    );
}

/// The whole page: the server's flags by heading, then each subcommand's.
fn render_flags() -> String {
    let mut cli = Cli::command();
    cli.build();
    let mut out = String::from(
        "# Flags\n\n<!-- Generated from the clap definitions (src/config/flags.rs, \
         src/config_file/cli.rs, src/worker/cli.rs) by tests/it/reference_docs.rs: edit those, \
         then run `SQSIM_BLESS=1 cargo test --features tools --test it reference_docs`. -->\n\n\
         Every flag can also be given as its environment variable. The server's flags, except \
         `--config`, `--compat`, `--credentials` and the logging flags, are also keys of a \
         config file's `[server]` section under their `snake_case` names \
         ([config.md](config.md)). `sqsim --help` shows the same text, \
         `sqsim completions bash|zsh|fish` a completion script and `sqsim man` the manual page.\n",
    );
    render_command(&mut out, &cli, "sqsim");
    for sub in cli.get_subcommands() {
        if sub.get_arguments().any(|a| !is_builtin(a)) {
            out.push_str(&format!("\n## `sqsim {}`\n\n", sub.get_name()));
            if let Some(about) = sub.get_long_about().or(sub.get_about()) {
                out.push_str(&format!("{}\n", one_line(&about.to_string())));
            }
            render_command(&mut out, sub, &format!("sqsim {}", sub.get_name()));
        }
    }
    out
}

/// One table per help heading, in the order `--help` shows them.
fn render_command(out: &mut String, cmd: &clap::Command, name: &str) {
    let mut headings: Vec<Option<&str>> = Vec::new();
    for arg in cmd.get_arguments().filter(|a| !is_builtin(a)) {
        if !headings.contains(&arg.get_help_heading()) {
            headings.push(arg.get_help_heading());
        }
    }
    let top = name == "sqsim";
    for heading in headings {
        let title = heading.unwrap_or(if top { "General" } else { "Options" });
        let level = if top { "##" } else { "###" };
        writeln!(out, "\n{level} {title}\n").unwrap();
        out.push_str("| flag | env | default | meaning |\n|---|---|---|---|\n");
        for arg in cmd
            .get_arguments()
            .filter(|a| !is_builtin(a) && a.get_help_heading() == heading)
        {
            out.push_str(&row(arg));
        }
    }
}

fn is_builtin(arg: &Arg) -> bool {
    matches!(arg.get_id().as_str(), "help" | "version") || arg.is_hide_set()
}

fn row(arg: &Arg) -> String {
    let flag = match arg.get_long() {
        Some(long) => format!("`--{long}`"),
        None => format!("`{}`", arg.get_id().as_str().to_uppercase()),
    };
    let env = arg
        .get_env()
        .map(|e| format!("`{}`", e.to_string_lossy()))
        .unwrap_or_else(|| "—".into());
    // The full text without its summary line, which `--help` shows alone and the full text
    // restates; a `[default: …]` in the text (settings whose default depends on others) goes
    // to the default column.
    let text = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    let paragraphs: Vec<&str> = text.split("\n\n").collect();
    let mut meaning = one_line(&paragraphs[paragraphs.len().min(2) - 1..].join(" "));
    let mut defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| format!("`{}`", v.to_string_lossy()))
        .collect();
    if let Some((before, rest)) = meaning.split_once(" [default: ") {
        if let Some((value, after)) = rest.split_once(']') {
            defaults.push(value.to_string());
            meaning = format!("{before}{after}");
        }
    }
    let default = if defaults.is_empty() {
        "—".to_string()
    } else {
        defaults.join(", ")
    };
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    let takes_value = arg.get_num_args().is_some_and(|n| n.takes_values());
    if takes_value && !values.is_empty() && !is_bool(&values) {
        write!(meaning, " (one of {})", values.join(", ")).unwrap();
    }
    format!(
        "| {flag} | {env} | {default} | {} |\n",
        meaning.replace('|', "\\|")
    )
}

fn is_bool(values: &[String]) -> bool {
    values == ["`true`", "`false`"]
}

/// Help text as one table cell: paragraphs joined by spaces.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn config_md_documents_exactly_the_keys_the_parser_takes() {
    let page = std::fs::read_to_string(docs("config.md")).unwrap();
    let checks: [(&str, BTreeSet<String>); 5] = [
        ("[server]", file_only_server_keys()),
        ("[queues.NAME]", keys_of::<QueueSection>()),
        ("[queues.NAME] dead_letter", keys_of::<DeadLetter>()),
        ("[[credentials]]", keys_of::<CredentialSection>()),
        ("[[workers]]", keys_of::<WorkerSection>()),
    ];
    for (section, parser) in checks {
        assert!(
            parser.len() >= 2,
            "{section}: the parser's keys: {parser:?}"
        );
        assert_eq!(
            table_keys(&page, section),
            parser,
            "docs/config.md, {section}"
        );
    }
}

/// The `[server]` keys that are no flag: the rest are documented once, in flags.md.
fn file_only_server_keys() -> BTreeSet<String> {
    use clap::Args;
    let flags = Flags::augment_args(clap::Command::new("sqsim"));
    let from_flags: BTreeSet<String> = flags
        .get_arguments()
        .map(|a| a.get_id().as_str().to_string())
        .collect();
    keys_of::<Flags>()
        .into_iter()
        .filter(|k| !from_flags.contains(k))
        .collect()
}

/// The fields a section's parser takes, as its refusal of an unknown key lists them.
fn keys_of<T: DeserializeOwned + std::fmt::Debug>() -> BTreeSet<String> {
    let err = toml::from_str::<T>("zz_no_such_key = 1\n")
        .unwrap_err()
        .to_string();
    let (_, expected) = err
        .split_once("expected")
        .unwrap_or_else(|| panic!("no list of keys in: {err}"));
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The first-column keys of the table under `## SECTION`.
fn table_keys(page: &str, section: &str) -> BTreeSet<String> {
    let heading = format!("## {section}\n");
    let at = page
        .find(&heading)
        .unwrap_or_else(|| panic!("docs/config.md has no `{}`", heading.trim()));
    let body = &page[at + heading.len()..];
    let body = &body[..body.find("\n## ").unwrap_or(body.len())];
    body.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(k, _)| k.to_string()))
        .collect()
}
