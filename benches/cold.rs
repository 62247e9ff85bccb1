//! B5-cold (DESIGN "Cold start"): `02-siblings`' measurement (eight tasks of a
//! 40 ms kernel against the same kernels on one stream, after a warm-up of
//! kernels of no length) in each of 20 fresh processes, so that every run
//! sees a runtime, a context and modules that are new. Not a criterion
//! bench (`harness = false`): it prints one JSON row a line on stdout,
//! `{"name": ..., "value": ..., "unit": "ns"}`, which `cargo xtask bench`
//! reads, and each run's siblings (thread, stream, start and launch
//! times) on stderr; with `B5_COLD_EVENTS=1`, when each kernel ended.
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

use common::siblings::measure_with;
use cudarc::driver::{result, sys};
use gpu::raw::RawTask;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

/// The kernel of each sibling.
const SPIN: Duration = Duration::from_millis(40);

fn row(name: &str, ns: f64) {
    println!("{{\"name\": \"{name}\", \"value\": {ns:.1}, \"unit\": \"ns\"}}");
}

/// One run, in this process: its two times as `serial together` (ns) on
/// stdout, its siblings on stderr.
fn one() -> Result<(), Box<dyn std::error::Error>> {
    // With `B5_COLD_EVENTS=1`, on CUDA, a timing event after each sibling's
    // kernel, on its stream: when each kernel ended on the device (a late
    // one ran after another). Off by default: an event recorded there
    // comes before the task's end-of-work write, which itself changes what
    // is measured (DESIGN "Cold start").
    let cuda = gpu::backend()? == gpu::BackendKind::Cuda
        && std::env::var_os("B5_COLD_EVENTS").is_some_and(|v| v == "1");
    let ends: Mutex<Vec<(usize, usize, usize)>> = Mutex::new(Vec::new());
    let m = measure_with(SPIN, &|t, i| {
        if cuda {
            let s = t.cu_stream() as usize as sys::CUstream;
            // SAFETY: a timing event of the task's context (current on this
            // worker: the launch just made it so), recorded on the task's
            // stream, which lives past the event's synchronize below (the
            // pool keeps its streams); destroyed after that.
            let e = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
                .and_then(|e| unsafe { result::event::record(e, s) }.map(|()| e))
                .map_err(|_| gpu::Error::Unsupported("a timing event"))?;
            ends.lock()
                .expect("ends")
                .push((i, t.stream_id().index(), e as usize));
        }
        Ok(())
    })?;
    let ends = ends.into_inner().expect("ends");
    let mut at: Vec<(f32, usize, usize)> = Vec::new();
    if let Some(&(_, _, first)) = ends.first() {
        for &(i, s, e) in &ends {
            // SAFETY: both events were recorded above and their streams
            // synchronized by the measurement's scope.
            let ms = unsafe { result::event::elapsed(first as sys::CUevent, e as sys::CUevent) }
                .unwrap_or(f32::NAN);
            at.push((ms, i, s));
        }
        at.sort_by(|a, b| a.0.total_cmp(&b.0));
        for &(_, _, e) in &ends {
            // SAFETY: created above, used by nothing after the elapsed times.
            let _ = unsafe { result::event::destroy(e as sys::CUevent) };
        }
    }
    let lead = at.first().map_or(0.0, |a| a.0);
    let ended: Vec<String> = at
        .iter()
        .map(|(ms, i, s)| format!("{i}@S{s}:{:+.1}", ms - lead))
        .collect();
    eprintln!(
        "  {}: one stream {:.2?}, siblings {:.2?}, speed-up {:.2}x\n{}",
        gpu::backend()?,
        m.serial,
        m.together,
        m.speedup(),
        m.detail()
    );
    if !ended.is_empty() {
        eprintln!(
            "    kernels ended (sibling@stream: ms after the first): {}",
            ended.join(" ")
        );
    }
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
