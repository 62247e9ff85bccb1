//! The kernels as a [`Module`] for the runtime, with typed launch wrappers.
//!
//! Each wrapper takes the task's [`TaskContext`] (a `gpu::Scope`
//! dereferences to one), `&` for buffers the kernel reads and `&mut` for
//! buffers it writes, and checks lengths before anything is submitted.

use crate::{grid_for, host, names, scan_tiles, BLOCK, KERNELS_PTX, MAX_GRID};
use gpu_sched::{
    DeviceRepr, DeviceSlice, DeviceSliceMut, Error, Gate, KernelArg, KernelDef, KernelRef,
    LaunchConfig, Module, Param, Result, TaskContext,
};
use std::time::Duration;

mod hostk {
    //! Host implementations with the kernels' argument lists, run by the
    //! host backend. Each is `unsafe`: the runtime checked the arguments
    //! against the parameter list and every pointer is a live allocation of
    //! the launch's size.

    use super::*;

    use crate::host::{arg_len as len, arg_ptr as ptr};
    pub(super) trait Scalar:
        Copy + Default + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self>
    {
        fn get(a: KernelArg) -> Self;
    }
    impl Scalar for f32 {
        fn get(a: KernelArg) -> Self {
            match a {
                KernelArg::F32(v) => v,
                _ => unreachable!("checked by the runtime"),
            }
        }
    }
    impl Scalar for f64 {
        fn get(a: KernelArg) -> Self {
            match a {
                KernelArg::F64(v) => v,
                _ => unreachable!("checked by the runtime"),
            }
        }
    }

    /// # Safety
    /// `p` is a live allocation of `n` `T`s with no other live reference.
    unsafe fn sl<'a, T>(p: u64, n: usize) -> &'a mut [T] {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(p as *mut T, n) }
    }

    pub(super) unsafe fn fill<T: Scalar>(a: &[KernelArg], _: LaunchConfig) {
        // SAFETY: see the module note.
        host::fill(unsafe { sl::<T>(ptr(a[0]), len(a[2])) }, T::get(a[1]));
    }
    pub(super) unsafe fn add_scalar<T: Scalar>(a: &[KernelArg], _: LaunchConfig) {
        // SAFETY: see the module note.
        host::add_scalar(unsafe { sl::<T>(ptr(a[0]), len(a[2])) }, T::get(a[1]));
    }
    pub(super) unsafe fn scale<T: Scalar>(a: &[KernelArg], _: LaunchConfig) {
        // SAFETY: see the module note.
        host::scale(unsafe { sl::<T>(ptr(a[0]), len(a[2])) }, T::get(a[1]));
    }
    pub(super) unsafe fn scale_into<T: Scalar>(a: &[KernelArg], _: LaunchConfig) {
        let n = len(a[3]);
        // SAFETY: see the module note; x and y are distinct buffers (one is
        // borrowed shared, the other exclusively).
        let (x, y) = unsafe { (sl::<T>(ptr(a[0]), n), sl::<T>(ptr(a[1]), n)) };
        host::scale_into(x, y, T::get(a[2]));
    }
    pub(super) unsafe fn axpy<T: Scalar>(a: &[KernelArg], _: LaunchConfig) {
        let n = len(a[3]);
        // SAFETY: see the module note; x and y are distinct buffers (one is
        // borrowed shared, the other exclusively).
        let (x, y) = unsafe { (sl::<T>(ptr(a[1]), n), sl::<T>(ptr(a[2]), n)) };
        host::axpy(T::get(a[0]), x, y);
    }
    pub(super) unsafe fn copy<T: Scalar>(a: &[KernelArg], _: LaunchConfig) {
        let n = len(a[2]);
        // SAFETY: see the module note.
        let (s, d) = unsafe { (sl::<T>(ptr(a[0]), n), sl::<T>(ptr(a[1]), n)) };
        host::copy(s, d);
    }
    pub(super) unsafe fn sum<T: Scalar>(a: &[KernelArg], _: LaunchConfig) {
        // SAFETY: see the module note.
        let (x, out) = unsafe { (sl::<T>(ptr(a[0]), len(a[2])), sl::<T>(ptr(a[1]), 1)) };
        out[0] = out[0] + host::sum(x);
    }
    pub(super) unsafe fn scan_block<T: Scalar>(a: &[KernelArg], _: LaunchConfig) {
        let n = len(a[3]);
        let tile = crate::SCAN_TILE as usize;
        // SAFETY: see the module note; `in == out` is allowed, so copy the
        // input first.
        let input: Vec<T> = unsafe { sl::<T>(ptr(a[0]), n) }.to_vec();
        // SAFETY: as above.
        let out = unsafe { sl::<T>(ptr(a[1]), n) };
        // SAFETY: as above.
        let sums = unsafe { sl::<T>(ptr(a[2]), n.div_ceil(tile)) };
        for (i, (src, dst)) in input.chunks(tile).zip(out.chunks_mut(tile)).enumerate() {
            host::inclusive_scan(src, dst);
            sums[i] = dst[dst.len() - 1];
        }
    }
    pub(super) unsafe fn scan_sums<T: Scalar>(a: &[KernelArg], _: LaunchConfig) {
        // SAFETY: see the module note.
        let sums = unsafe { sl::<T>(ptr(a[0]), len(a[1])) };
        let mut acc = T::default();
        for s in sums.iter_mut() {
            let v = *s;
            *s = acc;
            acc = acc + v;
        }
    }
    pub(super) unsafe fn scan_add<T: Scalar>(a: &[KernelArg], _: LaunchConfig) {
        let n = len(a[2]);
        let tile = crate::SCAN_TILE as usize;
        // SAFETY: see the module note.
        let (out, sums) = unsafe { (sl::<T>(ptr(a[0]), n), sl::<T>(ptr(a[1]), n.div_ceil(tile))) };
        for (i, chunk) in out.chunks_mut(tile).enumerate().skip(1) {
            chunk.iter_mut().for_each(|v| *v = *v + sums[i]);
        }
    }
    pub(super) unsafe fn spin_ns(a: &[KernelArg], _: LaunchConfig) {
        std::thread::sleep(Duration::from_nanos(len(a[0]) as u64));
    }
    pub(super) unsafe fn spin_touch(a: &[KernelArg], _: LaunchConfig) {
        std::thread::sleep(Duration::from_nanos(len(a[2]) as u64));
        // SAFETY: see the module note.
        host::add_scalar(unsafe { sl::<f32>(ptr(a[0]), len(a[1])) }, 1.0);
    }
    pub(super) unsafe fn gate(a: &[KernelArg], _: LaunchConfig) {
        use std::sync::atomic::{AtomicU32, Ordering};
        // SAFETY: the gate's flags are live pinned memory owned by the Gate.
        let (open, timed_out) = unsafe {
            (
                &*(ptr(a[0]) as *const AtomicU32),
                &*(ptr(a[1]) as *const AtomicU32),
            )
        };
        let start = std::time::Instant::now();
        let timeout = Duration::from_nanos(len(a[2]) as u64);
        while open.load(Ordering::Acquire) == 0 {
            if start.elapsed() >= timeout {
                timed_out.store(1, Ordering::Release);
                return;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

use Param::{PtrRead as R, PtrWrite as W, F32, F64, U64};

macro_rules! kernel {
    ($name:expr, [$($p:expr),*], $f:expr) => {
        KernelDef { name: $name, params: &[$($p),*], host: $f }
    };
}

/// The project's kernels, for [`TaskContext::launch`].
pub static MODULE: Module = Module {
    name: "gpu-kernels",
    ptx: KERNELS_PTX,
    kernels: &[
        kernel!(names::FILL_F32, [W, F32, U64], hostk::fill::<f32>),
        kernel!(names::FILL_F64, [W, F64, U64], hostk::fill::<f64>),
        kernel!(
            names::ADD_SCALAR_F32,
            [W, F32, U64],
            hostk::add_scalar::<f32>
        ),
        kernel!(
            names::ADD_SCALAR_F64,
            [W, F64, U64],
            hostk::add_scalar::<f64>
        ),
        kernel!(names::SCALE_F32, [W, F32, U64], hostk::scale::<f32>),
        kernel!(names::SCALE_F64, [W, F64, U64], hostk::scale::<f64>),
        kernel!(
            names::SCALE_INTO_F32,
            [R, W, F32, U64],
            hostk::scale_into::<f32>
        ),
        kernel!(
            names::SCALE_INTO_F64,
            [R, W, F64, U64],
            hostk::scale_into::<f64>
        ),
        kernel!(names::AXPY_F32, [F32, R, W, U64], hostk::axpy::<f32>),
        kernel!(names::AXPY_F64, [F64, R, W, U64], hostk::axpy::<f64>),
        kernel!(names::COPY_F32, [R, W, U64], hostk::copy::<f32>),
        kernel!(names::COPY_F64, [R, W, U64], hostk::copy::<f64>),
        kernel!(names::SUM_F32, [R, W, U64], hostk::sum::<f32>),
        kernel!(names::SUM_F64, [R, W, U64], hostk::sum::<f64>),
        kernel!(
            names::SCAN_BLOCK_F32,
            [R, W, W, U64],
            hostk::scan_block::<f32>
        ),
        kernel!(
            names::SCAN_BLOCK_F64,
            [R, W, W, U64],
            hostk::scan_block::<f64>
        ),
        kernel!(names::SCAN_SUMS_F32, [W, U64], hostk::scan_sums::<f32>),
        kernel!(names::SCAN_SUMS_F64, [W, U64], hostk::scan_sums::<f64>),
        kernel!(names::SCAN_ADD_F32, [W, R, U64], hostk::scan_add::<f32>),
        kernel!(names::SCAN_ADD_F64, [W, R, U64], hostk::scan_add::<f64>),
        kernel!(names::SPIN_NS, [U64], hostk::spin_ns),
        kernel!(names::SPIN_TOUCH_F32, [W, U64, U64], hostk::spin_touch),
        kernel!(names::GATE, [W, W, U64], hostk::gate),
    ],
};

/// Element types with kernels: `f32` and `f64`.
pub trait Float: DeviceRepr + Default + gpu_sched::ScalarArg + PartialEq + std::fmt::Debug {
    /// Index of the type's first kernel variant (0: f32, 1: f64).
    #[doc(hidden)]
    const VARIANT: usize;
}
impl Float for f32 {
    const VARIANT: usize = 0;
}
impl Float for f64 {
    const VARIANT: usize = 1;
}

const FILL: usize = 0;
const ADD_SCALAR: usize = 2;
const SCALE: usize = 4;
const SCALE_INTO: usize = 6;
const AXPY: usize = 8;
const COPY: usize = 10;
const SUM: usize = 12;
const SCAN_BLOCK: usize = 14;
const SCAN_SUMS: usize = 16;
const SCAN_ADD: usize = 18;
/// The timed spin kernel.
pub const SPIN_NS: KernelRef = KernelRef::new(&MODULE, 20);
/// The spin-then-touch kernel.
pub const SPIN_TOUCH_F32: KernelRef = KernelRef::new(&MODULE, 21);
/// The gate kernel.
pub const GATE: KernelRef = KernelRef::new(&MODULE, 22);

/// The kernel called `name` (its PTX entry, e.g. `"scan_block_f32"`), for
/// launches through [`TaskContext::launch`].
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
    unsafe {
        t.launch(k::<T>(FILL), elementwise(n))
            .write(x)
            .arg(v)
            .arg(n)
            .submit()
    }
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
    unsafe {
        t.launch(k::<T>(ADD_SCALAR), elementwise(n))
            .write(x)
            .arg(v)
            .arg(n)
            .submit()
    }
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
    unsafe {
        t.launch(k::<T>(SCALE), elementwise(n))
            .write(x)
            .arg(a)
            .arg(n)
            .submit()
    }
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
    unsafe {
        t.launch(k::<T>(SCALE_INTO), elementwise(n))
            .read(x)
            .write(y)
            .arg(a)
            .arg(n)
            .submit()
    }
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
    unsafe {
        t.launch(k::<T>(AXPY), elementwise(n))
            .arg(a)
            .read(x)
            .write(y)
            .arg(n)
            .submit()
    }
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
    unsafe {
        t.launch(k::<T>(COPY), elementwise(n))
            .read(src)
            .write(dst)
            .arg(n)
            .submit()
    }
}

/// `out[0] = sum(x)` (zeroes `out` first).
///
/// # Errors
///
/// [`Error::LengthMismatch`] unless `out` has one element; driver errors.
pub fn sum<T: Float>(
    t: &TaskContext,
    x: &(impl DeviceSlice<T> + ?Sized),
    out: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    same_len("sum's output", 1, out.len())?;
    t.memset_zero(out)?;
    let n = x.len();
    // SAFETY: the kernel reads `x[..n]` (a grid-stride loop over `i < n`,
    // `n = x.len()`) and adds into `out[0]` (length 1, checked above).
    unsafe {
        t.launch(k::<T>(SUM), LaunchConfig::linear(grid_for(n as u64), BLOCK))
            .read(x)
            .write(out)
            .arg(n)
            .submit()
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
        t.launch(
            k::<T>(SCAN_BLOCK),
            LaunchConfig::linear(tiles.min(MAX_GRID as u64) as u32, BLOCK),
        )
        .read(src)
        .write(dst)
        .write(&mut sums)
        .arg(n)
        .submit()
    }?;
    if tiles > 1 {
        // SAFETY: scans `sums[..tiles]`, its length.
        unsafe {
            t.launch(k::<T>(SCAN_SUMS), LaunchConfig::linear(1, BLOCK))
                .write(&mut sums)
                .arg(tiles)
                .submit()
        }?;
        // SAFETY: `dst[..n]`, and `sums` at the tile of each element
        // (`tiles` entries cover `n`).
        unsafe {
            t.launch(k::<T>(SCAN_ADD), elementwise(n))
                .write(dst)
                .read(&sums)
                .arg(n)
                .submit()
        }?;
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
    unsafe {
        t.launch(SPIN_NS, LaunchConfig::linear(1, 1))
            .arg(d.as_nanos() as u64)
            .submit()
    }
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
    unsafe {
        t.launch(SPIN_TOUCH_F32, elementwise(n))
            .write(x)
            .arg(n)
            .arg(d.as_nanos() as u64)
            .submit()
    }
}

/// Blocks the task's stream until `gate` opens (or `timeout` passes, which
/// sets the gate's `timed_out`).
///
/// # Errors
///
/// Driver errors.
pub fn gate(t: &TaskContext, g: &Gate, timeout: Duration) -> Result<()> {
    // SAFETY: `GATE` is the gate kernel `block_on` asks for.
    unsafe { t.block_on(g, GATE, timeout) }
}
