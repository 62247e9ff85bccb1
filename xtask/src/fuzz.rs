//! `cargo xtask fuzz [--cases N]`: the property-based fuzzing of the
//! runtime's parsers of user input and argument checks
//! (`crates/gpu-sched/tests/fuzz_parsers.rs`) with N cases per property
//! (default 10 000 000; CI runs 5 000), in release, on the host backend.

use crate::{fail, workspace_root, Error};
use std::process::Command;

pub(crate) fn run(args: &[String]) -> Result<(), Error> {
    let mut cases = 10_000_000u64;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--cases" => {
                let v = it
                    .next()
                    .ok_or_else(|| Error::Usage("--cases needs a value".into()))?;
                cases = v
                    .parse()
                    .ok()
                    .filter(|&n| n > 0 && n <= u64::from(u32::MAX))
                    .ok_or_else(|| {
                        Error::Usage(format!("--cases: `{v}` is not a number from 1 to 2^32 - 1"))
                    })?;
            }
            other => return Err(Error::Usage(format!("unknown argument `{other}`"))),
        }
    }
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "test",
            "-p",
            "gpu-sched",
            "--release",
            "--test",
            "fuzz_parsers",
            "--",
            "--nocapture",
        ])
        .env("FUZZ_CASES", cases.to_string())
        .current_dir(workspace_root())
        .status()
        .map_err(|e| fail(format!("running cargo: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(fail(format!("the fuzz tests failed ({status})")))
    }
}
