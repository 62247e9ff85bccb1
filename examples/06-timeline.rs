//! # 06: timelines of the hand-off (B4) and of 8 siblings (B5)
//!
//! Traces both scenarios (`Runtime::trace_start`, one timing-event pair per
//! operation) and draws an SVG with a lane per stream, plus a Chrome trace
//! you can open in Perfetto. For your own programs, set
//! `GPU_TRACE=trace.json` instead.
//!
//! Run: `cargo run --release --example 06-timeline [out-dir]`.

use gpu::{trace, Buffer, Result};
use gpu_kernels as k;
use std::time::Duration;

fn main() -> Result<()> {
    let rt = gpu::runtime()?;
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "benches/results".into());
    let out = std::path::Path::new(&out);
    std::fs::create_dir_all(out).expect("creating the output folder");
    let cuda = rt.backend() == gpu::BackendKind::Cuda;
    println!("backend: {} ({})", rt.backend(), rt.device_name());
    let child_work = Duration::from_micros(if cuda { 200 } else { 2000 });

    // B4: the parent fills `a`, spawns the child, and works 20x longer on `b`.
    let mut a = Buffer::<f32>::zeros(1 << 20)?;
    let mut b = Buffer::<f32>::zeros(4096)?;
    let mut c = Buffer::<f32>::zeros(4096)?;
    gpu::synchronize()?;
    rt.trace_start()?;
    gpu::scope(|s| {
        k::fill(s, &mut a, 1.0)?;
        let (a, c) = (&mut a, &mut c);
        s.spawn(move |t| {
            k::add_scalar(t, a, 1.0)?;
            k::spin_touch(t, c, child_work)?;
            t.host_sync_ptr(a)?;
            Ok(())
        });
        k::spin_touch(s, &mut b, child_work * 20)
    })?;
    let b4 = rt.trace_stop()?;

    // B5: 8 sibling tasks, each a long kernel.
    rt.trace_start()?;
    gpu::scope(|s| {
        for _ in 0..8 {
            s.spawn(move |t| k::spin(t, child_work * 5));
        }
        Ok(())
    })?;
    let b5 = rt.trace_stop()?;

    for (name, title, spans) in [
        (
            "timeline-b4",
            "B4: the hand-off (child on its own stream, parent keeps working)",
            &b4,
        ),
        ("timeline-b5", "B5: 8 sibling tasks, one stream each", &b5),
    ] {
        let svg = out.join(format!("{name}.svg"));
        let json = out.join(format!("{name}.json"));
        std::fs::write(
            &svg,
            trace::svg_timeline(&format!("{title} [{}]", rt.backend()), spans),
        )
        .expect("writing the SVG");
        std::fs::write(&json, trace::chrome_trace(spans)).expect("writing the trace");
        let lanes: std::collections::BTreeSet<_> = spans.iter().map(|s| s.stream).collect();
        println!(
            "{name}: {} spans on {} streams -> {}",
            spans.len(),
            lanes.len(),
            svg.display()
        );
        for s in spans.iter() {
            println!(
                "  stream {:>2} {:<16} start {:>10.1} us  dur {:>10.1} us",
                s.stream.index(),
                s.name,
                s.start_us,
                s.dur_us
            );
        }
    }
    let overlap = b5.iter().filter(|s| s.name == "spin_ns").count();
    if overlap != 8 {
        eprintln!("expected 8 spin spans, got {overlap}");
        std::process::exit(1);
    }
    Ok(())
}
