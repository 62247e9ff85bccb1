//! `cargo xtask bench`: runs the benchmarks of [`table::BENCHES`], writes
//! `benches/results/<date>-<commit>-<device>/bench.json` (and `table.md`)
//! and prints a table against the device's newest committed run;
//! `--report` makes `benches/results/README.md`, the README's results and
//! DESIGN "Benchmarks"'s table ([`report`]).
//!
//! On a GPU machine without cargo it runs the bench binaries of the bundle
//! (`bundle/bin/bench.*`, see `cargo xtask bundle`); elsewhere it builds
//! them with cargo first. Criterion writes its estimates under a scratch
//! `CRITERION_HOME`; the median of each benchmark becomes one row, and
//! the `ratio/*` rows of [`table::BENCHES`] compare each with what it is
//! compared to.
//!
//! The Python comparisons ([`torch`]: PyTorch's; B16's is CuPy's, checked
//! by its own preflight) run after criterion, from the
//! bundle's copy of the scripts (`bundle/benches/`, beside the binary) or the
//! repository's `benches/`. A comparison that cannot run fails the command
//! (exit 1, after the table is written): no script, no `python3`, no
//! PyTorch or no CUDA device for it, a script that fails or leaves out one of
//! its rows. Before criterion starts, the scripts are found and `python3 -c
//! "import torch"` is tried, so that a machine without PyTorch fails at once.
//! `--no-torch` skips them, loudly: the table then says which rows and
//! ratios are missing.

use crate::{fail, workspace_root, Error};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

mod multi;
mod report;
mod table;
#[cfg(test)]
mod test;
mod torch;
pub(crate) use report::newest_run;
use table::add_ratios;
use torch::{
    cupy_preflight, find_script, selected_by, torch_preflight, torch_rows, torch_skipped_note,
    TorchScript, TORCH_SCRIPTS,
};

pub(crate) fn run(args: &[String]) -> Result<(), Error> {
    if args.iter().any(|a| a == "--multi-gpu") {
        return multi::run(args);
    }
    if args.first().is_some_and(|a| a == "--report") {
        return match &args[1..] {
            [] => report::run(&workspace_root(), false),
            [c] if c == "--check" => report::run(&workspace_root(), true),
            _ => Err(Error::Usage("--report [--check]".into())),
        };
    }
    let mut filter = None;
    let mut out_dir = None;
    let mut no_torch = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--filter" => {
                filter = Some(
                    it.next()
                        .cloned()
                        .ok_or_else(|| Error::Usage("--filter REGEX".into()))?,
                )
            }
            "--out" => {
                out_dir = Some(
                    it.next()
                        .map(PathBuf::from)
                        .ok_or_else(|| Error::Usage("--out DIR".into()))?,
                )
            }
            "--no-torch" => no_torch = true,
            "--recompute" => {
                let f = it
                    .next()
                    .ok_or_else(|| Error::Usage("--recompute FILE".into()))?;
                return recompute(Path::new(f));
            }
            other => return Err(Error::Usage(format!("unknown argument `{other}`"))),
        }
    }
    let root = repo_root();
    let selected: Vec<&TorchScript> = TORCH_SCRIPTS
        .iter()
        .filter(|t| selected_by(t, filter.as_deref()))
        .collect();
    let skipped_note = torch_skipped_note(no_torch, &selected);
    let scripts = if no_torch {
        if !skipped_note.is_empty() {
            eprintln!("{skipped_note}");
        }
        Vec::new()
    } else {
        let scripts = selected
            .iter()
            .map(|t| Ok((*t, find_script(&root, t.file)?)))
            .collect::<Result<Vec<_>, Error>>()?;
        if !scripts.is_empty() {
            torch_preflight()?;
        }
        // B16's script is CuPy's; B15's (torch_linalg.py) runs CuPy's potrf too.
        if scripts
            .iter()
            .any(|(t, _)| t.file.starts_with("cupy") || t.file == "torch_linalg.py")
        {
            cupy_preflight()?;
        }
        scripts
    };
    for t in TORCH_SCRIPTS
        .iter()
        .filter(|t| !selected.iter().any(|s| s.file == t.file))
    {
        eprintln!(
            "bench: --filter names none of {:?}: {} is not run",
            t.groups, t.file
        );
    }
    let benches = bench_binaries(&root)?;
    let scratch = std::env::temp_dir().join(format!("xtask-bench-{}", std::process::id()));
    let crit = scratch.join("criterion");
    fs::create_dir_all(&crit).map_err(|e| fail(format!("creating {}: {e}", crit.display())))?;
    let total = benches.len() + scripts.len();
    let mut printed = BTreeMap::new();
    for (i, b) in benches.iter().enumerate() {
        eprintln!("[{}/{total}] {}", i + 1, b.display());
        let mut cmd = Command::new(b);
        cmd.arg("--bench").env("CRITERION_HOME", &crit);
        if let Some(f) = &filter {
            cmd.arg(f);
        }
        printed.extend(run_printing_rows(cmd, b)?);
    }
    if filter
        .as_deref()
        .is_none_or(|f| "ledger".contains(f) || f.contains("ledger"))
    {
        printed.extend(oracle_rows(&root, &scratch)?);
    }
    let mut rows = criterion_medians(&crit);
    rows.extend(printed);
    let mut torch_errors = Vec::new();
    for (i, (t, path)) in scripts.iter().enumerate() {
        eprintln!(
            "[{}/{total}] {} (PyTorch {})",
            benches.len() + i + 1,
            path.display(),
            t.groups.join(", ")
        );
        match torch_rows(t, path) {
            Ok(r) => rows.extend(r),
            Err(e) => {
                eprintln!("bench: {e}");
                torch_errors.push(e);
            }
        }
    }
    add_ratios(&mut rows);

    let device = device_name();
    let slug = slug(&device);
    let results = root.join("benches/results");
    // The previous run: the newest committed one of this device.
    let previous_text =
        report::newest_run(&results, &slug).and_then(|p| fs::read_to_string(p).ok());
    let previous = previous_text.as_deref().map(parse_rows).unwrap_or_default();
    let prev_commit = previous_text
        .as_deref()
        .and_then(|t| field(t, "commit"))
        .unwrap_or_else(|| "-".into());
    let json = render_json(&rows, &device);
    let dir = report::run_dir(
        &results,
        &field(&json, "date").unwrap_or_default(),
        &commit(),
        &slug,
    );
    fs::create_dir_all(&dir).map_err(|e| fail(format!("creating {}: {e}", dir.display())))?;
    let path = dir.join("bench.json");
    fs::write(&path, &json).map_err(|e| fail(format!("writing {}: {e}", path.display())))?;
    if let Some(o) = out_dir {
        let _ = fs::create_dir_all(&o);
        let _ = fs::write(o.join(format!("{slug}.json")), &json);
    }
    let mut table = render_table(&rows, &previous, &commit(), &prev_commit);
    if !skipped_note.is_empty() {
        table.push_str(&format!("\n{skipped_note}\n"));
    }
    if !torch_errors.is_empty() {
        table.push_str(
            "\nFAILED: PyTorch comparisons that did not run (their rows and ratios are missing):\n",
        );
        for e in &torch_errors {
            table.push_str(&format!("- {e}\n"));
        }
    }
    let _ = fs::write(dir.join("table.md"), &table);
    if let Ok(o) = std::env::var("OUT") {
        let _ = fs::write(Path::new(&o).join("bench-table.md"), &table);
    }
    println!(
        "\nwrote {} (commit it, then `cargo xtask bench --report`)\n",
        path.display()
    );
    print!("{table}");
    if !torch_errors.is_empty() {
        return Err(fail(format!(
            "{} PyTorch comparison(s) failed (above); rerun with --no-torch to measure without them",
            torch_errors.len()
        )));
    }
    Ok(())
}

/// Recomputes the `ratio/*` rows of a results file from its measured rows
/// (after a change in how ratios are derived), keeping everything else.
fn recompute(path: &Path) -> Result<(), Error> {
    let text =
        fs::read_to_string(path).map_err(|e| fail(format!("reading {}: {e}", path.display())))?;
    let mut rows: BTreeMap<String, f64> = parse_rows(&text)
        .into_iter()
        .filter(|(k, _)| !k.starts_with("ratio/"))
        .collect();
    add_ratios(&mut rows);
    let head: String = text
        .lines()
        .take_while(|l| !l.contains("\"rows\""))
        .map(|l| format!("{l}\n"))
        .collect();
    let body = render_json(&rows, "");
    let rows_part = &body[body.find("  \"rows\"").unwrap_or(0)..];
    fs::write(path, format!("{head}{rows_part}"))
        .map_err(|e| fail(format!("writing {}: {e}", path.display())))?;
    for (k, v) in rows.iter().filter(|(k, _)| k.starts_with("ratio/")) {
        println!("{k}: {v:.3}");
    }
    Ok(())
}

/// The repository root: the workspace root when run by cargo, else the
/// current directory (the bundle is run from the repository root).
fn repo_root() -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_default();
    if cwd.join("bundle/bin").exists() || cwd.join("Cargo.toml").exists() {
        cwd
    } else {
        workspace_root()
    }
}

fn bench_binaries(root: &Path) -> Result<Vec<PathBuf>, Error> {
    let bin = root.join("bundle/bin");
    let found = bench_files(&bin).unwrap_or_default();
    if !found.is_empty() {
        return Ok(found);
    }
    crate::bundle::run(&[])?;
    bench_files(&bin).map_err(|e| fail(format!("reading {}: {e}", bin.display())))
}

/// Runs a bench binary, its output passed on as it comes; the JSON rows
/// it printed (`{"name": ..., "value": ...}` a line: the benches that are
/// not criterion's, such as B5-cold's fresh processes).
fn run_printing_rows(mut cmd: Command, b: &Path) -> Result<BTreeMap<String, f64>, Error> {
    use std::io::BufRead;
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("running {}: {e}", b.display())))?;
    let mut rows = BTreeMap::new();
    // How long each group took (its rows' prefix, `B13` of `B13/...`), to
    // plan device time: printed when the next group's first row comes.
    let mut group: Option<(String, std::time::Instant)> = None;
    if let Some(out) = child.stdout.take() {
        for line in std::io::BufReader::new(out).lines().map_while(|l| l.ok()) {
            if let Some(g) = row_group(&line) {
                if group.as_ref().is_none_or(|(cur, _)| *cur != g) {
                    if let Some((cur, t0)) = group.take() {
                        eprintln!(
                            "bench: {:.1} s from group {cur}'s first row to the next group's",
                            t0.elapsed().as_secs_f64()
                        );
                    }
                    group = Some((g, std::time::Instant::now()));
                }
            }
            println!("{line}");
            if let (Some(k), Some(v)) =
                (json_field(&line, "name"), number_after(&line, "\"value\":"))
            {
                rows.insert(k, v);
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| fail(format!("running {}: {e}", b.display())))?;
    if let Some((cur, t0)) = group {
        eprintln!(
            "bench: {:.1} s from group {cur}'s first row to its binary's end",
            t0.elapsed().as_secs_f64()
        );
    }
    if !status.success() {
        return Err(fail(format!("{} failed: {status}", b.display())));
    }
    Ok(rows)
}

/// Programs of the oracle's run for `ratio/ledger-unnecessary-random`
/// (issue 39's million).
const ORACLE_CASES: &str = "1000000";

/// The ledger's precision on the oracle's random programs
/// (`ledger/random-*` rows): the bundle's oracle test
/// (`bundle/bin/test.oracle`), run with [`ORACLE_CASES`] programs; it fails
/// on an unsafe skip.
fn oracle_rows(root: &Path, scratch: &Path) -> Result<BTreeMap<String, f64>, Error> {
    let bin = root.join("bundle/bin/test.oracle");
    let file = scratch.join("oracle-rows");
    eprintln!(
        "bench: the oracle, {ORACLE_CASES} random programs ({})",
        bin.display()
    );
    let status = Command::new(&bin)
        .args(["--exact", "ledger_never_skips_a_wait_the_oracle_needs"])
        .env("ORACLE_CASES", ORACLE_CASES)
        .env("ORACLE_ROWS", &file)
        .status()
        .map_err(|e| fail(format!("running {}: {e}", bin.display())))?;
    if !status.success() {
        return Err(fail(format!("{} failed: {status}", bin.display())));
    }
    let text =
        fs::read_to_string(&file).map_err(|e| fail(format!("reading {}: {e}", file.display())))?;
    Ok(text
        .lines()
        .filter_map(|l| Some((json_field(l, "name")?, number_after(l, "\"value\":")?)))
        .collect())
}

/// The group of a criterion result line or a printed row (`B13` of
/// `B13/gpu-scope  time: ...` or of `{"name": "B13/...", ...}`): the time
/// from a group's first row to the next group's first row is about the
/// group's (its setup before its first row counts to the group before).
fn row_group(line: &str) -> Option<String> {
    let name = json_field(line, "name").unwrap_or_else(|| line.to_owned());
    let (g, _) = name.split_once('/')?;
    let ok = g.starts_with('B') && g.len() <= 12 && !g.contains(' ');
    ok.then(|| g.to_owned())
}

/// The `bench.*` files of `bin`, sorted.
pub(crate) fn bench_files(bin: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = fs::read_dir(bin)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|f| f.to_str())
                .is_some_and(|f| f.starts_with("bench."))
        })
        .collect();
    v.sort();
    Ok(v)
}

/// Every `<id>/new/estimates.json` under `dir` (ids may nest): the
/// median, ns, named by the id.
fn criterion_medians(dir: &Path) -> BTreeMap<String, f64> {
    let mut rows = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if !p.is_dir() || p.file_name().is_some_and(|f| f == "report") {
                continue;
            }
            if p.file_name().is_some_and(|f| f == "new") {
                let Ok(text) = fs::read_to_string(p.join("estimates.json")) else {
                    continue;
                };
                // {"mean":{...},"median":{"confidence_interval":{...},"point_estimate":N,...
                let median = text
                    .find("\"median\"")
                    .and_then(|m| number_after(&text[m..], "\"point_estimate\":"));
                if let (Some(v), Ok(rel)) = (median, d.strip_prefix(dir)) {
                    rows.insert(rel.to_string_lossy().replace('\\', "/"), v);
                }
            } else {
                stack.push(p);
            }
        }
    }
    rows
}

fn number_after(text: &str, key: &str) -> Option<f64> {
    let s = text.find(key)? + key.len();
    let rest = text[s..].trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | 'e' | 'E' | '+')))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

fn json_field(line: &str, key: &str) -> Option<String> {
    let k = format!("\"{key}\": \"");
    let s = line.find(&k)? + k.len();
    let e = line[s..].find('"')? + s;
    Some(line[s..e].to_string())
}

fn field(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| json_field(l, key))
}

fn unit(name: &str) -> &'static str {
    if name.starts_with("ratio/") {
        "x"
    } else if name.starts_with("peer/") {
        "GB/s"
    } else if name.starts_with("ledger/") {
        "waits"
    } else {
        "ns"
    }
}

fn render_json(rows: &BTreeMap<String, f64>, device: &str) -> String {
    let mut s = String::from("{\n");
    s.push_str(&format!("  \"commit\": \"{}\",\n", commit()));
    s.push_str(&format!("  \"date\": \"{}\",\n", date()));
    s.push_str(&format!("  \"device\": \"{device}\",\n"));
    s.push_str(&format!("  \"driver\": \"{}\",\n", driver()));
    s.push_str("  \"rows\": [\n");
    let n = rows.len();
    for (i, (k, v)) in rows.iter().enumerate() {
        s.push_str(&format!(
            "    {{\"name\": \"{k}\", \"value\": {v:.4}, \"unit\": \"{}\"}}{}\n",
            unit(k),
            if i + 1 < n { "," } else { "" }
        ));
    }
    s.push_str("  ]\n}\n");
    s
}

fn parse_rows(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter_map(|l| Some((json_field(l, "name")?, number_after(l, "\"value\":")?)))
        .collect()
}

fn fmt_value(name: &str, v: f64) -> String {
    if name.starts_with("ratio/") {
        format!("{v:.3}")
    } else if name.starts_with("peer/") {
        format!("{v:.1} GB/s")
    } else if name.starts_with("ledger/") {
        format!("{v:.0} waits")
    } else if v >= 1e6 {
        format!("{:.3} ms", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.3} us", v / 1e3)
    } else {
        format!("{v:.1} ns")
    }
}

fn render_table(
    rows: &BTreeMap<String, f64>,
    previous: &BTreeMap<String, f64>,
    current_commit: &str,
    previous_commit: &str,
) -> String {
    let mut s = format!(
        "| benchmark | current: {current_commit} | previous: {previous_commit} | ratio |\n|---|---|---|---|\n"
    );
    for (k, v) in rows {
        let (p, r) = match previous.get(k) {
            Some(p) if *p > 0.0 => (fmt_value(k, *p), format!("{:.2}", v / p)),
            _ => ("-".into(), "-".into()),
        };
        s.push_str(&format!("| {k} | {} | {p} | {r} |\n", fmt_value(k, *v)));
    }
    s
}

fn sh(cmd: &str, args: &[&str]) -> Option<String> {
    let o = Command::new(cmd).args(args).output().ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn device_name() -> String {
    sh("nvidia-smi", &["--query-gpu=name", "--format=csv,noheader"])
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_else(|| "host".into())
}

fn driver() -> String {
    sh(
        "nvidia-smi",
        &["--query-gpu=driver_version", "--format=csv,noheader"],
    )
    .and_then(|s| s.lines().next().map(str::to_string))
    .unwrap_or_else(|| "none".into())
}

fn commit() -> String {
    std::env::var("BENCH_COMMIT")
        .ok()
        .or_else(|| {
            // The bundle's (bundle/ or bundle-x2/), beside this binary's bin/.
            let exe = std::env::current_exe().ok()?;
            let c = fs::read_to_string(exe.parent()?.join("../COMMIT")).ok()?;
            Some(c.trim().to_string())
        })
        .or_else(|| {
            fs::read_to_string("bundle/COMMIT")
                .ok()
                .map(|s| s.trim().to_string())
        })
        .or_else(|| sh("git", &["describe", "--always", "--dirty", "--abbrev=12"]))
        .unwrap_or_else(|| "unknown".into())
}

fn date() -> String {
    sh("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]).unwrap_or_default()
}

fn slug(device: &str) -> String {
    device
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect::<String>()
        .split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}
