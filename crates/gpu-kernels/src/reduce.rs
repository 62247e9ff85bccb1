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
//! Two launches of the kernels of this module's statics
//! ([`REDUCE_SUM_F32`], ...; `src/cuda/reduce.cu`), with
//! no atomics: pass 1 cuts the `n` elements into [`reduce_parts`]`(n)` parts
//! of [`reduce_chunk`]`(n)` elements, which depend on `n` only (not on the
//! grid, the device or timing), and reduces each with one block, in a fixed
//! tree, into a partial; pass 2 reduces the partials the same way with one
//! block. With a single part (`n <=` [`REDUCE_TILE`]) pass 1 writes the
//! result directly. Results are therefore always deterministic, bit for bit
//! from run to run: there is no non-deterministic mode to opt out of (the
//! atomic [`crate::sum_atomic_into`] of the element-wise module is the
//! other one). The
//! host references [`crate::host::reduce`] follow the same order, so the device
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

use crate::host::reduce::{dot_pass, max_pass, min_pass, sum_pass};
use crate::ops::{head, same_len};
use crate::{Float, BLOCK};
use gpu_sched::{
    Buffer, Builtin, DeviceRepr, DeviceSlice, DeviceSliceMut, In, LaunchConfig, Out, Result,
    TaskContext,
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

/// The signature of pass 1 of a sum, min or max, and of every pass 2:
/// `(const I* x, A* partials, u64 n)`.
pub type Pass<I, A> = (In<I>, Out<A>, u64);

/// The signature of pass 1 of a dot product: `(const I* x, const I* y, A*
/// partials, u64 n)`.
pub type DotPass<I, A> = (In<I>, In<I>, Out<A>, u64);

builtins! {
    module MODULE("gpu-kernels/reduce", crate::REDUCE_PTX), names NAMES;

    /// `reduce_sum_f32(const float* x, float* partials, u64 n)`.
    pub static REDUCE_SUM_F32: Pass<f32, f32> =
        "reduce_sum_f32", |x, p, n| sum_pass(head(x, n), p);
    /// `reduce_sum_f64(const double* x, double* partials, u64 n)`.
    pub static REDUCE_SUM_F64: Pass<f64, f64> =
        "reduce_sum_f64", |x, p, n| sum_pass(head(x, n), p);
    /// `reduce_min_f32(const float* x, float* partials, u64 n)`: skips NaN,
    /// `-0 < +0`, `+inf` for an empty part.
    pub static REDUCE_MIN_F32: Pass<f32, f32> =
        "reduce_min_f32", |x, p, n| min_pass(head(x, n), p);
    /// `reduce_min_f64(const double* x, double* partials, u64 n)`.
    pub static REDUCE_MIN_F64: Pass<f64, f64> =
        "reduce_min_f64", |x, p, n| min_pass(head(x, n), p);
    /// `reduce_max_f32(const float* x, float* partials, u64 n)`: skips NaN,
    /// `+0 > -0`, `-inf` for an empty part.
    pub static REDUCE_MAX_F32: Pass<f32, f32> =
        "reduce_max_f32", |x, p, n| max_pass(head(x, n), p);
    /// `reduce_max_f64(const double* x, double* partials, u64 n)`.
    pub static REDUCE_MAX_F64: Pass<f64, f64> =
        "reduce_max_f64", |x, p, n| max_pass(head(x, n), p);
    /// `reduce_dot_f32(const float* x, const float* y, float* partials, u64
    /// n)`: adds the rounded products `x[i] * y[i]`.
    pub static REDUCE_DOT_F32: DotPass<f32, f32> =
        "reduce_dot_f32", |x, y, p, n| dot_pass(head(x, n), head(y, n), p);
    /// `reduce_dot_f64(const double* x, const double* y, double* partials,
    /// u64 n)`.
    pub static REDUCE_DOT_F64: DotPass<f64, f64> =
        "reduce_dot_f64", |x, y, p, n| dot_pass(head(x, n), head(y, n), p);
    /// `reduce_sum_f32_f64(const float* x, double* partials, u64 n)`: each
    /// element widened to `double`, added in `double`.
    pub static REDUCE_SUM_F32_F64: Pass<f32, f64> =
        "reduce_sum_f32_f64", |x, p, n| sum_pass(head(x, n), p);
    /// `reduce_dot_f32_f64(const float* x, const float* y, double*
    /// partials, u64 n)`: products and sums in `double` (the products are
    /// exact).
    pub static REDUCE_DOT_F32_F64: DotPass<f32, f64> =
        "reduce_dot_f32_f64", |x, y, p, n| dot_pass(head(x, n), head(y, n), p);
}

/// Pass 1 of a reduction: its kernel with its inputs.
enum First<'x, I: DeviceRepr, A: DeviceRepr, X: ?Sized, Y: ?Sized> {
    /// A sum, min or max over `x`.
    Unary(&'static Builtin<Pass<I, A>>, &'x X),
    /// A dot product of `x` and `y`.
    Dot(&'static Builtin<DotPass<I, A>>, &'x X, &'x Y),
}

/// One launch of pass 1 over `x[..n]` (and `y`) into `partials`, with one
/// block per part.
///
/// # Safety
///
/// `y` (if any) is as long as `x`, and `partials` holds
/// `reduce_parts(x.len())` elements.
unsafe fn pass<I, A, X, Y, P>(
    t: &TaskContext,
    first: &First<'_, I, A, X, Y>,
    partials: &mut P,
) -> Result<()>
where
    I: DeviceRepr,
    A: DeviceRepr,
    X: DeviceSlice<I> + ?Sized,
    Y: DeviceSlice<I> + ?Sized,
    P: DeviceSliceMut<A> + ?Sized,
{
    match *first {
        First::Unary(k, x) => {
            let n = x.len();
            let grid = LaunchConfig::linear(reduce_parts(n as u64) as u32, BLOCK);
            // SAFETY: the kernel reads `x[..n]` and writes
            // `partials[..reduce_parts(n)]` (the caller's contract); blocks
            // stride over parts, so it touches nothing else whatever the
            // grid.
            unsafe { k.launch(t, grid, (x, partials, n)) }
        }
        First::Dot(k, x, y) => {
            let n = x.len();
            let grid = LaunchConfig::linear(reduce_parts(n as u64) as u32, BLOCK);
            // SAFETY: as above, and `y[..n]` is read (`y` as long as `x`:
            // the caller's contract).
            unsafe { k.launch(t, grid, (x, y, partials, n)) }
        }
    }
}

/// Pass 1 (`first`) then, with more than one part, pass 2 (`second`, a
/// sum, min or max over the partials of `A`), into `out`.
///
/// # Safety
///
/// `y` (if any) is as long as `x` and `out` holds one element.
unsafe fn two_pass<I, A, X, Y, O>(
    t: &TaskContext,
    first: First<'_, I, A, X, Y>,
    second: &'static Builtin<Pass<A, A>>,
    out: &mut O,
) -> Result<()>
where
    I: DeviceRepr,
    A: DeviceRepr,
    X: DeviceSlice<I> + ?Sized,
    Y: DeviceSlice<I> + ?Sized,
    O: DeviceSliceMut<A> + ?Sized,
{
    let n = match first {
        First::Unary(_, x) | First::Dot(_, x, _) => x.len(),
    };
    let parts = reduce_parts(n as u64);
    if parts == 1 {
        // SAFETY: the caller's contract; one part, one element of `out`.
        return unsafe { pass(t, &first, out) };
    }
    let mut partials = t.alloc::<A>(parts as usize)?;
    // SAFETY: the caller's contract; `partials` holds `parts` elements.
    unsafe { pass(t, &first, &mut partials) }?;
    // SAFETY: `parts <= REDUCE_PARTS <= REDUCE_TILE` elements are one part,
    // written to the one element of `out`.
    unsafe { pass::<A, A, _, Buffer<A>, _>(t, &First::Unary(second, &partials), out) }
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
    unsafe {
        two_pass::<T, T, _, Buffer<T>, _>(t, First::Unary(T::reduce_sum(), x), T::reduce_sum(), out)
    }
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
        two_pass::<f32, f64, _, Buffer<f32>, _>(
            t,
            First::Unary(&REDUCE_SUM_F32_F64, x),
            &REDUCE_SUM_F64,
            out,
        )
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
    unsafe {
        two_pass::<T, T, _, Buffer<T>, _>(t, First::Unary(T::reduce_min(), x), T::reduce_min(), out)
    }
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
    unsafe {
        two_pass::<T, T, _, Buffer<T>, _>(t, First::Unary(T::reduce_max(), x), T::reduce_max(), out)
    }
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
    unsafe { two_pass(t, First::Dot(T::reduce_dot(), x, y), T::reduce_sum(), out) }
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
    unsafe {
        two_pass(
            t,
            First::Dot(&REDUCE_DOT_F32_F64, x, y),
            &REDUCE_SUM_F64,
            out,
        )
    }
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
