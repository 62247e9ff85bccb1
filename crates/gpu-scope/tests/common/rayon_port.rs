//! Shared by the ports of rayon-core's tests (`tests/rayon_*.rs`): a seeded
//! generator, the tiny GPU operation the `_gpu` variants do in each task, a
//! big-stack thread for deep recursion, and a lock that lets the tests which
//! count the global runtime's live resources
//! ([`assert_nothing_held`](super::assert_nothing_held)) run alone.

use gpu::TaskContext;
use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Rayon's tests use `XorShiftRng` seeded with `0, 1, 2, ...`; this is
/// the same xorshift128 generator (Marsaglia), seeded likewise, so a run
/// is reproducible without the `rand` crates.
#[derive(Clone, Debug)]
pub(crate) struct XorShift {
    x: u32,
    y: u32,
    z: u32,
    w: u32,
}

impl XorShift {
    /// Seeded as rayon's `seeded_rng()`: the seed bytes are `0..16`.
    pub(crate) fn seeded() -> Self {
        let word = |i: u32| {
            u32::from_le_bytes([
                4 * i as u8,
                4 * i as u8 + 1,
                4 * i as u8 + 2,
                4 * i as u8 + 3,
            ])
        };
        XorShift {
            x: word(0),
            y: word(1),
            z: word(2),
            w: word(3),
        }
    }

    pub(crate) fn next_u32(&mut self) -> u32 {
        let t = self.x ^ (self.x << 11);
        self.x = self.y;
        self.y = self.z;
        self.z = self.w;
        self.w = self.w ^ (self.w >> 19) ^ (t ^ (t >> 8));
        self.w
    }

    /// In `0..n` (`n > 0`; the slight bias does not matter here).
    pub(crate) fn below(&mut self, n: u32) -> u32 {
        self.next_u32() % n
    }
}

/// Rayon's `partition`: Lomuto, the last element as the pivot.
pub(crate) fn partition<T: PartialOrd + Send>(v: &mut [T]) -> usize {
    let pivot = v.len() - 1;
    let mut i = 0;
    for j in 0..pivot {
        if v[j] <= v[pivot] {
            v.swap(i, j);
            i += 1;
        }
    }
    v.swap(i, pivot);
    i
}

/// `n` seeded random `u32`s.
pub(crate) fn random_data(n: usize) -> Vec<u32> {
    let mut rng = XorShift::seeded();
    (0..n).map(|_| rng.next_u32()).collect()
}

/// The tiny GPU operation of the `_gpu` variants: a 4-element buffer,
/// zeroed and filled on the task's stream. It is the task's first GPU
/// operation, so it binds the task's stream (or shares one when every
/// stream is held).
pub(crate) fn tiny_gpu_op(t: &TaskContext) -> gpu::Result<()> {
    let mut b = t.zeros::<f32>(4)?;
    gpu_kernels::fill(t, &mut b, 1.0)?;
    Ok(())
}

/// A GPU round trip whose result matters: `v` written on the device and
/// read back (`v` must be exact in `f32`).
pub(crate) fn through_gpu(t: &TaskContext, v: u64) -> gpu::Result<u64> {
    assert!(v < 1 << 24, "{v} is not exact in f32");
    let mut b = t.zeros::<f32>(1)?;
    gpu_kernels::fill(t, &mut b, v as f32)?;
    Ok(t.to_vec(&b)?[0] as u64)
}

/// Stack for the threads that run deep recursions on the calling thread
/// (the first levels of 10,000 nested `Scope::join`s opened outside the
/// pool: about 6 KB a level in a debug build, where a test thread has
/// 2 MiB).
pub(crate) const BIG_STACK: usize = 1 << 30;

/// Runs `f` on a new thread with a stack of `stack` bytes and returns its
/// result; a panic of `f` is re-raised here with its payload.
pub(crate) fn on_big_stack<R: Send>(stack: usize, f: impl FnOnce() -> R + Send) -> R {
    std::thread::scope(|s| {
        let h = std::thread::Builder::new()
            .name("rayon-port-big-stack".into())
            .stack_size(stack)
            .spawn_scoped(s, f)
            .expect("spawning the big-stack thread");
        match h.join() {
            Ok(r) => r,
            Err(p) => resume_unwind(p),
        }
    })
}

/// The message of a panic payload (`panic!` with a literal or a format).
pub(crate) fn panic_message(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "<not a string>".to_string()
    }
}

/// Runs `f`, which must panic; returns the panic's message (rayon's tests
/// use `unwind::halt_unwinding`).
#[track_caller]
pub(crate) fn expect_panic<R>(f: impl FnOnce() -> R) -> String {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(_) => panic!("failed to propagate the panic"),
        Err(p) => panic_message(&*p),
    }
}

/// Tests of one binary run in parallel on the one global runtime; those
/// that count its live resources take [`alone`], all others [`together`].
static LIVE: RwLock<()> = RwLock::new(());

/// Held by a test that may run beside others.
pub(crate) fn together() -> RwLockReadGuard<'static, ()> {
    LIVE.read().unwrap_or_else(|p| p.into_inner())
}

/// Held by a test that counts the global runtime's live resources: no
/// other test of the binary runs meanwhile.
pub(crate) fn alone() -> RwLockWriteGuard<'static, ()> {
    LIVE.write().unwrap_or_else(|p| p.into_inner())
}
