//! `cargo xtask bench --multi-gpu`: the multi-GPU benchmarks (the rows of
//! [`super::table::BENCHES`] marked `multi_gpu`) on a machine with two GPUs
//! (nvidia-h200-x2), written to
//! `benches/results/<date>-<commit>-<device>-x<count>/bench.json` with a
//! table of rows, ratios and their goals.
//!
//! - B11, one process: `09-multi-gpu-heat` on 16384 x 16384 f32, 101 steps
//!   (the first one a warm-up, not timed) on one GPU, on two, and on two
//!   without the halo exchange;
//! - B11-mpi: the same example with `--mpi`, two ranks under `mpirun`;
//! - peer copies: the `multi_gpu` bench binary (the library's `copy_peer`
//!   against a raw `cuMemcpyPeerAsync`), and every other bench binary of
//!   the bundle that prints rows (B12, NCCL: rows `B12/library-<size>` and
//!   `B12/raw-<size>` give `ratio/B12-<size>`);
//! - PyTorch: `benches/torch_multi_gpu.py` (the same heat equation on one
//!   and two GPUs, a peer copy).
//!
//! Each example configuration runs `--repeat` times (default 3, the
//! configurations interleaved) and its median becomes the row. The
//! binaries are those of the lean bundle (`cargo xtask bundle
//! --multi-gpu`, `bundle-x2/bin`): beside this binary when it runs from the
//! bundle, else built first. A piece that cannot run fails the command
//! (exit 1): fewer than two GPUs, no `mpirun`, no PyTorch (unless
//! `--no-torch`), a run that fails or prints no row. Missed goals do not
//! fail it: the table says which.
//!
//! `--quick` runs tiny sizes on whatever backend `GPU_BACKEND` names (the
//! host backend simulates two devices): a check of the harness, written
//! only under `--out`.

use super::table::{add_ratios, goal, goals, named_by};
use super::torch::{find_script, last_line, script_rows, TorchScript};
use super::{
    commit, date, device_name, driver, field, fmt_value, number_after, parse_rows, render_json, sh,
    slug,
};
use crate::{fail, Error};
use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[cfg(test)]
mod test;

/// The heat example, as named in the bundle.
const HEAT: &str = "example.09-multi-gpu-heat";
/// The bench binary with the peer-copy rows, and the rows it must print.
const PEER_BENCH: &str = "bench.multi_gpu";
const PEER_ROWS: &[&str] = &["peer/library-0to1", "peer/raw-0to1"];

/// The PyTorch comparison.
const TORCH: TorchScript = TorchScript {
    file: "torch_multi_gpu.py",
    groups: &["B11"],
    rows: &["B11/torch-1-gpu", "B11/torch-2-gpu", "peer/torch-0to1"],
};

/// What one `--multi-gpu` run does.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub(super) nx: usize,
    pub(super) ny: usize,
    /// Steps given to the example, the first a warm-up.
    pub(super) steps: usize,
    pub(super) repeat: usize,
    pub(super) quick: bool,
    pub(super) no_torch: bool,
    pub(super) out: Option<PathBuf>,
}

pub(super) fn parse(args: &[String]) -> Result<Plan, Error> {
    let mut p = Plan {
        nx: 16384,
        ny: 16384,
        steps: 101,
        repeat: 3,
        quick: false,
        no_torch: false,
        out: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut num = |flag: &str| -> Result<usize, Error> {
            it.next()
                .and_then(|v| v.parse().ok())
                .filter(|n| *n > 0)
                .ok_or_else(|| Error::Usage(format!("{flag} N (N > 0)")))
        };
        match a.as_str() {
            "--multi-gpu" => {}
            "--quick" => p.quick = true,
            "--no-torch" => p.no_torch = true,
            "--repeat" => p.repeat = num("--repeat")?,
            "--out" => {
                p.out = Some(
                    it.next()
                        .map(PathBuf::from)
                        .ok_or_else(|| Error::Usage("--out DIR".into()))?,
                )
            }
            other => {
                return Err(Error::Usage(format!(
                    "unknown argument `{other}` for bench --multi-gpu"
                )))
            }
        }
    }
    if p.quick {
        (p.nx, p.ny, p.steps) = (256, 258, 6);
    }
    Ok(p)
}

pub(super) fn run(args: &[String]) -> Result<(), Error> {
    let plan = parse(args)?;
    let backend = std::env::var("GPU_BACKEND").unwrap_or_else(|_| "cuda".into());
    if !plan.quick && backend != "cuda" {
        return Err(fail(format!(
            "GPU_BACKEND={backend}: B11 is measured on CUDA GPUs (--quick checks the harness \
             on another backend)"
        )));
    }
    // Preflight: everything that can be missing, before measuring anything.
    let gpus = gpu_count();
    if !plan.quick && gpus < 2 {
        return Err(fail(format!(
            "bench --multi-gpu needs two GPUs; nvidia-smi lists {gpus}"
        )));
    }
    let mpirun = mpirun()?;
    let root = super::repo_root();
    let torch = if plan.no_torch {
        eprintln!(
            "WARNING: --no-torch: {} was NOT run; missing rows: {} (and ratio/B11-vs-torch)",
            TORCH.file,
            TORCH.rows.join(", ")
        );
        None
    } else {
        let script = find_script(&root, TORCH.file)?;
        torch_preflight()?;
        Some(script)
    };
    let bin = binaries(&root)?;
    // The commit of the results: the bundle's that runs.
    if std::env::var_os("BENCH_COMMIT").is_none() {
        if let Ok(c) = fs::read_to_string(bin.join("../COMMIT")) {
            std::env::set_var("BENCH_COMMIT", c.trim());
        }
    }
    eprintln!(
        "bench --multi-gpu: {} GPU(s), backend {backend}; binaries in {}",
        gpus,
        bin.display()
    );

    let mut errors = Vec::new();
    let mut rows = BTreeMap::new();
    // B11 in one process, the configurations interleaved.
    let configs: [(&str, usize, bool); 3] = [
        ("B11/1-gpu", 1, true),
        ("B11/2-gpu", 2, true),
        ("B11/2-gpu-no-halo", 2, false),
    ];
    let mut times: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let size = [
        "--nx".to_string(),
        plan.nx.to_string(),
        "--ny".into(),
        plan.ny.to_string(),
        "--steps".into(),
        plan.steps.to_string(),
    ];
    for r in 0..plan.repeat {
        for (name, devices, halo) in configs {
            let mut args = size.to_vec();
            args.extend(["--devices".into(), devices.to_string()]);
            if !halo {
                args.push("--no-halo".into());
            }
            eprintln!(
                "[{name} {}/{}] {HEAT} {}",
                r + 1,
                plan.repeat,
                args.join(" ")
            );
            let mut cmd = Command::new(bin.join(HEAT));
            cmd.args(&args)
                .env("GPU_BACKEND", &backend)
                .env("NCCL_NVLS_ENABLE", "0");
            match run_heat(cmd, &plan, devices, halo, "process", &backend) {
                Ok(ms) => times.entry(name).or_default().push(ms),
                Err(e) => errors.push(format!("{name}: {e}")),
            }
        }
    }
    // B11 with two MPI ranks.
    for r in 0..plan.repeat {
        let name = "B11-mpi/2-ranks";
        let mut cmd = Command::new(&mpirun[0]);
        cmd.args(&mpirun[1..])
            .args(["-np", "2", "-x"])
            .arg(format!("GPU_BACKEND={backend}"))
            .args(["-x", "NCCL_NVLS_ENABLE=0"])
            .arg(bin.join(HEAT))
            .arg("--mpi")
            .args(&size);
        eprintln!("[{name} {}/{}] {cmd:?}", r + 1, plan.repeat);
        match run_heat(cmd, &plan, 2, true, "mpi", &backend) {
            Ok(ms) => times.entry(name).or_default().push(ms),
            Err(e) => errors.push(format!("{name}: {e}")),
        }
    }
    for (name, v) in &times {
        if v.len() == plan.repeat {
            rows.insert(name.to_string(), median(v.clone()) * 1e6);
        }
    }
    // The bench binaries that print rows: `bench.multi_gpu` (peer copies)
    // and any other `bench.*` (B12's).
    for b in super::bench_files(&bin).unwrap_or_default() {
        let name = b.file_name().and_then(|f| f.to_str()).unwrap_or_default();
        eprintln!("[{name}] {}", b.display());
        let mut cmd = Command::new(&b);
        cmd.env("GPU_BACKEND", &backend)
            .env("NCCL_NVLS_ENABLE", "0");
        if plan.quick {
            cmd.arg("--quick");
        }
        let required: &'static [&'static str] = if name == PEER_BENCH { PEER_ROWS } else { &[] };
        match run_rows(cmd, name, required) {
            Ok(r) => rows.extend(r),
            Err(e) => errors.push(e),
        }
    }
    if !bin.join(PEER_BENCH).is_file() {
        errors.push(format!("{PEER_BENCH} is not in {}", bin.display()));
    }
    // PyTorch.
    if let Some(script) = &torch {
        eprintln!("[PyTorch] {}", script.display());
        let mut cmd = Command::new("python3");
        cmd.arg(script)
            .args(["--nx", &plan.nx.to_string(), "--ny", &plan.ny.to_string()])
            .args(["--steps", &(plan.steps - 1).max(1).to_string()])
            .args(["--repeats", &plan.repeat.to_string()])
            .args(["--peer-mib", if plan.quick { "16" } else { "1024" }])
            .env("NCCL_NVLS_ENABLE", "0");
        match run_rows(cmd, TORCH.file, TORCH.rows) {
            Ok(r) => rows.extend(r),
            Err(e) => errors.push(e),
        }
    }
    add_ratios(&mut rows);

    // Results: benches/results/<device>-x<n>.json (not for --quick), the
    // table, both also under --out.
    let device = device_name();
    let stem = format!("{}-x{}", slug(&device), gpus.max(2));
    let results_dir = root.join("benches/results");
    let previous_text =
        super::report::newest_run(&results_dir, &stem).and_then(|p| fs::read_to_string(p).ok());
    let previous = previous_text.as_deref().map(parse_rows).unwrap_or_default();
    let prev_commit = previous_text
        .as_deref()
        .and_then(|t| field(t, "commit"))
        .unwrap_or_else(|| "-".into());
    let json = render_json(&rows, &format!("{device} x{}", gpus.max(2)));
    let results = super::report::run_dir(
        &results_dir,
        &field(&json, "date").unwrap_or_default(),
        &commit(),
        &stem,
    )
    .join("bench.json");
    let mut table = render_table(&rows, &previous, &commit(), &prev_commit);
    table.push_str(&format!(
        "\nB11: 09-multi-gpu-heat, {}x{} f32, {} timed steps (after one warm-up), median of {} \
         runs each; B11-mpi: two ranks under `{}`; driver {}, {}.\n",
        plan.nx,
        plan.ny,
        plan.steps - 1,
        plan.repeat,
        mpirun.join(" "),
        driver(),
        date()
    ));
    if plan.no_torch {
        table.push_str(&format!(
            "\nWARNING: --no-torch: missing rows {} and ratio/B11-vs-torch\n",
            TORCH.rows.join(", ")
        ));
    }
    if !errors.is_empty() {
        table.push_str("\nFAILED: pieces that did not run (their rows are missing):\n");
        for e in &errors {
            table.push_str(&format!("- {e}\n"));
        }
    }
    if !plan.quick {
        fs::create_dir_all(results.parent().unwrap_or(&root))
            .map_err(|e| fail(format!("creating the run's folder: {e}")))?;
        fs::write(&results, &json)
            .map_err(|e| fail(format!("writing {}: {e}", results.display())))?;
        println!("\nwrote {}", results.display());
    }
    let out = plan
        .out
        .clone()
        .or_else(|| std::env::var_os("OUT").map(PathBuf::from));
    if let Some(o) = &out {
        let _ = fs::create_dir_all(o);
        let name = if plan.quick {
            format!("{stem}-quick.json")
        } else {
            format!("{stem}.json")
        };
        let _ = fs::write(o.join(name), &json);
        let _ = fs::write(o.join("bench-table.md"), &table);
    }
    println!();
    print!("{table}");
    if errors.is_empty() {
        Ok(())
    } else {
        Err(fail(format!(
            "{} piece(s) of bench --multi-gpu did not run (above)",
            errors.len()
        )))
    }
}

/// GPUs `nvidia-smi -L` lists (0 without it).
fn gpu_count() -> usize {
    sh("nvidia-smi", &["-L"])
        .map(|s| s.lines().filter(|l| l.starts_with("GPU ")).count())
        .unwrap_or(0)
}

/// The `mpirun` command line before `-np`: `MPIRUN` (default `mpirun`),
/// `--allow-run-as-root`, and `MPIRUN_ARGS` (default: Open MPI's plain
/// shared-memory copies, as containers may forbid the cross-process ones).
/// Fails when `mpirun` does not run.
fn mpirun() -> Result<Vec<String>, Error> {
    let exe = std::env::var("MPIRUN").unwrap_or_else(|_| "mpirun".into());
    let ok = Command::new(&exe)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return Err(fail(format!(
            "`{exe} --version` did not run: B11-mpi needs Open MPI's mpirun (apt-get install \
             openmpi-bin)"
        )));
    }
    let extra = std::env::var("MPIRUN_ARGS")
        .unwrap_or_else(|_| "--mca btl_vader_single_copy_mechanism none".into());
    let mut v = vec![exe, "--allow-run-as-root".into()];
    v.extend(extra.split_whitespace().map(String::from));
    Ok(v)
}

/// Fails unless `python3` imports torch and sees two CUDA devices.
fn torch_preflight() -> Result<(), Error> {
    let probe = "import sys, torch\n\
                 sys.exit(0 if torch.cuda.device_count() >= 2 else 3)";
    let out = Command::new("python3")
        .args(["-c", probe])
        .output()
        .map_err(|e| {
            fail(format!(
                "python3 did not start ({e}): {} needs it; pass --no-torch to run without it",
                TORCH.file
            ))
        })?;
    match out.status.code() {
        Some(0) => Ok(()),
        Some(3) => Err(fail(format!(
            "PyTorch sees fewer than two CUDA devices: {} needs two; pass --no-torch to run \
             without it",
            TORCH.file
        ))),
        _ => Err(fail(format!(
            "python3 could not import torch ({}): {} needs it; pass --no-torch to run without it",
            last_line(&out.stderr),
            TORCH.file
        ))),
    }
}

/// The folder of the lean bundle's binaries: this binary's own when it
/// runs from the bundle (not under cargo), else `bundle-x2/bin`, built
/// first (`cargo xtask bundle --multi-gpu`).
fn binaries(root: &Path) -> Result<PathBuf, Error> {
    let here = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf));
    if std::env::var_os("CARGO").is_none() {
        if let Some(h) = here.filter(|h| h.join(HEAT).is_file()) {
            return Ok(h);
        }
        let b = root.join("bundle-x2/bin");
        if b.join(HEAT).is_file() {
            return Ok(b);
        }
    }
    crate::bundle::run(&["--multi-gpu".to_string()])?;
    Ok(root.join("bundle-x2/bin"))
}

/// What a child process did.
struct Ran {
    ok: bool,
    status: String,
    stdout: String,
    stderr: String,
}

/// Runs `cmd` with its output captured, killed after `limit`.
fn capture(mut cmd: Command, limit: Duration) -> Result<Ran, String> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{:?} did not start: {e}", cmd.get_program()))?;
    let pipe = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut r) = r {
                let _ = r.read_to_string(&mut s);
            }
            s
        })
    };
    let out = pipe(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = pipe(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if start.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for {:?}: {e}", cmd.get_program())),
        }
    };
    let (stdout, stderr) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    eprint!("{stdout}{stderr}");
    Ok(Ran {
        ok: status.is_some_and(|s| s.success()),
        status: status.map_or(format!("killed after {} s", limit.as_secs()), |s| {
            s.to_string()
        }),
        stdout,
        stderr,
    })
}

/// How long a child may run.
const LIMIT: Duration = Duration::from_secs(300);

/// Runs the heat example; the milliseconds of its timed steps, after
/// checking that it ran what was asked.
fn run_heat(
    cmd: Command,
    plan: &Plan,
    devices: usize,
    halo: bool,
    mode: &str,
    backend: &str,
) -> Result<f64, String> {
    let ran = capture(cmd, LIMIT)?;
    if !ran.ok {
        return Err(format!(
            "{HEAT} failed ({}): {}",
            ran.status,
            last_line(ran.stderr.as_bytes())
        ));
    }
    let h = heat_line(&ran.stdout).ok_or_else(|| format!("{HEAT} printed no timing line"))?;
    let want = HeatLine {
        mode: mode.into(),
        backend: backend.into(),
        devices,
        nx: plan.nx,
        ny: plan.ny,
        steps: plan.steps - 1,
        halo,
        ms: h.ms,
    };
    if h != want {
        return Err(format!("{HEAT} ran {h:?}, not {want:?}"));
    }
    Ok(h.ms)
}

/// The timing line of `09-multi-gpu-heat`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct HeatLine {
    pub(super) mode: String,
    pub(super) backend: String,
    pub(super) devices: usize,
    pub(super) nx: usize,
    pub(super) ny: usize,
    pub(super) steps: usize,
    pub(super) halo: bool,
    pub(super) ms: f64,
}

/// The example's JSON line in `stdout` (the last one).
pub(super) fn heat_line(stdout: &str) -> Option<HeatLine> {
    let l = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("{\"example\":\"09-multi-gpu-heat\""))?;
    let s = |k: &str| -> Option<String> {
        let key = format!("\"{k}\":\"");
        let a = l.find(&key)? + key.len();
        Some(l[a..a + l[a..].find('"')?].to_string())
    };
    let n = |k: &str| number_after(l, &format!("\"{k}\":"));
    Some(HeatLine {
        mode: s("mode")?,
        backend: s("backend")?,
        devices: n("devices")? as usize,
        nx: n("nx")? as usize,
        ny: n("ny")? as usize,
        steps: n("steps")? as usize,
        halo: l.contains("\"halo\":true"),
        ms: n("ms")?,
    })
}

/// Runs a program that prints rows (one JSON object a line); its rows, or
/// why it failed or left out one of `required`.
fn run_rows(
    cmd: Command,
    name: &str,
    required: &'static [&'static str],
) -> Result<BTreeMap<String, f64>, String> {
    let ran = capture(cmd, LIMIT)?;
    if !ran.ok {
        return Err(format!(
            "{name} failed ({}): {}",
            ran.status,
            last_line(ran.stderr.as_bytes())
        ));
    }
    let t = TorchScript {
        file: "",
        groups: &[],
        rows: required,
    };
    script_rows(&t, &ran.stdout).map_err(|e| format!("{name}{e}"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The table: each row, the previous run's figure, their ratio, and the
/// goal with whether it is met.
pub(super) fn render_table(
    rows: &BTreeMap<String, f64>,
    previous: &BTreeMap<String, f64>,
    current_commit: &str,
    previous_commit: &str,
) -> String {
    let mut s = format!(
        "| benchmark | current: {current_commit} | previous: {previous_commit} | ratio | goal |\n\
         |---|---|---|---|---|\n"
    );
    for (k, v) in rows {
        let (p, r) = match previous.get(k) {
            Some(p) if *p > 0.0 => (fmt_value(k, *p), format!("{:.2}", v / p)),
            _ => ("-".into(), "-".into()),
        };
        let g = match goal(k) {
            Some(g) => format!("{}: {}", g.text(), if g.met(*v) { "met" } else { "MISSED" }),
            None => String::new(),
        };
        s.push_str(&format!(
            "| {k} | {} | {p} | {r} | {g} |\n",
            fmt_value(k, *v)
        ));
    }
    // The multi-GPU goals: those of one ratio, listed when missing; those
    // of a ratio a key (`B12-*`: each size), said when none came.
    let multi = || goals().filter(|(b, _, _)| b.multi_gpu);
    let missing: Vec<String> = multi()
        .filter(|(_, name, _)| !name.contains('*'))
        .map(|(_, name, _)| format!("ratio/{name}"))
        .filter(|n| !rows.contains_key(n))
        .collect();
    if !missing.is_empty() {
        s.push_str(&format!("\nnot measured: {}\n", missing.join(", ")));
    }
    for (b, name, _) in multi().filter(|(_, name, _)| name.contains('*')) {
        let measured = rows
            .keys()
            .any(|k| k.strip_prefix("ratio/").is_some_and(|k| named_by(name, k)));
        if !measured {
            s.push_str(&format!(
                "{} ({}, against {}): not measured by this bundle\n",
                b.id, b.what, b.against
            ));
        }
    }
    s
}
