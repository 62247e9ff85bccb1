//! What `oracle` and `fuzz` share: a property test of the workspace run in
//! release with `--cases N` cases (passed to it in an environment
//! variable).

use crate::{fail, workspace_root, Error};
use std::process::Command;

/// One such command: its test, and how its cases reach it.
pub(crate) struct CasesTest {
    /// The package and its test target.
    pub(crate) package: &'static str,
    pub(crate) test: &'static str,
    /// The variable the test reads its case count from.
    pub(crate) env: &'static str,
    /// Cases without `--cases`.
    pub(crate) default: u64,
    /// The most cases the test takes.
    pub(crate) max: u64,
    /// What failed, for the message.
    pub(crate) what: &'static str,
}

impl CasesTest {
    /// Parses `[--cases N]` from `args` and runs the test.
    pub(crate) fn run(&self, args: &[String]) -> Result<(), Error> {
        let mut cases = self.default;
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
                        .filter(|&n| n > 0 && n <= self.max)
                        .ok_or_else(|| {
                            Error::Usage(format!(
                                "--cases: `{v}` is not a number from 1 to {}",
                                self.max
                            ))
                        })?;
                }
                other => return Err(Error::Usage(format!("unknown argument `{other}`"))),
            }
        }
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["test", "-p", self.package, "--release", "--test", self.test])
            .args(["--", "--nocapture"])
            .env(self.env, cases.to_string())
            .current_dir(workspace_root())
            .status()
            .map_err(|e| fail(format!("running cargo: {e}")))?;
        if status.success() {
            Ok(())
        } else {
            Err(fail(format!("{} failed ({status})", self.what)))
        }
    }
}
