//! `cargo xtask bench`: runs the benchmarks (B1-B14), writes
//! `benches/results/<date>-<commit>-<device>/bench.json` (and `table.md`)
//! and prints a table against the device's newest committed run;
//! `--report` makes `benches/results/README.md` from every committed run
//! ([`report`]).
//!
//! On a GPU machine without cargo it runs the bench binaries of the bundle
//! (`bundle/bin/bench.*`, see `cargo xtask bundle`); elsewhere it builds
//! them with cargo first. Criterion writes its estimates under a scratch
//! `CRITERION_HOME`; the median of each benchmark becomes one row, and
//! `ratio/B*` rows compare each with what DESIGN.md §7 and §12 compare it to.
//!
//! The PyTorch comparisons ([`TORCH_SCRIPTS`]; B16's is CuPy's, checked by
//! its own preflight) run after criterion, from the
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
pub(crate) use report::newest_run;
#[cfg(test)]
mod test;

/// A PyTorch script of `benches/` and the rows it must print.
struct TorchScript {
    /// Its file name in `benches/` (and `bundle/benches/`).
    file: &'static str,
    /// The benchmark groups it measures: it runs when there is no
    /// `--filter`, or when the filter names one of them (contains it, or is
    /// part of it).
    groups: &'static [&'static str],
    /// The rows it prints; each one missing is a failure.
    rows: &'static [&'static str],
}

/// The PyTorch comparisons.
const TORCH_SCRIPTS: &[TorchScript] = &[
    TorchScript {
        file: "torch_pipeline.py",
        groups: &["B7", "B14"],
        rows: &[
            "B7/torch-4",
            "B7/torch-8",
            "B7/pageable-torch-4",
            "B7/pageable-torch-8",
            "B14/torch-sum",
        ],
    },
    TorchScript {
        file: "torch_linalg.py",
        groups: &["B15"],
        rows: &[
            "B15/torch-32768",
            "B15/cupy-32768",
            "B15/torch-8192",
            "B15/cupy-8192",
        ],
    },
    TorchScript {
        file: "torch_dag.py",
        groups: &["B13"],
        rows: &[
            "B13/torch-serial",
            "B13/torch-8-streams",
            "B13/cuda-graph",
            "B13/cuda-graph-100",
            "B13/torch-spin-alone",
        ],
    },
    // B16's comparison is CuPy's (cupyx.scipy.sparse.linalg.cg), not
    // PyTorch's: [`cupy_preflight`] checks that it imports.
    TorchScript {
        file: "cupy_cg.py",
        groups: &["B16"],
        rows: &["B16/cupy-cg-small", "B16/cupy-cg"],
    },
];

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

/// Whether `--filter` (a criterion regex, matched here as text) selects
/// `t`: no filter, or one that names one of its groups.
fn selected_by(t: &TorchScript, filter: Option<&str>) -> bool {
    match filter {
        None => true,
        Some(f) => t.groups.iter().any(|g| f.contains(g) || g.contains(f)),
    }
}

/// What `--no-torch` leaves out, said loudly.
fn torch_skipped_note(no_torch: bool, selected: &[&TorchScript]) -> String {
    if !no_torch || selected.is_empty() {
        return String::new();
    }
    let rows: Vec<&str> = selected
        .iter()
        .flat_map(|t| t.rows.iter().copied())
        .collect();
    format!(
        "WARNING: --no-torch: the PyTorch comparisons were NOT run; missing rows: {} \
         (and the ratios against them)",
        rows.join(", ")
    )
}

/// The script `file`: the bundle's copy beside this binary
/// (`bundle/bin/../benches/`), else the repository's `benches/`, else a
/// bundle's under the repository root.
fn find_script(root: &Path, file: &str) -> Result<PathBuf, Error> {
    let mut places = Vec::new();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        places.push(dir.join("../benches").join(file));
    }
    places.push(root.join("benches").join(file));
    places.push(root.join("bundle/benches").join(file));
    places.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        let looked: Vec<String> = places.iter().map(|p| p.display().to_string()).collect();
        fail(format!(
            "the PyTorch comparison {file} is missing (looked in {}); rebuild the bundle \
             (`cargo xtask bundle` copies benches/*.py into it) or pass --no-torch",
            looked.join(", ")
        ))
    })
}

/// Fails unless `python3` runs, imports torch and sees a CUDA device.
fn torch_preflight() -> Result<(), Error> {
    let probe = "import sys, torch\n\
                 sys.exit(0 if torch.cuda.is_available() else 3)";
    let out = Command::new("python3")
        .args(["-c", probe])
        .output()
        .map_err(|e| {
            fail(format!(
                "python3 did not start ({e}): the PyTorch comparisons need it; \
                 pass --no-torch to run without them"
            ))
        })?;
    match out.status.code() {
        Some(0) => Ok(()),
        Some(3) => Err(fail(
            "PyTorch sees no CUDA device (torch.cuda.is_available() is False): the PyTorch \
             comparisons need one; pass --no-torch to run without them",
        )),
        _ => Err(fail(format!(
            "python3 could not import torch ({}): the PyTorch comparisons need it; pass \
             --no-torch to run without them",
            last_line(&out.stderr)
        ))),
    }
}

/// Fails unless `python3` imports CuPy and sees a CUDA device (B16's
/// comparison, `benches/cupy_cg.py`).
fn cupy_preflight() -> Result<(), Error> {
    let probe = "import sys, cupy\n\
                 sys.exit(0 if cupy.cuda.runtime.getDeviceCount() > 0 else 3)";
    let out = Command::new("python3")
        .args(["-c", probe])
        .output()
        .map_err(|e| fail(format!("python3 did not start ({e}); pass --no-torch")))?;
    match out.status.code() {
        Some(0) => Ok(()),
        _ => Err(fail(format!(
            "python3 could not import CuPy or sees no device ({}): B16's comparison \
             (benches/cupy_cg.py) needs it (`pip install cupy-cuda13x`); pass --no-torch \
             to run without the Python comparisons, or --filter to leave B16 out",
            last_line(&out.stderr)
        ))),
    }
}

fn last_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no message")
        .to_string()
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

/// Runs `t`'s script; its rows, or why not all of them came.
fn torch_rows(t: &TorchScript, script: &Path) -> Result<BTreeMap<String, f64>, String> {
    let out = Command::new("python3")
        .arg(script)
        .output()
        .map_err(|e| format!("{}: python3 did not start: {e}", t.file))?;
    // What the script said on the way (calibrations, checks) goes to the log.
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            t.file,
            out.status,
            last_line(&out.stderr)
        ));
    }
    script_rows(t, &String::from_utf8_lossy(&out.stdout))
}

/// The rows in a script's output (one JSON object a line), or which of
/// `t`'s rows it left out.
fn script_rows(t: &TorchScript, stdout: &str) -> Result<BTreeMap<String, f64>, String> {
    let rows: BTreeMap<String, f64> = stdout
        .lines()
        .filter_map(|l| Some((json_field(l, "name")?, number_after(l, "\"value\":")?)))
        .collect();
    let missing: Vec<&str> = t
        .rows
        .iter()
        .copied()
        .filter(|r| !rows.contains_key(*r))
        .collect();
    if missing.is_empty() {
        Ok(rows)
    } else {
        Err(format!(
            "{} left out its rows {}",
            t.file,
            missing.join(", ")
        ))
    }
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

fn min_of(rows: &BTreeMap<String, f64>, prefix: &str) -> Option<f64> {
    rows.iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .map(|(_, v)| *v)
        .reduce(f64::min)
}

/// The comparisons of DESIGN.md §7, as `ratio/B*` rows.
fn add_ratios(rows: &mut BTreeMap<String, f64>) {
    let get = |r: &BTreeMap<String, f64>, k: &str| r.get(k).copied();
    let mut ratios = Vec::new();
    let mut ratio = |name: &str, a: Option<f64>, b: Option<f64>| {
        if let (Some(a), Some(b)) = (a, b) {
            if b > 0.0 {
                ratios.push((format!("ratio/{name}"), a / b));
            }
        }
    };
    let r = &*rows;
    ratio("B1", get(r, "B1/tracked"), get(r, "B1/raw"));
    ratio("B2", get(r, "B2/tracked"), get(r, "B2/raw"));
    ratio("B3", get(r, "B3/tracked"), get(r, "B3/raw"));
    ratio("B3-vs-cudarc", get(r, "B3/tracked"), get(r, "B3/cudarc"));
    // Issue 13: the same kernel as a user's module, launched through the
    // typed path (`Kernel::launch`), against the raw call; goal <= 1.05.
    ratio("B3-user", get(r, "B3/user"), get(r, "B3/raw"));
    // Issue 25: a tracked 512 x 512 sgemm against raw cuBLAS on the same
    // stream, host-side cost (goal <= 1.10); 16 of them on 16 sibling
    // tasks: the speed-up over one stream (stated) and the share of one
    // strided-batched call's throughput (goal >= 0.5).
    ratio(
        "B15-vs-torch",
        get(r, "B15/tiled-32768"),
        get(r, "B15/torch-32768"),
    );
    ratio(
        "B15-vs-cupy",
        get(r, "B15/tiled-32768"),
        get(r, "B15/cupy-32768"),
    );
    ratio(
        "B15-8192-vs-torch",
        get(r, "B15/tiled-8192"),
        get(r, "B15/torch-8192"),
    );
    ratio(
        "B15-overlap",
        get(r, "B15/one-stream-32768"),
        get(r, "B15/tiled-32768"),
    );
    // B16: a CG step through gpu::sparse and gpu::blas against CuPy's cg
    // (both grids), and the memory-traffic bound (a copy of the step's
    // bytes) over the step on the large grid.
    ratio(
        "B16-small-vs-cupy",
        get(r, "B16/cg-small"),
        get(r, "B16/cupy-cg-small"),
    );
    ratio("B16-vs-cupy", get(r, "B16/cg"), get(r, "B16/cupy-cg"));
    ratio("B16-vs-bound", get(r, "B16/copy-bound"), get(r, "B16/cg"));
    ratio("B17", get(r, "B17/tracked"), get(r, "B17/raw"));
    ratio(
        "B17-setstream",
        get(r, "B17/raw-setstream"),
        get(r, "B17/raw"),
    );
    ratio(
        "B17-siblings",
        get(r, "B17/one-stream"),
        get(r, "B17/siblings"),
    );
    ratio(
        "B17-siblings-vs-batched",
        get(r, "B17/batched"),
        get(r, "B17/siblings"),
    );
    // B4's baseline: the same scope without the parent's later work (the
    // child's latency then still includes waiting for the fill it needs).
    let alone = get(r, "B4/child-latency-alone");
    ratio("B4", get(r, "B4/child-latency"), alone);
    ratio("B4-wait-all", get(r, "B4/child-latency-wait-all"), alone);
    ratio(
        "B4-vs-own-work",
        get(r, "B4/child-latency"),
        get(r, "B4/child-own-work"),
    );
    ratio("B5", get(r, "B5/siblings"), get(r, "B5/one-kernel"));
    ratio(
        "B5-one-stream",
        get(r, "B5/one-stream"),
        get(r, "B5/one-kernel"),
    );
    ratio(
        "B5-wait-all",
        get(r, "B5/siblings-wait-all"),
        get(r, "B5/one-kernel"),
    );
    ratio("B6", get(r, "B6/one-launch"), get(r, "B6/par-chunks"));
    // Issue 14: a sum by 8 chunks over 1 GiB against one device reduction
    // of it all and against `torch.sum`; goals >= 0.9. Issue 26: the chunks'
    // sums combined on the device (one host read); `.map(sum).sum()`, one
    // host read per chunk, is stated (`B14-host-combine`).
    ratio(
        "B14",
        get(r, "B14/one-reduction"),
        get(r, "B14/par-chunks-sum-device"),
    );
    ratio(
        "B14-host-combine",
        get(r, "B14/one-reduction"),
        get(r, "B14/par-chunks-sum"),
    );
    // Issue 16: the task graph (10,000 tasks over 256 buffers) through
    // gpu::scope against the same graph by hand on 8 PyTorch streams (goal
    // <= 0.25) and against one CUDA graph of it replayed (goal <= 1.5).
    ratio(
        "B13-vs-torch",
        get(r, "B13/gpu-scope"),
        get(r, "B13/torch-8-streams"),
    );
    ratio(
        "B13-vs-graph",
        get(r, "B13/gpu-scope"),
        get(r, "B13/cuda-graph"),
    );
    // The same scope captured once (`gpu::capture`) and replayed, against
    // PyTorch's graph of it (goal <= 1.5), and the floor of launching it
    // kernel by kernel (raw launches from as many threads, no dependences)
    // against that graph.
    ratio(
        "B13-capture-vs-graph",
        get(r, "B13/gpu-capture-replay"),
        get(r, "B13/cuda-graph"),
    );
    // Issue 26: 100 iterations of the graph through a serial graphed scope
    // (`gpu::Graphed::serial`, the first build included) against 100 replays of
    // PyTorch's graph (goal <= 1.10); building the graph (the first run's
    // time to its launch) against one plain run of the scope (goal <= 2.0).
    ratio(
        "B13-iter",
        get(r, "B13/gpu-graphed-serial-100"),
        get(r, "B13/cuda-graph-100"),
    );
    ratio(
        "B13-capture",
        get(r, "B13/gpu-graphed-serial-build"),
        get(r, "B13/gpu-scope"),
    );
    // The same with the tasks as jobs of the pool (no goal).
    ratio(
        "B13-capture-threaded",
        get(r, "B13/gpu-graphed-build"),
        get(r, "B13/gpu-scope"),
    );
    ratio(
        "B13-raw-floor-vs-graph",
        r.iter()
            .filter(|(k, _)| k.starts_with("B13/raw-launches-") && !k.ends_with("-1-thread"))
            .map(|(_, v)| *v)
            .reduce(f64::min),
        get(r, "B13/cuda-graph"),
    );
    ratio(
        "B14-vs-torch",
        get(r, "B14/torch-sum"),
        get(r, "B14/par-chunks-sum-device"),
    );
    let par_map = min_of(r, "B7/par-map-pinned");
    ratio("B7", get(r, "B7/transfer-bound"), par_map);
    ratio("B7-vs-torch", min_of(r, "B7/torch"), par_map);
    ratio("B7-vs-serial", get(r, "B7/copy-compute-copy"), par_map);
    ratio(
        "B7-pageable",
        get(r, "B7/transfer-bound"),
        min_of(r, "B7/par-map-pageable"),
    );
    // Issue 16: pageable `par_map` against the same pipeline in PyTorch from
    // pageable tensors (goal >= 1.0), and the best a staged pipeline can
    // reach here: the bound over the host copies alone.
    ratio(
        "B7-pageable-vs-torch",
        min_of(r, "B7/pageable-torch"),
        min_of(r, "B7/par-map-pageable"),
    );
    ratio(
        "B7-pageable-floor",
        get(r, "B7/transfer-bound"),
        get(r, "B7/host-copies"),
    );
    let bare = get(r, "B8/raw-launch").or(get(r, "B8/bare-launch"));
    ratio("B8", get(r, "B8/spawn-join"), bare);
    ratio("B8-wait-all", get(r, "B8/spawn-join-wait-all"), bare);
    ratio(
        "B10-join-tree",
        get(r, "B10/join-tree-gpu"),
        get(r, "B10/join-tree-rayon"),
    );
    ratio(
        "B10-spawns",
        get(r, "B10/spawns-gpu"),
        get(r, "B10/spawns-rayon"),
    );
    // Issue 26: 02-siblings' measurement in fresh processes, each run's
    // speed-up over one stream, and the least of them (goal >= 7.5).
    let cold: Vec<(String, f64)> = r
        .iter()
        .filter_map(|(k, v)| {
            let run = k.strip_prefix("B5-cold/")?.strip_suffix("-one-stream")?;
            let together = get(r, &format!("B5-cold/{run}-siblings"))?;
            (together > 0.0).then(|| (format!("ratio/B5-cold-{run}"), v / together))
        })
        .collect();
    if let Some(min) = cold.iter().map(|(_, x)| *x).reduce(f64::min) {
        let name = "B5-cold-min";
        ratios.push((format!("ratio/{name}"), min));
    }
    ratios.extend(cold);
    rows.extend(ratios);
    multi::add_ratios(rows);
}

fn unit(name: &str) -> &'static str {
    if name.starts_with("ratio/") {
        "x"
    } else if name.starts_with("peer/") {
        "GB/s"
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
