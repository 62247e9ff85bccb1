//! Deterministic reductions on the device: `sum`, `min`, `max` and `dot` of
//! `f32` and `f64`, and `sum` and `dot` of `f32` accumulated in `f64`.
//!
//! Each comes in two forms:
//!
//! - `*_into(t, .., &mut out)` writes the result into `out`, a one-element
//!   buffer: a *device scalar*, which later kernels on the stream can read
//!   without a host round trip. Nothing waits.
//! - the plain form (`sum(t, &x)`) returns a host value: it reduces into a
//!   fresh device scalar, copies it back and so waits for the task's stream.
//!
//! # Order and determinism
//!
//! Two launches of the kernels in [`MODULE`] (`src/cuda/reduce.cu`), with
//! no atomics: pass 1 cuts the `n` elements into [`reduce_parts`]`(n)` parts
//! of [`reduce_chunk`]`(n)` elements, which depend on `n` only (not on the
//! grid, the device or timing), and reduces each with one block, in a fixed
//! tree, into a partial; pass 2 reduces the partials the same way with one
//! block. With a single part (`n <=` [`REDUCE_TILE`]) pass 1 writes the
//! result directly. Results are therefore always deterministic, bit for bit
//! from run to run: there is no non-deterministic mode to opt out of (the
//! atomic [`crate::sum`] of the element-wise module is the other one). The
//! host references [`host::reduce`] follow the same order, so the device
//! and host results are bit-identical; see there for the exact order.
//!
//! # Scratch
//!
//! With more than one part, the wrapper allocates the partials
//! ([`reduce_parts`]`(n)` accumulators, at most 8 KiB) with
//! [`TaskContext::alloc`], in stream order on the task's stream, and drops
//! them when it returns (freed in stream order too: nothing waits).
//!
//! # Values
//!
//! - No elements: `sum` and `dot` give `+0.0`, `min` gives `+inf`, `max`
//!   gives `-inf` (their identities; no error).
//! - `min` and `max` skip NaN and order `-0` below `+0` (IEEE 754-2019
//!   `minimumNumber` / `maximumNumber`, like `fminf`/`fmaxf` but with the
//!   sign of zero defined): the least (greatest) non-NaN element, `+inf`
//!   (`-inf`) when every element is NaN.
//! - `sum` and `dot` round each addition (and each product) in the
//!   accumulator's type, without fused multiply-add; a NaN or infinity in
//!   the input propagates as IEEE arithmetic says.
//! - `min` and `max` are exact, so they have no `f64` variants.
//!
//! # Examples
//!
//! ```
//! use gpu_kernels::reduce;
//! use gpu_sched::Runtime;
//!
//! let rt = Runtime::host().unwrap();
//! let t = rt.begin_task().unwrap();
//! let x = t.from_host(&[1.0_f32, 2.0, 3.0]).unwrap();
//! let y = t.from_host(&[4.0_f32, 5.0, 6.0]).unwrap();
//! assert_eq!(reduce::sum(&t, &x).unwrap(), 6.0);
//! assert_eq!(reduce::max(&t, &x).unwrap(), 3.0);
//! assert_eq!(reduce::dot_f64(&t, &x, &y).unwrap(), 32.0);
//!
//! // A device scalar: the dot product stays on the device, and is read by
//! // the next reduction.
//! let mut d = t.alloc::<f32>(1).unwrap();
//! reduce::dot_into(&t, &x, &y, &mut d).unwrap();
//! assert_eq!(reduce::min(&t, &d).unwrap(), 32.0);
//! ```

use crate::ops::same_len;
use crate::{host, names, Float, BLOCK};
use gpu_sched::{
    Buffer, DeviceRepr, DeviceSlice, DeviceSliceMut, KernelArg, KernelDef, KernelRef, LaunchConfig,
    Module, Param, Result, TaskContext,
};

/// Elements per part (`GK_REDUCE_TILE`): a reduction of `n` elements has one
/// part per `REDUCE_TILE` elements, up to [`REDUCE_PARTS`].
pub const REDUCE_TILE: u32 = 2048;

/// Most parts, and so partials, of a reduction (`GK_REDUCE_PARTS`). At most
/// [`REDUCE_TILE`], so that the partials are reduced as one part.
pub const REDUCE_PARTS: u32 = 1024;
const _: () = assert!(REDUCE_PARTS <= REDUCE_TILE);

/// Parts of a reduction of `n` elements, one block and one partial each:
/// `ceil(n / REDUCE_TILE)`, at least 1 and at most [`REDUCE_PARTS`].
///
/// # Examples
///
/// ```
/// use gpu_kernels::{reduce_parts, REDUCE_PARTS, REDUCE_TILE};
/// assert_eq!(reduce_parts(0), 1);
/// assert_eq!(reduce_parts(u64::from(REDUCE_TILE)), 1);
/// assert_eq!(reduce_parts(u64::from(REDUCE_TILE) + 1), 2);
/// assert_eq!(reduce_parts(u64::MAX), u64::from(REDUCE_PARTS));
/// ```
pub const fn reduce_parts(n: u64) -> u64 {
    let parts = n.div_ceil(REDUCE_TILE as u64);
    if parts == 0 {
        1
    } else if parts > REDUCE_PARTS as u64 {
        REDUCE_PARTS as u64
    } else {
        parts
    }
}

/// Elements per part of a reduction of `n` elements: `n / reduce_parts(n)`
/// rounded up to a multiple of [`BLOCK`]. Part `p` is
/// `[p * chunk, min((p + 1) * chunk, n))`; the last parts may be short or
/// empty.
///
/// # Examples
///
/// ```
/// use gpu_kernels::{reduce_chunk, BLOCK};
/// assert_eq!(reduce_chunk(0), 0);
/// assert_eq!(reduce_chunk(1), u64::from(BLOCK));
/// assert_eq!(reduce_chunk(2049), 1280); // two parts
/// ```
pub const fn reduce_chunk(n: u64) -> u64 {
    let per_part = n.div_ceil(reduce_parts(n));
    per_part.div_ceil(BLOCK as u64) * BLOCK as u64
}

mod hostk {
    //! Host implementations with the kernels' argument lists, run by the
    //! host backend. Each is `unsafe`: the runtime checked the arguments
    //! against the parameter list and every pointer is a live allocation of
    //! the launch's size (the wrappers pass `reduce_parts(n)` partials).

    use super::*;
    use host::reduce::{dot_pass, max_pass, min_pass, sum_pass, Real};

    use crate::host::{arg_len as len, arg_ptr as ptr};

    /// # Safety
    /// `p` is a live allocation of `n` `T`s with no live `&mut` to it.
    unsafe fn sl<'a, T>(p: u64, n: usize) -> &'a [T] {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(p as *const T, n) }
    }
    /// # Safety
    /// `p` is a live allocation of `n` `T`s with no other live reference.
    unsafe fn sl_mut<'a, T>(p: u64, n: usize) -> &'a mut [T] {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(p as *mut T, n) }
    }
    fn parts(n: usize) -> usize {
        reduce_parts(n as u64) as usize
    }

    pub(super) unsafe fn sum<In: Copy, A: Real + From<In>>(a: &[KernelArg], _: LaunchConfig) {
        let n = len(a[2]);
        // SAFETY: see the module note; the input is read, the partials (a
        // distinct buffer, borrowed exclusively) written.
        let (x, p) = unsafe { (sl::<In>(ptr(a[0]), n), sl_mut::<A>(ptr(a[1]), parts(n))) };
        sum_pass(x, p);
    }
    pub(super) unsafe fn dot<In: Copy, A: Real + From<In>>(a: &[KernelArg], _: LaunchConfig) {
        let n = len(a[3]);
        // SAFETY: as in `sum`; x and y may be the same buffer (both read).
        let (x, y, p) = unsafe {
            (
                sl::<In>(ptr(a[0]), n),
                sl::<In>(ptr(a[1]), n),
                sl_mut::<A>(ptr(a[2]), parts(n)),
            )
        };
        dot_pass(x, y, p);
    }
    pub(super) unsafe fn min<T: Real>(a: &[KernelArg], _: LaunchConfig) {
        let n = len(a[2]);
        // SAFETY: as in `sum`.
        let (x, p) = unsafe { (sl::<T>(ptr(a[0]), n), sl_mut::<T>(ptr(a[1]), parts(n))) };
        min_pass(x, p);
    }
    pub(super) unsafe fn max<T: Real>(a: &[KernelArg], _: LaunchConfig) {
        let n = len(a[2]);
        // SAFETY: as in `sum`.
        let (x, p) = unsafe { (sl::<T>(ptr(a[0]), n), sl_mut::<T>(ptr(a[1]), parts(n))) };
        max_pass(x, p);
    }
}

use Param::{PtrRead as R, PtrWrite as W, U64};

macro_rules! kernel {
    ($name:expr, [$($p:expr),*], $f:expr) => {
        KernelDef { name: $name, params: &[$($p),*], host: $f }
    };
}

/// The reduction kernels (`REDUCE_PTX`), in the order of
/// [`names::REDUCE_ALL`], for [`TaskContext::launch`].
pub static MODULE: Module = Module {
    name: "gpu-kernels/reduce",
    ptx: crate::REDUCE_PTX,
    kernels: &[
        kernel!(names::REDUCE_SUM_F32, [R, W, U64], hostk::sum::<f32, f32>),
        kernel!(names::REDUCE_SUM_F64, [R, W, U64], hostk::sum::<f64, f64>),
        kernel!(names::REDUCE_MIN_F32, [R, W, U64], hostk::min::<f32>),
        kernel!(names::REDUCE_MIN_F64, [R, W, U64], hostk::min::<f64>),
        kernel!(names::REDUCE_MAX_F32, [R, W, U64], hostk::max::<f32>),
        kernel!(names::REDUCE_MAX_F64, [R, W, U64], hostk::max::<f64>),
        kernel!(
            names::REDUCE_DOT_F32,
            [R, R, W, U64],
            hostk::dot::<f32, f32>
        ),
        kernel!(
            names::REDUCE_DOT_F64,
            [R, R, W, U64],
            hostk::dot::<f64, f64>
        ),
        kernel!(
            names::REDUCE_SUM_F32_F64,
            [R, W, U64],
            hostk::sum::<f32, f64>
        ),
        kernel!(
            names::REDUCE_DOT_F32_F64,
            [R, R, W, U64],
            hostk::dot::<f32, f64>
        ),
    ],
};

const SUM: usize = 0;
const MIN: usize = 2;
const MAX: usize = 4;
const DOT: usize = 6;
const SUM_F32_F64: usize = 8;
const DOT_F32_F64: usize = 9;

/// The reduction kernel called `name` (its PTX entry, e.g.
/// `"reduce_sum_f32"`), for launches through [`TaskContext::launch`].
pub fn kernel_ref(name: &str) -> Option<KernelRef> {
    MODULE
        .kernels
        .iter()
        .position(|k| k.name == name)
        .map(|i| KernelRef::new(&MODULE, i))
}

fn k<T: Float>(base: usize) -> KernelRef {
    KernelRef::new(&MODULE, base + T::VARIANT)
}

fn kernel(index: usize) -> KernelRef {
    KernelRef::new(&MODULE, index)
}

/// One launch of the `reduce_*` kernel `kernel` over `x[..n]` (and `y`)
/// into `partials`, with one block per part.
///
/// # Safety
///
/// `kernel` has the parameters `(const In* x, [const In* y,] A* partials,
/// u64 n)`, `y` (if any) is as long as `x`, and `partials` holds
/// `reduce_parts(x.len())` elements.
unsafe fn pass<In, A, X, Y, P>(
    t: &TaskContext,
    kernel: KernelRef,
    x: &X,
    y: Option<&Y>,
    partials: &mut P,
) -> Result<()>
where
    In: DeviceRepr,
    A: DeviceRepr,
    X: DeviceSlice<In> + ?Sized,
    Y: DeviceSlice<In> + ?Sized,
    P: DeviceSliceMut<A> + ?Sized,
{
    let n = x.len();
    let grid = LaunchConfig::linear(reduce_parts(n as u64) as u32, BLOCK);
    let mut launch = t.launch(kernel, grid).read::<In>(x);
    if let Some(y) = y {
        launch = launch.read::<In>(y);
    }
    // SAFETY: the kernel reads `x[..n]` and `y[..n]` and writes
    // `partials[..reduce_parts(n)]` (the caller's contract); blocks stride
    // over parts, so it touches nothing else whatever the grid.
    unsafe { launch.write::<A>(partials).arg(n).submit() }
}

/// Pass 1 (`first`, over `x` and, for a dot product, `y`, of `In`) then,
/// with more than one part, pass 2 (`second`, a sum, min or max over the
/// partials of `A`), into `out`.
///
/// # Safety
///
/// `first` has the parameters `(const In* x, [const In* y,] A* partials, u64
/// n)` and `second` `(const A* x, A* partials, u64 n)`; `y` (if any) is as
/// long as `x` and `out` holds one element.
unsafe fn two_pass<In, A, X, Y, O>(
    t: &TaskContext,
    first: KernelRef,
    second: KernelRef,
    x: &X,
    y: Option<&Y>,
    out: &mut O,
) -> Result<()>
where
    In: DeviceRepr,
    A: DeviceRepr,
    X: DeviceSlice<In> + ?Sized,
    Y: DeviceSlice<In> + ?Sized,
    O: DeviceSliceMut<A> + ?Sized,
{
    let parts = reduce_parts(x.len() as u64);
    if parts == 1 {
        // SAFETY: the caller's contract; one part, one element of `out`.
        return unsafe { pass::<In, A, _, _, _>(t, first, x, y, out) };
    }
    let mut partials = t.alloc::<A>(parts as usize)?;
    // SAFETY: the caller's contract; `partials` holds `parts` elements.
    unsafe { pass::<In, A, _, _, _>(t, first, x, y, &mut partials) }?;
    // SAFETY: `parts <= REDUCE_PARTS <= REDUCE_TILE` elements are one part,
    // written to the one element of `out`.
    unsafe { pass::<A, A, _, Buffer<A>, _>(t, second, &partials, None, out) }
}

/// A fresh device scalar, filled by `into`, copied back (waits).
fn to_host<A: DeviceRepr + Default>(
    t: &TaskContext,
    into: impl FnOnce(&mut gpu_sched::Buffer<A>) -> Result<()>,
) -> Result<A> {
    let mut out = t.alloc::<A>(1)?;
    into(&mut out)?;
    let mut v = [A::default()];
    t.copy_to_host(&out, &mut v)?;
    Ok(v[0])
}

/// `out[0] = x[0] + x[1] + ...` in the fixed order of the module
/// documentation; `+0.0` for no elements. Nothing waits.
///
/// # Errors
///
/// [`Error::LengthMismatch`](gpu_sched::Error::LengthMismatch) unless `out` has one element; driver errors;
/// [`Error::WrongDevice`](gpu_sched::Error::WrongDevice).
pub fn sum_into<T: Float>(
    t: &TaskContext,
    x: &(impl DeviceSlice<T> + ?Sized),
    out: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    same_len("sum's output", 1, out.len())?;
    // SAFETY: `reduce_sum_{f32,f64}` for `T`, in and out.
    unsafe { two_pass::<T, T, _, Buffer<T>, _>(t, k::<T>(SUM), k::<T>(SUM), x, None, out) }
}

/// The sum of `x` ([`sum_into`]) as a host value: waits for the task's
/// stream.
///
/// # Errors
///
/// Driver errors; [`Error::WrongDevice`](gpu_sched::Error::WrongDevice).
pub fn sum<T: Float>(t: &TaskContext, x: &(impl DeviceSlice<T> + ?Sized)) -> Result<T> {
    to_host(t, |out| sum_into(t, x, out))
}

/// `out[0]` = the sum of the `f32` elements of `x`, each widened to `f64`
/// and added in `f64` (in the fixed order). Nothing waits.
///
/// # Errors
///
/// As [`sum_into`].
pub fn sum_f64_into(
    t: &TaskContext,
    x: &(impl DeviceSlice<f32> + ?Sized),
    out: &mut (impl DeviceSliceMut<f64> + ?Sized),
) -> Result<()> {
    same_len("sum_f64's output", 1, out.len())?;
    // SAFETY: `reduce_sum_f32_f64` (f32 in, f64 partials), then
    // `reduce_sum_f64`.
    unsafe {
        two_pass::<f32, f64, _, Buffer<f32>, _>(t, kernel(SUM_F32_F64), k::<f64>(SUM), x, None, out)
    }
}

/// [`sum_f64_into`] as a host value: waits for the task's stream.
///
/// # Errors
///
/// As [`sum`].
pub fn sum_f64(t: &TaskContext, x: &(impl DeviceSlice<f32> + ?Sized)) -> Result<f64> {
    to_host(t, |out| sum_f64_into(t, x, out))
}

/// `out[0]` = the least non-NaN element of `x` (`-0 < +0`), `+inf` if there
/// is none (no elements, or only NaN). Nothing waits.
///
/// # Errors
///
/// As [`sum_into`].
pub fn min_into<T: Float>(
    t: &TaskContext,
    x: &(impl DeviceSlice<T> + ?Sized),
    out: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    same_len("min's output", 1, out.len())?;
    // SAFETY: `reduce_min_{f32,f64}` for `T`, in and out.
    unsafe { two_pass::<T, T, _, Buffer<T>, _>(t, k::<T>(MIN), k::<T>(MIN), x, None, out) }
}

/// [`min_into`] as a host value: waits for the task's stream.
///
/// # Errors
///
/// As [`sum`].
pub fn min<T: Float>(t: &TaskContext, x: &(impl DeviceSlice<T> + ?Sized)) -> Result<T> {
    to_host(t, |out| min_into(t, x, out))
}

/// `out[0]` = the greatest non-NaN element of `x` (`+0 > -0`), `-inf` if
/// there is none (no elements, or only NaN). Nothing waits.
///
/// # Errors
///
/// As [`sum_into`].
pub fn max_into<T: Float>(
    t: &TaskContext,
    x: &(impl DeviceSlice<T> + ?Sized),
    out: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    same_len("max's output", 1, out.len())?;
    // SAFETY: `reduce_max_{f32,f64}` for `T`, in and out.
    unsafe { two_pass::<T, T, _, Buffer<T>, _>(t, k::<T>(MAX), k::<T>(MAX), x, None, out) }
}

/// [`max_into`] as a host value: waits for the task's stream.
///
/// # Errors
///
/// As [`sum`].
pub fn max<T: Float>(t: &TaskContext, x: &(impl DeviceSlice<T> + ?Sized)) -> Result<T> {
    to_host(t, |out| max_into(t, x, out))
}

/// `out[0] = x[0] * y[0] + x[1] * y[1] + ...`, each product rounded, added
/// in the fixed order; `+0.0` for no elements. `x` and `y` may be the same
/// buffer. Nothing waits.
///
/// # Errors
///
/// [`Error::LengthMismatch`](gpu_sched::Error::LengthMismatch) unless `x` and `y` agree and `out` has one
/// element; driver errors; [`Error::WrongDevice`](gpu_sched::Error::WrongDevice).
pub fn dot_into<T: Float>(
    t: &TaskContext,
    x: &(impl DeviceSlice<T> + ?Sized),
    y: &(impl DeviceSlice<T> + ?Sized),
    out: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    same_len("dot's y", x.len(), y.len())?;
    same_len("dot's output", 1, out.len())?;
    // SAFETY: `reduce_dot_{f32,f64}` for `T`, then `reduce_sum` of `T`.
    unsafe { two_pass::<T, T, _, _, _>(t, k::<T>(DOT), k::<T>(SUM), x, Some(y), out) }
}

/// [`dot_into`] as a host value: waits for the task's stream.
///
/// # Errors
///
/// [`Error::LengthMismatch`](gpu_sched::Error::LengthMismatch) unless `x` and `y` agree; driver errors;
/// [`Error::WrongDevice`](gpu_sched::Error::WrongDevice).
pub fn dot<T: Float>(
    t: &TaskContext,
    x: &(impl DeviceSlice<T> + ?Sized),
    y: &(impl DeviceSlice<T> + ?Sized),
) -> Result<T> {
    to_host(t, |out| dot_into(t, x, y, out))
}

/// `out[0]` = the dot product of the `f32` vectors `x` and `y` in `f64`:
/// each product `f64(x[i]) * f64(y[i])` (exact), added in `f64` in the
/// fixed order. Nothing waits.
///
/// # Errors
///
/// As [`dot_into`].
pub fn dot_f64_into(
    t: &TaskContext,
    x: &(impl DeviceSlice<f32> + ?Sized),
    y: &(impl DeviceSlice<f32> + ?Sized),
    out: &mut (impl DeviceSliceMut<f64> + ?Sized),
) -> Result<()> {
    same_len("dot_f64's y", x.len(), y.len())?;
    same_len("dot_f64's output", 1, out.len())?;
    // SAFETY: `reduce_dot_f32_f64` (f32 in, f64 partials), then
    // `reduce_sum_f64`.
    unsafe { two_pass::<f32, f64, _, _, _>(t, kernel(DOT_F32_F64), k::<f64>(SUM), x, Some(y), out) }
}

/// [`dot_f64_into`] as a host value: waits for the task's stream.
///
/// # Errors
///
/// As [`dot`].
pub fn dot_f64(
    t: &TaskContext,
    x: &(impl DeviceSlice<f32> + ?Sized),
    y: &(impl DeviceSlice<f32> + ?Sized),
) -> Result<f64> {
    to_host(t, |out| dot_f64_into(t, x, y, out))
}
