//! # 03: a parallel map over disjoint chunks
//!
//! `par_chunks_mut` splits a buffer into chunks and runs one task per
//! chunk, each on its own stream (here `Scope::par_chunks_mut`, inside a
//! task; the free `gpu::par_chunks_mut` starts a task of its own). The
//! chunks are views with stamps of their own, so no chunk's task waits for
//! another's; when they are done the buffer is handed back to the task that
//! split it, ordered after all of them. The result is checked against the
//! same computation on the host, and the ledger's counters show that no
//! device wait was needed.
//!
//! ```text
//! cargo run -p gpu-examples --example 03-par-chunks
//! ```

use gpu::diag::Reason;
use gpu::BackendKind;
use gpu_kernels::{add_scalar, scale};
use std::time::Instant;

const CHUNKS: usize = 16;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let backend = gpu::backend()?;
    let n: usize = match backend {
        BackendKind::Cuda => 1 << 24,
        BackendKind::Host => 1 << 20,
    };
    let chunk = n / CHUNKS;
    println!("03-par-chunks: backend {backend}; {n} f32 in {CHUNKS} chunks of {chunk}");

    let host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let rt = gpu::runtime()?;

    let before = rt.counters();
    let start = Instant::now();
    let got = gpu::scope(|s| {
        // Upload on this task's stream; the chunks' tasks are spawned after
        // it, so they are ordered after the upload.
        let mut buf = s.from_host(&host)?;
        s.par_chunks_mut(&mut buf, chunk, |t, c| {
            // Each chunk: x = 2x + (its index), on its own stream.
            scale(t, c, 2.0)?;
            add_scalar(t, c, c.index() as f32)
        })?;
        // Back on this task, ordered after every chunk.
        s.to_vec(&buf)
    })?;
    let elapsed = start.elapsed();
    let d = rt.counters().since(&before);

    for (i, (g, h)) in got.iter().zip(&host).enumerate() {
        let want = 2.0 * h + (i / chunk) as f32;
        if *g != want {
            return Err(format!("element {i}: got {g}, expected {want}").into());
        }
    }
    println!("  upload + map + copy back: {elapsed:.2?}; all {n} elements match the host");
    println!(
        "  hand-offs: {} device waits, {} host syncs; waits avoided: {} ordered, {} completed, {} recycled",
        d.device_waits,
        d.host_syncs,
        d.avoided(Reason::Ordered),
        d.avoided(Reason::Completed),
        d.avoided(Reason::Recycled),
    );
    if d.device_waits != 0 {
        return Err(format!(
            "{} device waits: a chunk waited for another",
            d.device_waits
        )
        .into());
    }
    Ok(())
}
