//! cuRAND on the CUDA backend: the one-time probe of the library, the
//! generators (a pool per stream slot of a runtime), and the calls.

use crate::context::ForeignStream;
use crate::error::Result;
use crate::libs::SlotPool;
use crate::TaskContext;
use cudarc::curand::sys::{self, curandGenerator_t, curandRngType_t, curandStatus_t};
use std::sync::atomic::{AtomicUsize, Ordering};

const LIBRARY: &str = "cuRAND";

crate::libs::library_probe!(
    /// cuRAND loaded and every function the fills call present; probed
    /// once. Never panics (nothing calls cudarc's loader before this
    /// succeeded).
    pub(super) fn library = cudarc::curand::sys, LIBRARY, "curand", super::SYMBOLS
);

/// `Ok` for success, else the typed error of `status` in `call` (cuRAND
/// has no function naming its statuses: the enum's name is used).
fn check(status: curandStatus_t, call: &'static str) -> Result<()> {
    if status == curandStatus_t::CURAND_STATUS_SUCCESS {
        return Ok(());
    }
    Err(crate::libs::status_error(
        LIBRARY,
        call,
        status as i32,
        format!("{status:?}"),
    ))
}

/// A cuRAND generator (Philox), bound to one stream at a time.
#[derive(Debug)]
struct Generator(curandGenerator_t);

// SAFETY: a cuRAND generator may be used from any thread, by one thread at
// a time (the pool hands it to one user at a time).
unsafe impl Send for Generator {}

/// A runtime's cuRAND generators, per stream slot
/// ([`crate::libs::SlotPool`]: a generator's state and scratch stay in its
/// stream's order). Destroyed with the runtime, after its streams
/// finished.
#[derive(Debug, Default)]
pub(crate) struct Generators {
    idle: SlotPool<Generator>,
    made: AtomicUsize,
}

impl Generators {
    /// Destroys every idle generator. The runtime's streams are idle (its
    /// drop synchronized them) and its context current.
    pub(crate) fn clear(&self) {
        for g in self.idle.drain() {
            // SAFETY: an idle generator of this pool, made by
            // `curandCreateGenerator`, destroyed once (it left the pool).
            let _ = unsafe { sys::curandDestroyGenerator(g.0) };
        }
    }

    /// Generators made, generators idle.
    pub(crate) fn counts(&self) -> (usize, usize) {
        (self.made.load(Ordering::Relaxed), self.idle.idle_count())
    }

    /// An idle generator of `slot`, or a new one. The runtime's context is
    /// current on this thread.
    fn take(&self, slot: usize) -> Result<Generator> {
        if let Some(g) = self.idle.take(slot) {
            return Ok(g);
        }
        let mut g: curandGenerator_t = std::ptr::null_mut();
        check(
            // SAFETY: the library is probed; `g` is a valid out-pointer;
            // the runtime's context is current (a foreign operation's
            // device closure binds it).
            unsafe {
                sys::curandCreateGenerator(&mut g, curandRngType_t::CURAND_RNG_PSEUDO_PHILOX4_32_10)
            },
            "curandCreateGenerator",
        )?;
        self.made.fetch_add(1, Ordering::Relaxed);
        Ok(Generator(g))
    }
}

/// Runs `f` (a generation call: its name and status) with a generator of
/// `t`'s stream slot bound to the foreign operation's stream `s`, seeded
/// with `seed` at cuRAND's `offset`. Called in the device closure of the
/// foreign operation that declares what `f` writes.
pub(super) fn generate(
    t: &TaskContext,
    s: &ForeignStream<'_>,
    seed: u64,
    offset: u64,
    f: impl FnOnce(curandGenerator_t) -> (&'static str, curandStatus_t),
) -> Result<()> {
    let slot = t.sid().index();
    let pool = t.runtime().rand_generators();
    let g = pool.take(slot)?;
    // SAFETY: `g` is a live generator, used by this thread only (taken
    // from the pool); `s` is the operation's live stream. Its earlier
    // stream was the slot's, whose work with it is ordered before this
    // (the same stream, or a retired idle one).
    let r = check(
        unsafe { sys::curandSetStream(g.0, s.raw() as usize as sys::cudaStream_t) },
        "curandSetStream",
    )
    .and_then(|()| {
        check(
            // SAFETY: as above.
            unsafe { sys::curandSetPseudoRandomGeneratorSeed(g.0, seed) },
            "curandSetPseudoRandomGeneratorSeed",
        )
    })
    .and_then(|()| {
        check(
            // SAFETY: as above.
            unsafe { sys::curandSetGeneratorOffset(g.0, offset) },
            "curandSetGeneratorOffset",
        )
    })
    .and_then(|()| {
        let (call, status) = f(g.0);
        check(status, call)
    });
    pool.idle.give(slot, g);
    r
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
