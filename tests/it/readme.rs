//! The examples in the README and the docs are real tests: every code block preceded by
//! `<!-- file: PATH -->`, in README.md or any docs/*.md, must equal that file, which its own
//! test runner executes. The crate doc's Layout section is checked against the code the same
//! way.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[test]
fn doc_examples_match_the_files_the_suite_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages.insert(0, root.join("README.md"));
    let mut checked = 0;
    for page in &pages {
        let name = page.strip_prefix(root).unwrap().display().to_string();
        let text = std::fs::read_to_string(page).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut rest = text.as_str();
        while let Some(at) = rest.find("<!-- file: ") {
            rest = &rest[at + "<!-- file: ".len()..];
            let (path, after) = rest
                .split_once(" -->")
                .unwrap_or_else(|| panic!("{name}: a marker ends with -->"));
            let fence_start = after
                .find("```")
                .unwrap_or_else(|| panic!("{name}: a code block follows the marker for {path}"));
            let block = &after[fence_start..];
            let body_start = block.find('\n').unwrap() + 1;
            let body_end = block[body_start..]
                .find("\n```")
                .unwrap_or_else(|| panic!("{name}: the block for {path} is not closed"))
                + body_start
                + 1;
            let snippet = &block[body_start..body_end];
            let file = std::fs::read_to_string(root.join(path))
                .unwrap_or_else(|e| panic!("{name}: {path}: {e}"));
            assert_eq!(
                snippet, file,
                "{name}: the block for {path} differs from the file"
            );
            checked += 1;
            rest = &block[body_end..];
        }
    }
    assert!(
        checked >= 6,
        "expected at least 6 examples (the packaged pytest and Jest ones, the Rust one, the \
         ones without the packages, the realism ones), found {checked}"
    );
}

/// The crate doc's Layout section (src/lib.rs) names every module, file by file, and for each
/// top-level module exactly the others it uses; a module uses only modules listed below it.
#[test]
fn crate_layout_names_every_module_and_what_it_uses() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let declared: BTreeSet<String> = lib
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = ["pub(crate) mod ", "pub mod ", "mod "]
                .iter()
                .find_map(|p| l.strip_prefix(p))?;
            rest.strip_suffix(';').map(str::to_string)
        })
        .collect();
    // Each bullet: "- `name` (uses: a, b) — text", continued on the following lines.
    let mut order = Vec::new();
    let mut uses: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut text: BTreeMap<String, String> = BTreeMap::new();
    for line in lib.lines().filter_map(|l| l.strip_prefix("//!")) {
        if let Some(rest) = line.strip_prefix(" - `") {
            let (name, rest) = rest.split_once("` (uses: ").expect("- `name` (uses: …)");
            let (list, _) = rest.split_once(')').unwrap();
            let list = match list {
                "nothing" => BTreeSet::new(),
                l => l.split(", ").map(str::to_string).collect(),
            };
            order.push(name.to_string());
            uses.insert(name.to_string(), list);
            text.insert(name.to_string(), rest.to_string());
        } else if line.starts_with("   ") {
            // A continuation of the last bullet; indented lines after the section (a code
            // example's) belong to no bullet.
            if let Some(last) = order.last().filter(|l| !l.is_empty()) {
                text.get_mut(last).unwrap().push_str(line);
            }
        } else if line.starts_with(" #") {
            order.push(String::new()); // the section ended
        }
    }
    order.retain(|n| !n.is_empty());
    assert_eq!(
        order.iter().cloned().collect::<BTreeSet<_>>(),
        declared,
        "the Layout section lists exactly the modules lib.rs declares"
    );
    for (i, name) in order.iter().enumerate() {
        let files = rust_files(&src, name);
        let used = crate_paths(&files, &declared, name);
        assert_eq!(used, uses[name], "what `{name}` uses");
        // The HTTP layer waits on what the engine says an answer relies on; it never
        // reaches past the engine into the store.
        assert!(
            !(name == "server" && used.contains("store")),
            "`server` must not use `store`"
        );
        for u in &used {
            assert!(
                order[i + 1..].contains(u),
                "`{name}` uses `{u}`, which the Layout lists above it"
            );
        }
        let dir = src.join(name);
        for f in files.iter().filter(|f| f.starts_with(&dir)) {
            for part in f.strip_prefix(&dir).unwrap().with_extension("").iter() {
                let part = part.to_str().unwrap();
                assert!(
                    part == "mod" || text[name].contains(&format!("`{part}`")),
                    "the Layout's `{name}` line does not name `{part}`"
                );
            }
        }
    }
}

/// A module's source files: `src/NAME.rs`, or every `.rs` file under `src/NAME/`.
fn rust_files(src: &Path, name: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let dir = src.join(name);
    let mut out = Vec::new();
    if dir.is_dir() {
        walk(&dir, &mut out);
    } else {
        out.push(src.join(format!("{name}.rs")));
    }
    out.sort();
    out
}

/// The other top-level modules that `files` name through `crate::`, outside their
/// `#[cfg(test)] mod tests`.
fn crate_paths(files: &[PathBuf], modules: &BTreeSet<String>, own: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for f in files {
        // A module's tests (an inline `mod tests { … }`, or a `tests.rs` of their own) may
        // reach anywhere; a `mod tests;` declaration ends nothing.
        if f.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        let code = text.split("#[cfg(test)]\nmod tests {").next().unwrap();
        for (at, _) in code.match_indices("crate::") {
            if code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            let rest = &code[at + "crate::".len()..];
            let names: Vec<&str> = match rest.strip_prefix('{') {
                // `crate::{a::x, b}`: the first segment of each path in the group.
                Some(group) => {
                    let end = crate::file_circles::closing_brace(group).unwrap_or(group.len());
                    group[..end]
                        .split(',')
                        .map(|p| p.trim().split("::").next().unwrap_or_default())
                        .collect()
                }
                None => vec![rest
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or_default()],
            };
            for n in names {
                if n != own && modules.contains(n) {
                    used.insert(n.to_string());
                }
            }
        }
    }
    used
}
