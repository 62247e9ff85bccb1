//! # 04: a host -> device -> host pipeline
//!
//! `gpu::par_map` streams a host slice through the device in chunks: each
//! chunk is copied in through a pinned staging buffer, a kernel runs on it,
//! and the result is copied back. Chunks are spread over a few tasks (each
//! with its own stream and its own staging and device buffers), so one
//! chunk's upload, another's kernel and a third's download run at the same
//! time. The same work done the plain way (copy everything in, compute,
//! copy everything back, on one stream) is timed beside it; both results
//! are checked against the host.
//!
//! ```text
//! cargo run -p gpu-examples --example 04-pipeline
//! ```

use gpu::iter::PipelineOptions;
use gpu::{BackendKind, Buffer, TaskContext};
use gpu_kernels::{add_scalar, scale_into};
use std::time::Instant;

/// The kernel part: `y = 2 x + 1`.
fn compute(t: &TaskContext, x: &Buffer<f32>, y: &mut Buffer<f32>) -> gpu::Result<()> {
    scale_into(t, x, y, 2.0)?;
    add_scalar(t, y, 1.0)
}

fn check(what: &str, input: &[f32], output: &[f32]) -> Result<(), String> {
    for (i, (x, y)) in input.iter().zip(output).enumerate() {
        if *y != 2.0 * x + 1.0 {
            return Err(format!(
                "{what}: element {i} is {y}, expected {}",
                2.0 * x + 1.0
            ));
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let backend = gpu::backend()?;
    let (n, opts) = match backend {
        BackendKind::Cuda => (
            1 << 26,
            PipelineOptions {
                chunk: 1 << 22,
                lanes: 4,
            },
        ),
        BackendKind::Host => (
            1 << 22,
            PipelineOptions {
                chunk: 1 << 18,
                lanes: 4,
            },
        ),
    };
    let mib = (n * 4) as f64 / (1 << 20) as f64;
    println!(
        "04-pipeline: backend {backend}; {n} f32 ({mib:.0} MiB) in chunks of {}, {} lanes",
        opts.chunk, opts.lanes
    );
    let input: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();

    // Warm up: load the kernels, create the streams and the memory pools.
    let mut out = vec![0.0f32; opts.chunk];
    gpu::par_map(&input[..opts.chunk], &mut out, opts, compute)?;

    // The pipeline.
    let mut piped = vec![0.0f32; n];
    let start = Instant::now();
    gpu::par_map(&input, &mut piped, opts, compute)?;
    let t_piped = start.elapsed();
    check("par_map", &input, &piped)?;

    // The plain way: all in, compute, all out, one stream.
    let mut plain = vec![0.0f32; n];
    let start = Instant::now();
    gpu::with_task(|t| {
        let x = t.from_host(&input)?;
        let mut y = t.alloc::<f32>(n)?;
        compute(t, &x, &mut y)?;
        t.copy_to_host(&y, &mut plain)
    })?;
    let t_plain = start.elapsed();
    check("copy-all", &input, &plain)?;

    let rate = |d: std::time::Duration| 2.0 * mib / 1024.0 / d.as_secs_f64();
    println!(
        "  copy all in, compute, copy all out: {t_plain:>10.2?} ({:.1} GiB/s moved)",
        rate(t_plain)
    );
    println!(
        "  par_map pipeline:                   {t_piped:>10.2?} ({:.1} GiB/s moved)",
        rate(t_piped)
    );
    println!(
        "  pipeline speed-up {:.2}x; both results checked",
        t_plain.as_secs_f64() / t_piped.as_secs_f64()
    );
    Ok(())
}
