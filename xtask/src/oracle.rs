//! `cargo xtask oracle [--cases N]`: the ledger's oracle property test with
//! more cases than CI runs (10 000 there), in release, printing the
//! precision table (waits the oracle says were not needed, by cause).

use crate::{fail, workspace_root, Error};
use std::process::Command;

pub(crate) fn run(args: &[String]) -> Result<(), Error> {
    let mut cases = 100_000u64;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--cases" => {
                let v = it
                    .next()
                    .ok_or_else(|| Error::Usage("--cases needs a value".into()))?;
                cases = v
                    .parse()
                    .map_err(|_| Error::Usage(format!("--cases: `{v}` is not a number")))?;
            }
            other => return Err(Error::Usage(format!("unknown argument `{other}`"))),
        }
    }
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "test",
            "-p",
            "gpu-epoch",
            "--release",
            "--test",
            "oracle",
            "--",
            "--nocapture",
        ])
        .env("ORACLE_CASES", cases.to_string())
        .current_dir(workspace_root())
        .status()
        .map_err(|e| fail(format!("running cargo: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(fail(format!("the oracle test failed ({status})")))
    }
}
