//! The README's first program is the `gpu` crate's first doctest (which
//! compiles and runs it): this keeps the two the same.

#[test]
fn the_readme_program_is_the_crate_doctest() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let lib = std::fs::read_to_string(format!("{root}/crates/gpu-scope/src/lib.rs")).unwrap();
    let section = &readme[readme
        .find("## Getting started")
        .expect("a Getting started section")..];
    let start = section.find("```rust\n").expect("a rust block") + "```rust\n".len();
    let in_readme = &section[start..start + section[start..].find("```").unwrap()];
    let doc: String = lib
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .map(|l| {
            l.strip_prefix("//! ")
                .unwrap_or(l.strip_prefix("//!").unwrap())
        })
        .collect::<Vec<_>>()
        .join("\n");
    let start = doc.find("```\n").expect("a doctest") + "```\n".len();
    let in_doc = &doc[start..start + doc[start..].find("```").unwrap()];
    assert_eq!(in_readme.trim_end(), in_doc.trim_end());
}
