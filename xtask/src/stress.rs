//! `cargo xtask stress`: the large random-DAG run (the test kit's binary
//! `stress`, `crates/gpu-testkit/src/bin/stress.rs`,
//! at least 100 000 tasks by default), built in release and run on the
//! global runtime: the GPU when there is one, the host backend otherwise.
//! It prints the tasks run, the wrong values and races (both must be 0)
//! and the time, and fails if either is not 0. The example's other modes
//! pass through: `--devices N`, `--comms C`, `--max-streams M`,
//! `--warm-streams W`, `--stall SECONDS`, `--multi` (the runs over two
//! devices after the first; on the host backend where the machine has
//! fewer GPUs) and `--library-failures` (factorizations in the tasks, some
//! failing, injected from the seed: each top-level call must return the
//! failures of the tasks it covers and no other, and nothing may be left
//! for `Runtime::synchronize`; DESIGN "Where a failure goes").
//!
//! On a GPU machine without cargo it runs the bundle's binary
//! (`bundle/bin/bin.stress`, see `cargo xtask bundle`).

use crate::{fail, workspace_root, Error};
use std::path::PathBuf;
use std::process::Command;

pub(crate) fn run(args: &[String]) -> Result<(), Error> {
    let mut forward = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--tasks" | "--seed" | "--devices" | "--comms" | "--max-streams" | "--warm-streams"
            | "--stall" => {
                let v = it
                    .next()
                    .ok_or_else(|| Error::Usage(format!("{a} needs a value")))?;
                if v.parse::<u64>().is_err() {
                    return Err(Error::Usage(format!("{a}: `{v}` is not a number")));
                }
                forward.extend([a.clone(), v.clone()]);
            }
            "--multi" | "--library-failures" => forward.push(a.clone()),
            other => return Err(Error::Usage(format!("unknown argument `{other}`"))),
        }
    }
    run_testkit_bin("stress", &forward)
}

/// Builds the test kit's binary `name` in release (or finds it in the
/// bundle when there is no cargo) and runs it with `args`, its output
/// going straight to ours.
pub(crate) fn run_testkit_bin(name: &str, args: &[String]) -> Result<(), Error> {
    let exe = testkit_binary(name)?;
    eprintln!("xtask: running {} {}", exe.display(), args.join(" "));
    let status = Command::new(&exe)
        .args(args)
        .status()
        .map_err(|e| fail(format!("running {}: {e}", exe.display())))?;
    if status.success() {
        Ok(())
    } else {
        Err(fail(format!("{name} failed: {status}")))
    }
}

fn testkit_binary(name: &str) -> Result<PathBuf, Error> {
    let root = workspace_root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let built = Command::new(&cargo)
        .args(["build", "--release", "-p", "gpu-testkit", "--bin", name])
        .arg("--message-format=json-render-diagnostics")
        .current_dir(&root)
        .output();
    let output = match built {
        Ok(o) => o,
        Err(e) => {
            // No cargo here (a GPU machine): the bundle's binary.
            let cwd = std::env::current_dir().unwrap_or_default();
            let bundled = [cwd, root]
                .iter()
                .map(|r| r.join("bundle/bin").join(format!("bin.{name}")))
                .find(|p| p.exists());
            return bundled.ok_or_else(|| {
                fail(format!(
                    "cannot run cargo ({e}) and there is no bundle/bin/bin.{name}"
                ))
            });
        }
    };
    if !output.status.success() {
        return Err(fail(format!(
            "cargo build --release -p gpu-testkit --bin {name} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    let key = "\"executable\":\"";
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| l.contains("\"kind\":[\"bin\"]"))
        .find_map(|l| {
            let start = l.find(key)? + key.len();
            let end = l[start..].find('"')? + start;
            Some(PathBuf::from(l[start..end].replace("\\\\", "\\")))
        })
        .ok_or_else(|| fail(format!("cargo built no executable for binary {name}")))
}
