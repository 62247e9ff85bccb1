//! # 01: the hand-off
//!
//! The scenario of the original change (CUDA.jl, "don't wait for work that
//! an event already ordered"): a parent fills `a`, spawns a child, and keeps
//! working on `b` for a long time. The child adds to `a` and hands it to a
//! host-side "send" (MPI, FFI) through a host-sync pointer. With the
//! ledger's facts, the child waits for `a` only, and finishes while the
//! parent's later work still runs. With the facts turned off (every stream
//! switch waits for everything the old stream queued), the child finishes
//! only after the parent's later work.
//!
//! Run: `cargo run --release --example 01-handoff` (the GPU if there is
//! one, the host backend otherwise; `GPU_BACKEND=host` forces it).

use gpu::{Buffer, Result};
use gpu_kernels as k;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Stands for `MPI_Send`: code that is not stream-aware and reads the
/// memory behind `ptr` right away.
fn external_send(ptr: u64, len: usize) {
    std::hint::black_box((ptr, len));
}

struct Run {
    child_done: Duration,
    parent_done: Duration,
    device_waits: u64,
    waits_avoided: u64,
}

fn run(n: usize, parent_work: Duration) -> Result<Run> {
    let rt = gpu::runtime()?;
    let mut a = Buffer::<f32>::zeros(n)?;
    // `b` is small: the parent's long kernel occupies a few blocks, not the
    // whole device (a kernel that fills every SM delays everyone, ledger or not).
    let mut b = Buffer::<f32>::zeros(4096)?;
    // Warm up: the first use of each pooled stream loads modules etc.
    gpu::scope(|s| k::fill(s, &mut a, 0.0))?;
    let queued = AtomicBool::new(false);
    let mut child_done = Duration::ZERO;
    let before = rt.counters();
    let t0 = Instant::now();
    gpu::scope(|s| {
        k::fill(s, &mut a, 1.0)?; // parent work, on the parent's stream
        let (a, queued, child_done) = (&mut a, &queued, &mut child_done);
        s.spawn(move |t| {
            // The child runs once the parent has queued its later work, so
            // the comparison below does not depend on thread timing.
            while !queued.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
            k::add_scalar(t, a, 1.0)?; // ordered after the fill only
            let p = t.host_sync_ptr(a)?; // waits for `a`, not for the parent
            external_send(p, a.len());
            *child_done = t0.elapsed();
            Ok(())
        });
        k::spin_touch(s, &mut b, parent_work)?; // the parent keeps going
        queued.store(true, Ordering::Release);
        Ok(())
    })?;
    // The scope orders this thread's next task after everything; wait for it.
    let host_b = b.to_vec()?;
    let parent_done = t0.elapsed();
    let host_a = a.to_vec()?;
    let d = rt.counters().since(&before);
    if host_a.iter().any(|x| *x != 2.0) || host_b.iter().any(|x| *x != 1.0) {
        eprintln!(
            "wrong values: a[0]={} b[0]={}; races: {:?}",
            host_a[0],
            host_b[0],
            rt.races()
        );
        std::process::exit(1);
    }
    Ok(Run {
        child_done,
        parent_done,
        device_waits: d.device_waits,
        waits_avoided: d.switches_avoided(),
    })
}

fn main() -> Result<()> {
    let rt = gpu::runtime()?;
    println!("backend: {} ({})", rt.backend(), rt.device_name());
    let n = 1 << 20;
    let parent_work = Duration::from_millis(200);
    println!("parent's later work: a kernel of {parent_work:?} on `b`; the child adds 1 to `a` and sends it\n");
    println!(
        "{:<28} {:>14} {:>20} {:>12} {:>14}",
        "policy", "child done", "parent's work done", "device waits", "waits avoided"
    );
    let mut with_facts = None;
    for facts in [true, false] {
        rt.set_facts(facts);
        let r = run(n, parent_work)?;
        let name = if facts {
            "ledger facts (this library)"
        } else {
            "wait for everything"
        };
        println!(
            "{:<28} {:>11.2} ms {:>17.2} ms {:>12} {:>14}",
            name,
            r.child_done.as_secs_f64() * 1e3,
            r.parent_done.as_secs_f64() * 1e3,
            r.device_waits,
            r.waits_avoided
        );
        if facts {
            with_facts = Some(r);
        }
    }
    rt.set_facts(true);
    let r = with_facts.expect("ran");
    if r.child_done < r.parent_done / 2 {
        println!("\nthe child finished while the parent's later work was still running");
        Ok(())
    } else {
        eprintln!("\nthe child waited for the parent's later work");
        std::process::exit(1);
    }
}
