//! `cargo xtask fuzz [--cases N]`: the property-based fuzzing of the
//! runtime's parsers of user input and argument checks
//! (`crates/gpu-sched/tests/fuzz_parsers.rs`) with N cases per property
//! (default 10 000 000; CI runs 10 000), in release, on the host backend.

use crate::cases::CasesTest;
use crate::Error;

pub(crate) fn run(args: &[String]) -> Result<(), Error> {
    CasesTest {
        package: "gpu-sched",
        test: "fuzz_parsers",
        env: "FUZZ_CASES",
        default: 10_000_000,
        // proptest counts cases in a u32.
        max: u64::from(u32::MAX),
        what: "the fuzz tests",
    }
    .run(args)
}
