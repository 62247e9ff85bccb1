//! B5-cold (DESIGN.md §15): `02-siblings`' measurement (eight tasks of a
//! 40 ms kernel against the same kernels on one stream, after a warm-up of
//! kernels of no length) in each of 20 fresh processes, so that every run
//! sees a runtime, a context and modules that are new. Not a criterion
//! bench (`harness = false`): it prints one JSON row a line on stdout,
//! `{"name": ..., "value": ..., "unit": "ns"}`, which `cargo xtask bench`
//! reads, and each run's siblings (thread, stream, start and launch
//! times) on stderr.
//!
//! ```text
//! cargo bench -p gpu-benches --bench cold -- [FILTER]
//! ```
//!
//! Rows, for run `NN` of `B5_COLD_RUNS` (default 20):
//! `B5-cold/run-NN-one-stream` and `B5-cold/run-NN-siblings` (ns); xtask
//! makes `ratio/B5-cold-run-NN` (the speed-up) and `ratio/B5-cold-min`
//! (the least of them, goal >= 7.5) of them. A filter (criterion's
//! argument) that does not name B5 skips it.

use common::siblings::measure;
use std::process::Command;
use std::time::Duration;

/// The kernel of each sibling.
const SPIN: Duration = Duration::from_millis(40);

fn row(name: &str, ns: f64) {
    println!("{{\"name\": \"{name}\", \"value\": {ns:.1}, \"unit\": \"ns\"}}");
}

/// One run, in this process: its two times as `serial together` (ns) on
/// stdout, its siblings on stderr.
fn one() -> Result<(), Box<dyn std::error::Error>> {
    let m = measure(SPIN)?;
    eprintln!(
        "  {}: one stream {:.2?}, siblings {:.2?}, speed-up {:.2}x\n{}",
        gpu::backend()?,
        m.serial,
        m.together,
        m.speedup(),
        m.detail()
    );
    println!("{} {}", m.serial.as_nanos(), m.together.as_nanos());
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--one") {
        return one();
    }
    // cargo bench passes --bench; the first other argument is a filter.
    if let Some(f) = args.iter().find(|a| !a.starts_with("--")) {
        if !f.contains("B5") {
            eprintln!("B5-cold: filter `{f}` does not name B5; skipped");
            return Ok(());
        }
    }
    let runs: usize = std::env::var("B5_COLD_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let exe = std::env::current_exe()?;
    let mut speedups = Vec::with_capacity(runs);
    for i in 1..=runs {
        eprintln!("B5-cold: run {i} of {runs}, a fresh process");
        let out = Command::new(&exe).arg("--one").output()?;
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
        if !out.status.success() {
            return Err(format!("B5-cold run {i} failed: {}", out.status).into());
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let t: Vec<f64> = text
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        let [serial, together] = t[..] else {
            return Err(format!("B5-cold run {i} printed `{}`", text.trim()).into());
        };
        row(&format!("B5-cold/run-{i:02}-one-stream"), serial);
        row(&format!("B5-cold/run-{i:02}-siblings"), together);
        speedups.push(serial / together);
    }
    let min = speedups.iter().copied().fold(f64::INFINITY, f64::min);
    let listed: Vec<String> = speedups.iter().map(|s| format!("{s:.2}")).collect();
    eprintln!("B5-cold: speed-ups {}; least {min:.2}x", listed.join(" "));
    Ok(())
}
