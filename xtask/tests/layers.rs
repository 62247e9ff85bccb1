//! gpu-sched's layer map, checked (issue 37 item 2): the table in
//! `crates/gpu-sched/src/lib.rs` ("Layout") is the one place the order is
//! written. This test reads it, checks that it lists every module of the
//! crate once, and checks every `crate::` path under `src/` (imports,
//! paths in code, `$crate::` in macros, test modules included; comments and
//! string literals are skipped) against it: a module names only modules
//! of layers below its own, but for [`EXCEPTIONS`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The edges allowed against the order: (file under `src/`, the module it
/// names). Each says why it is there and what removes it; lib.rs's
/// "Layout" names each file too. An exception that matches no upward edge
/// fails the test: whoever removes an edge removes its line here.
const EXCEPTIONS: &[(&str, &str)] = &[
    // Blocking a task's stream on a gate launches the gate kernel, a
    // `Builtin` of `typed`, which takes a `TaskContext`: the
    // `context`/`typed` pair, kept on purpose (no issue removes it).
    ("context/gate.rs", "typed"),
    // The pool's unit tests open a whole runtime to get a driver and its
    // streams: test builds only, kept.
    ("pool/test.rs", "runtime"),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/gpu-sched/src")
}

/// One layer of lib.rs's table: its modules, each with whether it is
/// marked a folder (`name/`).
type Layers = Vec<Vec<(String, bool)>>;

/// The table in lib.rs's "Layout": the ```text block whose lines start
/// with a layer number, `N  module, folder/, ..: what they are`, numbered
/// from 0; lines without a number continue the description.
fn layers(lib: &str) -> Layers {
    let start = lib
        .find("//! # Layout")
        .expect("lib.rs has a `# Layout` section");
    let mut lines = lib[start..].lines().map(|l| l.trim_start_matches("//!"));
    lines
        .by_ref()
        .find(|l| l.trim() == "```text")
        .expect("lib.rs's Layout has a ```text block");
    let mut out: Layers = Vec::new();
    for line in lines.take_while(|l| l.trim() != "```") {
        let line = line.trim();
        let digits = line.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            continue;
        }
        let n: usize = line[..digits].parse().expect("a layer number");
        assert_eq!(
            n,
            out.len(),
            "lib.rs's layers are numbered 0, 1, ..: `{line}`"
        );
        let (mods, _what) = line[digits..]
            .split_once(':')
            .unwrap_or_else(|| panic!("`{line}`: `N  modules: what they are`"));
        out.push(
            mods.split(',')
                .map(|m| {
                    let m = m.trim();
                    let name = m.trim_end_matches('/');
                    (name.to_string(), name.len() != m.len())
                })
                .collect(),
        );
    }
    out
}

/// `text` with comments, string and character literals blanked out, so
/// that only code is searched.
fn code_only(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        let prev_ident = i > 0 && ident(c[i - 1]);
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if let Some((hashes, mut j)) = raw_string(&c, i).filter(|_| !prev_ident) {
            loop {
                if c[j] == '"' && (1..=hashes).all(|k| c.get(j + k) == Some(&'#')) {
                    i = j + 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
        } else if c[i] == '"' {
            i += 1;
            while c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c[i] == '\'' && c.get(i + 1) == Some(&'\\') {
            // '\n', '\'', '\u{..}'
            i += 2;
            while c[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if c[i] == '\'' && c.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push_str("' '");
        } else {
            // Code, or a lifetime's quote.
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// A raw string literal at `i` (`r".."`, `r#".."#`, `br".."`): its number
/// of `#`s and where its text starts.
fn raw_string(c: &[char], i: usize) -> Option<(usize, usize)> {
    let mut j = i + match (c[i], c.get(i + 1)) {
        ('r', _) => 1,
        ('b', Some('r')) => 2,
        _ => return None,
    };
    let hashes = c[j..].iter().take_while(|&&ch| ch == '#').count();
    j += hashes;
    (c.get(j) == Some(&'"')).then_some((hashes, j + 1))
}

/// The paths of a use tree, each with the name it binds: `a::{b, c::{d,
/// e as f}}` gives `a::b` (`b`), `a::c::d` (`d`), `a::c::e` (`f`).
fn flatten(tree: &str) -> Vec<(Vec<String>, String)> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let (path, alias) = tree.split_once(" as ").unwrap_or((tree, ""));
        let segs: Vec<String> = path.split("::").map(|s| s.trim().to_string()).collect();
        let name = if alias.trim().is_empty() {
            segs[segs.len() - 1].clone()
        } else {
            alias.trim().to_string()
        };
        return vec![(segs, name)];
    };
    let prefix: Vec<String> = tree[..open]
        .split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let (mut depth, mut from, mut parts) = (0, 0, Vec::new());
    for (k, ch) in inner.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[from..k]);
                from = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[from..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(flatten)
        .map(|(rest, name)| (prefix.iter().cloned().chain(rest).collect(), name))
        .collect()
}

/// Every path that follows `crate::` (or `$crate::`) in `code`, as the use
/// trees written there, flattened.
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|ch| ch.is_alphanumeric() || ch == '_') {
            continue;
        }
        // The path: identifiers, `::`, and braced groups after `::`.
        let rest = &code[at + "crate::".len()..];
        let (mut end, mut depth) = (0, 0);
        for (k, ch) in rest.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' if depth > 0 => depth -= 1,
                ch if depth > 0 || ch.is_alphanumeric() || ch == '_' || ch == ':' => {}
                _ => break,
            }
            end = k + ch.len_utf8();
            if depth == 0 && ch == '}' {
                break;
            }
        }
        let tree = rest[..end].trim_end_matches(':');
        out.extend(flatten(tree).into_iter().map(|(path, _)| path));
    }
    out
}

/// lib.rs's declarations: its file modules, its inline modules, and the
/// module each name the root re-exports comes from (`None`: another
/// crate's).
struct Root {
    mods: BTreeSet<String>,
    inline: BTreeSet<String>,
    names: BTreeMap<String, Option<String>>,
}

fn root(lib: &str) -> Root {
    let code = code_only(lib);
    let mut mods = BTreeSet::new();
    let mut inline = BTreeSet::new();
    for line in code.lines().map(str::trim) {
        let decl = line
            .strip_prefix("pub mod ")
            .or_else(|| line.strip_prefix("pub(crate) mod "))
            .or_else(|| line.strip_prefix("mod "));
        if let Some(d) = decl {
            if let Some(name) = d.strip_suffix(';') {
                mods.insert(name.trim().to_string());
            } else if let Some(name) = d.strip_suffix('{') {
                inline.insert(name.trim().to_string());
            }
        }
    }
    let mut names = BTreeMap::new();
    for (at, _) in code.match_indices("pub use ") {
        let stmt = &code[at + "pub use ".len()..];
        let stmt = &stmt[..stmt.find(';').expect("a `pub use` ends")];
        for (path, name) in flatten(stmt) {
            let first = path.iter().find(|s| *s != "crate").expect("a path");
            names.insert(name, mods.contains(first).then(|| first.clone()));
        }
    }
    Root {
        mods,
        inline,
        names,
    }
}

/// An edge: (file under `src/`, its module, the module it names).
type Edge = (String, String, String);

fn edges(src: &Path, root: &Root) -> Vec<Edge> {
    let mut files = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("read src/") {
            let p = e.expect("a directory entry").path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    let mut out = BTreeSet::new();
    for p in files {
        let rel = p.strip_prefix(src).expect("under src/");
        let rel = rel.to_string_lossy().replace('\\', "/");
        if rel == "lib.rs" {
            continue;
        }
        let module = rel
            .split('/')
            .next()
            .expect("a path")
            .trim_end_matches(".rs");
        let text = std::fs::read_to_string(&p).expect("read a source file");
        for path in crate_paths(&code_only(&text)) {
            let mut seg = path.iter().map(String::as_str);
            let mut first = seg.next().unwrap_or_default();
            if root.inline.contains(first) {
                first = seg.next().unwrap_or_default();
            }
            let to = if root.mods.contains(first) {
                first.to_string()
            } else {
                match root.names.get(first) {
                    Some(Some(m)) => m.clone(),
                    Some(None) => continue,
                    None => panic!(
                        "{rel}: `crate::{}` names nothing lib.rs declares",
                        path.join("::")
                    ),
                }
            };
            if to != module {
                out.insert((rel.clone(), module.to_string(), to));
            }
        }
    }
    out.into_iter().collect()
}

#[test]
fn gpu_sched_modules_import_only_layers_below_theirs() {
    let src = src();
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("read lib.rs");
    let root = root(&lib);
    let table = layers(&lib);
    let mut problems = String::new();

    // The table lists each module once, with folders marked.
    let mut layer_of = BTreeMap::new();
    for (n, layer) in table.iter().enumerate() {
        for (m, folder) in layer {
            if layer_of.insert(m.clone(), n).is_some() {
                writeln!(problems, "lib.rs's table lists `{m}` twice").unwrap();
            }
            if !root.mods.contains(m) {
                writeln!(
                    problems,
                    "lib.rs's table lists `{m}`, which lib.rs does not declare"
                )
                .unwrap();
            }
            let is_folder = src.join(m).join("mod.rs").is_file();
            if is_folder != *folder {
                let (is, mark) = if is_folder {
                    ("a folder", "`name/`")
                } else {
                    ("a file", "`name`")
                };
                writeln!(problems, "`{m}` is {is}: write it {mark} in lib.rs's table").unwrap();
            }
        }
    }
    for m in root.mods.difference(&layer_of.keys().cloned().collect()) {
        writeln!(problems, "`mod {m}` is in no layer of lib.rs's table").unwrap();
    }

    // Every edge goes down, but for the exceptions; each exception is
    // used, and named in lib.rs.
    let mut used = BTreeSet::new();
    for (file, from, to) in edges(&src, &root) {
        let (Some(&lf), Some(&lt)) = (layer_of.get(&from), layer_of.get(&to)) else {
            continue; // reported above
        };
        if lt < lf {
            continue;
        }
        if EXCEPTIONS.contains(&(file.as_str(), to.as_str())) {
            used.insert((file, to));
            continue;
        }
        let side = if lt == lf { "beside it" } else { "above it" };
        writeln!(
            problems,
            "{file}: `{from}` (layer {lf}) names `{to}` (layer {lt}), {side}: move the code, \
             change the order in lib.rs's table, or add an exception (why, and what removes it) \
             to xtask/tests/layers.rs"
        )
        .unwrap();
    }
    for &(file, to) in EXCEPTIONS {
        if !used.contains(&(file.to_string(), to.to_string())) {
            writeln!(
                problems,
                "exception ({file} -> {to}) matches no edge against the order: remove it"
            )
            .unwrap();
        }
        if !lib.contains(&format!("`{file}`")) {
            writeln!(
                problems,
                "exception ({file} -> {to}): lib.rs's Layout does not name `{file}`"
            )
            .unwrap();
        }
    }
    assert!(
        problems.is_empty(),
        "gpu-sched's layers (lib.rs, \"Layout\"):\n{problems}"
    );
}

#[test]
fn the_scanner_reads_use_trees_and_skips_comments_and_strings() {
    let code = code_only(
        "use crate::{a::B, c::{d, e as f}, G};\n\
         // crate::h\n/* crate::i /* nested */ crate::j */\n\
         let s = \"crate::k\"; let r = r#\"crate::l\"#; let q = '\"'; fn x<'a>() {}\n\
         let t = crate::m::n(); $crate::o::P; gpu_crate::q;",
    );
    let firsts: Vec<String> = crate_paths(&code)
        .into_iter()
        .map(|p| p[0].clone())
        .collect();
    assert_eq!(firsts, ["a", "c", "c", "G", "m", "o"]);
}
