//! # 90: stress and soak
//!
//! Random task DAGs from a seed (nested scopes, spawns, joins,
//! `par_chunks_mut`, shared readers, writers, stream synchronizes, user
//! events, host-sync and raw pointers, graphs, temporaries dropped while in
//! use; and what the runtime does behind the borrow rules: pooled events
//! taken, waited for, synchronized and queried before a record, dropped at
//! random times; splits rejoined, dropped or leaked, their parent used at
//! once; temporaries handed to several streams and freed with their work
//! queued; captures that fail, panic or try a host copy) run on the global
//! runtime: the GPU when there is one. A host model tracks every buffer's
//! expected value; after every top-level scope each buffer is copied back
//! and compared. The host backend's race detector checks every access
//! besides.
//!
//! ```text
//! cargo run --release -p gpu-scope --example 90-stress -- --tasks 100000 --seed 1
//! ```
//!
//! (`cargo xtask stress` builds and runs it; `91-soak` runs the same
//! generator in a loop for a while.)
//!
//! It prints progress, then the tasks run, the wrong values (must be 0),
//! the races (must be 0), the ledger's decisions and the time, and how many
//! of the soundness operations above ran, and exits with status 1 if a
//! value was wrong, a race was found or a scope failed.

#[path = "../crates/gpu-scope/tests/common/dag.rs"]
mod dag;

use gpu::Runtime;
use std::process::ExitCode;

/// The command line.
#[derive(Debug)]
struct Args {
    tasks: usize,
    seed: u64,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        tasks: 100_000,
        seed: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match flag.as_str() {
            "--tasks" => a.tasks = num(&value("--tasks")?)?,
            "--seed" => a.seed = num(&value("--seed")?)?,
            "-h" | "--help" => return Err("usage: 90-stress [--tasks N] [--seed S]".into()),
            other => return Err(format!("unknown argument `{other}` (try --help)")),
        }
    }
    Ok(a)
}

fn num<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    s.parse().map_err(|_| format!("`{s}` is not a number"))
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("90-stress: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match gpu::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("90-stress: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "90-stress: backend {} ({}), seed {}",
        rt.backend(),
        rt.device_name(),
        args.seed
    );
    if stress(rt, &args) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// One large run: `--tasks` tasks from `--seed`.
fn stress(rt: &Runtime, args: &Args) -> bool {
    let cfg = dag::Config::new(args.seed, args.tasks);
    let step = (args.tasks / 10).max(1);
    let mut next = step;
    let r = dag::run(rt, &cfg, |r| {
        if r.tasks >= next && r.tasks < args.tasks {
            println!(
                "  {:>7} tasks, {} scopes, wrong {}, races {}, {:.1?}",
                r.tasks, r.scopes, r.wrong, r.races, r.elapsed
            );
            next = r.tasks + step;
        }
        true
    });
    match r {
        Ok(report) => {
            println!("stress: {report}");
            println!("soundness operations:\n{}", report.soundness_census());
            println!("live after the run: {:?}", rt.live());
            report.ok()
        }
        Err(e) => {
            println!("stress: FAILED: {e}");
            false
        }
    }
}
