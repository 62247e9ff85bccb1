//! A cudarc user's program with `gpu` added: it compiles (no clash of
//! cudarc's CUDA-version features), the project's cudarc and
//! `gpu::foreign::cudarc` are one crate, and a scope runs (on the host
//! backend in CI, on the GPU where there is one).

use std::sync::Arc;

/// The project's own cudarc types are the ones `gpu` takes and gives.
fn same_stream(
    s: Arc<cudarc::driver::CudaStream>,
) -> Arc<gpu::foreign::cudarc::driver::CudaStream> {
    s
}

fn main() -> gpu::Result<()> {
    let _ = same_stream;
    let mut x = gpu::Buffer::from_host(&[1.0f32, 2.0, 3.0])?;
    gpu::scope(|s| gpu_kernels::scale(s, &mut x, 2.0))?;
    assert_eq!(x.to_vec()?, [2.0, 4.0, 6.0]);
    let rt = gpu::runtime()?;
    // The runtime's context, as the project's cudarc's type (the host
    // backend has none).
    let ctx: gpu::Result<Arc<cudarc::driver::CudaContext>> = rt.cuda_context();
    match rt.backend() {
        gpu::BackendKind::Cuda => assert!(ctx.is_ok()),
        _ => assert!(ctx.is_err()),
    }
    println!(
        "cudarc user: gpu and cudarc (CUDA {}) together, {:?} backend: ok",
        cudarc::driver::sys::CUDA_VERSION,
        rt.backend()
    );
    Ok(())
}
