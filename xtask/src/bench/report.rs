//! `cargo xtask bench --report [--check]`: the results page,
//! `benches/results/README.md`, generated from the committed bench JSONs,
//! so that no figure is ever copied by hand; the README's results block;
//! and the table of the benchmarks in DESIGN "Benchmarks" ([`table::design_table`]).
//!
//! Every `*.json` under `benches/results/` with a commit, a device and rows
//! is a run. For each device, the runs at the commit of its newest run are
//! summarized: every row's median and range over those runs, and for the
//! ratios with a goal ([`table::BENCHES`]) the goal and whether the
//! median meets it; a goal those runs do not measure is taken from the
//! newest earlier run of the device that does, named as such. An index of
//! every run follows. The README's block does the same from the runs of a
//! clean tree only: a run from a dirty one (`-dirty` in its folder or
//! commit: uncommitted changes) is on the results page, marked, and never
//! in the README. `--check` regenerates the three in memory and fails if a
//! committed one differs (CI runs it).

use super::table::{self, goals, named_by, Goal};
use super::{fmt_value, json_field, parse_rows};
use crate::{fail, Error};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

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
    /// Made from a tree with uncommitted changes: its folder (or commit)
    /// says `-dirty`.
    fn dirty(&self) -> bool {
        self.path.contains("-dirty") || self.commit.ends_with("-dirty")
    }

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
/// The README's generated block lies between these two lines.
const BEGIN: &str = "<!-- results:begin -->";
const END: &str = "<!-- results:end -->";
/// The table of the benchmarks in DESIGN "Benchmarks" lies between these two lines.
const DESIGN_BEGIN: &str = "<!-- benches:begin -->";
const DESIGN_END: &str = "<!-- benches:end -->";

pub(super) fn run(root: &Path, check: bool) -> Result<(), Error> {
    let results = root.join("benches/results");
    let runs = runs(&results)?;
    let page = results.join("README.md");
    let read =
        |p: &Path| fs::read_to_string(p).map_err(|e| fail(format!("reading {}: {e}", p.display())));
    let readme = root.join("README.md");
    let design = root.join("docs/DESIGN.md");
    let files = [
        (page, render(&runs, &run_folders(&results))),
        (
            readme.clone(),
            with_summary(&read(&readme)?, &summary(&runs))?,
        ),
        (
            design.clone(),
            with_block(
                &read(&design)?,
                "docs/DESIGN.md",
                (DESIGN_BEGIN, DESIGN_END),
                &table::design_table(),
            )?,
        ),
    ];
    for note in dirty_notes(&runs) {
        println!("bench --report: {note}");
    }
    for (path, text) in &files {
        if check {
            let committed = fs::read_to_string(path).unwrap_or_default();
            if committed != *text {
                return Err(fail(format!(
                    "{} is not what `cargo xtask bench --report` makes from the committed \
                     runs and the table of benchmarks: run it and commit the result",
                    path.display()
                )));
            }
            println!("bench --report --check: {} is up to date", path.display());
        } else {
            fs::write(path, text).map_err(|e| fail(format!("writing {}: {e}", path.display())))?;
            println!("bench --report: wrote {}", path.display());
        }
    }
    Ok(())
}

/// `readme` with its block between [`BEGIN`] and [`END`] replaced by
/// `block`.
fn with_summary(readme: &str, block: &str) -> Result<String, Error> {
    with_block(readme, "README.md", (BEGIN, END), block)
}

/// `text` (the file `file`) with its block between the two `markers`
/// replaced by `block`.
fn with_block(
    text: &str,
    file: &str,
    (begin, end): (&str, &str),
    block: &str,
) -> Result<String, Error> {
    let (Some(b), Some(e)) = (text.find(begin), text.find(end)) else {
        return Err(fail(format!("{file} has no `{begin}` ... `{end}` block")));
    };
    if e < b {
        return Err(fail(format!("{file}: `{end}` before `{begin}`")));
    }
    Ok(format!("{}{begin}\n{block}{}", &text[..b], &text[e..]))
}

/// Every run under `dir`, sorted by date then path; a run committed twice
/// (the same device, commit, date and rows) counts once, its copies named.
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
            // Probes and filtered runs of an investigation are not runs.
            if p.file_name().is_some_and(|n| n == "investigations") {
                continue;
            }
            json_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "json") {
            out.push(p);
        }
    }
}

/// The run folders of `dir` (`<date>-<commit>-<device>/`, see [`run_dir`])
/// with their files, newest first.
fn run_folders(dir: &Path) -> Vec<(String, Vec<String>)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut folders: Vec<(String, Vec<String>)> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_string();
            // Dated folders only: `investigations/` and the like are not runs.
            name.starts_with(|c: char| c.is_ascii_digit())
                .then_some(())?;
            let mut files: Vec<String> = fs::read_dir(&p)
                .ok()?
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect();
            files.sort();
            Some((name, files))
        })
        .collect();
    folders.sort();
    folders.reverse();
    folders
}

/// The folder of one run, `benches/results/<date>-<commit>-<device>/`
/// (`results` is `benches/results`): dates sort the folders in time.
pub(crate) fn run_dir(results: &Path, date: &str, commit: &str, device_slug: &str) -> PathBuf {
    // 2026-12-01T03:08:35Z -> 2026-12-01T0308Z
    let compact = match date.split_once('T') {
        Some((day, time)) => {
            let hm: String = time.chars().filter(char::is_ascii_digit).take(4).collect();
            format!("{day}T{hm}Z")
        }
        None if date.is_empty() => "undated".into(),
        None => date.into(),
    };
    results.join(format!("{compact}-{commit}-{device_slug}"))
}

/// The newest committed run of the device `device_slug` (a folder of
/// [`run_dir`] holding `bench.json`): that file's path.
pub(crate) fn newest_run(results: &Path, device_slug: &str) -> Option<PathBuf> {
    let suffix = format!("-{device_slug}");
    let mut dirs: Vec<PathBuf> = fs::read_dir(results)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(&suffix))
                && p.join("bench.json").is_file()
        })
        .collect();
    dirs.sort();
    dirs.pop().map(|d| d.join("bench.json"))
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

/// The devices of `runs`, sorted.
fn devices<'r>(runs: &[&'r Run]) -> Vec<&'r str> {
    let mut devices: Vec<&str> = runs.iter().map(|r| r.device.as_str()).collect();
    devices.sort_unstable();
    devices.dedup();
    devices
}

/// The runs of `device` at the commit of its newest run in `runs`.
fn newest_set<'r>(runs: &[&'r Run], device: &str) -> Option<Vec<&'r Run>> {
    let newest = runs.iter().rev().find(|r| r.device == device)?;
    Some(
        runs.iter()
            .filter(|r| r.device == device && r.commit == newest.commit)
            .copied()
            .collect(),
    )
}

/// The runs of each device at the commit of its newest run.
fn newest_sets<'r>(runs: &[&'r Run]) -> Vec<(&'r str, Vec<&'r Run>)> {
    devices(runs)
        .into_iter()
        .filter_map(|device| Some((device, newest_set(runs, device)?)))
        .collect()
}

/// The goals that the runs of `device` are judged by, in the table's
/// order: each ratio with a goal, one named with `*` once for each key
/// that a run of `device` has (`B12-*`: each size measured).
fn device_goals(runs: &[&Run], device: &str) -> Vec<(String, Goal)> {
    goals()
        .flat_map(|(_, name, g)| {
            if !name.contains('*') {
                return vec![(name.to_string(), g)];
            }
            let mut ids: Vec<String> = runs
                .iter()
                .filter(|r| r.device == device)
                .flat_map(|r| r.rows.keys())
                .filter_map(|k| k.strip_prefix("ratio/"))
                .filter(|id| named_by(name, id))
                .map(str::to_string)
                .collect();
            ids.sort();
            ids.dedup();
            ids.into_iter().map(|id| (id, g)).collect()
        })
        .collect()
}

/// The goals that `set` (the runs of `device` at its newest commit) does
/// not measure, each from the newest earlier run of `device` that does:
/// its id, goal, value and that run. Partial runs (one benchmark group at
/// a newer commit) would otherwise hide what the full runs before them
/// measured.
fn earlier_goals<'r>(
    runs: &[&'r Run],
    device: &str,
    set: &[&Run],
) -> Vec<(String, Goal, f64, &'r Run)> {
    device_goals(runs, device)
        .into_iter()
        .filter(|(id, _)| median_range(set, &format!("ratio/{id}")).is_none())
        .filter_map(|(id, g)| {
            let name = format!("ratio/{id}");
            let r = runs
                .iter()
                .rev()
                .find(|r| r.device == device && r.rows.contains_key(&name))?;
            Some((id, g, r.rows[&name], *r))
        })
        .collect()
}

/// The median of row `name` over `set`, and its range when there are
/// several values.
fn median_range(set: &[&Run], name: &str) -> Option<(f64, Option<(f64, f64)>)> {
    let mut v: Vec<f64> = set
        .iter()
        .filter_map(|r| r.rows.get(name))
        .copied()
        .collect();
    if v.is_empty() {
        return None;
    }
    let med = median(&mut v);
    let range = (v.len() > 1).then(|| (v[0], v[v.len() - 1]));
    Some((med, range))
}

/// The README's block: per device, how many goals its runs meet and which
/// they miss (the figures themselves are on the results page), from the
/// runs of a clean tree only.
fn summary(runs: &[Run]) -> String {
    let all: Vec<&Run> = runs.iter().collect();
    let clean: Vec<&Run> = runs.iter().filter(|r| !r.dirty()).collect();
    let mut s = String::new();
    for device in devices(&all) {
        let Some(set) = newest_set(&clean, device) else {
            let newest = newest_set(&all, device).unwrap_or_default();
            s.push_str(&format!(
                "- {device}: no run from a clean tree yet (the newest, at {}, is on the \
                 results page).\n",
                newest.first().map_or("-", |r| r.commit.as_str())
            ));
            continue;
        };
        // Each goal's value: the newest runs' median, else an earlier run's.
        let mut goals: Vec<(String, Goal, f64, Option<&str>)> = device_goals(&clean, device)
            .into_iter()
            .filter_map(|(id, g)| {
                let (med, _) = median_range(&set, &format!("ratio/{id}"))?;
                Some((id, g, med, None))
            })
            .collect();
        for (id, g, v, r) in earlier_goals(&clean, device, &set) {
            goals.push((id, g, v, Some(r.commit.as_str())));
        }
        let missed: Vec<String> = goals
            .iter()
            .filter(|(_, g, v, _)| !g.met(*v))
            .map(|(id, g, v, earlier)| {
                let at = earlier.map(|c| format!(", at {c}")).unwrap_or_default();
                format!("{id} {v:.3} ({}{at})", g.text())
            })
            .collect();
        let runs_text = if set.len() == 1 { "run" } else { "runs" };
        s.push_str(&format!(
            "- {device}, commit {} ({} {runs_text}): {} of {} goals met; missed: {}.\n",
            set[0].commit,
            set.len(),
            goals.len() - missed.len(),
            goals.len(),
            if missed.is_empty() {
                "none".to_string()
            } else {
                missed.join(", ")
            }
        ));
    }
    s
}

/// What the README's block leaves out: each device whose newest run is
/// from a dirty tree, and what the block uses instead.
fn dirty_notes(runs: &[Run]) -> Vec<String> {
    let all: Vec<&Run> = runs.iter().collect();
    let clean: Vec<&Run> = runs.iter().filter(|r| !r.dirty()).collect();
    newest_sets(&all)
        .into_iter()
        .filter(|(_, set)| set[0].dirty())
        .map(|(device, set)| {
            let instead = match newest_set(&clean, device) {
                Some(c) => format!("uses the newest clean one instead, at {}", c[0].commit),
                None => "has no clean run of it: none of its figures".to_string(),
            };
            format!(
                "{device}: the newest run, at {}, is from a dirty tree: not in README.md, \
                 which {instead}",
                set[0].commit
            )
        })
        .collect()
}

/// The results page.
fn render(runs: &[Run], folders: &[(String, Vec<String>)]) -> String {
    let mut s = String::from(
        "# Benchmark results\n\n\
         Generated by `cargo xtask bench --report` from the committed runs (the JSON files \
         below); CI checks it with `--check`. Do not edit by hand.\n\n\
         For each device: the runs at the commit of its newest run, every row's median and \
         range over them, and each ratio's goal (DESIGN.md, \"Benchmarks\", from `BENCHES` in \
         `xtask/src/bench/table.rs`). Ratios are \
         ours over the comparison for times (lower is better) and the comparison over ours \
         for throughputs; the goal says which way. A run from a dirty tree (`-dirty`: \
         uncommitted changes) is marked, and the README's summary leaves it out. \
         Investigations (probes and their notes) are under `investigations/`.\n",
    );
    let all: Vec<&Run> = runs.iter().collect();
    for (device, set) in newest_sets(&all) {
        s.push_str(&format!(
            "\n## {device}, commit {} ({} run{})\n\n",
            set[0].commit,
            set.len(),
            if set.len() == 1 { "" } else { "s" }
        ));
        for r in &set {
            s.push_str(&format!("- {} ({})\n", r.files(), r.date));
        }
        if set[0].dirty() {
            let clean: Vec<&Run> = all.iter().filter(|r| !r.dirty()).copied().collect();
            let instead = match newest_set(&clean, device) {
                Some(c) => format!("gives the newest clean run's, at {}", c[0].commit),
                None => "has none of this device (no clean run)".to_string(),
            };
            s.push_str(&format!(
                "\nFrom a dirty tree (uncommitted changes): the README's summary leaves these \
                 runs out and {instead}.\n"
            ));
        }
        s.push_str("\n| row | median | range | goal | met |\n|---|---|---|---|---|\n");
        let mut names: Vec<&String> = set.iter().flat_map(|r| r.rows.keys()).collect();
        names.sort_by_key(|n| (!n.starts_with("ratio/"), n.as_str()));
        names.dedup();
        for name in names {
            let Some((med, range)) = median_range(&set, name) else {
                continue;
            };
            let range = match range {
                Some((a, b)) => format!("{} - {}", fmt_value(name, a), fmt_value(name, b)),
                None => "-".into(),
            };
            let (g, met) = match table::goal(name) {
                Some(g) => (g.text(), if g.met(med) { "yes" } else { "no" }),
                None => ("-".into(), "-"),
            };
            s.push_str(&format!(
                "| {name} | {} | {range} | {g} | {met} |\n",
                fmt_value(name, med)
            ));
        }
        let earlier = earlier_goals(&all, device, &set);
        if !earlier.is_empty() {
            s.push_str(
                "\nGoals these runs do not measure, from the newest earlier run of this device \
                 that does:\n\n| ratio | value | goal | met | run |\n|---|---|---|---|---|\n",
            );
            for (id, g, v, r) in earlier {
                s.push_str(&format!(
                    "| ratio/{id} | {v:.3} | {} | {} | `{}` ({}) |\n",
                    g.text(),
                    if g.met(v) { "yes" } else { "no" },
                    r.path,
                    r.date
                ));
            }
        }
    }
    s.push_str(
        "\n## Every committed run\n\nOne folder a device call, `<date>-<commit>-<device>/`, \
         newest first (runs of reverted code and partial runs are not kept: git has them).\n\n\
         | folder | files |\n|---|---|\n",
    );
    for (name, files) in folders {
        let files: Vec<String> = files.iter().map(|f| format!("[{f}]({name}/{f})")).collect();
        s.push_str(&format!("| {name} | {} |\n", files.join(", ")));
    }
    s
}

#[cfg(test)]
mod test;
