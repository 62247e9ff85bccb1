//! The vector operations: [`axpy`] and [`scal`] (their factor from the host,
//! or from a one-element device buffer: [`axpy_dev`], [`scal_dev`]), and
//! [`dot`] and [`nrm2`] into a one-element device buffer.

use super::{cuda, int, ready, Scalar};
use crate::shared::stream_of;
use gpu_sched::TaskContext;
use gpu_sched::{DeviceSlice, DeviceSliceMut};
use gpu_sched::{Error, Result};
use std::ffi::c_int;

/// The vectors' increment in every call: packed.
const INC: c_int = 1;

/// A key's word (`Foreign::reuse_capture`) for cuBLAS's host pointer
/// mode: the factor passed from the host (and keyed by its bits).
const HOST_MODE: u64 = 0;
/// A key's word for cuBLAS's device pointer mode: the scalars in declared
/// one-element device buffers.
const DEVICE_MODE: u64 = 1;

/// The common length of two vectors, or the error.
fn same_len(op: &'static str, x: usize, y: usize) -> Result<usize> {
    if x == y {
        Ok(x)
    } else {
        Err(Error::Shape {
            op,
            problem: format!("x has {x} elements, y {y}"),
        })
    }
}

/// A one-element device scalar (`what`: the result, or the factor), or
/// the error.
fn scalar(op: &'static str, what: &str, len: usize) -> Result<()> {
    if len == 1 {
        Ok(())
    } else {
        Err(Error::Shape {
            op,
            problem: format!("the {what} buffer has {len} elements, 1 expected"),
        })
    }
}

/// `y = alpha x + y`.
///
/// # Errors
///
/// [`Error::Shape`] for vectors of different lengths; otherwise as
/// [`Gemm::run`](super::Gemm::run).
pub fn axpy<T: Scalar>(
    t: &TaskContext,
    alpha: T,
    x: &(impl DeviceSlice<T> + ?Sized),
    y: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    let n = same_len("axpy", x.len(), y.len())?;
    let ni = int("axpy", "n", n)?;
    ready(t)?;
    let op = t
        .foreign(T::AXPY.0, (x,), (y,))
        .host(move |(x,): (&[T],), (y,): (&mut [T],)| {
            super::host::axpy(alpha, x, y);
            Ok(())
        });
    let key = [ni as u64, INC as u64, alpha.bits(), HOST_MODE];
    // SAFETY: in a capture, through a handle of the capture slot
    // (`shared::CAPTURE_SLOT`, no workspace: `cuda::call`), cuBLAS queues
    // kernels whose parameters are the declared `x` and `y`'s pointers and
    // the keyed values (`n`, the increments, `alpha`'s bits, host pointer
    // mode; the name tells the element type), which use no memory besides
    // `x` and `y` (the handle, in the runtime's pool, lives as long as the
    // runtime).
    let op = unsafe { op.reuse_capture(&key) };
    // SAFETY: `n` elements of the declared `x` (read) and `y` (written),
    // equal lengths checked; on the given stream; queued.
    unsafe {
        op.run(|s, (x,), (y,)| {
            cuda::call(t.runtime(), stream_of(s), false, T::AXPY.0, |h| {
                (T::AXPY.1)(h, ni, &alpha, x.as_ptr(), INC, y.as_mut_ptr(), INC)
            })
        })
    }
}

/// `x = alpha x`.
///
/// # Errors
///
/// As [`Gemm::run`](super::Gemm::run).
pub fn scal<T: Scalar>(
    t: &TaskContext,
    alpha: T,
    x: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    let ni = int("scal", "n", x.len())?;
    ready(t)?;
    let op = t
        .foreign(T::SCAL.0, (), (x,))
        .host(move |(), (x,): (&mut [T],)| {
            x.iter_mut().for_each(|x| *x = alpha * *x);
            Ok(())
        });
    let key = [ni as u64, INC as u64, alpha.bits(), HOST_MODE];
    // SAFETY: as in `axpy`: kernels over the declared `x`'s pointer and
    // the keyed values (`n`, the increment, `alpha`'s bits, host pointer
    // mode), through a capture slot's handle; no other memory.
    let op = unsafe { op.reuse_capture(&key) };
    // SAFETY: `x.len()` elements of the declared `x`, written in place, on
    // the given stream; queued.
    unsafe {
        op.run(|s, (), (x,)| {
            cuda::call(t.runtime(), stream_of(s), false, T::SCAL.0, |h| {
                (T::SCAL.1)(h, ni, &alpha, x.as_mut_ptr(), INC)
            })
        })
    }
}

/// The workspace of a cuBLAS reduction in a graphed scope: cuBLAS's
/// reductions need one, which a captured handle does not have (on an H100
/// the captured call without one is `CUBLAS_STATUS_NOT_SUPPORTED`). The
/// size cuBLAS documents for the architectures before Hopper (Hopper's
/// 32 MiB is for its matrix products).
const REDUCTION_WORKSPACE: usize = 4 << 20;

/// The host twin of [`dot`].
fn host_dot<T: Scalar>(x: &[T], y: &[T]) -> T {
    x.iter().zip(y).fold(T::ZERO, |s, (&x, &y)| s + x * y)
}

/// `out[0] = x . y`, written in device memory (cuBLAS's device pointer
/// mode): no host wait, so chains like CG stay on the device.
///
/// In a graphed scope the call takes a workspace of its own, a 4 MiB
/// temporary of the scope (reused from run to run, as any allocation
/// there), which it declares written: the captured call then uses no
/// memory another node uses. In a stream capture (`TaskContext::capture`,
/// `gpu::capture`), where nothing may allocate, it is `Error::Capturing`
/// before anything is queued; `gpu_kernels::reduce::dot_into` is a device
/// reduction that is not.
///
/// # Errors
///
/// [`Error::Shape`] for vectors of different lengths or an `out` that is
/// not one element; otherwise as [`Gemm::run`](super::Gemm::run).
pub fn dot<T: Scalar>(
    t: &TaskContext,
    x: &(impl DeviceSlice<T> + ?Sized),
    y: &(impl DeviceSlice<T> + ?Sized),
    out: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    let n = same_len("dot", x.len(), y.len())?;
    scalar("dot", "result", out.len())?;
    let ni = int("dot", "n", n)?;
    ready(t)?;
    if t.is_recording() {
        let mut ws = workspace(t, T::DOT.0)?;
        let op = t.foreign(T::DOT.0, (x, y), (out, &mut ws)).host(
            move |(x, y): (&[T], &[T]), (out, _): (&mut [T], &mut [u8])| {
                out[0] = host_dot(x, y);
                Ok(())
            },
        );
        // SAFETY: as below, and the workspace is the declared `ws`, which
        // this call alone uses (written), set on the capture slot's handle
        // for this call only (`cuda::call_with`). Its capture may be reused
        // (`reuse_capture`): the call is determined by the declared
        // buffers (the workspace's address and size among them) and `n`.
        return unsafe {
            op.reuse_capture(&[ni as u64]).run(|s, (x, y), (out, ws)| {
                let ws = Some((ws.raw(), ws.len()));
                cuda::call_with(t.runtime(), stream_of(s), true, ws, T::DOT.0, |h| {
                    (T::DOT.1)(h, ni, x.as_ptr(), INC, y.as_ptr(), INC, out.as_mut_ptr())
                })
            })
        };
    }
    let op = t.foreign(T::DOT.0, (x, y), (out,)).host(
        move |(x, y): (&[T], &[T]), (out,): (&mut [T],)| {
            out[0] = host_dot(x, y);
            Ok(())
        },
    );
    // SAFETY: `n` elements of the declared `x` and `y` (read), one of
    // `out` (written, device pointer mode); on the given stream; queued.
    unsafe {
        op.run(|s, (x, y), (out,)| {
            cuda::call(t.runtime(), stream_of(s), true, T::DOT.0, |h| {
                (T::DOT.1)(h, ni, x.as_ptr(), INC, y.as_ptr(), INC, out.as_mut_ptr())
            })
        })
    }
}

/// A reduction's workspace in a graphed scope ([`REDUCTION_WORKSPACE`]);
/// in a stream capture the allocation's refusal, naming `call`.
fn workspace(t: &TaskContext, call: &'static str) -> Result<gpu_sched::Buffer<u8>> {
    use gpu_sched::ResultExt;
    t.alloc::<u8>(REDUCTION_WORKSPACE)
        .with_context(|| format!("`{call}` in a capture: its workspace"))
}

/// `out[0] = ||x||_2`, written in device memory (as [`dot`]).
///
/// In a graphed scope and a capture, as [`dot`].
///
/// # Errors
///
/// [`Error::Shape`] for an `out` that is not one element; otherwise as
/// [`Gemm::run`](super::Gemm::run).
pub fn nrm2<T: Scalar>(
    t: &TaskContext,
    x: &(impl DeviceSlice<T> + ?Sized),
    out: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    scalar("nrm2", "result", out.len())?;
    let ni = int("nrm2", "n", x.len())?;
    ready(t)?;
    if t.is_recording() {
        let mut ws = workspace(t, T::NRM2.0)?;
        let op = t.foreign(T::NRM2.0, (x,), (out, &mut ws)).host(
            move |(x,): (&[T],), (out, _): (&mut [T], &mut [u8])| {
                out[0] = T::host_nrm2(x);
                Ok(())
            },
        );
        // SAFETY: as below, with the workspace and the reuse as in `dot`.
        return unsafe {
            op.reuse_capture(&[ni as u64]).run(|s, (x,), (out, ws)| {
                let ws = Some((ws.raw(), ws.len()));
                cuda::call_with(t.runtime(), stream_of(s), true, ws, T::NRM2.0, |h| {
                    (T::NRM2.1)(h, ni, x.as_ptr(), INC, out.as_mut_ptr())
                })
            })
        };
    }
    let op = t
        .foreign(T::NRM2.0, (x,), (out,))
        .host(move |(x,): (&[T],), (out,): (&mut [T],)| {
            out[0] = T::host_nrm2(x);
            Ok(())
        });
    // SAFETY: `x.len()` elements of the declared `x` (read), one of `out`
    // (written, device pointer mode); on the given stream; queued.
    unsafe {
        op.run(|s, (x,), (out,)| {
            cuda::call(t.runtime(), stream_of(s), true, T::NRM2.0, |h| {
                (T::NRM2.1)(h, ni, x.as_ptr(), INC, out.as_mut_ptr())
            })
        })
    }
}

/// `y = alpha[0] x + y`, the factor read on the device from a one-element
/// buffer (cuBLAS's device pointer mode): a scalar an earlier operation
/// wrote (a [`dot`], say) needs no host wait.
///
/// # Errors
///
/// [`Error::Shape`] for vectors of different lengths or an `alpha` that is
/// not one element; otherwise as [`Gemm::run`](super::Gemm::run).
pub fn axpy_dev<T: Scalar>(
    t: &TaskContext,
    alpha: &(impl DeviceSlice<T> + ?Sized),
    x: &(impl DeviceSlice<T> + ?Sized),
    y: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    let n = same_len("axpy", x.len(), y.len())?;
    scalar("axpy", "factor", alpha.len())?;
    let ni = int("axpy", "n", n)?;
    ready(t)?;
    let op = t.foreign(T::AXPY.0, (alpha, x), (y,)).host(
        move |(a, x): (&[T], &[T]), (y,): (&mut [T],)| {
            super::host::axpy(a[0], x, y);
            Ok(())
        },
    );
    let key = [ni as u64, INC as u64, DEVICE_MODE];
    // SAFETY: as in `axpy`: kernels over the declared `alpha` (read on the
    // device), `x` and `y`'s pointers and the keyed values (`n`, the
    // increments, device pointer mode), through a capture slot's handle;
    // no other memory.
    let op = unsafe { op.reuse_capture(&key) };
    // SAFETY: one element of the declared `alpha` and `n` of `x` (read),
    // `n` of `y` (written), device pointer mode; on the given stream;
    // queued.
    unsafe {
        op.run(|s, (a, x), (y,)| {
            cuda::call(t.runtime(), stream_of(s), true, T::AXPY.0, |h| {
                (T::AXPY.1)(h, ni, a.as_ptr(), x.as_ptr(), INC, y.as_mut_ptr(), INC)
            })
        })
    }
}

/// `x = alpha[0] x`, the factor read on the device (as [`axpy_dev`]).
///
/// # Errors
///
/// [`Error::Shape`] for an `alpha` that is not one element; otherwise as
/// [`Gemm::run`](super::Gemm::run).
pub fn scal_dev<T: Scalar>(
    t: &TaskContext,
    alpha: &(impl DeviceSlice<T> + ?Sized),
    x: &mut (impl DeviceSliceMut<T> + ?Sized),
) -> Result<()> {
    scalar("scal", "factor", alpha.len())?;
    let ni = int("scal", "n", x.len())?;
    ready(t)?;
    let op = t
        .foreign(T::SCAL.0, (alpha,), (x,))
        .host(move |(a,): (&[T],), (x,): (&mut [T],)| {
            let a = a[0];
            x.iter_mut().for_each(|x| *x = a * *x);
            Ok(())
        });
    let key = [ni as u64, INC as u64, DEVICE_MODE];
    // SAFETY: as in `axpy_dev`: kernels over the declared `alpha` and
    // `x`'s pointers and the keyed values (`n`, the increment, device
    // pointer mode), through a capture slot's handle; no other memory.
    let op = unsafe { op.reuse_capture(&key) };
    // SAFETY: one element of the declared `alpha` (read), `x.len()` of `x`
    // (written in place), device pointer mode; on the given stream; queued.
    unsafe {
        op.run(|s, (a,), (x,)| {
            cuda::call(t.runtime(), stream_of(s), true, T::SCAL.0, |h| {
                (T::SCAL.1)(h, ni, a.as_ptr(), x.as_mut_ptr(), INC)
            })
        })
    }
}
