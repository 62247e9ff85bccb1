//! # 14: cudarc interop
//!
//! `gpu` takes cudarc 0.19 and re-exports it as `gpu::foreign::cudarc`: a
//! project's own `cudarc = "0.19"` is the same crate, so its types pass
//! both ways (this file names both paths for one type, which compiles only
//! because they are one). Three ways across:
//!
//! 1. **cudarc code inside a task** (both backends): a kernel compiled by
//!    cudarc's NVRTC and launched with cudarc's launch builder, on the
//!    task's stream as cudarc's (`ForeignStream::cudarc`), as one tracked
//!    operation (`TaskContext::foreign`) over the buffers it declares: the
//!    ledger orders it with every other use of them. The host backend has
//!    no CUDA: it runs the operation's host twin instead, and never calls
//!    the device closure (nor `ForeignStream::cudarc`, nor cudarc).
//! 2. **The runtime's context as cudarc's** (CUDA only):
//!    `Runtime::cuda_context` is the device's primary context, which the
//!    runtime uses, as an `Arc<CudaContext>`; cudarc's streams, modules and
//!    slices made from it work with the runtime's. On the host backend it
//!    is `Error::Unsupported` (there is no CUDA context).
//! 3. **Buffers both ways** (CUDA only): a cudarc `CudaSlice` adopted as a
//!    `Buffer` (`TaskContext::adopt_cudarc`, ordered after cudarc's pending
//!    work on it), used by `gpu` tasks, and given back as a `CudaSlice` on a
//!    cudarc stream (`TaskContext::into_cudarc`, ordered after the ledger's
//!    last use). On the host backend there is no `CudaSlice` to adopt nor a
//!    cudarc stream to give one to (both need part 2's context), and both
//!    are `Error::Unsupported` there.
//!
//! Every result is checked; exits non-zero if one is wrong, or if the host
//! backend does not refuse what is CUDA only.
//!
//! ```text
//! cargo run --release -p gpu-examples --example 14-cudarc
//! ```

use gpu::foreign::cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};
use gpu::foreign::cudarc::nvrtc;
use gpu::prelude::*;
use gpu::{BackendKind, Runtime};
use gpu_kernels as k;

/// The cudarc project's kernel: `y = a x + y`.
const SRC: &str = r#"
extern "C" __global__ void axpy(float* y, const float* x, float a, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"#;

/// `gpu::foreign::cudarc` is the project's own `cudarc`: the same type by
/// both paths.
fn same_crate(s: CudaSlice<f32>) -> ::cudarc::driver::CudaSlice<f32> {
    s
}

/// The kernel, compiled and loaded by cudarc into the runtime's context
/// (CUDA only).
fn load(rt: &Runtime) -> Result<CudaFunction> {
    let ptx =
        nvrtc::compile_ptx(SRC).map_err(|e| Error::external("compiling with cudarc's NVRTC", e))?;
    let module = rt.cuda_context()?.load_module(ptx)?;
    Ok(module.load_function("axpy")?)
}

/// `y = a x + y` as a tracked operation: cudarc's launch on the task's
/// stream on CUDA, the host twin on the host backend.
fn axpy(
    t: &TaskContext,
    f: Option<&CudaFunction>,
    a: f32,
    x: &Buffer<f32>,
    y: &mut Buffer<f32>,
) -> Result<()> {
    if x.len() != y.len() {
        return Err(Error::LengthMismatch {
            what: "axpy's x",
            expected: y.len(),
            got: x.len(),
        });
    }
    let op =
        t.foreign("cudarc axpy", (x,), (y,))
            .host(move |(x,): (&[f32],), (y,): (&mut [f32],)| {
                y.iter_mut().zip(x).for_each(|(y, x)| *y += a * x);
                Ok(())
            });
    // SAFETY: the device closure queues one launch on the task's stream
    // (cudarc's wrapper of it, borrowed for the closure), whose threads
    // `i < n` read `x[i]` and write `y[i]`, both of `n` elements (checked
    // above); it waits for nothing and keeps nothing.
    unsafe {
        op.run(|s, (x,), (y,)| {
            let f = f.ok_or(Error::Unsupported("the cudarc kernel was not loaded"))?;
            let stream = s.cudarc()?;
            let (yp, xp, n) = (y.raw(), x.raw(), y.len() as u64);
            stream
                .launch_builder(f)
                .arg(&yp)
                .arg(&xp)
                .arg(&a)
                .arg(&n)
                .launch(LaunchConfig::for_num_elems(n as u32))?;
            Ok(())
        })
    }
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    // (The bundle passes an output folder; this example writes nothing.)
    let rt = gpu::runtime()?;
    let cuda = rt.backend() == BackendKind::Cuda;
    let n = if cuda { 1 << 20 } else { 4096 };
    println!(
        "14-cudarc: backend {} ({}); cudarc 0.19 as gpu::foreign::cudarc",
        rt.backend(),
        rt.device_name()
    );

    // Part 2 first: cudarc's context, and a stream of cudarc's (its first
    // stream of a context synchronizes the device once: make it early).
    let cudarc = match rt.cuda_context() {
        Ok(ctx) => Some((ctx.new_stream()?, load(rt)?)),
        Err(e @ Error::Unsupported(_)) if !cuda => {
            println!("  Runtime::cuda_context: CUDA only; here: {e}");
            None
        }
        Err(e) => return Err(e.into()),
    };

    // Part 1: cudarc's kernel in a task, ordered by the ledger.
    let xs: Vec<f32> = (0..n).map(|i| (i % 100) as f32).collect();
    let x = Buffer::from_host(&xs)?;
    let mut y = Buffer::from_host(&vec![1.0f32; n])?;
    let f = cudarc.as_ref().map(|(_, f)| f);
    gpu::scope(|s| {
        k::scale(s, &mut y, 2.0)?; // y = 2, a built-in kernel
        axpy(s, f, 0.5, &x, &mut y)?; // y += x / 2, cudarc's kernel (or the twin)
        s.spawn(|t| k::add_scalar(t, &mut y, 1.0)); // ordered after both
        Ok(())
    })?;
    let got = y.to_vec()?;
    let bad = got
        .iter()
        .zip(&xs)
        .position(|(g, x)| *g != 2.0 + 0.5 * x + 1.0);
    println!(
        "  a cudarc kernel as a tracked operation ({}): {}",
        if cuda {
            "cudarc's NVRTC and launch builder, on ForeignStream::cudarc()"
        } else {
            "the host twin; the device closure and ForeignStream::cudarc are CUDA only"
        },
        if bad.is_none() { "right" } else { "WRONG" }
    );
    if let Some(i) = bad {
        return Err(format!("y[{i}] = {}, expected {}", got[i], 3.0 + 0.5 * xs[i]).into());
    }

    // Part 3: a CudaSlice adopted as a Buffer, used by tasks, given back.
    let Some((stream, _)) = cudarc else {
        println!(
            "  TaskContext::adopt_cudarc, into_cudarc: CUDA only (they take a CudaSlice and a \
             cudarc stream, which need Runtime::cuda_context)"
        );
        println!("  the host backend ran the host twin and refused what is CUDA only");
        return Ok(());
    };
    let slice = same_crate(stream.clone_htod(&xs)?); // cudarc's, on its stream
    let mut buf = gpu::with_task(|t| t.adopt_cudarc(slice))?; // now the ledger's
    gpu::scope(|s| {
        s.spawn(|t| k::scale(t, &mut buf, 3.0)); // a task's stream, not cudarc's
        Ok(())
    })?;
    let back = gpu::with_task(|t| t.into_cudarc(buf, &stream))?; // cudarc's again
    let got = stream.clone_dtoh(&back)?;
    let bad = got.iter().zip(&xs).position(|(g, x)| *g != 3.0 * x);
    println!(
        "  a CudaSlice adopted, scaled by a task, given back to cudarc's stream: {}",
        if bad.is_none() { "right" } else { "WRONG" }
    );
    if let Some(i) = bad {
        return Err(format!("slice[{i}] = {}, expected {}", got[i], 3.0 * xs[i]).into());
    }
    Ok(())
}
