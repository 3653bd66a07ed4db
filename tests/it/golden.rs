//! Golden wire exchanges: each file in `fixtures/wire/` is a sequence of raw requests and the
//! exact responses sqsim must give, after replacing what varies between runs (request and
//! message ids, receipt handles, move-task handles, timestamps and SigV4 dates, FIFO sequence
//! numbers) with placeholders. `SQSIM_BLESS=1` rewrites the files from the current output;
//! review the diff before committing it.
//!
//! A file's leading comment may configure its server: `# server: max_body_bytes=N` or
//! `# server: auth=ACCESS_KEY:SECRET` (signatures verified against that key).
//!
//! Requests may hold placeholders, filled in before sending (the file keeps them):
//! `<HANDLE>` and `<TASK>`, the first receipt handle / move-task handle of the newest earlier
//! reply that held one (percent-encoded in a path or a form body), and `<REPEAT n x>`, the
//! text `x` repeated `n` times (for bodies too large to keep in a file).

use crate::common;

use std::path::Path;

use common::{raw, start_with, RawResponse};

use sqsim::server::in_process::{parse_wire as parse, WireRequest as Exchange};

fn is_uuid_at(b: &[u8], i: usize) -> bool {
    const SHAPE: &[usize] = &[8, 4, 4, 4, 12];
    let mut j = i;
    for (n, len) in SHAPE.iter().enumerate() {
        for _ in 0..*len {
            if j >= b.len() || !b[j].is_ascii_hexdigit() {
                return false;
            }
            j += 1;
        }
        if n < SHAPE.len() - 1 {
            if j >= b.len() || b[j] != b'-' {
                return false;
            }
            j += 1;
        }
    }
    j == b.len() || !b[j].is_ascii_hexdigit()
}

/// Whether a SigV4 date (`20240101T000000Z`) starts at `i`.
fn is_amz_date_at(b: &[u8], i: usize) -> bool {
    let Some(d) = b.get(i..i + 16) else {
        return false;
    };
    d[..8].iter().all(u8::is_ascii_digit)
        && d[8] == b'T'
        && d[9..15].iter().all(u8::is_ascii_digit)
        && d[15] == b'Z'
}

/// How every move-task handle starts: base64 of `{"sourceArn":`.
const TASK_HANDLE: &str = "eyJzb3VyY2VBcm4iOi";

/// The server a fixture asks for in its `# server:` lines.
fn config_of(preamble: &[String]) -> sqsim::Config {
    let mut config = sqsim::Config::default();
    for line in preamble {
        let Some(setting) = line.strip_prefix("# server: ") else {
            continue;
        };
        match setting.split_once('=') {
            Some(("max_body_bytes", n)) => config.max_body_bytes = n.parse().unwrap(),
            Some(("auth", key)) => {
                let cred = sqsim::config::Credential::parse(key).unwrap();
                config.auth = sqsim::config::AuthMode::Verify(
                    [(cred.access_key.clone(), cred)].into_iter().collect(),
                );
            }
            _ => panic!("unknown fixture setting {setting:?}"),
        }
    }
    config
}

/// Replaces run-dependent values with placeholders.
fn normalize(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        let boundary = i == 0 || !b[i - 1].is_ascii_alphanumeric();
        if boundary && is_uuid_at(b, i) {
            out.push_str("<UUID>");
            i += 36;
        } else if boundary && s[i..].starts_with(TASK_HANDLE) {
            // base64 of `{"sourceArn":…,"taskId":"<uuid>"}`: the id varies, so the handle does.
            out.push_str("<TASK>");
            while i < b.len()
                && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'+' | b'/' | b'='))
            {
                i += 1;
            }
        } else if boundary && s[i..].starts_with("AQEB") {
            out.push_str("<HANDLE>");
            i += 4;
            while i < b.len()
                && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'+' | b'/' | b'='))
            {
                i += 1;
            }
        } else if boundary && is_amz_date_at(b, i) {
            out.push_str("<AMZDATE>");
            i += 16;
        } else if boundary && b[i].is_ascii_digit() {
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            match i - start {
                13 => out.push_str("<MS>"),
                19..=21 => out.push_str("<SEQ>"),
                10 => out.push_str("<S>"),
                _ => out.push_str(&s[start..i]),
            }
        } else {
            let ch = s[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// The run-dependent values a later request may refer to.
#[derive(Default)]
struct Seen {
    handle: Option<String>,
    task: Option<String>,
}

impl Seen {
    fn note(&mut self, reply: &str) {
        if let Some(h) = first_token(reply, "AQEB") {
            self.handle = Some(h);
        }
        if let Some(t) = first_token(reply, TASK_HANDLE) {
            self.task = Some(t);
        }
    }
}

/// The first base64 token starting with `prefix` at a word boundary.
fn first_token(s: &str, prefix: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut from = 0;
    while let Some(at) = s[from..].find(prefix).map(|i| i + from) {
        if at == 0 || !b[at - 1].is_ascii_alphanumeric() {
            let end = s[at..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=')))
                .map_or(s.len(), |n| at + n);
            return Some(s[at..end].to_string());
        }
        from = at + prefix.len();
    }
    None
}

/// A request text with its placeholders filled in.
fn fill(text: &str, seen: &Seen, encode: bool) -> String {
    let value = |v: &Option<String>, name: &str| {
        let v = v
            .as_deref()
            .unwrap_or_else(|| panic!("{name} before any reply held one"));
        if encode {
            serde_urlencoded::to_string([("k", v)]).unwrap()[2..].to_string()
        } else {
            v.to_string()
        }
    };
    let mut out = text.to_string();
    if out.contains("<HANDLE>") {
        out = out.replace("<HANDLE>", &value(&seen.handle, "<HANDLE>"));
    }
    if out.contains("<TASK>") {
        out = out.replace("<TASK>", &value(&seen.task, "<TASK>"));
    }
    while let Some(at) = out.find("<REPEAT ") {
        let end = at + out[at..].find('>').expect("<REPEAT n x> is closed");
        let (n, x) = out[at + "<REPEAT ".len()..end]
            .split_once(' ')
            .expect("<REPEAT n x>");
        let expanded = x.repeat(n.parse().expect("<REPEAT n x> with a number n"));
        out.replace_range(at..=end, &expanded);
    }
    out
}

fn render(r: &RawResponse) -> String {
    let mut headers: Vec<_> = r
        .headers
        .iter()
        .filter(|(k, _)| k != "date" && k != "content-length")
        .map(|(k, v)| format!("{k}: {}", normalize(v)))
        .collect();
    headers.sort();
    format!(
        "<<< {}\n{}\n\n{}",
        r.status,
        headers.join("\n"),
        normalize(&r.body)
    )
}

fn render_request(e: &Exchange) -> String {
    let mut s = format!(">>> {} {}\n", e.method, e.path);
    for (k, v) in &e.headers {
        s.push_str(&format!("{k}: {v}\n"));
    }
    s.push('\n');
    s.push_str(&e.body);
    s
}

#[tokio::test]
async fn wire_fixtures() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/wire");
    let bless = std::env::var("SQSIM_BLESS").is_ok();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "http"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    let mut failures = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let (preamble, exchanges) = parse(&text);
        let server = start_with(config_of(&preamble)).await;
        let mut blessed: Vec<String> = preamble.clone();
        let mut seen = Seen::default();
        for (i, (ex, expected)) in exchanges.iter().enumerate() {
            let headers: Vec<(&str, &str)> = ex
                .headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let form = headers.iter().any(|(k, v)| {
                k.eq_ignore_ascii_case("content-type") && v.contains("x-www-form-urlencoded")
            });
            let body = fill(&ex.body.replace("\\r", "\r"), &seen, form);
            let path = fill(&ex.path, &seen, true);
            let r = raw(&server, &ex.method, &path, &headers, body.as_bytes()).await;
            seen.note(&r.body);
            let actual = render(&r);
            if actual != *expected && !bless {
                failures.push(format!(
                    "{} exchange {}:\n--- expected\n{expected}\n--- actual\n{actual}",
                    file.display(),
                    i + 1
                ));
            }
            blessed.push(render_request(ex));
            blessed.push(actual);
        }
        if bless {
            std::fs::write(&file, blessed.join("\n") + "\n").unwrap();
        }
        server.shutdown().await;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
