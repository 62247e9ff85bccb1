//! `cargo xtask test`: what CI runs, minus formatting and lints: the
//! workspace's tests (host backend) and the ledger's loom tests.

use crate::{fail, workspace_root, Error};
use std::process::Command;

pub(crate) fn run(args: &[String]) -> Result<(), Error> {
    if let Some(a) = args.first() {
        return Err(Error::Usage(format!("test takes no arguments, got `{a}`")));
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = workspace_root();
    /// (what, cargo arguments, loom build?)
    type Step<'a> = (&'a str, &'a [&'a str], bool);
    let steps: [Step<'_>; 2] = [
        ("tests", &["test", "--workspace"], false),
        (
            "loom",
            &["test", "-p", "gpu-epoch", "--release", "--test", "loom"],
            true,
        ),
    ];
    for (what, args, loom) in steps {
        eprintln!("xtask test: {what}");
        let mut cmd = Command::new(&cargo);
        cmd.args(args).current_dir(&root);
        if loom {
            cmd.env("RUSTFLAGS", "--cfg loom")
                .env("CARGO_TARGET_DIR", root.join("target/loom"));
        }
        let status = cmd
            .status()
            .map_err(|e| fail(format!("running cargo: {e}")))?;
        if !status.success() {
            return Err(fail(format!("{what} failed ({status})")));
        }
    }
    Ok(())
}
