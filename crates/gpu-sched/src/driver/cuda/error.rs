//! Driver results: the sticky codes, the driver's names for codes, and the
//! mapping of a result to `Ok` or an [`Error`].
//!
//! `sys::CUresult` is cudarc's `#[repr(u32)]` enum, and a driver call
//! returns it as such: results are matched as its variants. A code that
//! cudarc's bindings (of the CUDA version its feature selects, `cuda-12020`
//! unless the project chose another) do not list, from a newer driver, would
//! be an invalid value of the enum as soon as the call returns, before any
//! code here could look at it (cudarc's own wrappers are in the same place).

use super::CudaDriver;
use crate::error::{Error, Result};
use cudarc::driver::sys::{self, CUresult};
use std::ffi::{c_char, CStr};
use std::ptr;

/// Codes after which the context is unusable until the process exits (the
/// driver documents each as leaving the process in an inconsistent state).
const STICKY_CODES: &[CUresult] = &[
    CUresult::CUDA_ERROR_ECC_UNCORRECTABLE,
    CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
    CUresult::CUDA_ERROR_LAUNCH_TIMEOUT,
    CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED,
    CUresult::CUDA_ERROR_ASSERT,
    CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR,
    CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION,
    CUresult::CUDA_ERROR_MISALIGNED_ADDRESS,
    CUresult::CUDA_ERROR_INVALID_ADDRESS_SPACE,
    CUresult::CUDA_ERROR_INVALID_PC,
    CUresult::CUDA_ERROR_LAUNCH_FAILED,
    CUresult::CUDA_ERROR_EXTERNAL_DEVICE,
];

/// Whether `r` breaks the context for good.
pub(super) fn is_sticky_code(r: CUresult) -> bool {
    STICKY_CODES.contains(&r)
}

/// The driver's name for `r` (`CUDA_ERROR_...`).
#[cold]
pub(super) fn error_name(r: CUresult) -> String {
    let mut name: *const c_char = ptr::null();
    // SAFETY: `r` came from a driver call, so the library is loaded and
    // `cuGetErrorName` was checked to exist; it needs no context and writes
    // one pointer to a static NUL-terminated string (or fails).
    let ok = unsafe { sys::cuGetErrorName(r, &mut name) } == CUresult::CUDA_SUCCESS;
    if ok && !name.is_null() {
        // SAFETY: on success `name` points to a static NUL-terminated string
        // owned by the driver.
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    } else {
        format!("CUDA_ERROR_{}", r as u32)
    }
}

impl CudaDriver {
    /// Maps a driver result to `Ok` or the error for it.
    #[inline]
    pub(super) fn check(&self, r: CUresult, during: &'static str) -> Result<()> {
        match r {
            CUresult::CUDA_SUCCESS => Ok(()),
            _ => Err(self.fail(r, during)),
        }
    }

    /// As [`Self::check`], with out-of-memory reported as such.
    #[inline]
    pub(super) fn check_alloc(
        &self,
        r: CUresult,
        requested: usize,
        during: &'static str,
    ) -> Result<()> {
        match r {
            CUresult::CUDA_SUCCESS => Ok(()),
            CUresult::CUDA_ERROR_OUT_OF_MEMORY => Err(Error::OutOfMemory { requested, during }),
            _ => Err(self.fail(r, during)),
        }
    }

    /// A query's answer: `Ok(true)` done, `Ok(false)` not yet
    /// (`CUDA_ERROR_NOT_READY`), or the error.
    #[inline]
    pub(super) fn ready(&self, r: CUresult, during: &'static str) -> Result<bool> {
        match r {
            CUresult::CUDA_SUCCESS => Ok(true),
            CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            _ => Err(self.fail(r, during)),
        }
    }

    /// The error for a failed call; remembers the first sticky one.
    #[cold]
    pub(super) fn fail(&self, r: CUresult, during: &'static str) -> Error {
        if is_sticky_code(r) {
            let (code, name) = self.sticky.get_or_init(|| (r as i32, error_name(r)));
            sticky_error(*code, name)
        } else {
            Error::Driver {
                code: r as i32,
                name: error_name(r),
                during,
            }
        }
    }
}

#[cold]
pub(super) fn sticky_error(code: i32, name: &str) -> Error {
    Error::StickyDeviceError {
        code,
        name: name.to_owned(),
    }
}

/// `check` for calls made before a driver exists (setup).
pub(super) fn check_free(r: CUresult, during: &'static str) -> Result<()> {
    match r {
        CUresult::CUDA_SUCCESS => Ok(()),
        _ => Err(Error::Driver {
            code: r as i32,
            name: error_name(r),
            during,
        }),
    }
}
