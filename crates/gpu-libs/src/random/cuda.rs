//! cuRAND on the CUDA backend: the library ([`Curand`], its generators
//! pooled per stream slot of a runtime by [`HandlePool`]), and the calls.

use crate::shared::{stream_of, HandlePool, Library};
use cudarc::curand::result;
use cudarc::curand::sys::{self, curandGenerator_t, curandRngType_t, curandStatus_t};
use gpu_sched::{ForeignStream, Result, TaskContext};

/// cuRAND; its handle is a generator (Philox), a generator's state and
/// scratch staying in its stream's order. The seed and offset are set at
/// each use ([`generate`]).
pub(crate) struct Curand;

impl Library for Curand {
    const NAME: &'static str = "cuRAND";
    const STEM: &'static str = "curand";
    const SYMBOLS: &'static [&'static str] = super::SYMBOLS;
    const CREATE: &'static str = "curandCreateGenerator";
    const SET_STREAM: &'static str = "curandSetStream";
    type Status = curandStatus_t;
    type Handle = curandGenerator_t;

    crate::shared::loader!(cudarc::curand::sys);

    fn succeeded(status: curandStatus_t) -> bool {
        status == curandStatus_t::CURAND_STATUS_SUCCESS
    }

    fn code(status: curandStatus_t) -> i32 {
        status as i32
    }

    fn create() -> std::result::Result<curandGenerator_t, curandStatus_t> {
        result::create_generator_kind(curandRngType_t::CURAND_RNG_PSEUDO_PHILOX4_32_10)
            .map_err(|e| e.0)
    }

    unsafe fn destroy(g: curandGenerator_t) {
        // SAFETY: the caller's contract.
        let _ = unsafe { result::destroy_generator(g) };
    }

    unsafe fn set_stream(
        g: curandGenerator_t,
        stream: u64,
    ) -> std::result::Result<(), curandStatus_t> {
        // SAFETY: the caller's contract.
        unsafe { result::set_stream(g, stream as usize as sys::cudaStream_t) }.map_err(|e| e.0)
    }
}

/// Generators made, generators idle, of `t`'s runtime.
pub(super) fn counts(rt: &gpu_sched::Runtime) -> (usize, usize) {
    HandlePool::<Curand>::of(rt).counts()
}

/// Runs `f` (a generation call: its name and status) with a generator of
/// the foreign operation's stream `s` (its slot's), seeded with `seed` at
/// cuRAND's `offset`. Called in the device closure of the foreign
/// operation that declares what `f` writes.
pub(super) fn generate(
    t: &TaskContext,
    s: &ForeignStream<'_>,
    seed: u64,
    offset: u64,
    f: impl FnOnce(curandGenerator_t) -> (&'static str, curandStatus_t),
) -> Result<()> {
    HandlePool::<Curand>::of(t.runtime()).with_handle(stream_of(s), |g| {
        // SAFETY: `g` is a live generator, used by this thread only (taken
        // from the pool) and bound to `s`.
        let r = unsafe { sys::curandSetPseudoRandomGeneratorSeed(g, seed) };
        Curand::check(r, "curandSetPseudoRandomGeneratorSeed")?;
        // SAFETY: as above.
        let r = unsafe { sys::curandSetGeneratorOffset(g, offset) };
        Curand::check(r, "curandSetGeneratorOffset")?;
        let (call, status) = f(g);
        Curand::check(status, call)
    })
}

/// Copies `bytes` from device address `src` to `dst` on `s`.
///
/// # Safety
///
/// Both ranges lie within buffers of the caller's foreign operation, `dst`
/// in one it declares as a write.
pub(super) unsafe fn copy(s: &ForeignStream<'_>, dst: u64, src: u64, bytes: usize) -> Result<()> {
    // SAFETY: the caller's contract; `s` is the operation's live stream of
    // the current context.
    unsafe {
        cudarc::driver::sys::cuMemcpyDtoDAsync_v2(
            dst,
            src,
            bytes,
            s.raw() as usize as cudarc::driver::sys::CUstream,
        )
    }
    .result()?;
    Ok(())
}
