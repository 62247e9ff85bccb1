//! # 07: bring your own kernel
//!
//! A 2D heat step (a 5-point stencil) written in CUDA C, compiled at run
//! time by NVRTC for the device, and launched as a typed kernel: its
//! signature is declared once in Rust (`(Out<f32>, In<f32>, u64, u64, u64,
//! u64, f32)`), so every launch's arguments are checked by the compiler, and
//! it has a host implementation in safe Rust, which the host backend runs in
//! place of the CUDA code. A launch is `unsafe` (the runtime cannot see what
//! the kernel indexes); the safe wrapper `Heat::step` derives the sizes it
//! passes from its buffers' lengths. The kernel, its host implementation
//! and the wrapper are in `examples/common/heat.rs`, which `05-stencil`
//! shares.
//!
//! The example ping-pongs two buffers for 100 steps and checks the result
//! against a plain CPU loop. Without NVRTC, the host backend reads the
//! kernel's name from the source and runs the host implementation; on
//! CUDA, NVRTC is needed (`Error::NvrtcUnavailable` otherwise).
//!
//! ```text
//! cargo run -p gpu-examples --example 07-own-kernel
//! ```

use common::heat;

use gpu::BackendKind;
use heat::Heat;
use std::time::Instant;

/// The diffusion number (stable up to 1/4).
const K: f32 = 0.2;
/// Time steps.
const STEPS: usize = 100;
/// Largest difference allowed against the CPU loop.
const TOLERANCE: f32 = 1e-5;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // (The bundle passes an output folder; this example writes nothing.)
    let rt = gpu::runtime()?;
    let (nx, ny) = match rt.backend() {
        BackendKind::Cuda => (1024, 768),
        BackendKind::Host => (160, 120),
    };
    let heat = Heat::load(rt)?;
    println!(
        "07-own-kernel: backend {} ({}); {nx}x{ny} grid, {STEPS} steps",
        rt.backend(),
        rt.device_name()
    );
    println!(
        "  source: {}",
        match (heat.nvrtc, rt.backend()) {
            (true, BackendKind::Cuda) => "CUDA C compiled by NVRTC, run on the device",
            (true, BackendKind::Host) =>
                "CUDA C compiled by NVRTC (checked); the host implementation runs",
            (false, _) =>
                "no NVRTC: the kernel's name and parameters read from the source; the host implementation runs",
        }
    );

    let start = Instant::now();
    let field = gpu::scope(|s| {
        let mut cur = s.from_host(&heat::initial(nx, ny))?;
        let mut next = s.zeros::<f32>(nx * ny)?;
        // The wrapper checks the sizes against the buffers before the
        // (unsafe) launch: a wrong one is an error, not a stray write.
        let short = s.zeros::<f32>(nx * ny - 1)?;
        let refused = heat
            .step(s, &mut next, &short, (nx, ny), 0..ny, K)
            .unwrap_err();
        println!("  a grid one element short is refused: {refused}");
        for _ in 0..STEPS {
            heat.step(s, &mut next, &cur, (nx, ny), 0..ny, K)?;
            std::mem::swap(&mut cur, &mut next);
        }
        s.to_vec(&cur)
    })?;
    let elapsed = start.elapsed();

    let want = heat::reference(heat::initial(nx, ny), nx, ny, K, STEPS);
    let (worst, at) = heat::largest_difference(&field, &want);
    let mean = field.iter().map(|&x| f64::from(x)).sum::<f64>() / field.len() as f64;
    println!("  {elapsed:.2?} (upload, {STEPS} launches, download); mean temperature {mean:.5}");
    println!(
        "  largest difference from the CPU loop: {worst:.2e} (row {}, col {})",
        at / nx,
        at % nx
    );
    if worst > TOLERANCE {
        return Err(
            format!("the field differs from the CPU loop by {worst:e} (> {TOLERANCE:e})").into(),
        );
    }
    println!("  matches the CPU loop (tolerance {TOLERANCE:e})");
    Ok(())
}
