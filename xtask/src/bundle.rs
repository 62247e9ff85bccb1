//! `cargo xtask bundle`: builds the GPU test binaries, the examples and
//! xtask itself (release, stripped) into `bundle/`, with the PyTorch
//! comparisons that `bench` runs (`benches/*.py` into `bundle/benches/`) and
//! `bundle/run.sh`, which runs them on a machine without cargo:
//!
//! ```text
//! bash bundle/run.sh                                  # tests, examples, bench; logs under $OUT
//! BENCH_ARGS="--filter B13" bash bundle/run.sh bench  # one benchmark group
//! ```
//!
//! `--multi-gpu` builds the lean bundle of the two-GPU machine instead,
//! `bundle-x2/` (well under the 64 MiB a run carries): see [`multi_gpu`].

use crate::{fail, workspace_root, Error};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

#[cfg(test)]
mod test;

/// Crates whose tests go in the bundle.
const PACKAGES: &[&str] = &["gpu-sched", "gpu-kernels", "gpu-libs", "gpu-scope"];

pub(crate) fn run(args: &[String]) -> Result<(), Error> {
    match args.first().map(String::as_str) {
        None => {}
        Some("--multi-gpu") if args.len() == 1 => return multi_gpu(),
        Some(a) => {
            return Err(Error::Usage(format!(
                "bundle takes no argument but --multi-gpu, got `{a}`"
            )))
        }
    }
    let root = workspace_root();
    let out = root.join("bundle");
    let bin = out.join("bin");
    let _ = fs::remove_dir_all(&out);
    fs::create_dir_all(&bin).map_err(|e| fail(format!("creating {}: {e}", bin.display())))?;

    let mut exes = Vec::new();
    for pkg in PACKAGES {
        exes.extend(cargo_executables(
            &root,
            &["test", "--release", "--no-run", "-p", pkg],
        )?);
    }
    exes.extend(cargo_executables(
        &root,
        &["build", "--release", "--examples", "-p", "gpu-examples"],
    )?);
    exes.extend(cargo_executables(
        &root,
        &["build", "--release", "--bins", "-p", "gpu-testkit"],
    )?);
    exes.extend(cargo_executables(
        &root,
        &["bench", "--no-run", "-p", "gpu-benches", "--bench", "gpu"],
    )?);
    exes.extend(cargo_executables(
        &root,
        &["bench", "--no-run", "-p", "gpu-benches", "--bench", "cold"],
    )?);
    exes.extend(cargo_executables(
        &root,
        &["bench", "--no-run", "-p", "gpu-benches", "--bench", "waits"],
    )?);
    exes.extend(cargo_executables(
        &root,
        &["bench", "--no-run", "-p", "gpu-epoch", "--bench", "ledger"],
    )?);
    // The oracle's random programs (`ratio/ledger-unnecessary-random`).
    exes.extend(cargo_executables(
        &root,
        &[
            "test",
            "--release",
            "--no-run",
            "-p",
            "gpu-epoch",
            "--test",
            "oracle",
        ],
    )?);
    exes.extend(cargo_executables(
        &root,
        &["build", "--release", "-p", "xtask"],
    )?);

    let names = install(exes, &bin)?;
    let size = folder_size(&bin, &names);
    let scripts = copy_scripts(&root.join("benches"), &out.join("benches"))?;
    write_commit(&root, &out)?;
    fs::write(out.join("run.sh"), RUN_SH).map_err(|e| fail(format!("writing run.sh: {e}")))?;
    println!(
        "bundle: {} binaries, {:.1} MiB in {}\nrun it on the GPU machine with: bash bundle/run.sh",
        names.len(),
        size as f64 / (1 << 20) as f64,
        out.display()
    );
    for n in &names {
        println!("  {n}");
    }
    for n in &scripts {
        println!("  benches/{n}");
    }
    Ok(())
}

/// Copies each executable into `bin` as `<kind>.<name>` (without the
/// hash suffix of test and bench binaries), stripped; their names, sorted.
fn install(exes: Vec<(String, PathBuf)>, bin: &Path) -> Result<Vec<String>, Error> {
    let mut names = Vec::new();
    for (kind, path) in exes {
        let file = path
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or_default();
        // Test binaries carry a hash suffix: `matrix-0123abcd`.
        let base = match (kind.as_str(), file.rsplit_once('-')) {
            ("test" | "bench", Some((b, h)))
                if h.len() == 16 && h.chars().all(|c| c.is_ascii_hexdigit()) =>
            {
                b
            }
            _ => file,
        };
        let name = format!("{kind}.{base}");
        let dst = bin.join(&name);
        fs::copy(&path, &dst).map_err(|e| fail(format!("copying {}: {e}", path.display())))?;
        let _ = Command::new("strip").arg(&dst).status();
        names.push(name);
    }
    names.sort();
    names.dedup();
    Ok(names)
}

/// Bytes of the files `names` of `dir`.
fn folder_size(dir: &Path, names: &[String]) -> u64 {
    names
        .iter()
        .filter_map(|n| fs::metadata(dir.join(n)).ok())
        .map(|m| m.len())
        .sum()
}

/// `out/COMMIT`: the commit the bundle was built from.
fn write_commit(root: &Path, out: &Path) -> Result<(), Error> {
    let commit = Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .current_dir(root)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    fs::write(out.join("COMMIT"), format!("{commit}\n"))
        .map_err(|e| fail(format!("writing COMMIT: {e}")))
}

/// The most a run carries (the device tool's limit for all carried paths).
const CARRY_LIMIT: u64 = 64 << 20;

/// `bundle --multi-gpu`: the lean bundle of the two-GPU machine,
/// `bundle-x2/`, holding only what its run needs, built with the feature
/// `mpi` (Open MPI's `libmpi.so.40` is on that machine; building needs
/// `libopenmpi-dev` and `libclang-dev` here):
///
/// - `09-multi-gpu-heat` (B11, its checks, `--mpi`) and `10-mpi`;
/// - the test binaries of `crates/gpu-scope/tests/devices.rs` and, where
///   it exists, `tests/nccl.rs`;
/// - the bench binaries that print rows: `multi_gpu` (peer copies) and,
///   where gpu-scope declares it, `nccl` (B12);
/// - xtask (`bench --multi-gpu` runs it all), `benches/torch_multi_gpu.py`,
///   and `run.sh`:
///
/// ```text
/// bash bundle-x2/run.sh                 # tests examples bench; logs under $OUT
/// BENCH_ARGS=--no-torch bash bundle-x2/run.sh bench
/// ```
fn multi_gpu() -> Result<(), Error> {
    let root = workspace_root();
    let out = root.join("bundle-x2");
    let bin = out.join("bin");
    let _ = fs::remove_dir_all(&out);
    fs::create_dir_all(&bin).map_err(|e| fail(format!("creating {}: {e}", bin.display())))?;
    let builds = multi_gpu_builds();
    let mut exes = Vec::new();
    for args in &builds {
        let args: Vec<&str> = args.iter().map(|a| a.as_str()).collect();
        exes.extend(cargo_executables(&root, &args)?);
    }
    exes.extend(cargo_executables(
        &root,
        &["build", "--release", "-p", "xtask"],
    )?);
    let names = install(exes, &bin)?;
    let size = folder_size(&bin, &names);
    let scripts = out.join("benches");
    fs::create_dir_all(&scripts)
        .map_err(|e| fail(format!("creating {}: {e}", scripts.display())))?;
    let script = root.join("benches").join(MULTI_GPU_SCRIPT);
    fs::copy(&script, scripts.join(MULTI_GPU_SCRIPT))
        .map_err(|e| fail(format!("copying {}: {e}", script.display())))?;
    write_commit(&root, &out)?;
    fs::write(out.join("run.sh"), RUN_X2_SH).map_err(|e| fail(format!("writing run.sh: {e}")))?;
    println!(
        "bundle --multi-gpu: {} binaries, {:.1} MiB in {}\n(cargo {})\nrun it on the two-GPU \
         machine (carry bundle-x2) with: bash bundle-x2/run.sh",
        names.len(),
        size as f64 / (1 << 20) as f64,
        out.display(),
        builds
            .iter()
            .map(|b| b.join(" "))
            .collect::<Vec<_>>()
            .join("; cargo ")
    );
    for n in &names {
        println!("  {n}");
    }
    println!("  benches/{MULTI_GPU_SCRIPT}");
    if size + (1 << 20) > CARRY_LIMIT {
        return Err(fail(format!(
            "bundle-x2 holds {:.1} MiB: more than a run carries (64 MiB)",
            size as f64 / (1 << 20) as f64
        )));
    }
    Ok(())
}

/// The PyTorch comparison of the two-GPU bundle.
const MULTI_GPU_SCRIPT: &str = "torch_multi_gpu.py";

/// The cargo builds of the two-GPU bundle: gpu-scope's `devices` and
/// `nccl` tests, the examples `09-multi-gpu-heat` and `10-mpi` (feature
/// `mpi`), the row-printing benches `multi_gpu` (peer copies) and `nccl`
/// (B12).
pub(crate) fn multi_gpu_builds() -> Vec<Vec<String>> {
    let build = |rest: &[&str]| {
        ["build", "--release"]
            .iter()
            .chain(rest)
            .map(|a| a.to_string())
            .collect()
    };
    vec![
        build(&["-p", "gpu-scope", "--test", "devices", "--test", "nccl"]),
        build(&[
            "-p",
            "gpu-examples",
            "--features",
            "mpi",
            "--example",
            "09-multi-gpu-heat",
            "--example",
            "10-mpi",
        ]),
        build(&[
            "-p",
            "gpu-benches",
            "--bench",
            "multi_gpu",
            "--bench",
            "nccl",
        ]),
    ]
}

/// Copies the PyTorch comparisons (`*.py`) of `from` into `to`, which
/// `bench` looks for beside its binary; fails if there are none, since
/// `bench` would then fail on the GPU machine.
fn copy_scripts(from: &Path, to: &Path) -> Result<Vec<String>, Error> {
    fs::create_dir_all(to).map_err(|e| fail(format!("creating {}: {e}", to.display())))?;
    let mut names = Vec::new();
    let entries =
        fs::read_dir(from).map_err(|e| fail(format!("reading {}: {e}", from.display())))?;
    for e in entries.flatten() {
        let p = e.path();
        let Some(name) = p.file_name().and_then(|f| f.to_str()) else {
            continue;
        };
        if p.is_file() && name.ends_with(".py") {
            fs::copy(&p, to.join(name))
                .map_err(|e| fail(format!("copying {}: {e}", p.display())))?;
            names.push(name.to_string());
        }
    }
    if names.is_empty() {
        return Err(fail(format!(
            "no PyTorch comparison (*.py) in {}: bench needs them",
            from.display()
        )));
    }
    names.sort();
    Ok(names)
}

/// Runs cargo with `--message-format=json` and returns (kind, executable)
/// for every artifact with an executable.
fn cargo_executables(root: &Path, args: &[&str]) -> Result<Vec<(String, PathBuf)>, Error> {
    let output = Command::new(env_cargo())
        .args(args)
        .arg("--message-format=json-render-diagnostics")
        .current_dir(root)
        .output()
        .map_err(|e| fail(format!("running cargo: {e}")))?;
    if !output.status.success() {
        return Err(fail(format!(
            "cargo {} failed:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    let mut found = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Some(exe) = json_str(line, "\"executable\":\"") else {
            continue;
        };
        let kind = if line.contains("\"kind\":[\"bench\"]") {
            "bench"
        } else if line.contains("\"test\":true},\"features\"") {
            "test"
        } else if line.contains("\"kind\":[\"example\"]") {
            "example"
        } else {
            "bin"
        };
        found.push((kind.to_string(), PathBuf::from(exe)));
    }
    Ok(found)
}

fn json_str(line: &str, key: &str) -> Option<String> {
    let start = line.find(key)? + key.len();
    let end = line[start..].find('"')? + start;
    Some(line[start..end].replace("\\\\", "\\"))
}

fn env_cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

const RUN_SH: &str = r#"#!/usr/bin/env bash
# Runs the bundle on a GPU machine (no cargo needed), from the repository root:
#   bash bundle/run.sh [tests] [examples] [bench] [stress] [soak MINUTES] [siblings RUNS]
# (no argument: tests examples bench). siblings: which driver calls wait for
# other streams' work, then B5-cold's RUNS fresh processes (lazy and eager
# module loading), with every slow driver call. Logs go to $OUT (or ./bundle-out);
# the summary is printed last. BENCH_ARGS go to `xtask bench` (e.g.
# "--filter B13"; "--no-torch" where there is no PyTorch); the PyTorch
# comparisons are bundle/benches/*.py, and bench fails if one cannot run.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/../bundle-out}
mkdir -p "$out"
log=$out/gpu-tests.log
summary=()
fail=0
cd "$here/.."
phases=("$@")
[ ${#phases[@]} -eq 0 ] && phases=(tests examples bench)
echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)" | tee -a "$log"
echo "commit: $(cat "$here/COMMIT" 2>/dev/null)  date: $(date -u +%FT%TZ)" | tee -a "$log"
export GPU_BACKEND=cuda
# The CUDA toolkit's vendor libraries (cuBLAS, ...), after what the loader
# finds already: cudarc loads them by their unversioned names.
for d in /usr/local/cuda/lib64 /usr/local/cuda-*/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
i=0
while [ $i -lt ${#phases[@]} ]; do
  phase=${phases[$i]}; i=$((i+1))
  case $phase in
  tests)
    for t in "$here"/bin/test.*; do
      name=$(basename "$t")
      skip=()
      if { [ "$name" = test.devices ] || [ "$name" = test.nccl ] || [ "$name" = test.nccl_never_hangs ]; } && [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -lt 2 ]; then
        # Their CUDA variants need two GPUs: the two-GPU bundle runs them.
        skip=(--skip ::cuda)
        echo "=== $name (host variants only: fewer than two GPUs here)" | tee -a "$log"
      else
        echo "=== $name (all tests, the CUDA variants included)" | tee -a "$log"
      fi
      timeout 400 "$t" --include-ignored --test-threads=1 "${skip[@]}" >>"$log" 2>&1
      rc=$?
      line=$(grep -E '^test result:' "$log" | tail -1)
      summary+=("$name rc=$rc $line")
      [ $rc -eq 0 ] || fail=1
    done ;;
  examples)
    for e in "$here"/bin/example.*; do
      name=$(basename "$e")
      echo "=== $name" | tee -a "$log"
      timeout 120 "$e" "$out" >>"$log" 2>&1
      rc=$?
      summary+=("$name rc=$rc")
      [ $rc -eq 0 ] || fail=1
    done ;;
  bench)
    echo "=== bench" | tee -a "$log"
    # shellcheck disable=SC2086 # BENCH_ARGS is split into arguments
    rm -f "$out/bench-table.md"
    OUT=$out "$here/bin/bin.xtask" bench --out "$out" ${BENCH_ARGS:-} 2>&1 | tee "$out/bench.log" | grep -vE '^(Benchmarking|  )' >>"$log"
    rc=${PIPESTATUS[0]}
    [ -f "$out/bench-table.md" ] && cat "$out/bench-table.md"
    [ $rc -eq 0 ] || { echo "bench FAILED (rc=$rc):"; grep -E '^(xtask bench|bench):' "$out/bench.log" | tail -5; }
    summary+=("bench rc=$rc")
    [ $rc -eq 0 ] || fail=1 ;;
  stress)
    echo "=== stress" | tee -a "$log"
    "$here/bin/bin.stress" 2>&1 | tee "$out/stress.log" | tail -20 >>"$log"
    rc=${PIPESTATUS[0]}
    summary+=("stress rc=$rc")
    [ $rc -eq 0 ] || fail=1 ;;
  siblings)
    runs=${phases[$i]:-20}; i=$((i+1))
    echo "=== siblings: driver calls behind a gate, then B5-cold in $runs fresh processes" | tee -a "$log"
    "$here/bin/test.gpu_sched" --include-ignored --nocapture task_path_calls >"$out/task-path-calls.log" 2>&1
    rc=$?
    grep -E '^cu|waited|test result' "$out/task-path-calls.log" | tee -a "$log"
    summary+=("task-path-calls rc=$rc")
    [ $rc -eq 0 ] || fail=1
    # B5-cold's fresh processes, each sibling's start and launch times and
    # every driver call over 2 ms; then the same with eager module loading.
    for mode in default EAGER; do
      if [ $mode = EAGER ]; then export CUDA_MODULE_LOADING=EAGER; fi
      B5_COLD_RUNS="$runs" GPU_SLOW_CALLS_US=2000 "$here/bin/bench.cold" >"$out/cold-$mode.rows" 2>"$out/cold-$mode.log"
      echo "B5-cold ($mode loading): $(grep -E 'speed-ups' "$out/cold-$mode.log")" | tee -a "$log"
      unset CUDA_MODULE_LOADING
    done
    summary+=("siblings: B5-cold in $runs fresh processes (cold-*.log)") ;;
  soak)
    mins=${phases[$i]:-5}; i=$((i+1))
    echo "=== soak $mins min" | tee -a "$log"
    "$here/bin/bin.soak" --minutes "$mins" 2>&1 | tee "$out/soak.log" | tail -20 >>"$log"
    rc=${PIPESTATUS[0]}
    summary+=("soak rc=$rc")
    [ $rc -eq 0 ] || fail=1 ;;
  esac
done
echo "=== summary" | tee -a "$log"
printf '%s\n' "${summary[@]}" | tee -a "$log"
exit $fail
"#;

/// `bundle-x2/run.sh`: the two-GPU machine's run.
const RUN_X2_SH: &str = r#"#!/usr/bin/env bash
# Runs the two-GPU bundle (cargo xtask bundle --multi-gpu) on a machine with
# two GPUs and no cargo, from the repository root:
#   bash bundle-x2/run.sh [tests] [examples] [bench]     (none: all three)
# tests: the devices test binary (and nccl's, if bundled), CUDA cases
# included; examples: 09-multi-gpu-heat checked against the CPU loop, in one
# process and as two MPI ranks, and 10-mpi on two ranks; bench: `xtask bench
# --multi-gpu` (B11, B11-mpi, peer copies, PyTorch), BENCH_ARGS added (e.g.
# "--no-torch", "--repeat 5"). Logs and results go to $OUT (or
# ./bundle-x2-out): x2.log, bench.log, bench-table.md, <device>-x2.json;
# the summary is printed last. GPU_BACKEND (default cuda) and MPIRUN_ARGS
# (default: Open MPI's plain shared-memory copies) can be set.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/../bundle-x2-out}
mkdir -p "$out"
log=$out/x2.log
summary=()
fail=0
cd "$here/.."
phases=("$@")
[ ${#phases[@]} -eq 0 ] && phases=(tests examples bench)
export GPU_BACKEND=${GPU_BACKEND:-cuda}
# NVLink multicast stays off.
export NCCL_NVLS_ENABLE=0
mpi_args=${MPIRUN_ARGS---mca btl_vader_single_copy_mechanism none}
export MPIRUN_ARGS=$mpi_args
# shellcheck disable=SC2206 # split into arguments
mpirun=(mpirun --allow-run-as-root $mpi_args -np 2 -x GPU_BACKEND -x NCCL_NVLS_ENABLE=0)
{
  echo "devices:"; nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>&1
  nvidia-smi topo -m 2>&1 | head -4
  echo "commit: $(cat "$here/COMMIT" 2>/dev/null)  date: $(date -u +%FT%TZ)  GPU_BACKEND=$GPU_BACKEND"
  echo "mpirun: $(command -v mpirun) $(mpirun --version 2>&1 | head -1)"
} | tee -a "$log"
# step NAME EXPECT CMD...: runs CMD (output to the log), passes if it exits 0
# and (EXPECT not empty) prints a line matching the regex EXPECT.
step() {
  local name=$1 expect=$2; shift 2
  echo "=== $name: $*" | tee -a "$log"
  local tmp; tmp=$(mktemp)
  timeout 300 "$@" >"$tmp" 2>&1
  local rc=$?
  cat "$tmp" >>"$log"
  if [ $rc -eq 0 ] && [ -n "$expect" ] && ! grep -Eq "$expect" "$tmp"; then
    echo "$name: no line matching /$expect/" | tee -a "$log"; rc=99
  fi
  rm -f "$tmp"
  summary+=("$name rc=$rc")
  [ $rc -eq 0 ] || fail=1
}
for phase in "${phases[@]}"; do
  case $phase in
  tests)
    for t in "$here"/bin/test.*; do
      [ -e "$t" ] || continue
      name=$(basename "$t")
      echo "=== $name (all tests, the CUDA variants included)" | tee -a "$log"
      timeout 400 "$t" --include-ignored --test-threads=1 >>"$log" 2>&1
      rc=$?
      line=$(grep -E '^test result:' "$log" | tail -1)
      summary+=("$name rc=$rc $line")
      [ $rc -eq 0 ] || fail=1
    done ;;
  examples)
    heat=$here/bin/example.09-multi-gpu-heat
    step "09-multi-gpu-heat" 'matches the CPU loop' "$heat"
    step "09-multi-gpu-heat --mpi" 'matches the CPU loop' "${mpirun[@]}" "$heat" --mpi
    step "10-mpi (2 ranks)" '^[0-9]+ passed, 0 failed$' "${mpirun[@]}" "$here/bin/example.10-mpi"
    ;;
  bench)
    echo "=== bench --multi-gpu ${BENCH_ARGS:-}" | tee -a "$log"
    rm -f "$out/bench-table.md"
    # shellcheck disable=SC2086 # BENCH_ARGS is split into arguments
    OUT=$out "$here/bin/bin.xtask" bench --multi-gpu --out "$out" ${BENCH_ARGS:-} >"$out/bench.log" 2>&1
    rc=$?
    grep -E '^(\[|wrote|xtask|bench)' "$out/bench.log" >>"$log"
    [ -f "$out/bench-table.md" ] && cat "$out/bench-table.md"
    [ $rc -eq 0 ] || { echo "bench FAILED (rc=$rc):"; grep -E '^(xtask bench|bench|- )' "$out/bench.log" | tail -8; }
    summary+=("bench --multi-gpu rc=$rc")
    [ $rc -eq 0 ] || fail=1 ;;
  *) echo "unknown phase $phase (tests, examples, bench)"; fail=1 ;;
  esac
done
echo "=== summary" | tee -a "$log"
printf '%s\n' "${summary[@]}" | tee -a "$log"
exit $fail
"#;
