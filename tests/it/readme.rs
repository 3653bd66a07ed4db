//! The README's examples are real tests: every code block preceded by
//! `<!-- file: PATH -->` must equal that file, which its own test runner executes.

use std::path::Path;

#[test]
fn readme_examples_match_the_files_the_suite_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let mut checked = 0;
    let mut rest = readme.as_str();
    while let Some(at) = rest.find("<!-- file: ") {
        rest = &rest[at + "<!-- file: ".len()..];
        let (path, after) = rest.split_once(" -->").expect("marker ends with -->");
        let fence_start = after.find("```").expect("a code block follows the marker");
        let block = &after[fence_start..];
        let body_start = block.find('\n').unwrap() + 1;
        let body_end = block[body_start..].find("\n```").unwrap() + body_start + 1;
        let snippet = &block[body_start..body_end];
        let file =
            std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(
            snippet, file,
            "README block for {path} differs from the file"
        );
        checked += 1;
        rest = &block[body_end..];
    }
    assert!(
        checked >= 3,
        "expected the pytest, Jest and Rust examples, found {checked}"
    );
}
