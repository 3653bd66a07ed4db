//! No import circle between source files: the crate's layering (src/lib.rs's Layout,
//! checked module by module in `readme.rs`) holds file by file too. A file that names
//! another — `use crate::engine::queue::Queue`, `super::fifo::group_footprint(…)`, a child
//! module's item from its `mod.rs` — depends on it, and no file depends on itself through
//! others. A file naming an item of its own folder's `mod.rs` (or of any folder above it) is
//! not counted: a folder's `mod.rs` is where names its files share belong, above them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every source file of the library (not `src/bin`, not tests), by module path (`engine::fifo`).
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    fn walk(dir: &Path, prefix: &str, out: &mut BTreeMap<String, PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap().to_str().unwrap().to_string();
            if path.is_dir() {
                if name == "bin" && prefix.is_empty() {
                    continue;
                }
                walk(&path, &format!("{prefix}{name}::"), out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                if name == "tests" || name.ends_with("_tests") {
                    continue;
                }
                let module = match name.as_str() {
                    "mod" => prefix.trim_end_matches("::").to_string(),
                    "lib" | "main" if prefix.is_empty() => continue,
                    _ => format!("{prefix}{name}"),
                };
                out.insert(module, path);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, "", &mut out);
    out
}

/// A file's code without its inline `#[cfg(test)] mod tests { … }` and comments.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.split("#[cfg(test)]\nmod tests {").next().unwrap();
    text.lines()
        .map(|l| match l.find("//") {
            Some(at) if !l[..at].contains('"') => &l[..at],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Where the `}` closing a group that starts just before `text` is (nested groups skipped).
pub(crate) fn closing_brace(text: &str) -> Option<usize> {
    let mut depth = 0;
    text.find(|c| {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return true,
            '}' => depth -= 1,
            _ => {}
        }
        false
    })
}

/// The paths a file names: each `a::b::c` (with `use` groups `a::{b, c::d}` expanded), as
/// segments.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let bytes = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !ident(bytes[i]) || (i > 0 && (ident(bytes[i - 1]) || bytes[i - 1] == b':')) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && (ident(bytes[i]) || code[i..].starts_with("::")) {
            i += if bytes[i] == b':' { 2 } else { 1 };
        }
        let path = &code[start..i];
        if !path.contains("::") {
            continue;
        }
        let path = path.trim_end_matches("::");
        let base: Vec<String> = path.split("::").map(str::to_string).collect();
        if code[i..].starts_with('{') {
            // A group: every member, one level deep at a time.
            let end = closing_brace(&code[i + 1..]).map_or(code.len(), |e| i + 1 + e);
            let group = &code[i + 1..end];
            let mut depth = 0;
            let mut member = String::new();
            let mut members = Vec::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => members.push(std::mem::take(&mut member)),
                    _ => {}
                }
                if c != ',' || depth != 0 {
                    member.push(c);
                }
            }
            members.push(member);
            for m in members {
                let m = m.trim();
                if m.is_empty() {
                    continue;
                }
                for sub in paths_in(m).into_iter().chain([vec![m
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or_default()
                    .to_string()]])
                {
                    let mut p = base.clone();
                    p.extend(sub);
                    out.push(p);
                }
            }
            i = end;
        } else {
            out.push(base);
        }
    }
    out
}

/// The module a path names from a file of module `here`: the longest prefix that is a
/// file, or `None` for anything outside the crate (std, a dependency, a local name).
fn resolve(path: &[String], here: &str, files: &BTreeMap<String, PathBuf>) -> Option<String> {
    let mut base: Vec<String> = here
        .split("::")
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        // A child module's item, named without `self::`.
        Some(first) => {
            let child = format!("{}::{first}", base.join("::"));
            if !files.contains_key(child.trim_start_matches("::")) {
                return None;
            }
        }
        None => return None,
    }
    let mut segs = base;
    let mut best = None;
    for s in rest {
        segs.push(s.clone());
        if files.contains_key(&segs.join("::")) {
            best = Some(segs.join("::"));
        }
    }
    best
}

#[test]
fn no_source_file_depends_on_itself_through_others() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = modules(&src);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, path) in &files {
        let code = code_of(path);
        for p in paths_in(&code) {
            let Some(target) = resolve(&p, module, &files) else {
                continue;
            };
            // Itself, or a folder above it (where shared names belong): not an edge.
            if target == *module || module.starts_with(&format!("{target}::")) {
                continue;
            }
            edges.entry(module.clone()).or_default().insert(target);
        }
    }
    // Tarjan's strongly connected components: each of more than one file is a circle.
    let mut circles = Vec::new();
    let names: Vec<&String> = files.keys().collect();
    let index_of: BTreeMap<&String, usize> =
        names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let n = names.len();
    let (mut index, mut low, mut on) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut next) = (Vec::new(), 0);
    fn connect(
        v: usize,
        names: &[&String],
        index_of: &BTreeMap<&String, usize>,
        edges: &BTreeMap<String, BTreeSet<String>>,
        st: &mut (Vec<usize>, Vec<usize>, Vec<bool>, Vec<usize>, usize),
        circles: &mut Vec<Vec<String>>,
    ) {
        st.0[v] = st.4;
        st.1[v] = st.4;
        st.4 += 1;
        st.3.push(v);
        st.2[v] = true;
        for w in edges.get(names[v]).into_iter().flatten() {
            let w = index_of[w];
            if st.0[w] == usize::MAX {
                connect(w, names, index_of, edges, st, circles);
                st.1[v] = st.1[v].min(st.1[w]);
            } else if st.2[w] {
                st.1[v] = st.1[v].min(st.0[w]);
            }
        }
        if st.1[v] == st.0[v] {
            let mut component = Vec::new();
            while let Some(w) = st.3.pop() {
                st.2[w] = false;
                component.push(names[w].clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                circles.push(component);
            }
        }
    }
    let mut st = (
        std::mem::take(&mut index),
        std::mem::take(&mut low),
        std::mem::take(&mut on),
        std::mem::take(&mut stack),
        std::mem::take(&mut next),
    );
    for v in 0..n {
        if st.0[v] == usize::MAX {
            connect(v, &names, &index_of, &edges, &mut st, &mut circles);
        }
    }
    let described: Vec<String> = circles
        .iter()
        .map(|c| {
            let inner: Vec<String> = c
                .iter()
                .map(|m| {
                    let to: Vec<&String> = edges[m].iter().filter(|t| c.contains(t)).collect();
                    format!("{m} → {to:?}")
                })
                .collect();
            inner.join("; ")
        })
        .collect();
    assert!(
        circles.is_empty(),
        "files that depend on themselves through others:\n{}",
        described.join("\n")
    );
}
