//! `cargo xtask bundle`: builds the GPU test binaries, the examples and
//! xtask itself (release, stripped) into `bundle/`, with the PyTorch
//! comparisons that `bench` runs (`benches/*.py` into `bundle/benches/`) and
//! `bundle/run.sh`, which runs them on a machine without cargo:
//!
//! ```text
//! bash bundle/run.sh                                  # tests, examples, bench; logs under $OUT
//! BENCH_ARGS="--filter B13" bash bundle/run.sh bench  # one benchmark group
//! ```

use crate::{fail, workspace_root, Error};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Crates whose tests and examples go in the bundle.
const PACKAGES: &[&str] = &["gpu-sched", "gpu-kernels", "gpu-scope"];

pub(crate) fn run(args: &[String]) -> Result<(), Error> {
    if let Some(a) = args.first() {
        return Err(Error::Usage(format!(
            "bundle takes no arguments, got `{a}`"
        )));
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
        &["build", "--release", "--examples", "-p", "gpu-scope"],
    )?);
    exes.extend(cargo_executables(
        &root,
        &["bench", "--no-run", "-p", "gpu-scope", "--bench", "gpu"],
    )?);
    exes.extend(cargo_executables(
        &root,
        &["bench", "--no-run", "-p", "gpu-epoch", "--bench", "ledger"],
    )?);
    exes.extend(cargo_executables(
        &root,
        &["build", "--release", "-p", "xtask"],
    )?);

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
    let size: u64 = names
        .iter()
        .filter_map(|n| fs::metadata(bin.join(n)).ok())
        .map(|m| m.len())
        .sum();
    let scripts = copy_scripts(&root.join("benches"), &out.join("benches"))?;
    let commit = Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .current_dir(&root)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    fs::write(out.join("COMMIT"), format!("{commit}\n"))
        .map_err(|e| fail(format!("writing COMMIT: {e}")))?;
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
#   bash bundle/run.sh [tests] [examples] [bench] [stress] [soak MINUTES]
# (no argument: tests examples bench). Logs go to $OUT (or ./bundle-out);
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
i=0
while [ $i -lt ${#phases[@]} ]; do
  phase=${phases[$i]}; i=$((i+1))
  case $phase in
  tests)
    for t in "$here"/bin/test.*; do
      name=$(basename "$t")
      skip=()
      if [ "$name" = test.devices ] && [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -lt 2 ]; then
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
      case $name in *stress*|*soak*) continue ;; esac
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
    "$here/bin/example.90-stress" 2>&1 | tee "$out/stress.log" | tail -20 >>"$log"
    rc=${PIPESTATUS[0]}
    summary+=("stress rc=$rc")
    [ $rc -eq 0 ] || fail=1 ;;
  soak)
    mins=${phases[$i]:-5}; i=$((i+1))
    echo "=== soak $mins min" | tee -a "$log"
    "$here/bin/example.91-soak" --minutes "$mins" 2>&1 | tee "$out/soak.log" | tail -20 >>"$log"
    rc=${PIPESTATUS[0]}
    summary+=("soak rc=$rc")
    [ $rc -eq 0 ] || fail=1 ;;
  esac
done
echo "=== summary" | tee -a "$log"
printf '%s\n' "${summary[@]}" | tee -a "$log"
exit $fail
"#;
