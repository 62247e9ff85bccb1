//! Tests: the table of benchmarks is whole, its ratios are made from the
//! rows it names, and its ids are in the benches and in DESIGN "Benchmarks".

use super::*;
use crate::workspace_root;
use std::fs;

fn read(path: &str) -> String {
    fs::read_to_string(workspace_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Row groups named in `text`: `benchmark_group("B1")` and the prefixes of
/// row names (`"B13/gpu-scope"`).
fn groups(text: &str) -> Vec<String> {
    let mut v = Vec::new();
    for (i, _) in text.match_indices('"') {
        let rest = &text[i + 1..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(rest.len());
        let name = &rest[..end];
        let is_id = (name.starts_with('B') && name[1..].starts_with(|c: char| c.is_ascii_digit()))
            || name == "peer"
            || name == "ledger";
        let is_row = rest[end..].starts_with('/')
            || (rest[end..].starts_with('"')
                && text.contains(&format!("benchmark_group(\"{name}\")")));
        if is_id && is_row {
            v.push(name.to_string());
        }
    }
    v
}

#[test]
fn every_row_s_id_is_in_its_code_and_in_design_s_table() {
    let design = read("docs/DESIGN.md");
    let s7 = &design[design.find("## §7 ").unwrap()..design.find("## §8 ").unwrap()];
    for b in BENCHES {
        assert!(!b.code.is_empty(), "{} names no code", b.id);
        for file in b.code {
            let text = read(file);
            assert!(
                groups(&text).iter().any(|g| g == b.id),
                "{file} names no row or group {}",
                b.id
            );
        }
        assert!(
            s7.contains(&format!("\n| {} ", b.id)),
            "DESIGN \"Benchmarks\" has no row {}",
            b.id
        );
    }
    // The committed table is the one `--report` writes.
    assert!(
        s7.contains(&format!(
            "<!-- benches:begin -->\n{}<!-- benches:end -->",
            design_table()
        )),
        "The table in DESIGN \"Benchmarks\" is not `design_table()`: run `cargo xtask bench --report`"
    );
}

#[test]
fn every_group_the_benches_measure_has_a_row() {
    let mut files = vec![workspace_root().join("crates/gpu-epoch/benches/ledger.rs")];
    for dir in ["benches", "benches/gpu"] {
        for e in fs::read_dir(workspace_root().join(dir)).unwrap().flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "rs" || x == "py") {
                files.push(p);
            }
        }
    }
    let mut seen = 0;
    for f in files {
        for g in groups(&fs::read_to_string(&f).unwrap()) {
            seen += 1;
            assert!(
                BENCHES.iter().any(|b| b.id == g),
                "{} measures {g}, which has no row in BENCHES",
                f.display()
            );
        }
    }
    assert!(seen > 20, "{seen}");
}

#[test]
fn ids_and_ratio_names_are_unique_and_each_ratio_is_its_benchmark_s() {
    let mut ids: Vec<&str> = BENCHES.iter().map(|b| b.id).collect();
    let mut names: Vec<&str> = ratios().map(|r| r.name).collect();
    let (n_ids, n_names) = (ids.len(), names.len());
    ids.sort_unstable();
    ids.dedup();
    names.sort_unstable();
    names.dedup();
    assert_eq!((ids.len(), names.len()), (n_ids, n_names));
    for b in BENCHES {
        for r in b.ratios {
            assert!(r.name.starts_with(b.id), "{} under {}", r.name, b.id);
        }
    }
}

/// Rows that give every term of `r` a value of 2 (`*` standing for `k`).
fn rows_for(r: &Ratio) -> BTreeMap<String, f64> {
    let Def::Over(a, b) = r.def else {
        return BTreeMap::new();
    };
    let mut rows = BTreeMap::new();
    for t in [a, b] {
        let name = match t {
            Term::Row(n) | Term::Twice(n) => n.replace('*', "k"),
            Term::FirstOf(ns) => ns[0].to_string(),
            Term::Least { prefix, .. } => format!("{prefix}x"),
            // A constant: no row.
            Term::Ns(_) => continue,
        };
        rows.insert(name, 2.0);
    }
    rows
}

#[test]
fn every_ratio_is_made_from_the_rows_it_names() {
    let all: Vec<&Ratio> = ratios().collect();
    for (i, r) in all.iter().enumerate() {
        let mut rows = match r.def {
            Def::Over(..) => rows_for(r),
            // The least of an earlier `*` ratio, from its rows.
            Def::LeastOf(p) => {
                let of = all[..i].iter().find(|o| o.name == p);
                rows_for(of.unwrap_or_else(|| panic!("{}: no earlier {p}", r.name)))
            }
        };
        let name = format!("ratio/{}", r.name.replace('*', "k"));
        if let Def::Over(Term::Row(a), _) = r.def {
            assert_eq!(r.name.contains('*'), a.contains('*'), "{}", r.name);
        }
        add_ratios(&mut rows);
        assert!(rows.contains_key(&name), "{name} not made from {rows:?}");
        assert_eq!(goal(&name), r.goal, "{name}");
    }
}

#[test]
fn a_star_ratio_gives_one_a_key_and_the_least_of_them() {
    let mut rows = BTreeMap::from([
        ("B12/library-1MiB".to_string(), 21.0),
        ("B12/raw-1MiB".to_string(), 20.0),
        ("B12/library-4MiB".to_string(), 40.0),
    ]);
    add_ratios(&mut rows);
    assert_eq!(rows["ratio/B12-1MiB"], 1.05);
    assert!(!rows.contains_key("ratio/B12-4MiB"));
    assert_eq!(goal("ratio/B12-256MiB"), Some(Goal::AtMost(1.05)));
    // `B5-cold-min` is its own ratio, not one of `B5-cold-*`.
    assert_eq!(goal("ratio/B5-cold-min"), Some(Goal::AtLeast(7.5)));
    assert_eq!(goal("ratio/B5-cold-run-01"), None);
    assert!(!named_by("B5-cold-*", "B5-cold-min"));
}

/// A goal given as a time: the row over it, a fraction of the goal.
#[test]
fn a_time_goal_divides_its_row() {
    let mut rows = BTreeMap::from([("B13/gpu-graphed-replay-host-per-task".to_string(), 1500.0)]);
    add_ratios(&mut rows);
    assert_eq!(rows["ratio/B13-graphed-host-per-task"], 1.5);
    assert_eq!(
        goal("ratio/B13-graphed-host-per-task"),
        Some(Goal::AtMost(1.0))
    );
}
