//! `cargo xtask oracle [--cases N]`: the ledger's oracle property test with
//! more cases than CI runs (10 000 there), in release, printing the
//! precision table (waits the oracle says were not needed, by cause).

use crate::cases::CasesTest;
use crate::Error;

pub(crate) fn run(args: &[String]) -> Result<(), Error> {
    CasesTest {
        package: "gpu-epoch",
        test: "oracle",
        env: "ORACLE_CASES",
        default: 100_000,
        max: u64::MAX,
        what: "the oracle test",
    }
    .run(args)
}
