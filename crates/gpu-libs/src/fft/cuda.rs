//! cuFFT on the CUDA backend: the library ([`Cufft`]), the plan cache (per
//! stream slot of a runtime and shape), and the execution with a tracked,
//! stream-ordered workspace.

use super::sealed::Sealed;
use super::{Kind, Plan, SYMBOLS};
use crate::shared::{Library, SlotPool};
use cudarc::cufft::result;
use cudarc::cufft::sys::{self, cufftHandle, cufftResult, cufftType};
use gpu_sched::{BackendKind, Buffer, Extension, Result, TaskContext};
use gpu_sched::{DevicePtrMut, ForeignStream};
use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};

/// cuFFT's `CUFFT_FORWARD` and `CUFFT_INVERSE` (macros in `cufft.h`).
const FORWARD: c_int = -1;
const INVERSE: c_int = 1;

/// At most this many idle plans are kept per runtime; a plan given back
/// beyond it is destroyed (many shapes on many streams would otherwise keep
/// every plan's device memory).
const MAX_IDLE: usize = 64;

/// cuFFT; its handle is a plan. Plans are not pooled by
/// [`crate::shared::HandlePool`] (which binds a handle for one call inside
/// the operation): a plan is made for one shape ([`Key`]), the pool of idle
/// ones is capped ([`MAX_IDLE`]), and a plan is taken before its operation
/// is declared, since its workspace size decides the buffer the operation
/// writes. [`Plans`] keeps them on the same [`SlotPool`].
pub(crate) struct Cufft;

impl Library for Cufft {
    const NAME: &'static str = "cuFFT";
    const STEM: &'static str = "cufft";
    const SYMBOLS: &'static [&'static str] = SYMBOLS;
    const CREATE: &'static str = "cufftCreate";
    const SET_STREAM: &'static str = "cufftSetStream";
    type Status = cufftResult;
    type Handle = cufftHandle;

    crate::shared::loader!(cudarc::cufft::sys);

    fn succeeded(status: cufftResult) -> bool {
        status == cufftResult::CUFFT_SUCCESS
    }

    fn code(status: cufftResult) -> i32 {
        status as i32
    }

    fn create() -> std::result::Result<cufftHandle, cufftResult> {
        result::create().map_err(|e| e.0)
    }

    unsafe fn destroy(h: cufftHandle) {
        // SAFETY: the caller's contract.
        let _ = unsafe { result::destroy(h) };
    }

    unsafe fn set_stream(h: cufftHandle, stream: u64) -> std::result::Result<(), cufftResult> {
        // SAFETY: the caller's contract.
        unsafe { result::set_stream(h, stream as usize as sys::cudaStream_t) }.map_err(|e| e.0)
    }
}

/// cuFFT's direction of a complex to complex transform.
pub(super) fn direction(kind: Kind) -> c_int {
    match kind {
        Kind::Inverse | Kind::C2R => INVERSE,
        Kind::Forward | Kind::R2C => FORWARD,
    }
}

/// What a plan was made for: dimensions, cuFFT's type, batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Key {
    dims: [c_int; 3],
    rank: usize,
    ty: cufftType,
    batch: c_int,
}

/// A cuFFT plan, made for `key`, its workspace size in bytes.
#[derive(Debug)]
struct CachedPlan {
    handle: cufftHandle,
    key: Key,
    work: usize,
}

/// A runtime's cuFFT plans, per stream slot ([`SlotPool`]: a plan is used
/// on one stream at a time), kept as the runtime's extension. Destroyed by
/// its teardown, after its streams finished.
#[derive(Debug, Default)]
pub(crate) struct Plans {
    idle: SlotPool<CachedPlan>,
    made: AtomicUsize,
}

impl Extension for Plans {
    /// Destroys every idle plan. The runtime's streams are idle (its drop
    /// synchronized them) and its context current.
    fn teardown(&self) {
        for p in self.idle.drain() {
            // SAFETY: an idle plan of this pool, made by `cufftCreate`,
            // destroyed once (it left the pool); its work finished.
            unsafe { Cufft::destroy(p.handle) };
        }
    }
}

impl Plans {
    /// Plans made, plans idle.
    pub(crate) fn counts(&self) -> (usize, usize) {
        (self.made.load(Ordering::Relaxed), self.idle.idle_count())
    }

    /// An idle plan of `slot` for `key`, or a new one. The runtime's
    /// context is current on this thread.
    fn take(&self, slot: usize, key: Key) -> Result<CachedPlan> {
        if let Some(p) = self.idle.take_where(slot, |p| p.key == key) {
            return Ok(p);
        }
        let h = Cufft::create().map_err(|s| Cufft::error(s, Cufft::CREATE))?;
        let mut n = key.dims;
        let mut work = 0usize;
        // SAFETY: `h` is a fresh plan; `n` holds `rank` dimensions; null
        // embeddings ask for the packed layout (strides and distances
        // ignored); `work` is a valid out-pointer. Without automatic
        // allocation, making the plan allocates no workspace: each call
        // gives its own.
        let made = Cufft::check(
            unsafe { sys::cufftSetAutoAllocation(h, 0) },
            "cufftSetAutoAllocation",
        )
        .and_then(|()| {
            Cufft::check(
                // SAFETY: as above.
                unsafe {
                    sys::cufftMakePlanMany(
                        h,
                        key.rank as c_int,
                        n.as_mut_ptr(),
                        std::ptr::null_mut(),
                        1,
                        0,
                        std::ptr::null_mut(),
                        1,
                        0,
                        key.ty,
                        key.batch,
                        &mut work,
                    )
                },
                "cufftMakePlanMany",
            )
        });
        if let Err(e) = made {
            // SAFETY: made above, used by nothing else.
            unsafe { Cufft::destroy(h) };
            return Err(e);
        }
        self.made.fetch_add(1, Ordering::Relaxed);
        Ok(CachedPlan {
            handle: h,
            key,
            work,
        })
    }

    /// Gives `p` back to `slot`, or destroys it beyond [`MAX_IDLE`]. Its
    /// work queued on the slot's stream still runs: cuFFT frees a plan's
    /// memory with `cudaFree`, which waits for the device's work first (a
    /// host wait, paid only past the cap).
    fn give(&self, slot: usize, p: CachedPlan) {
        if self.idle.idle_count() >= MAX_IDLE {
            // SAFETY: taken from or made for this pool, used by nothing
            // else now; the context is current (the caller's).
            unsafe { Cufft::destroy(p.handle) };
        } else {
            self.idle.give(slot, p);
        }
    }
}

/// Runs `f` with a workspace buffer and a plan for `plan`'s `kind` of `T`
/// on `t`'s stream slot: on the CUDA backend, a cached plan (or a new one)
/// and a workspace of its size allocated on `t`'s stream, which `f`
/// declares as a write of its foreign operation; the plan goes back to the
/// cache after. On the host backend, an empty workspace and no plan (`f`'s
/// foreign operation runs its host twin).
pub(super) fn with_plan<T: Sealed>(
    t: &TaskContext,
    plan: &Plan,
    kind: Kind,
    f: impl FnOnce(&mut Buffer<u8>, cufftHandle) -> Result<()>,
) -> Result<()> {
    let rt = t.runtime();
    if rt.backend() == BackendKind::Host {
        let mut ws = t.alloc::<u8>(0)?;
        return f(&mut ws, 0);
    }
    let mut dims = [1 as c_int; 3];
    for (d, &n) in dims.iter_mut().zip(plan.dims()) {
        // Checked to fit (`Plan::check`).
        *d = n as c_int;
    }
    let key = Key {
        dims,
        rank: plan.rank,
        ty: T::TYPES[kind as usize],
        batch: plan.batch as c_int,
    };
    // Making a plan calls the CUDA runtime: the runtime's context must be
    // current on this thread; the task may have no stream yet (nothing
    // queued so far): `stream_slot` binds both.
    let slot = t.stream_slot()?.slot();
    let pool = rt.extension::<Plans>();
    let p = pool.take(slot, key)?;
    let r = t
        .alloc::<u8>(p.work)
        .and_then(|mut ws| f(&mut ws, p.handle));
    pool.give(slot, p);
    r
}

/// One execution: `plan` bound to the foreign operation's stream and given
/// its workspace `ws`, then `f` (cuFFT's execution call, named `call`).
/// Called in the device closure of the foreign operation that declares
/// `ws` (so the context is current).
pub(super) fn exec(
    plan: cufftHandle,
    s: &ForeignStream<'_>,
    ws: DevicePtrMut<u8>,
    call: &'static str,
    f: impl FnOnce(cufftHandle) -> cufftResult,
) -> Result<()> {
    // SAFETY: `plan` is a live plan, used by this thread only (taken from
    // the pool); `s` is the operation's live stream. A plan's earlier
    // stream was the slot's, whose work on the plan's memory is ordered
    // before this one's (the same slot's stream, or a retired idle one).
    unsafe { Cufft::set_stream(plan, s.raw()) }
        .map_err(|st| Cufft::error(st, Cufft::SET_STREAM))?;
    Cufft::check(
        // SAFETY: `ws` is a device buffer of the plan's workspace size (at
        // least 4 bytes: an allocation of 0 bytes is rounded up, so the
        // pointer is valid even where cuFFT needs none), declared as a
        // write of this operation: ordered for this stream, freed only
        // after it in stream order.
        unsafe { sys::cufftSetWorkArea(plan, ws.as_mut_ptr().cast()) },
        "cufftSetWorkArea",
    )?;
    Cufft::check(f(plan), call)
}
