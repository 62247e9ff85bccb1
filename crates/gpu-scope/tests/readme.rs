//! The README's programs are the `gpu` crate's doctests (which compile and
//! run them): this keeps each README block the same as the crate-doc block
//! under the same heading.

/// The first code block after `heading` in `text`, opened by `fence`.
fn block_after<'a>(text: &'a str, heading: &str, fence: &str) -> &'a str {
    let section = &text[text
        .find(heading)
        .unwrap_or_else(|| panic!("a section {heading:?}"))..];
    let start = section
        .find(fence)
        .unwrap_or_else(|| panic!("a code block under {heading:?}"))
        + fence.len();
    section[start..start + section[start..].find("```").unwrap()].trim_end()
}

#[test]
fn the_readme_programs_are_the_crate_doctests() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let lib = std::fs::read_to_string(format!("{root}/crates/gpu-scope/src/lib.rs")).unwrap();
    let doc: String = lib
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .map(|l| {
            l.strip_prefix("//! ")
                .unwrap_or(l.strip_prefix("//!").unwrap())
        })
        .collect::<Vec<_>>()
        .join("\n");
    for heading in [
        "## Getting started",
        "## Parallel iterators over chunks",
        "## Bring your own kernel",
        "## Capturing a scope into a graph",
    ] {
        assert_eq!(
            block_after(&readme, heading, "```rust\n"),
            block_after(&doc, heading, "```\n"),
            "the README's block under {heading:?} and the crate doc's differ"
        );
    }
}

#[test]
fn the_readme_kernel_block_is_at_most_25_lines() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let lines = block_after(&readme, "## Bring your own kernel", "```rust\n")
        .lines()
        .count();
    assert!(lines <= 25, "{lines} lines");
}
