//! The host cost of a graphed scope's replay, per task (issue 38, item 4):
//! B13's DAG (10,000 tasks; `--tasks N`) through a `gpu::Graphed` (serial
//! unless `--threads`), built once, then replayed `--runs R` times (default
//! 30), each run waited for before the next. For each replay it takes the
//! time `Graphed::scope` took on the host and its parts from
//! `Graphed::stats`: the body (the tasks' host code and the recording of
//! their operations), the comparison (of the recording with the cached
//! graph, and setting changed nodes in place), the launch, and the rest
//! (beginning the scope and its task, ending them). Prints the medians per task, and one
//! JSON row per part as `xtask bench` reads them.
//!
//! ```text
//! cargo run --release -p gpu-testkit --bin graphed_cost -- --tasks 10000 --runs 30
//! ```
//!
//! On the host backend the graph's launch hands the nodes to the stream's
//! thread, which runs them meanwhile: on a machine of few cores that
//! thread competes with the body (the replays are waited for one by one,
//! so only the launch's own work overlaps).

use gpu_testkit::b13;
use std::time::{Duration, Instant};

fn flag(args: &[String], name: &str) -> Option<usize> {
    let i = args.iter().position(|a| a == name)?;
    let v = args
        .get(i + 1)
        .unwrap_or_else(|| panic!("{name} takes a number"));
    Some(
        v.parse()
            .unwrap_or_else(|_| panic!("{name} takes a number, got {v}")),
    )
}

fn main() -> gpu::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n = flag(&args, "--tasks").unwrap_or(b13::TASKS);
    let runs = flag(&args, "--runs").unwrap_or(30).max(1);
    let serial = !args.iter().any(|a| a == "--threads");
    let rt = gpu::Runtime::global()?;
    let tasks = b13::dag(b13::SEED, n, b13::BUFFERS);
    let pristine = b13::pristine()?;
    let mut bufs = b13::buffers()?;
    let t = rt.begin_task()?;
    b13::reset(&t, &pristine, &mut bufs)?;
    t.synchronize()?;
    let mut g = gpu::Graphed::on(rt).serial(serial);
    let t0 = Instant::now();
    b13::run_graphed(&mut g, &bufs, &tasks)?;
    let build = t0.elapsed();
    gpu::synchronize()?;
    let p = b13::replay_host_parts(&mut g, &t, &pristine, &mut bufs, &tasks, runs)?;
    let st = g.stats();
    assert_eq!(st.builds, 1, "one build: {st:?}");
    let per = |d: Duration| d.as_nanos() as f64 / n as f64;
    println!(
        "graphed replay of B13's DAG ({n} tasks, {} nodes, {}), on {}: build {build:?}; \
         median of {runs} replays {:?}: per task {:.0} ns = body {:.0} ns + compare {:.0} ns + launch {:.0} ns + rest {:.0} ns",
        st.nodes,
        if serial { "serial" } else { "threads" },
        rt.device_name(),
        p.total,
        per(p.total),
        per(p.body),
        per(p.compare),
        per(p.launch),
        per(p.rest),
    );
    print!("{}", p.rows(n));
    Ok(())
}
