//! # 91: soak
//!
//! The stress generator (`stress`) in a loop: rounds of random scopes,
//! each round with fresh buffers and events and a new seed, every value
//! checked, until the time is up. Once a minute, and at the end, it prints
//! the runtime's live resources at a quiet moment (between rounds, after a
//! synchronize): streams and events (created, and in use), allocations,
//! device bytes and pinned bytes. Between the first and the last report
//! the counts in use, the allocations and the bytes must not change at all;
//! the pools' totals (streams, events created) are high-water marks of
//! concurrent use, which may still creep up at a rare peak but must level
//! off: more than a quarter (at least 4) of growth is a leak.
//!
//! ```text
//! cargo run --release -p gpu-testkit --bin soak -- --minutes 10
//! ```
//!
//! (`cargo xtask soak --minutes N` builds and runs it.) Exit status 1 if
//! a count grew, a value was wrong, a race was found or a scope failed.

use gpu_testkit::dag;

use gpu::diag::LiveCounts;
use gpu::Runtime;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Tasks per round.
const ROUND_TASKS: usize = 2_000;

/// The command line.
#[derive(Debug)]
struct Args {
    minutes: f64,
    every: Duration,
    seed: u64,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        minutes: 1.0,
        every: Duration::from_secs(60),
        seed: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match flag.as_str() {
            "--minutes" => a.minutes = num(&value("--minutes")?)?,
            "--every" => a.every = Duration::from_secs_f64(num(&value("--every")?)?),
            "--seed" => a.seed = num(&value("--seed")?)?,
            "-h" | "--help" => {
                return Err("usage: soak [--minutes M] [--every SECONDS] [--seed S]".into())
            }
            other => return Err(format!("unknown argument `{other}` (try --help)")),
        }
    }
    if !(a.minutes > 0.0 && a.every > Duration::ZERO) {
        return Err("--minutes and --every must be positive".into());
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
            eprintln!("soak: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match gpu::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("soak: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "soak: backend {} ({}), {} min, seeds from {}",
        rt.backend(),
        rt.device_name(),
        args.minutes,
        args.seed
    );
    if soak(rt, &args) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The counts, by name, with whether each is a pool's total: a high-water
/// mark of concurrent use, which grows while rare peaks of concurrency
/// come and must then level off. The others (in use, allocations, bytes)
/// return to the same value at every quiet moment.
fn named(c: &LiveCounts) -> [(&'static str, usize, bool); 7] {
    [
        ("streams", c.streams, true),
        ("streams in use", c.streams_in_use, false),
        ("events", c.events, true),
        ("events in use", c.events_in_use, false),
        ("allocations", c.allocations, false),
        ("device bytes", c.device_bytes, false),
        ("pinned bytes", c.pinned_bytes, false),
    ]
}

/// What grew from `first` to `last`: any count in use, or a pool's total
/// by more than a quarter (at least 4), which is a leak rather than a peak.
fn grew(first: &LiveCounts, last: &LiveCounts) -> Vec<String> {
    named(first)
        .iter()
        .zip(named(last))
        .filter(|((_, a, pool), (_, b, _))| {
            if *pool {
                *b > *a + (*a / 4).max(4)
            } else {
                b != a
            }
        })
        .map(|((name, a, _), (_, b, _))| format!("{name} {a} -> {b}"))
        .collect()
}

/// Rounds of random scopes for `--minutes`, reporting live resources.
fn soak(rt: &Runtime, args: &Args) -> bool {
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(args.minutes * 60.0);
    let mut next_report = start + args.every;
    let (mut tasks, mut wrong, mut races, mut rounds) = (0, 0, 0, 0u64);
    let mut first: Option<LiveCounts> = None;
    let mut last = rt.live();
    let mut ok = true;
    loop {
        let cfg = dag::Config::new(args.seed.wrapping_add(rounds), ROUND_TASKS);
        match dag::run(rt, &cfg, |_| true) {
            Ok(r) => {
                tasks += r.tasks;
                wrong += r.wrong;
                races += r.races;
                if !r.ok() {
                    println!("soak: round {rounds} (seed {}): {r}", cfg.seed);
                    ok = false;
                }
            }
            Err(e) => {
                println!("soak: round {rounds} FAILED: {e}");
                return false;
            }
        }
        rounds += 1;
        let now = Instant::now();
        let done = now >= end;
        if now >= next_report || done {
            // Quiet: the round's buffers and events are gone; wait for the
            // stream-ordered frees.
            if let Err(e) = rt.synchronize() {
                println!("soak: synchronize failed: {e}");
                return false;
            }
            last = rt.live();
            first.get_or_insert(last);
            let t = now - start;
            println!(
                "soak {:>3}:{:02}  rounds {rounds}, tasks {tasks}, wrong {wrong}, races {races} | \
                 streams {} (in use {}), events {} (in use {}), allocations {}, \
                 device bytes {}, pinned bytes {}",
                t.as_secs() / 60,
                t.as_secs() % 60,
                last.streams,
                last.streams_in_use,
                last.events,
                last.events_in_use,
                last.allocations,
                last.device_bytes,
                last.pinned_bytes
            );
            while next_report <= now {
                next_report += args.every;
            }
        }
        if done {
            break;
        }
    }
    let first = first.unwrap_or(last);
    let grew = grew(&first, &last);
    if grew.is_empty() {
        println!(
            "soak: flat over {:.1?}: {rounds} rounds, {tasks} tasks, wrong values {wrong}, races {races}",
            start.elapsed()
        );
    } else {
        println!(
            "soak: FAILED: grew between the first and the last report (a leak): {}",
            grew.join(", ")
        );
        ok = false;
    }
    ok && wrong == 0 && races == 0
}
