//! The design note is cited by heading, and every citation names a heading
//! that exists (issue 37 item 2): the sources and READMEs say `DESIGN
//! "Streams are a resource"`, never a section number (numbers drifted: the
//! specification numbers its sections differently, and about 19 citations
//! of graphed scopes said the libraries' number). A cited heading matches
//! the start of a `## ` heading of `docs/DESIGN.md`, after its number.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` and `.md` file under `dir`, but build output.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name();
        let name = name.to_string_lossy();
        if p.is_dir() {
            if !matches!(name.as_ref(), "target" | "results" | ".git") {
                files(&p, out);
            }
        } else if name.ends_with(".rs") || name.ends_with(".md") {
            out.push(p);
        }
    }
}

/// The headings of docs/DESIGN.md, without their `§n `.
fn headings() -> Vec<String> {
    let design = std::fs::read_to_string(root().join("docs/DESIGN.md")).expect("docs/DESIGN.md");
    design
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|h| {
            let h = h.trim();
            match h.strip_prefix('§') {
                Some(rest) => rest
                    .split_once(' ')
                    .map_or(rest, |(_, title)| title)
                    .to_owned(),
                None => h.to_owned(),
            }
        })
        .collect()
}

/// The text of each `DESIGN "..."` citation in `text` (a citation may
/// wrap: its quotes close on a later line of the comment).
fn citations(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("DESIGN \"") {
        rest = &rest[i + "DESIGN \"".len()..];
        if let Some(j) = rest.find('"') {
            // Comment markers and indentation of a wrapped line out.
            let cited: Vec<&str> = rest[..j]
                .split_whitespace()
                .filter(|w| !matches!(*w, "//" | "///" | "//!" | "#" | ">"))
                .collect();
            out.push(cited.join(" "));
        }
    }
    out
}

#[test]
fn the_design_note_is_cited_by_existing_headings() {
    let heads = headings();
    assert!(heads.len() > 10, "docs/DESIGN.md has its headings");
    let mut all = Vec::new();
    for dir in ["crates", "xtask", "examples", "benches", "ci"] {
        files(&root().join(dir), &mut all);
    }
    all.push(root().join("README.md"));
    let this = Path::new(file!()).file_name().expect("a file name");
    let mut bad = Vec::new();
    let mut cited = 0;
    for f in all.iter().filter(|f| f.file_name() != Some(this)) {
        let text = std::fs::read_to_string(f).expect("a readable source");
        let name = f.strip_prefix(root()).unwrap_or(f).display().to_string();
        for (n, line) in text.lines().enumerate() {
            // A heading of the note looked up by its text (`"## §7 "`) is
            // no citation.
            if line.replace("## §", "").contains('§') {
                bad.push(format!(
                    "{name}:{}: a section number: {}",
                    n + 1,
                    line.trim()
                ));
            }
        }
        for c in citations(&text) {
            cited += 1;
            if !heads.iter().any(|h| h.starts_with(&c)) {
                bad.push(format!(
                    "{name}: DESIGN \"{c}\" is no heading of docs/DESIGN.md"
                ));
            }
        }
    }
    assert!(cited > 100, "the citations were found ({cited})");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn a_wrapped_citation_is_read_whole() {
    let text = "//! see DESIGN \"Graphs without capture\n//! by hand\" and DESIGN \"Words\".";
    assert_eq!(
        citations(text),
        vec![
            "Graphs without capture by hand".to_owned(),
            "Words".to_owned()
        ]
    );
}
