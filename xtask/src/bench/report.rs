//! `cargo xtask bench --report [--check]`: the results page,
//! `benches/results/README.md`, generated from the committed bench JSONs,
//! so that no figure is ever copied by hand.
//!
//! Every `*.json` under `benches/results/` with a commit, a device and rows
//! is a run. For each device, the runs at the commit of its newest run are
//! summarized: every row's median and range over those runs, and for the
//! ratios with a goal (DESIGN.md §7, §12, §16) the goal and whether the
//! median meets it. An index of every run follows. `--check` regenerates
//! the page in memory and fails if the committed one differs (CI runs it).

use super::{fmt_value, json_field, parse_rows};
use crate::{fail, Error};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// How a ratio is judged against its goal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Goal {
    /// The ratio must be at most this.
    AtMost(f64),
    /// The ratio must be at least this.
    AtLeast(f64),
}

impl Goal {
    fn met(self, v: f64) -> bool {
        match self {
            Goal::AtMost(g) => v <= g,
            Goal::AtLeast(g) => v >= g,
        }
    }

    fn text(self) -> String {
        match self {
            Goal::AtMost(g) => format!("<= {g}"),
            Goal::AtLeast(g) => format!(">= {g}"),
        }
    }
}

/// The goals of DESIGN.md §7, §12 and §16 (and the issues that set them),
/// by ratio row (without its `ratio/` prefix).
pub(super) const GOALS: &[(&str, Goal)] = &[
    ("B1", Goal::AtMost(1.10)),
    ("B2", Goal::AtMost(1.10)),
    ("B3", Goal::AtMost(1.05)),
    ("B3-user", Goal::AtMost(1.05)),
    ("B7", Goal::AtLeast(0.97)),
    ("B7-vs-torch", Goal::AtLeast(1.0)),
    ("B7-pageable", Goal::AtLeast(0.6)),
    ("B7-pageable-vs-torch", Goal::AtLeast(1.0)),
    ("B8", Goal::AtMost(1.5)),
    ("B10-join-tree", Goal::AtMost(2.5)),
    ("B10-spawns", Goal::AtMost(1.5)),
    ("B13-vs-torch", Goal::AtMost(0.25)),
    ("B13-vs-graph", Goal::AtMost(1.5)),
    ("B13-capture-vs-graph", Goal::AtMost(1.5)),
    ("B14", Goal::AtLeast(0.9)),
    ("B14-vs-torch", Goal::AtLeast(0.9)),
];

/// The goal of row `name` (`ratio/...`), if it has one.
pub(super) fn goal(name: &str) -> Option<Goal> {
    let id = name.strip_prefix("ratio/")?;
    GOALS.iter().find(|(g, _)| *g == id).map(|(_, g)| *g)
}

/// One committed bench run.
#[derive(Debug)]
struct Run {
    /// Its path, relative to `benches/results/`.
    path: String,
    commit: String,
    date: String,
    device: String,
    rows: BTreeMap<String, f64>,
    /// Other files holding the same run.
    copies: Vec<String>,
}

impl Run {
    fn same_run(&self, other: &Run) -> bool {
        (&self.device, &self.commit, &self.date, &self.rows)
            == (&other.device, &other.commit, &other.date, &other.rows)
    }

    /// Its file, and its copies.
    fn files(&self) -> String {
        std::iter::once(&self.path)
            .chain(&self.copies)
            .map(|p| format!("`{p}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

pub(super) fn run(root: &Path, check: bool) -> Result<(), Error> {
    let results = root.join("benches/results");
    let page = results.join("README.md");
    let text = render(&runs(&results)?);
    if check {
        let committed = fs::read_to_string(&page).unwrap_or_default();
        if committed != text {
            return Err(fail(format!(
                "{} is not what `cargo xtask bench --report` makes from the committed \
                 runs: run it and commit the page",
                page.display()
            )));
        }
        println!("bench --report --check: {} is up to date", page.display());
        return Ok(());
    }
    fs::write(&page, &text).map_err(|e| fail(format!("writing {}: {e}", page.display())))?;
    println!("bench --report: wrote {}", page.display());
    Ok(())
}

/// Every run under `dir`, sorted by date then path.
fn runs(dir: &Path) -> Result<Vec<Run>, Error> {
    let mut files = Vec::new();
    json_files(dir, &mut files);
    let mut runs = Vec::new();
    for f in files {
        let text =
            fs::read_to_string(&f).map_err(|e| fail(format!("reading {}: {e}", f.display())))?;
        let field = |k: &str| text.lines().find_map(|l| json_field(l, k));
        let (Some(commit), Some(date), Some(device)) =
            (field("commit"), field("date"), field("device"))
        else {
            continue;
        };
        let rows = parse_rows(&text);
        if rows.is_empty() {
            continue;
        }
        let path = f
            .strip_prefix(dir)
            .unwrap_or(&f)
            .to_string_lossy()
            .replace('\\', "/");
        runs.push(Run {
            path,
            commit,
            date,
            device,
            rows,
            copies: Vec::new(),
        });
    }
    runs.sort_by(|a, b| (&a.date, &a.path).cmp(&(&b.date, &b.path)));
    // A run committed twice (a device's latest JSON beside its copy in a
    // run's folder) counts once: the first path, the copies named.
    let mut unique: Vec<Run> = Vec::new();
    for r in runs {
        match unique.iter_mut().find(|u| u.same_run(&r)) {
            Some(u) => u.copies.push(r.path),
            None => unique.push(r),
        }
    }
    Ok(unique)
}

fn json_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            json_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "json") {
            out.push(p);
        }
    }
}

/// The median of `v` (not empty).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The results page.
fn render(runs: &[Run]) -> String {
    let mut s = String::from(
        "# Benchmark results\n\n\
         Generated by `cargo xtask bench --report` from the committed runs (the JSON files \
         below); CI checks it with `--check`. Do not edit by hand.\n\n\
         For each device: the runs at the commit of its newest run, every row's median and \
         range over them, and each ratio's goal (DESIGN.md §7, §12, §16). Ratios are \
         ours over the comparison for times (lower is better) and the comparison over ours \
         for throughputs; the goal says which way.\n",
    );
    let mut devices: Vec<&str> = runs.iter().map(|r| r.device.as_str()).collect();
    devices.sort_unstable();
    devices.dedup();
    for device in devices {
        let Some(newest) = runs.iter().rev().find(|r| r.device == device) else {
            continue;
        };
        let set: Vec<&Run> = runs
            .iter()
            .filter(|r| r.device == device && r.commit == newest.commit)
            .collect();
        s.push_str(&format!(
            "\n## {device}, commit {} ({} run{})\n\n",
            newest.commit,
            set.len(),
            if set.len() == 1 { "" } else { "s" }
        ));
        for r in &set {
            s.push_str(&format!("- {} ({})\n", r.files(), r.date));
        }
        s.push_str("\n| row | median | range | goal | met |\n|---|---|---|---|---|\n");
        let mut names: Vec<&String> = set.iter().flat_map(|r| r.rows.keys()).collect();
        names.sort_by_key(|n| (!n.starts_with("ratio/"), n.as_str()));
        names.dedup();
        for name in names {
            let mut v: Vec<f64> = set
                .iter()
                .filter_map(|r| r.rows.get(name))
                .copied()
                .collect();
            let med = median(&mut v);
            let range = if v.len() > 1 {
                format!(
                    "{} - {}",
                    fmt_value(name, v[0]),
                    fmt_value(name, v[v.len() - 1])
                )
            } else {
                "-".into()
            };
            let (g, met) = match goal(name) {
                Some(g) => (g.text(), if g.met(med) { "yes" } else { "no" }),
                None => ("-".into(), "-"),
            };
            s.push_str(&format!(
                "| {name} | {} | {range} | {g} | {met} |\n",
                fmt_value(name, med)
            ));
        }
    }
    s.push_str("\n## Every committed run\n\n| date | device | commit | rows | file |\n|---|---|---|---|---|\n");
    for r in runs.iter().rev() {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.date,
            r.device,
            r.commit,
            r.rows.len(),
            r.files()
        ));
    }
    s
}

#[cfg(test)]
mod test {
    use super::*;

    fn run(path: &str, commit: &str, date: &str, rows: &[(&str, f64)]) -> Run {
        Run {
            path: path.into(),
            commit: commit.into(),
            date: date.into(),
            device: "NVIDIA H200".into(),
            rows: rows.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            copies: Vec::new(),
        }
    }

    #[test]
    fn the_newest_commits_runs_give_medians_ranges_and_goals() {
        let runs = [
            run("old.json", "aaa", "2026-11-30", &[("ratio/B1", 9.0)]),
            run(
                "a.json",
                "bbb",
                "2026-12-01T01",
                &[("ratio/B1", 1.2), ("B1/raw", 240.0)],
            ),
            run(
                "b.json",
                "bbb",
                "2026-12-01T02",
                &[("ratio/B1", 1.0), ("B1/raw", 250.0)],
            ),
            run("c.json", "bbb", "2026-12-01T03", &[("ratio/B1", 1.05)]),
        ];
        let page = render(&runs);
        // The median of 1.2, 1.0, 1.05 (the old commit's 9.0 left out),
        // against B1's goal.
        assert!(
            page.contains("| ratio/B1 | 1.050 | 1.000 - 1.200 | <= 1.1 | yes |"),
            "{page}"
        );
        assert!(
            page.contains("| B1/raw | 245.0 ns | 240.0 ns - 250.0 ns | - | - |"),
            "{page}"
        );
        assert!(page.contains("commit bbb (3 runs)"), "{page}");
        // Every run is in the index, the old one too.
        assert!(page.contains("| aaa | 1 | `old.json` |"), "{page}");
    }

    #[test]
    fn a_run_committed_twice_counts_once() {
        let dir = std::env::temp_dir().join(format!("xtask-report-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("run")).unwrap();
        let json = "{\n  \"commit\": \"c\",\n  \"date\": \"d\",\n  \"device\": \"X\",\n  \"rows\": [\n    {\"name\": \"ratio/B1\", \"value\": 1.5000, \"unit\": \"x\"}\n  ]\n}\n";
        fs::write(dir.join("x.json"), json).unwrap();
        fs::write(dir.join("run/bench.json"), json).unwrap();
        let runs = runs(&dir).unwrap();
        let _ = fs::remove_dir_all(&dir);
        assert_eq!(runs.len(), 1);
        let page = render(&runs);
        assert!(page.contains("commit c (1 run)"), "{page}");
        assert!(page.contains("`run/bench.json`, `x.json`"), "{page}");
    }

    #[test]
    fn a_missed_goal_says_no() {
        let runs = [run("a.json", "c", "d", &[("ratio/B14", 0.82)])];
        assert!(render(&runs).contains("| ratio/B14 | 0.820 | - | >= 0.9 | no |"));
    }

    #[test]
    fn every_goal_names_a_ratio_the_bench_computes() {
        // A goal whose row no run can have would never be judged.
        let src = include_str!("../bench.rs");
        for (id, _) in GOALS {
            assert!(
                src.contains(&format!("\"{id}\"")),
                "goal {id} has no ratio in bench.rs"
            );
        }
    }
}
