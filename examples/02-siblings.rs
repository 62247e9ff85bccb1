//! # 02: sibling tasks overlap on the device
//!
//! Eight tasks spawned into one scope each run a long kernel on a buffer of
//! their own. Each task has its own stream and nothing orders the siblings
//! after each other, so their kernels run at the same time: together they
//! take about as long as one. The same eight kernels submitted one after
//! another on one task's stream take eight times as long.
//!
//! ```text
//! cargo run -p gpu-examples --example 02-siblings
//! ```

use gpu::Buffer;
use gpu_kernels::spin_touch;
use std::time::{Duration, Instant};

const TASKS: usize = 8;
/// Elements per buffer: one block of the spin kernel.
const N: usize = 256;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let backend = gpu::backend()?;
    // The host backend runs each stream on a CPU thread, and its "spin" is a
    // sleep; a GPU spins on the device's clock.
    let spin = Duration::from_millis(40);
    println!("02-siblings: backend {backend}; {TASKS} tasks, each a {spin:?} kernel");

    let mut bufs = (0..TASKS)
        .map(|_| Buffer::<f32>::zeros(N))
        .collect::<gpu::Result<Vec<_>>>()?;

    // Warm up: load the kernels, start the streams.
    gpu::scope(|s| {
        s.scope(|inner| {
            for b in bufs.iter_mut() {
                inner.spawn(move |t| spin_touch(t, b, Duration::ZERO));
            }
            Ok(())
        })?;
        s.synchronize()
    })?;

    // One after another, on one task's stream.
    let start = Instant::now();
    gpu::scope(|s| {
        for b in bufs.iter_mut() {
            spin_touch(s, b, spin)?;
        }
        s.synchronize()
    })?;
    let serial = start.elapsed();

    // Siblings: one task each.
    let start = Instant::now();
    gpu::scope(|s| {
        s.scope(|inner| {
            for b in bufs.iter_mut() {
                inner.spawn(move |t| spin_touch(t, b, spin));
            }
            Ok(())
        })?;
        // This task is ordered after all of them: wait for them on the host.
        s.synchronize()
    })?;
    let together = start.elapsed();

    // Every buffer was touched three times (warm-up, serial, siblings).
    for (i, b) in bufs.iter().enumerate() {
        let v = b.to_vec()?;
        if let Some((j, x)) = v.iter().enumerate().find(|(_, x)| **x != 3.0) {
            return Err(format!("buffer {i}[{j}] = {x}, expected 3").into());
        }
    }

    let ratio = serial.as_secs_f64() / together.as_secs_f64();
    println!("  one task, one kernel after another: {serial:>10.2?}");
    println!("  {TASKS} sibling tasks, one kernel each:  {together:>10.2?}");
    println!("  speed-up {ratio:.2}x (ideal {TASKS}x: one kernel's time); results checked");
    if ratio < 2.0 {
        println!("  note: the siblings did not overlap much on this machine");
    }
    Ok(())
}
