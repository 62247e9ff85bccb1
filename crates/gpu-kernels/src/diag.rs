//! Diagonal helpers: the identity, and a square matrix's diagonal set,
//! read or shifted, on the device (forming `B Bᵀ + n I` needs no upload of
//! `n I`). Matrices are `n x n`, stored packed (leading dimension `n`, in
//! either order: element `(i, i)` is at `i * (n + 1)`); `n` is taken from
//! the lengths (`n * n` elements, a diagonal of `n`).

use crate::{grid_for, BLOCK, DIAG_PTX};
use gpu_sched::{
    Builtin, DeviceSlice, DeviceSliceMut, Error, In, LaunchConfig, Out, Result, TaskContext,
};

builtins! {
    module MODULE("gpu-kernels/diag", DIAG_PTX), names NAMES;

    /// `identity_f32(float* a, u64 n)`: `a = I`, all `n * n` elements.
    pub static IDENTITY_F32: (Out<f32>, u64) = "identity_f32", identity_host;
    /// `identity_f64(double* a, u64 n)`: `a = I`, all `n * n` elements.
    pub static IDENTITY_F64: (Out<f64>, u64) = "identity_f64", identity_host;
    /// `set_diagonal_f32(float* a, const float* d, u64 n)`: `a(i, i) = d[i]`.
    pub static SET_DIAGONAL_F32: (Out<f32>, In<f32>, u64) =
        "set_diagonal_f32", set_host;
    /// `set_diagonal_f64(double* a, const double* d, u64 n)`: `a(i, i) = d[i]`.
    pub static SET_DIAGONAL_F64: (Out<f64>, In<f64>, u64) =
        "set_diagonal_f64", set_host;
    /// `diagonal_f32(const float* a, float* d, u64 n)`: `d[i] = a(i, i)`.
    pub static DIAGONAL_F32: (In<f32>, Out<f32>, u64) =
        "diagonal_f32", get_host;
    /// `diagonal_f64(const double* a, double* d, u64 n)`: `d[i] = a(i, i)`.
    pub static DIAGONAL_F64: (In<f64>, Out<f64>, u64) =
        "diagonal_f64", get_host;
    /// `add_diagonal_f32(float* a, float v, u64 n)`: `a(i, i) = a(i, i) + v`.
    pub static ADD_DIAGONAL_F32: (Out<f32>, f32, u64) =
        "add_diagonal_f32", add_host;
    /// `add_diagonal_f64(double* a, double v, u64 n)`: `a(i, i) = a(i, i) + v`.
    pub static ADD_DIAGONAL_F64: (Out<f64>, f64, u64) =
        "add_diagonal_f64", add_host;
}

fn identity_host<T: Copy + From<u8>>(a: &mut [T], n: u64) {
    let n = n as usize;
    for (k, x) in a[..n * n].iter_mut().enumerate() {
        *x = T::from(u8::from(k % (n + 1) == 0));
    }
}

fn set_host<T: Copy>(a: &mut [T], d: &[T], n: u64) {
    let n = n as usize;
    for i in 0..n {
        a[i * (n + 1)] = d[i];
    }
}

fn get_host<T: Copy>(a: &[T], d: &mut [T], n: u64) {
    let n = n as usize;
    for i in 0..n {
        d[i] = a[i * (n + 1)];
    }
}

fn add_host<T: Copy + std::ops::Add<Output = T>>(a: &mut [T], v: T, n: u64) {
    let n = n as usize;
    for i in 0..n {
        a[i * (n + 1)] = a[i * (n + 1)] + v;
    }
}

/// Element types with diagonal kernels: `f32` and `f64`.
pub trait DiagFloat: crate::Float {
    #[doc(hidden)]
    fn identity() -> &'static Builtin<(Out<Self>, u64)>;
    #[doc(hidden)]
    fn set_diagonal() -> &'static Builtin<(Out<Self>, In<Self>, u64)>;
    #[doc(hidden)]
    fn diagonal() -> &'static Builtin<(In<Self>, Out<Self>, u64)>;
    #[doc(hidden)]
    fn add_diagonal() -> &'static Builtin<(Out<Self>, Self, u64)>;
}

macro_rules! diag_float {
    ($t:ty: $id:ident, $set:ident, $get:ident, $add:ident) => {
        impl DiagFloat for $t {
            fn identity() -> &'static Builtin<(Out<$t>, u64)> {
                &$id
            }
            fn set_diagonal() -> &'static Builtin<(Out<$t>, In<$t>, u64)> {
                &$set
            }
            fn diagonal() -> &'static Builtin<(In<$t>, Out<$t>, u64)> {
                &$get
            }
            fn add_diagonal() -> &'static Builtin<(Out<$t>, $t, u64)> {
                &$add
            }
        }
    };
}
diag_float!(f32: IDENTITY_F32, SET_DIAGONAL_F32, DIAGONAL_F32, ADD_DIAGONAL_F32);
diag_float!(f64: IDENTITY_F64, SET_DIAGONAL_F64, DIAGONAL_F64, ADD_DIAGONAL_F64);

/// The order `n` of a square matrix of `len` elements.
fn order(what: &'static str, len: usize) -> Result<usize> {
    let n = len.isqrt();
    if n * n == len {
        Ok(n)
    } else {
        Err(Error::Shape {
            op: what,
            problem: format!("{len} elements are not a square matrix"),
        })
    }
}

fn config(n: usize) -> LaunchConfig {
    LaunchConfig::linear(grid_for(n as u64), BLOCK)
}

/// `a = I`: `a` a square matrix (`n * n` elements).
///
/// # Errors
///
/// [`Error::Shape`] if `a`'s length is not a square; the errors of a
/// launch.
pub fn identity<T: DiagFloat>(
    t: &TaskContext,
    a: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    let n = order("identity", a.len())?;
    // SAFETY: the kernel writes the `n * n` elements of `a` (its length),
    // in a grid-stride loop bounded by them; nothing else.
    unsafe { T::identity().launch(t, config(a.len()), (a, n as u64)) }
}

/// `a(i, i) = d[i]`: `a` square of order `d.len()`; the other elements
/// are left as they are.
///
/// # Errors
///
/// [`Error::Shape`] if `a` is not `d.len()` squared; the errors of a
/// launch.
pub fn set_diagonal<T: DiagFloat>(
    t: &TaskContext,
    a: &mut (impl DeviceSliceMut<T> + ?Sized),
    d: &(impl DeviceSlice<T> + ?Sized),
) -> Result<()> {
    let n = square_of("set_diagonal", a.len(), d.len())?;
    // SAFETY: element `i * (n + 1) < n * n = a.len()` of `a` written and
    // `i < n = d.len()` of `d` read, for `i < n` only.
    unsafe { T::set_diagonal().launch(t, config(n), (a, d, n as u64)) }
}

/// `d[i] = a(i, i)`: `a` square of order `d.len()`.
///
/// # Errors
///
/// As [`set_diagonal`].
pub fn diagonal<T: DiagFloat>(
    t: &TaskContext,
    a: &(impl DeviceSlice<T> + ?Sized),
    d: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    let n = square_of("diagonal", a.len(), d.len())?;
    // SAFETY: as in `set_diagonal`, `a` read and `d` written.
    unsafe { T::diagonal().launch(t, config(n), (a, d, n as u64)) }
}

/// `a(i, i) = a(i, i) + v`: `a` a square matrix (`n * n` elements).
///
/// # Errors
///
/// As [`identity`].
pub fn add_diagonal<T: DiagFloat>(
    t: &TaskContext,
    a: &mut (impl DeviceSliceMut<T> + ?Sized),
    v: T,
) -> Result<()> {
    let n = order("add_diagonal", a.len())?;
    // SAFETY: elements `i * (n + 1) < n * n = a.len()`, `i < n`, of `a`.
    unsafe { T::add_diagonal().launch(t, config(n), (a, v, n as u64)) }
}

/// `n` where `a` has `n * n` elements and `d` has `n`.
fn square_of(what: &'static str, a: usize, d: usize) -> Result<usize> {
    match d.checked_mul(d) {
        Some(sq) if sq == a => Ok(d),
        _ => Err(Error::Shape {
            op: what,
            problem: format!("the matrix has {a} elements, not the square of the diagonal's {d}"),
        }),
    }
}
