//! Golden wire exchanges: each file in `fixtures/wire/` is a sequence of raw requests and the
//! exact responses sqsim must give, after replacing what varies between runs (request and
//! message ids, receipt handles, timestamps, FIFO sequence numbers) with placeholders. `SQSIM_BLESS=1` rewrites the
//! files from the current output; review the diff before committing it.

mod common;

use std::path::Path;

use common::{raw, start, RawResponse};

struct Exchange {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: String,
}

fn parse(text: &str) -> (Vec<String>, Vec<(Exchange, String)>) {
    let mut preamble = Vec::new();
    let mut out = Vec::new();
    let mut blocks = text.split("\n>>> ");
    let first = blocks.next().unwrap_or_default();
    let mut rest: Vec<String> = Vec::new();
    if let Some(req) = first.strip_prefix(">>> ") {
        rest.push(req.to_string());
    } else {
        preamble.extend(first.lines().map(str::to_string));
    }
    rest.extend(blocks.map(str::to_string));
    for block in rest {
        let (request, response) = block.split_once("\n<<< ").expect("<<< response marker");
        let (head, body) = request.split_once("\n\n").unwrap_or((request, ""));
        let mut lines = head.lines();
        let (method, path) = lines.next().unwrap().split_once(' ').unwrap();
        let headers = lines
            .map(|l| {
                let (k, v) = l.split_once(':').unwrap();
                (k.trim().to_string(), v.trim().to_string())
            })
            .collect();
        out.push((
            Exchange {
                method: method.to_string(),
                path: path.to_string(),
                headers,
                body: body.trim_end_matches('\n').to_string(),
            },
            format!("<<< {}", response.trim_end_matches('\n')),
        ));
    }
    (preamble, out)
}

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
        } else if boundary && s[i..].starts_with("AQEB") {
            out.push_str("<HANDLE>");
            i += 4;
            while i < b.len()
                && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'+' | b'/' | b'='))
            {
                i += 1;
            }
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
        let server = start().await;
        let mut blessed: Vec<String> = preamble.clone();
        for (i, (ex, expected)) in exchanges.iter().enumerate() {
            let headers: Vec<(&str, &str)> = ex
                .headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let body = ex.body.replace("\\r", "\r");
            let r = raw(&server, &ex.method, &ex.path, &headers, body.as_bytes()).await;
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
