//! `cargo xtask bench`: runs the benchmarks (B1-B9), writes
//! `benches/results/<device>.json` and prints a table against the committed
//! results it replaces.
//!
//! On a GPU machine without cargo it runs the bench binaries of the bundle
//! (`bundle/bin/bench.*`, see `cargo xtask bundle`); elsewhere it builds
//! them with cargo first. Criterion writes its estimates under a scratch
//! `CRITERION_HOME`; the median of each benchmark becomes one row, and
//! `ratio/B*` rows compare each with what DESIGN.md §7 compares it to.

use crate::{fail, workspace_root, Error};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) fn run(args: &[String]) -> Result<(), Error> {
    let mut filter = None;
    let mut out_dir = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--filter" => filter = it.next().cloned(),
            "--out" => out_dir = it.next().map(PathBuf::from),
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
    let benches = bench_binaries(&root)?;
    let scratch = std::env::temp_dir().join(format!("xtask-bench-{}", std::process::id()));
    let crit = scratch.join("criterion");
    fs::create_dir_all(&crit).map_err(|e| fail(format!("creating {}: {e}", crit.display())))?;
    let total = benches.len() + 1;
    for (i, b) in benches.iter().enumerate() {
        eprintln!("[{}/{total}] {}", i + 1, b.display());
        let mut cmd = Command::new(b);
        cmd.arg("--bench").env("CRITERION_HOME", &crit);
        if let Some(f) = &filter {
            cmd.arg(f);
        }
        let status = cmd
            .status()
            .map_err(|e| fail(format!("running {}: {e}", b.display())))?;
        if !status.success() {
            return Err(fail(format!("{} failed: {status}", b.display())));
        }
    }
    let mut rows = criterion_medians(&crit);
    eprintln!("[{total}/{total}] benches/torch_pipeline.py (PyTorch B7)");
    rows.extend(torch_rows(&root));
    add_ratios(&mut rows);

    let device = device_name();
    let slug = slug(&device);
    let results = root.join("benches/results");
    fs::create_dir_all(&results)
        .map_err(|e| fail(format!("creating {}: {e}", results.display())))?;
    let path = results.join(format!("{slug}.json"));
    let previous = fs::read_to_string(&path)
        .ok()
        .map(|t| parse_rows(&t))
        .unwrap_or_default();
    let prev_commit = fs::read_to_string(&path)
        .ok()
        .and_then(|t| field(&t, "commit"))
        .unwrap_or_else(|| "-".into());
    let json = render_json(&rows, &device);
    fs::write(&path, &json).map_err(|e| fail(format!("writing {}: {e}", path.display())))?;
    if let Some(o) = out_dir {
        let _ = fs::create_dir_all(&o);
        let _ = fs::write(o.join(format!("{slug}.json")), &json);
    }
    let table = render_table(&rows, &previous, &commit(), &prev_commit);
    if let Ok(o) = std::env::var("OUT") {
        let _ = fs::write(Path::new(&o).join("bench-table.md"), &table);
    }
    println!("\nwrote {}\n", path.display());
    print!("{table}");
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
    let bundled = root.join("bundle/bin");
    let mut found: Vec<PathBuf> = fs::read_dir(&bundled)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|f| f.to_str())
                        .is_some_and(|f| f.starts_with("bench."))
                })
                .collect()
        })
        .unwrap_or_default();
    if found.is_empty() {
        crate::bundle::run(&[])?;
        return bench_binaries_built(root);
    }
    found.sort();
    Ok(found)
}

fn bench_binaries_built(root: &Path) -> Result<Vec<PathBuf>, Error> {
    let bin = root.join("bundle/bin");
    let mut v: Vec<PathBuf> = fs::read_dir(&bin)
        .map_err(|e| fail(format!("reading {}: {e}", bin.display())))?
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

fn torch_rows(root: &Path) -> BTreeMap<String, f64> {
    let script = root.join("benches/torch_pipeline.py");
    let mut rows = BTreeMap::new();
    let Ok(out) = Command::new("python3").arg(&script).output() else {
        eprintln!("  python3 not found: no PyTorch rows");
        return rows;
    };
    if !out.status.success() {
        eprintln!(
            "  PyTorch pipeline did not run: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
        return rows;
    }
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let (Some(n), Some(v)) = (json_field(line, "name"), number_after(line, "\"value\":")) {
            rows.insert(n, v);
        }
    }
    rows
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
    // Issue 14: `par_chunks(&x, n).map(sum).sum()` over 1 GiB against one
    // device reduction of it all and against `torch.sum`; goals >= 0.9.
    ratio(
        "B14",
        get(r, "B14/one-reduction"),
        get(r, "B14/par-chunks-sum"),
    );
    ratio(
        "B14-vs-torch",
        get(r, "B14/torch-sum"),
        get(r, "B14/par-chunks-sum"),
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
    rows.extend(ratios);
}

fn unit(name: &str) -> &'static str {
    if name.starts_with("ratio/") {
        "x"
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
