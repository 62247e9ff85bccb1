//! Every type that a public function or method of `gpu` returns can be
//! named by its users, at the root or in one of its modules (`kernel`,
//! `memory`, `sync`, `diag`, `iter`, `foreign`, `raw`, `nccl`, `trace`,
//! `mpi`, `blas`, `solver`, `sparse`, `fft`, `rand`): a compile test. The functions below are never called; that they
//! compile is the test (each annotation is the type the call returns).

#![allow(dead_code, clippy::too_many_arguments)]

use gpu::diag::{
    Binding, CaptureHandle, CounterSnapshot, Generation, LedgerView, LiveCounts, StreamEpoch,
    StreamId, TaskId, Uses,
};
use gpu::foreign::{DevicePtr, DevicePtrMut, Foreign, ForeignStream};
use gpu::iter::{Enumerate, EnumerateParts, InTask, Map, ParChunks, ParChunksMut, Zip, ZipParts};
use gpu::kernel::{In, Kernel, LoadedModule, Out};
use gpu::memory::{Access, Staging};
use gpu::nccl::{Communicator, GroupCalls, UniqueId};
use gpu::raw::RawTask;
use gpu::sync::{Event, Fence, Gate, Graph, GraphLaunch};
use gpu::trace::Span;
use gpu::{
    BackendKind, Buffer, Error, Result, Runtime, Scope, Split, TaskContext, ThreadPool,
    ThreadPoolBuildError, View, ViewMut,
};
use gpu_sched::plumbing::TaskHooks;

/// The runtime's and a task's methods, each result named.
fn runtime_and_task(rt: &Runtime, t: &TaskContext, b: &mut Buffer<f32>) -> Result<()> {
    let _: BackendKind = rt.backend();
    let _: LedgerView<'_> = rt.ledger();
    let _: CounterSnapshot = rt.counters();
    let _: LiveCounts = rt.live();
    let _: Gate = rt.gate()?;
    let _: Staging<f32> = Staging::new(rt, 4)?;
    let _: TaskContext = rt.begin_task()?;
    let _: &Runtime = t.runtime();
    let _: StreamId = t.stream_id();
    let _: TaskId = t.task_id();
    let _: CaptureHandle = t.capture_handle();
    let _: Binding = t.share_stream_of(t)?;
    let _: u64 = t.cu_stream();
    let _: Event = rt.event()?;
    let _: Fence = t.fence()?;
    let g: Graph = t.capture(|_| Ok(()))?;
    let _: GraphLaunch<'_, '_> = t.launch_graph(&g);
    let _: View<'_, f32> = b.slice(..)?;
    let _: ViewMut<'_, f32> = b.slice_mut(..)?;
    let _: Split<'_, f32> = b.split_at_mut(2)?;
    let x = t.zeros::<f32>(4)?;
    let _: Foreign<'_, '_, '_, (f32,), (), (&Buffer<f32>,), (), ()> = t.foreign("f", (&x,), ());
    let _: LoadedModule = rt.load_ptx("")?;
    Ok(())
}

/// The numerical libraries' constructors and builders, each result named.
fn numerical_libraries(rt: &Runtime, t: &TaskContext) -> Result<()> {
    use gpu::blas::{Gemm, Gemv, Syrk, Trsm};
    use gpu::fft::{Complex32, Plan};
    use gpu::rand::Rng;
    use gpu::solver::{Geqrf, Getrf, Getrs, Pivots, Potrf, Potrs};
    use gpu::sparse::{Csr, Spmm};
    let _: Gemm<f32> = Gemm::new(1, 1, 1);
    let _: Gemv<f64> = Gemv::new(1, 1);
    let _: Trsm<f32> = Trsm::new(1, 1);
    let _: Syrk<f64> = Syrk::new(1, 1);
    let _: (Potrf, Potrs, Getrf, Getrs, Geqrf) = (
        Potrf::new(1),
        Potrs::new(1, 1),
        Getrf::new(1, 1),
        Getrs::new(1, 1),
        Geqrf::new(1, 1),
    );
    let _: Pivots = Pivots::new(t, 1)?;
    let _: Csr<f64> = Csr::from_host(t, 1, 1, &[0, 1], &[0], &[1.0])?;
    let _: Spmm<f32> = Spmm::new(1);
    let _: Plan = Plan::new(&[4]);
    let _: Complex32 = Complex32::new(0.0, 0.0);
    let _: Rng = Rng::new(1).with_offset(2);
    let _: std::sync::Arc<gpu::foreign::cudarc::driver::CudaContext> = rt.cuda_context()?;
    Ok(())
}

/// Types that the functions above return inside their generics, or that
/// callbacks and iterators hand out.
fn in_generics(
    _: ParChunks<'_, f32>,
    _: ParChunksMut<'_, f32>,
    _: Zip<ParChunks<'_, f32>, ParChunksMut<'_, f32>>,
    _: ZipParts<(), ()>,
    _: Enumerate<ParChunks<'_, f32>>,
    _: EnumerateParts<()>,
    _: InTask<'_, ParChunks<'_, f32>>,
    _: Map<ParChunks<'_, f32>, fn()>,
    _: Kernel<(Out<f32>, In<f32>, u64)>,
    _: DevicePtr<f32>,
    _: DevicePtrMut<f32>,
    _: &ForeignStream,
    _: &Scope<'_, '_>,
    _: Generation,
    _: StreamEpoch,
    _: &Uses,
    _: Access,
    _: Error,
    _: ThreadPool,
    _: ThreadPoolBuildError,
    _: Communicator,
    _: UniqueId,
    _: GroupCalls<'_, '_>,
    _: Span,
) {
}

#[cfg(feature = "mpi")]
fn mpi_types(_: gpu::mpi::SharedComm, _: gpu::mpi::Path) {}

/// One test that runs, so that the file is a test of its own: the names
/// above resolve (a renamed or unexported type fails to compile here).
#[test]
fn the_returned_types_are_nameable() {
    let names = [
        std::any::type_name::<LedgerView<'static>>(),
        std::any::type_name::<GraphLaunch<'static, 'static>>(),
        std::any::type_name::<CaptureHandle>(),
    ];
    assert!(
        names.iter().all(|n| n.starts_with("gpu_sched::")),
        "{names:?}"
    );
}
