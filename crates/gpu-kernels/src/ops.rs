//! The kernels of [`KERNELS_PTX`] as [`Builtin`] statics, with typed
//! launch wrappers.
//!
//! Each wrapper takes the task's [`TaskContext`] (a `gpu::Scope`
//! dereferences to one), `&` for buffers the kernel reads and `&mut` for
//! buffers it writes, and checks lengths before anything is submitted.
//!
//! Each static's host implementation is what the host backend runs in
//! place of the kernel, over the launch's buffers as slices (their whole
//! lengths: the wrappers pass buffers of the kernel's `n` elements).

use crate::{grid_for, host, scan_tiles, BLOCK, KERNELS_PTX, MAX_GRID, SCAN_TILE};
use gpu_sched::{
    Arg, Builtin, DeviceRepr, DeviceSlice, DeviceSliceMut, Error, Gate, In, KernelParam,
    LaunchConfig, Out, Result, TaskContext,
};
use std::time::Duration;

/// `(T* x, T v, u64 n)`.
type Unary<T> = (Out<T>, T, u64);
/// `scan_block_*`'s `(const T* in, T* out, T* block_sums, u64 n)`.
type ScanBlock<T> = (In<T>, Out<T>, Out<T>, u64);

builtins! {
    module MODULE("gpu-kernels", KERNELS_PTX), names NAMES;

    /// `fill_f32(float* x, float v, u64 n)`: `x[i] = v`.
    pub static FILL_F32: Unary<f32> = "fill_f32", |x, v, n| host::fill(head_mut(x, n), v);
    /// `fill_f64(double* x, double v, u64 n)`: `x[i] = v`.
    pub static FILL_F64: Unary<f64> = "fill_f64", |x, v, n| host::fill(head_mut(x, n), v);
    /// `add_scalar_f32(float* x, float v, u64 n)`: `x[i] = x[i] + v`.
    pub static ADD_SCALAR_F32: Unary<f32> =
        "add_scalar_f32", |x, v, n| host::add_scalar(head_mut(x, n), v);
    /// `add_scalar_f64(double* x, double v, u64 n)`: `x[i] = x[i] + v`.
    pub static ADD_SCALAR_F64: Unary<f64> =
        "add_scalar_f64", |x, v, n| host::add_scalar(head_mut(x, n), v);
    /// `scale_f32(float* x, float a, u64 n)`: `x[i] = x[i] * a`.
    pub static SCALE_F32: Unary<f32> = "scale_f32", |x, a, n| host::scale(head_mut(x, n), a);
    /// `scale_f64(double* x, double a, u64 n)`: `x[i] = x[i] * a`.
    pub static SCALE_F64: Unary<f64> = "scale_f64", |x, a, n| host::scale(head_mut(x, n), a);
    /// `scale_into_f32(const float* x, float* y, float a, u64 n)`:
    /// `y[i] = x[i] * a`.
    pub static SCALE_INTO_F32: (In<f32>, Out<f32>, f32, u64) =
        "scale_into_f32", |x, y, a, n| {
        host::scale_into(head(x, n), head_mut(y, n), a)
    };
    /// `scale_into_f64(const double* x, double* y, double a, u64 n)`:
    /// `y[i] = x[i] * a`.
    pub static SCALE_INTO_F64: (In<f64>, Out<f64>, f64, u64) =
        "scale_into_f64", |x, y, a, n| {
        host::scale_into(head(x, n), head_mut(y, n), a)
    };
    /// `axpy_f32(float a, const float* x, float* y, u64 n)`:
    /// `y[i] = y[i] + a * x[i]`, without fused multiply-add.
    pub static AXPY_F32: (f32, In<f32>, Out<f32>, u64) =
        "axpy_f32", |a, x, y, n| host::axpy(a, head(x, n), head_mut(y, n));
    /// `axpy_f64(double a, const double* x, double* y, u64 n)`:
    /// `y[i] = y[i] + a * x[i]`, without fused multiply-add.
    pub static AXPY_F64: (f64, In<f64>, Out<f64>, u64) =
        "axpy_f64", |a, x, y, n| host::axpy(a, head(x, n), head_mut(y, n));
    /// `copy_f32(const float* src, float* dst, u64 n)`: `dst[i] = src[i]`.
    pub static COPY_F32: (In<f32>, Out<f32>, u64) =
        "copy_f32", |s, d, n| host::copy(head(s, n), head_mut(d, n));
    /// `copy_f64(const double* src, double* dst, u64 n)`: `dst[i] = src[i]`.
    pub static COPY_F64: (In<f64>, Out<f64>, u64) =
        "copy_f64", |s, d, n| host::copy(head(s, n), head_mut(d, n));
    /// `sum_f32(const float* x, float* out, u64 n)`: `*out += sum(x)`, one
    /// `atomicAdd` per block; [`BLOCK`] threads per block.
    pub static SUM_F32: (In<f32>, Out<f32>, u64) =
        "sum_f32", |x, out, n| out[0] += host::sum(head(x, n));
    /// `sum_f64(const double* x, double* out, u64 n)`: `*out += sum(x)`, one
    /// `atomicAdd` per block; [`BLOCK`] threads per block.
    pub static SUM_F64: (In<f64>, Out<f64>, u64) =
        "sum_f64", |x, out, n| out[0] += host::sum(head(x, n));
    /// `scan_block_f32(const float* in, float* out, float* block_sums, u64
    /// n)`: step 1 of the inclusive scan.
    pub static SCAN_BLOCK_F32: (In<f32>, Out<f32>, Out<f32>, u64) =
        "scan_block_f32", |x, out, sums, n| {
        scan_block(head(x, n), head_mut(out, n), sums)
    };
    /// `scan_block_f64(const double* in, double* out, double* block_sums,
    /// u64 n)`: step 1 of the inclusive scan.
    pub static SCAN_BLOCK_F64: (In<f64>, Out<f64>, Out<f64>, u64) =
        "scan_block_f64", |x, out, sums, n| {
        scan_block(head(x, n), head_mut(out, n), sums)
    };
    /// `scan_sums_f32(float* block_sums, u64 nblocks)`: step 2 of the
    /// inclusive scan (exclusive scan of the tile totals in place); one
    /// block.
    pub static SCAN_SUMS_F32: (Out<f32>, u64) =
        "scan_sums_f32", |sums, n| scan_sums(head_mut(sums, n));
    /// `scan_sums_f64(double* block_sums, u64 nblocks)`: step 2 of the
    /// inclusive scan (exclusive scan of the tile totals in place); one
    /// block.
    pub static SCAN_SUMS_F64: (Out<f64>, u64) =
        "scan_sums_f64", |sums, n| scan_sums(head_mut(sums, n));
    /// `scan_add_f32(float* out, const float* block_sums, u64 n)`: step 3
    /// of the inclusive scan.
    pub static SCAN_ADD_F32: (Out<f32>, In<f32>, u64) =
        "scan_add_f32", |out, sums, n| scan_add(head_mut(out, n), sums);
    /// `scan_add_f64(double* out, const double* block_sums, u64 n)`: step 3
    /// of the inclusive scan.
    pub static SCAN_ADD_F64: (Out<f64>, In<f64>, u64) =
        "scan_add_f64", |out, sums, n| scan_add(head_mut(out, n), sums);
    /// `spin_ns(u64 ns)`: one thread busy-waits `ns` nanoseconds of the
    /// GPU's `%globaltimer`. Launch with one block of one thread.
    pub static SPIN_NS: (u64,) = "spin_ns", |ns| std::thread::sleep(Duration::from_nanos(ns));
    /// `spin_touch_f32(float* x, u64 n, u64 ns)`: thread 0 of every block
    /// spins `ns` nanoseconds, then the grid adds `1.0` to every `x[i]`.
    pub static SPIN_TOUCH_F32: (Out<f32>, u64, u64) = "spin_touch_f32", |x, n, ns| {
        std::thread::sleep(Duration::from_nanos(ns));
        host::add_scalar(head_mut(x, n), 1.0);
    };
    /// `gate(volatile unsigned int* open, volatile unsigned int* timed_out,
    /// u64 timeout_ns)`: one thread waits until `*open != 0`, polling about
    /// every microsecond, or until `timeout_ns` nanoseconds have passed, in
    /// which case it sets `*timed_out = 1`. Both flags are pinned host
    /// memory mapped into the device. Launch with one block of one thread;
    /// only [`TaskContext::block_on`] launches it, and only on CUDA (the
    /// host backend blocks the stream's thread itself, so the host
    /// implementation is never run).
    pub(crate) static GATE: (Out<u32>, Out<u32>, u64) = "gate", |_open, _timed_out, _ns| {};
}

/// The first `n` elements of `x` (all of them if it is shorter: the launch
/// contract has `n` within the buffers).
pub(crate) fn head<T>(x: &[T], n: u64) -> &[T] {
    &x[..x.len().min(n as usize)]
}

/// [`head`] of a written buffer.
pub(crate) fn head_mut<T>(x: &mut [T], n: u64) -> &mut [T] {
    let n = x.len().min(n as usize);
    &mut x[..n]
}

/// Step 1 of the scan on the host: each tile of `x` scanned into `out`, its
/// total into `sums`. `in == out` is allowed on the device, never here
/// (the borrows are distinct).
fn scan_block<T: Copy + std::ops::Add<Output = T>>(x: &[T], out: &mut [T], sums: &mut [T]) {
    let tile = SCAN_TILE as usize;
    for (i, (src, dst)) in x.chunks(tile).zip(out.chunks_mut(tile)).enumerate() {
        host::inclusive_scan(src, dst);
        sums[i] = dst[dst.len() - 1];
    }
}

/// Step 2 on the host: `sums` into its exclusive scan, in place.
fn scan_sums<T: Copy + Default + std::ops::Add<Output = T>>(sums: &mut [T]) {
    let mut acc = T::default();
    for s in sums.iter_mut() {
        let v = *s;
        *s = acc;
        acc = acc + v;
    }
}

/// Step 3 on the host: `sums[tile]` added to every element of every tile
/// but the first.
fn scan_add<T: Copy + std::ops::Add<Output = T>>(out: &mut [T], sums: &[T]) {
    for (i, chunk) in out.chunks_mut(SCAN_TILE as usize).enumerate().skip(1) {
        chunk.iter_mut().for_each(|v| *v = *v + sums[i]);
    }
}

/// Element types with kernels: `f32` and `f64`. Each of its functions
/// gives the type's variant of a kernel (`f32::fill()` is [`FILL_F32`]).
pub trait Float:
    DeviceRepr + KernelParam + for<'b> Arg<'b, Self> + Default + PartialEq + std::fmt::Debug
{
    /// `fill_*`.
    fn fill() -> &'static Builtin<Unary<Self>>;
    /// `add_scalar_*`.
    fn add_scalar() -> &'static Builtin<Unary<Self>>;
    /// `scale_*`.
    fn scale() -> &'static Builtin<Unary<Self>>;
    /// `scale_into_*`.
    fn scale_into() -> &'static Builtin<(In<Self>, Out<Self>, Self, u64)>;
    /// `axpy_*`.
    fn axpy() -> &'static Builtin<(Self, In<Self>, Out<Self>, u64)>;
    /// `copy_*`.
    fn copy() -> &'static Builtin<(In<Self>, Out<Self>, u64)>;
    /// `sum_*` (atomic).
    fn sum_atomic() -> &'static Builtin<(In<Self>, Out<Self>, u64)>;
    /// `scan_block_*`.
    fn scan_block() -> &'static Builtin<ScanBlock<Self>>;
    /// `scan_sums_*`.
    fn scan_sums() -> &'static Builtin<(Out<Self>, u64)>;
    /// `scan_add_*`.
    fn scan_add() -> &'static Builtin<(Out<Self>, In<Self>, u64)>;
    /// `reduce_sum_*`.
    fn reduce_sum() -> &'static Builtin<crate::reduce::Pass<Self, Self>>;
    /// `reduce_min_*`.
    fn reduce_min() -> &'static Builtin<crate::reduce::Pass<Self, Self>>;
    /// `reduce_max_*`.
    fn reduce_max() -> &'static Builtin<crate::reduce::Pass<Self, Self>>;
    /// `reduce_dot_*`.
    fn reduce_dot() -> &'static Builtin<crate::reduce::DotPass<Self, Self>>;
}

macro_rules! float {
    ($t:ty: $fill:ident, $add:ident, $scale:ident, $scale_into:ident, $axpy:ident, $copy:ident,
        $sum:ident, $sb:ident, $ss:ident, $sa:ident, $rsum:path, $rmin:path, $rmax:path,
        $rdot:path) => {
        impl Float for $t {
            fn fill() -> &'static Builtin<Unary<$t>> {
                &$fill
            }
            fn add_scalar() -> &'static Builtin<Unary<$t>> {
                &$add
            }
            fn scale() -> &'static Builtin<Unary<$t>> {
                &$scale
            }
            fn scale_into() -> &'static Builtin<(In<$t>, Out<$t>, $t, u64)> {
                &$scale_into
            }
            fn axpy() -> &'static Builtin<($t, In<$t>, Out<$t>, u64)> {
                &$axpy
            }
            fn copy() -> &'static Builtin<(In<$t>, Out<$t>, u64)> {
                &$copy
            }
            fn sum_atomic() -> &'static Builtin<(In<$t>, Out<$t>, u64)> {
                &$sum
            }
            fn scan_block() -> &'static Builtin<ScanBlock<$t>> {
                &$sb
            }
            fn scan_sums() -> &'static Builtin<(Out<$t>, u64)> {
                &$ss
            }
            fn scan_add() -> &'static Builtin<(Out<$t>, In<$t>, u64)> {
                &$sa
            }
            fn reduce_sum() -> &'static Builtin<crate::reduce::Pass<$t, $t>> {
                &$rsum
            }
            fn reduce_min() -> &'static Builtin<crate::reduce::Pass<$t, $t>> {
                &$rmin
            }
            fn reduce_max() -> &'static Builtin<crate::reduce::Pass<$t, $t>> {
                &$rmax
            }
            fn reduce_dot() -> &'static Builtin<crate::reduce::DotPass<$t, $t>> {
                &$rdot
            }
        }
    };
}
float!(f32: FILL_F32, ADD_SCALAR_F32, SCALE_F32, SCALE_INTO_F32, AXPY_F32, COPY_F32, SUM_F32,
    SCAN_BLOCK_F32, SCAN_SUMS_F32, SCAN_ADD_F32, crate::reduce::REDUCE_SUM_F32,
    crate::reduce::REDUCE_MIN_F32, crate::reduce::REDUCE_MAX_F32, crate::reduce::REDUCE_DOT_F32);
float!(f64: FILL_F64, ADD_SCALAR_F64, SCALE_F64, SCALE_INTO_F64, AXPY_F64, COPY_F64, SUM_F64,
    SCAN_BLOCK_F64, SCAN_SUMS_F64, SCAN_ADD_F64, crate::reduce::REDUCE_SUM_F64,
    crate::reduce::REDUCE_MIN_F64, crate::reduce::REDUCE_MAX_F64, crate::reduce::REDUCE_DOT_F64);

fn elementwise(n: usize) -> LaunchConfig {
    LaunchConfig::linear(grid_for(n as u64), BLOCK)
}

pub(crate) fn same_len(what: &'static str, expected: usize, got: usize) -> Result<()> {
    if expected == got {
        Ok(())
    } else {
        Err(Error::LengthMismatch {
            what,
            expected,
            got,
        })
    }
}

/// `x[i] = v`. `x` is a buffer or a mutable view, never a read-only
/// [`gpu_sched::View`]:
///
/// ```compile_fail,E0277
/// # fn f(t: &gpu_sched::TaskContext, b: &gpu_sched::Buffer<f32>) -> gpu_sched::Result<()> {
/// gpu_kernels::fill(t, &mut b.slice(..2)?, 1.0)?; // error: `View` is not `DeviceSliceMut`
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// Driver errors; [`Error::WrongDevice`].
pub fn fill<T: Float>(
    t: &TaskContext,
    x: &mut (impl DeviceSliceMut<T> + ?Sized),
    v: T,
) -> Result<()> {
    let n = x.len();
    // SAFETY: the kernel is bounded by its length argument (a grid-stride
    // loop over `i < n`), which is the length of every buffer passed here
    // (checked above where there are two); it touches nothing else.
    unsafe { T::fill().launch(t, elementwise(n), (x, v, n)) }
}

/// `x[i] += v`.
///
/// # Errors
///
/// Driver errors; [`Error::WrongDevice`].
pub fn add_scalar<T: Float>(
    t: &TaskContext,
    x: &mut (impl DeviceSliceMut<T> + ?Sized),
    v: T,
) -> Result<()> {
    let n = x.len();
    // SAFETY: the kernel is bounded by its length argument (a grid-stride
    // loop over `i < n`), which is the length of every buffer passed here
    // (checked above where there are two); it touches nothing else.
    unsafe { T::add_scalar().launch(t, elementwise(n), (x, v, n)) }
}

/// `x[i] *= a`.
///
/// # Errors
///
/// Driver errors; [`Error::WrongDevice`].
pub fn scale<T: Float>(
    t: &TaskContext,
    x: &mut (impl DeviceSliceMut<T> + ?Sized),
    a: T,
) -> Result<()> {
    let n = x.len();
    // SAFETY: the kernel is bounded by its length argument (a grid-stride
    // loop over `i < n`), which is the length of every buffer passed here
    // (checked above where there are two); it touches nothing else.
    unsafe { T::scale().launch(t, elementwise(n), (x, a, n)) }
}

/// `y[i] = x[i] * a`: [`scale`] out of place, one kernel that reads `x` and
/// writes `y` (where [`copy`] then [`scale`] would be two, and twice the
/// memory traffic).
///
/// # Errors
///
/// [`Error::LengthMismatch`] unless `x` and `y` agree; driver errors.
pub fn scale_into<T: Float>(
    t: &TaskContext,
    x: &(impl DeviceSlice<T> + ?Sized),
    y: &mut (impl DeviceSliceMut<T> + ?Sized),
    a: T,
) -> Result<()> {
    let n = y.len();
    same_len("scale_into's x", n, x.len())?;
    // SAFETY: the kernel is bounded by its length argument (a grid-stride
    // loop over `i < n`), which is the length of every buffer passed here
    // (checked above where there are two); it touches nothing else.
    unsafe { T::scale_into().launch(t, elementwise(n), (x, y, a, n)) }
}

/// `y[i] += a * x[i]`.
///
/// # Errors
///
/// [`Error::LengthMismatch`] unless `x` and `y` agree; driver errors.
pub fn axpy<T: Float>(
    t: &TaskContext,
    a: T,
    x: &(impl DeviceSlice<T> + ?Sized),
    y: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    let n = y.len();
    same_len("axpy's x", n, x.len())?;
    // SAFETY: the kernel is bounded by its length argument (a grid-stride
    // loop over `i < n`), which is the length of every buffer passed here
    // (checked above where there are two); it touches nothing else.
    unsafe { T::axpy().launch(t, elementwise(n), (a, x, y, n)) }
}

/// `dst[i] = src[i]`, as a kernel.
///
/// # Errors
///
/// [`Error::LengthMismatch`] unless the lengths agree; driver errors.
pub fn copy<T: Float>(
    t: &TaskContext,
    src: &(impl DeviceSlice<T> + ?Sized),
    dst: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    let n = dst.len();
    same_len("copy's source", n, src.len())?;
    // SAFETY: the kernel is bounded by its length argument (a grid-stride
    // loop over `i < n`), which is the length of every buffer passed here
    // (checked above where there are two); it touches nothing else.
    unsafe { T::copy().launch(t, elementwise(n), (src, dst, n)) }
}

/// `out[0] = sum(x)` (zeroes `out` first), with atomics: blocks add their
/// partial sums in whatever order they finish, so the last bits of the
/// result vary from run to run. [`crate::reduce::sum_into`] is the
/// deterministic one.
///
/// # Errors
///
/// [`Error::LengthMismatch`] unless `out` has one element; driver errors.
pub fn sum_atomic_into<T: Float>(
    t: &TaskContext,
    x: &(impl DeviceSlice<T> + ?Sized),
    out: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    same_len("sum_atomic_into's output", 1, out.len())?;
    t.memset_zero(out)?;
    let n = x.len();
    // SAFETY: the kernel reads `x[..n]` (a grid-stride loop over `i < n`,
    // `n = x.len()`) and adds into `out[0]` (length 1, checked above).
    unsafe {
        T::sum_atomic().launch(
            t,
            LaunchConfig::linear(grid_for(n as u64), BLOCK),
            (x, out, n),
        )
    }
}

/// `dst[i] = src[0] + .. + src[i]`. `src` and `dst` may not be the same
/// buffer (the borrow rules see to it).
///
/// # Errors
///
/// [`Error::LengthMismatch`] unless the lengths agree; driver errors.
pub fn inclusive_scan<T: Float>(
    t: &TaskContext,
    src: &(impl DeviceSlice<T> + ?Sized),
    dst: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    let n = dst.len();
    same_len("scan's source", n, src.len())?;
    if n == 0 {
        return Ok(());
    }
    let tiles = scan_tiles(n as u64);
    let mut sums = t.alloc::<T>(tiles as usize)?;
    // SAFETY: tiles of `src[..n]` and `dst[..n]` (`n` is both lengths,
    // checked above), one entry of `sums` per tile (`tiles` entries).
    unsafe {
        T::scan_block().launch(
            t,
            LaunchConfig::linear(tiles.min(MAX_GRID as u64) as u32, BLOCK),
            (src, &mut *dst, &mut sums, n),
        )
    }?;
    if tiles > 1 {
        // SAFETY: scans `sums[..tiles]`, its length.
        unsafe { T::scan_sums().launch(t, LaunchConfig::linear(1, BLOCK), (&mut sums, tiles)) }?;
        // SAFETY: `dst[..n]`, and `sums` at the tile of each element
        // (`tiles` entries cover `n`).
        unsafe { T::scan_add().launch(t, elementwise(n), (dst, &sums, n)) }?;
    }
    Ok(())
}

/// A kernel that spins for `d` on one thread (benchmarks, tests).
///
/// # Errors
///
/// Driver errors.
pub fn spin(t: &TaskContext, d: Duration) -> Result<()> {
    // SAFETY: the kernel touches no memory; it spins on one thread.
    unsafe { SPIN_NS.launch(t, LaunchConfig::linear(1, 1), (d.as_nanos() as u64,)) }
}

/// Spins for `d` in each block, then adds 1 to every element of `x`: a long
/// kernel that writes a buffer.
///
/// # Errors
///
/// Driver errors.
pub fn spin_touch(
    t: &TaskContext,
    x: &mut (impl DeviceSliceMut<f32> + ?Sized),
    d: Duration,
) -> Result<()> {
    let n = x.len();
    // SAFETY: the kernel is bounded by its length argument (a grid-stride
    // loop over `i < n`), which is the length of every buffer passed here
    // (checked above where there are two); it touches nothing else.
    unsafe { SPIN_TOUCH_F32.launch(t, elementwise(n), (x, n, d.as_nanos() as u64)) }
}

/// Blocks the task's stream until `gate` opens (or `timeout` passes, which
/// sets the gate's `timed_out`).
///
/// # Errors
///
/// Driver errors.
pub fn gate(t: &TaskContext, g: &Gate, timeout: Duration) -> Result<()> {
    // SAFETY: `GATE` is the gate kernel `block_on` asks for.
    unsafe { t.block_on(g, &GATE, timeout) }
}
