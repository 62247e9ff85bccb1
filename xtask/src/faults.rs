//! `cargo xtask faults`: the driver-fault sweep of
//! `crates/gpu-scope/tests/driver_faults.rs` over every `k` (release, host
//! backend): the workload's `K` driver calls counted, then one run with
//! call `k` failing for each `k` and each error that call can return. It
//! prints `K`, the runs and the time, and fails if any run panicked, hung,
//! leaked or lost work (CI runs a sample of the `k`).

use crate::{fail, workspace_root, Error};
use std::process::Command;
use std::time::Instant;

pub(crate) fn run(args: &[String]) -> Result<(), Error> {
    if let Some(a) = args.first() {
        return Err(Error::Usage(format!(
            "faults takes no arguments, got `{a}`"
        )));
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let started = Instant::now();
    let out = Command::new(&cargo)
        .args([
            "test",
            "--release",
            "-p",
            "gpu-scope",
            "--test",
            "driver_faults",
            "a_failure_at_any_driver_call",
            "--",
            "--nocapture",
        ])
        .env("GPU_FAULTS_ALL", "1")
        .current_dir(workspace_root())
        .output()
        .map_err(|e| fail(format!("running cargo: {e}")))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = text
        .lines()
        .find(|l| l.starts_with("driver faults: K = "))
        .map(str::to_owned);
    if !out.status.success() {
        return Err(fail(format!(
            "the driver-fault sweep failed ({}):\n{text}",
            out.status
        )));
    }
    let summary = summary.ok_or_else(|| fail(format!("the test printed no summary:\n{text}")))?;
    println!("{summary}");
    println!(
        "xtask faults: passed in {:.1} s (build included)",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
