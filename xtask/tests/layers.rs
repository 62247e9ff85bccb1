//! gpu-sched's layer map, checked (issue 37 item 2): the table in
//! `crates/gpu-sched/src/lib.rs` ("Layout") is the one place the order is
//! written. This test reads it, checks that it lists every module of the
//! crate once, and checks every `crate::` path under `src/` (imports,
//! paths in code, `$crate::` in macros, test modules included; comments and
//! string literals are skipped) against it: a module names only modules
//! of layers below its own, but for [`EXCEPTIONS`].
//!
//! A row is a module of the crate's root (`context/`: the folder and every
//! file in it), or a module of a folder given a row of its own
//! (`kernel/typed`: kernel/typed.rs and the files under kernel/typed/),
//! which its folder's row then leaves out. Paths relative to a file
//! (`super::`, `self::`, a child module's) are checked too, so that the
//! modules of one folder in rows of their own name each other only down.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The edges allowed against the order: (file under `src/`, the module it
/// names). Each says why it is there and what removes it; lib.rs's
/// "Layout" names each file too. An exception that matches no upward edge
/// fails the test: whoever removes an edge removes its line here.
const EXCEPTIONS: &[(&str, &str)] = &[
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
/// with a layer number, `N  module, folder/, folder/module, ..: what they
/// are`, numbered from 0; lines without a number continue the
/// description.
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

/// Every path that follows `start` (`crate::`, `super::`, ..) in `code`
/// where `start` does not continue an identifier or a path (`$crate::`
/// counts), as the use trees written there, flattened; each with where its
/// tree starts and ends.
fn paths_after(code: &str, start: &str) -> Vec<(usize, usize, Vec<String>)> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices(start) {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|ch| ch.is_alphanumeric() || ch == '_' || ch == ':') {
            continue;
        }
        // The path: identifiers, `::`, and braced groups after `::`.
        let rest = &code[at + start.len()..];
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
        let ends = at + start.len() + end;
        out.extend(flatten(tree).into_iter().map(|(path, _)| (at, ends, path)));
    }
    out
}

/// Every path that follows `crate::` (or `$crate::`) in `code`.
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    paths_after(code, "crate::")
        .into_iter()
        .map(|(_, _, p)| p)
        .collect()
}

/// The `mod name;` a file's `code` declares (its child files) and, for
/// each byte of it, in how many inline `mod name { .. }` it is.
fn mods(code: &str) -> (Vec<String>, Vec<usize>) {
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let (mut children, mut opens) = (Vec::new(), BTreeSet::new());
    for (at, _) in code.match_indices("mod ") {
        if code[..at].chars().next_back().is_some_and(ident) {
            continue;
        }
        let rest = code[at + 4..].trim_start();
        let name: String = rest.chars().take_while(|&ch| ident(ch)).collect();
        let after = rest[name.len()..].trim_start();
        let brace = code.len() - after.len();
        match after.chars().next() {
            Some(';') if !name.is_empty() => children.push((at, name)),
            Some('{') if !name.is_empty() => {
                opens.insert(brace);
            }
            _ => {}
        }
    }
    let (mut depth, mut open, mut inline) = (0, Vec::new(), Vec::with_capacity(code.len()));
    for (k, b) in code.bytes().enumerate() {
        if b == b'{' {
            depth += 1;
            if opens.contains(&k) {
                open.push(depth);
            }
        }
        inline.push(open.len());
        if b == b'}' {
            if open.last() == Some(&depth) {
                open.pop();
            }
            depth -= 1;
        }
    }
    let children = children
        .into_iter()
        .filter(|(at, _)| inline[*at] == 0)
        .map(|(_, name)| name)
        .collect();
    (children, inline)
}

/// Every path of the crate that `code`, the file of module `module`
/// (`["kernel", "typed"]` for kernel/typed.rs), names, from the crate's
/// root: `crate::` paths, and the paths relative to the file: `super::`,
/// `self::` and a child's (`typed::` in kernel/mod.rs), which reach a
/// module of a row of its own as well (`kernel/typed`). Paths within an
/// inline module (`mod sealed { use super::X; }`) stay in the file.
fn crate_paths_from(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let (children, inline) = mods(code);
    let joined = |base: &[String], rest: &[String]| -> Vec<String> {
        base.iter().chain(rest).cloned().collect()
    };
    // Every tree, as (start, end, the path from the root); one inside
    // another's braces (`super::{a, super::b}`) is read with it.
    let mut found = Vec::new();
    for (at, end, p) in paths_after(code, "crate::") {
        found.push((at, end, Some(p)));
    }
    for (at, end, p) in paths_after(code, "super::") {
        let more = p.iter().take_while(|s| *s == "super").count();
        let up = (1 + more).saturating_sub(inline[at]);
        let path = (up > 0 && up <= module.len())
            .then(|| joined(&module[..module.len() - up], &p[more..]));
        found.push((at, end, path));
    }
    for (at, end, p) in paths_after(code, "self::") {
        found.push((at, end, (inline[at] == 0).then(|| joined(module, &p))));
    }
    for child in &children {
        for (at, end, p) in paths_after(code, &format!("{child}::")) {
            let path = joined(&joined(module, std::slice::from_ref(child)), &p);
            found.push((at, end, (inline[at] == 0).then_some(path)));
        }
    }
    let spans: Vec<(usize, usize)> = found.iter().map(|&(at, end, _)| (at, end)).collect();
    found
        .into_iter()
        .filter(|&(at, _, _)| !spans.iter().any(|&(a, e)| a < at && at < e))
        .filter_map(|(_, _, path)| path)
        .collect()
}

/// The row of lib.rs's table that the module at `path` is in: the longest
/// start of it that the table lists (`kernel/typed` for
/// `kernel::typed::Kernel`, `context` for `context::checks`).
fn row_of(path: &[String], rows: &BTreeSet<String>) -> String {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].join("/"))
        .find(|r| rows.contains(r))
        .unwrap_or_else(|| path[0].clone())
}

/// lib.rs's declarations: its file modules, its inline modules, and the
/// path each name the root re-exports comes from (`None`: another
/// crate's).
struct Root {
    mods: BTreeSet<String>,
    inline: BTreeSet<String>,
    names: BTreeMap<String, Option<Vec<String>>>,
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
            let path: Vec<String> = path.into_iter().filter(|s| s != "crate").collect();
            let local = mods.contains(&path[0]);
            names.insert(name, local.then_some(path));
        }
    }
    Root {
        mods,
        inline,
        names,
    }
}

/// An edge: (file under `src/`, its row, the row it names).
type Edge = (String, String, String);

/// Every edge between rows of the table (`rows`) of the files under `src`.
fn edges(src: &Path, root: &Root, rows: &BTreeSet<String>) -> Vec<Edge> {
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
        // The file's module: kernel/typed.rs is `kernel::typed`,
        // kernel/mod.rs `kernel`.
        let mut module: Vec<String> = rel
            .trim_end_matches(".rs")
            .split('/')
            .map(str::to_string)
            .collect();
        if module.len() > 1 && module.last().is_some_and(|m| m == "mod") {
            module.pop();
        }
        let from = row_of(&module, rows);
        let text = std::fs::read_to_string(&p).expect("read a source file");
        for path in crate_paths_from(&code_only(&text), &module) {
            let mut path = path.as_slice();
            if path.first().is_some_and(|s| root.inline.contains(s)) {
                path = &path[1..];
            }
            let Some(first) = path.first() else {
                continue;
            };
            let to = if root.mods.contains(first) {
                row_of(path, rows)
            } else {
                match root.names.get(first) {
                    Some(Some(from_path)) => row_of(from_path, rows),
                    Some(None) => continue,
                    None => panic!(
                        "{rel}: `crate::{}` names nothing lib.rs declares",
                        path.join("::")
                    ),
                }
            };
            if to != from {
                out.insert((rel.clone(), from.clone(), to));
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
            let declared = if m.contains('/') {
                // A module of a folder, in a row of its own.
                src.join(format!("{m}.rs")).is_file() || src.join(m).join("mod.rs").is_file()
            } else {
                root.mods.contains(m)
            };
            if !declared {
                writeln!(
                    problems,
                    "lib.rs's table lists `{m}`, which is not a module of src/"
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
    let rows = layer_of.keys().cloned().collect();
    for (file, from, to) in edges(&src, &root, &rows) {
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

#[test]
fn paths_relative_to_a_file_are_read_from_its_module() {
    let code = code_only(
        "use super::{X, super::Y};\n\
         pub(crate) mod typed;\nmod sealed { use super::Z; }\n\
         use self::ptx::E; let k = typed::Kernel::new(); crate::a::B;",
    );
    let module = ["kernel".to_string(), "loader".to_string()];
    let paths: Vec<String> = crate_paths_from(&code, &module)
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(
        paths,
        [
            "a::B",
            "kernel::X",
            "Y",
            "kernel::loader::ptx::E",
            "kernel::loader::typed::Kernel::new"
        ]
    );
    let rows = ["kernel", "kernel/typed", "context"]
        .map(str::to_string)
        .into();
    let row = |p: &str| {
        row_of(
            &p.split("::").map(str::to_string).collect::<Vec<_>>(),
            &rows,
        )
    };
    assert_eq!(row("kernel::typed::Kernel"), "kernel/typed");
    assert_eq!(row("kernel::ptx::entries"), "kernel");
    assert_eq!(row("context::checks"), "context");
}
