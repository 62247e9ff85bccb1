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

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
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
    let (mut total, mut body, mut graph, mut launch) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        // The values drift from run to run (each adds into its buffers):
        // reset now and then, outside the timing, so they stay finite.
        b13::reset(&t, &pristine, &mut bufs)?;
        t.synchronize()?;
        let t0 = Instant::now();
        b13::run_graphed(&mut g, &bufs, &tasks)?;
        total.push(t0.elapsed());
        gpu::synchronize()?;
        let st = g.stats();
        body.push(st.last_body);
        graph.push(st.last_graph.saturating_sub(st.last_launch));
        launch.push(st.last_launch);
    }
    let st = g.stats();
    assert_eq!(st.builds, 1, "one build: {st:?}");
    let per = |d: Duration| d.as_nanos() as f64 / n as f64;
    let (tm, bm, gm, lm) = (median(total), median(body), median(graph), median(launch));
    let rest = tm.saturating_sub(bm + gm + lm);
    println!(
        "graphed replay of B13's DAG ({n} tasks, {} nodes, {}), on {}: build {build:?}; \
         median of {runs} replays {tm:?}: per task {:.0} ns = body {:.0} ns + compare {:.0} ns + launch {:.0} ns + rest {:.0} ns",
        st.nodes,
        if serial { "serial" } else { "threads" },
        rt.device_name(),
        per(tm),
        per(bm),
        per(gm),
        per(lm),
        per(rest),
    );
    for (part, d) in [
        ("total", tm),
        ("body", bm),
        ("compare", gm),
        ("launch", lm),
        ("rest", rest),
    ] {
        println!(
            "{{\"name\": \"B13/gpu-graphed-replay-host-per-task/{part}\", \"value\": {:.1}, \"unit\": \"ns\"}}",
            per(d)
        );
    }
    Ok(())
}
