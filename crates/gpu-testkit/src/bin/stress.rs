//! # 90: stress and soak
//!
//! Random task DAGs from a seed (nested scopes, spawns, joins,
//! `par_chunks_mut`, shared readers, writers, stream synchronizes, user
//! events, host-sync and raw pointers, graphs, temporaries dropped while in
//! use; and what the runtime does behind the borrow rules: pooled events
//! taken, waited for, synchronized and queried before a record, dropped at
//! random times; splits rejoined, dropped or leaked, their parent used at
//! once; temporaries handed to several streams and freed with their work
//! queued; captures that fail, panic, try a host copy or try to allocate)
//! run on the global runtime: the GPU when there is one. A host model tracks every buffer's
//! expected value; after every top-level scope each buffer is copied back
//! and compared. The host backend's race detector checks every access
//! besides.
//!
//! ```text
//! cargo run --release -p gpu-testkit --bin stress -- --tasks 100000 --seed 1
//! ```
//!
//! Other modes (flags):
//!
//! - `--devices N`: buffers and tasks over N devices of one group:
//!   `spawn_on`, scopes of another device, `copy_peer`, copies from
//!   `Staging` memory of either device (see `dag_multi.rs`). On the GPUs
//!   when the machine has N, else on the host backend simulating N (with
//!   a message saying so).
//! - `--comms C`: with `--devices` above 1, C communicators over the
//!   devices, their collectives called from tasks on many threads.
//! - `--max-streams M`, `--warm-streams W`: a runtime of its own with a
//!   stream pool that small (streams shared once it runs out).
//! - `--stall SECONDS` (default 120): fail, naming the seed and scope, if
//!   no top-level scope ends for that long (a hang).
//! - `--multi`: after the run above, the runs CI makes smaller: two
//!   devices with staging and peer copies, then collectives through one
//!   communicator and through two (`--devices 2`, then `--devices 2
//!   --comms 1 --warm-streams 1`, then `--devices 2 --comms 2`), each of
//!   `--tasks`.
//!
//! - `--library-failures`: tasks also run Cholesky factorizations, and in
//!   half the top-level calls some fail (injected from the seed); the
//!   top-level calls vary (`scope_on`, `in_place_scope`, `join`, top-level
//!   chunk iterators). Each call must return the failure exactly when a
//!   task it covers had one, no wait of a task that holds none may report
//!   one, every value (the factors too) must be the model's, an unrelated
//!   `to_vec` after each call must keep its data, and `Runtime::synchronize`
//!   must have nothing left (DESIGN "Where a failure goes"; see `dag/mod.rs`). With `--multi`,
//!   the runs over two devices inject them too.
//!
//! Small stream pools (`--max-streams 2` and up, streams shared once they
//! run out) exercise stream sharing (DESIGN "Streams are a resource"); CI runs seed 31 on 2 to 10
//! streams, with and without collectives (see `tests/stress.rs`).
//!
//! (`cargo xtask stress` builds and runs it; `soak` runs the same
//! generator in a loop for a while.)
//!
//! It prints progress, then the tasks run, the wrong values (must be 0),
//! the races (must be 0), the ledger's decisions and the time, and how many
//! of the soundness operations above ran, and exits with status 1 if a
//! value was wrong, a race was found or a scope failed.

use gpu_testkit::dag;

use gpu::{BackendChoice, BackendKind, Runtime, RuntimeOptions};
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "usage: stress [--tasks N] [--seed S] [--devices N] [--comms C] \
                     [--max-streams M] [--warm-streams W] [--stall SECONDS] [--multi] \
                     [--library-failures]";

/// The command line.
#[derive(Clone, Debug)]
struct Args {
    tasks: usize,
    seed: u64,
    devices: usize,
    comms: usize,
    max_streams: Option<usize>,
    warm_streams: Option<usize>,
    stall: Duration,
    multi: bool,
    library_failures: bool,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        tasks: 100_000,
        seed: 1,
        devices: 1,
        comms: 0,
        max_streams: None,
        warm_streams: None,
        stall: Duration::from_secs(120),
        multi: false,
        library_failures: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match flag.as_str() {
            "--tasks" => a.tasks = num(&value("--tasks")?)?,
            "--seed" => a.seed = num(&value("--seed")?)?,
            "--devices" => a.devices = num(&value("--devices")?)?,
            "--comms" => a.comms = num(&value("--comms")?)?,
            "--max-streams" => a.max_streams = Some(num(&value("--max-streams")?)?),
            "--warm-streams" => a.warm_streams = Some(num(&value("--warm-streams")?)?),
            "--stall" => a.stall = Duration::from_secs_f64(num(&value("--stall")?)?),
            "--multi" => a.multi = true,
            "--library-failures" => a.library_failures = true,
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument `{other}` (try --help)")),
        }
    }
    if a.devices == 0 {
        return Err("--devices must be at least 1".into());
    }
    if a.comms > 0 && a.devices < 2 {
        return Err("--comms needs --devices 2 or more".into());
    }
    if a.stall.is_zero() {
        return Err("--stall must be positive".into());
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
            eprintln!("stress: {e}");
            return ExitCode::from(2);
        }
    };
    let mut runs = vec![args.clone()];
    if args.multi {
        runs.push(Args {
            devices: 2,
            comms: 0,
            max_streams: None,
            warm_streams: None,
            ..args.clone()
        });
        runs.push(Args {
            devices: 2,
            comms: 1,
            max_streams: None,
            warm_streams: Some(1),
            ..args.clone()
        });
        runs.push(Args {
            devices: 2,
            comms: 2,
            max_streams: None,
            warm_streams: None,
            ..args.clone()
        });
    }
    let mut ok = true;
    for a in &runs {
        ok &= match runtime(a) {
            Ok(rt) => {
                println!(
                    "stress: backend {} ({}), {} device(s), {} communicator(s), seed {}",
                    rt.backend(),
                    rt.device_name(),
                    a.devices,
                    a.comms,
                    a.seed
                );
                stress(&rt, a)
            }
            Err(e) => {
                eprintln!("stress: no runtime: {e}");
                false
            }
        };
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The runtime for `a`: the global one, unless the run needs devices or a
/// stream pool of its own; several devices on the host backend when the
/// machine has fewer GPUs.
fn runtime(a: &Args) -> gpu::Result<Runtime> {
    let global = gpu::runtime()?;
    if a.devices == 1 && a.max_streams.is_none() && a.warm_streams.is_none() {
        return Ok(global.clone());
    }
    let on_gpus = global.backend() == BackendKind::Cuda && global.device_count() >= a.devices;
    if !on_gpus && global.backend() == BackendKind::Cuda {
        println!(
            "stress: {} devices asked for, {} GPU(s) here: this run is on the host \
             backend, simulating them",
            a.devices,
            global.device_count()
        );
    }
    let d = RuntimeOptions::default();
    Runtime::new(RuntimeOptions {
        backend: if on_gpus {
            BackendChoice::Cuda
        } else {
            BackendChoice::Host
        },
        host_devices: a.devices,
        max_streams: a.max_streams.unwrap_or(d.max_streams),
        warm_streams: a.warm_streams.unwrap_or(d.warm_streams),
        ..d
    })
}

/// One large run: `--tasks` tasks from `--seed`, under the watchdog.
fn stress(rt: &Runtime, args: &Args) -> bool {
    let base = if args.library_failures {
        dag::Config::with_failures(args.seed, args.tasks)
    } else {
        dag::Config::new(args.seed, args.tasks)
    };
    let cfg = dag::Config {
        devices: args.devices,
        comms: args.comms,
        ..base
    };
    let step = (args.tasks / 10).max(1);
    let mut next = step;
    let tasks = args.tasks;
    let r = dag::run_watched(rt, &cfg, args.stall, |r| {
        if r.tasks >= next && r.tasks < tasks {
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
            if args.library_failures {
                println!("library failures:\n{}", report.library_census());
            }
            if args.devices > 1 {
                let kinds = dag::multi::MULTI_KINDS.iter();
                let kinds = kinds.chain(if args.comms > 0 {
                    dag::multi::COLLECTIVE_KINDS
                } else {
                    &[]
                });
                println!("operations across devices:");
                for k in kinds {
                    println!("  {:>6}  {k}", report.count(k));
                }
                let shared = report.count(dag::harness_kinds::CAPTURE_ON_SHARED_STREAM);
                println!(
                    "  {shared:>6}  {}",
                    dag::harness_kinds::CAPTURE_ON_SHARED_STREAM
                );
            }
            println!("live after the run: {:?}", rt.live());
            report.ok()
        }
        Err(e) => {
            println!("stress: FAILED: {e}");
            false
        }
    }
}
