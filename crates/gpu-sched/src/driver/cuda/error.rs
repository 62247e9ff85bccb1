//! Driver results: the codes matched, the sticky ones, the driver's names
//! for them, and the mapping of a failed call to an [`Error`].

use super::CudaDriver;
use crate::error::{Error, Result};
use cudarc::driver::sys;
use std::ffi::{c_char, CStr};
use std::ptr;

// `CUresult` codes as integers. Results are turned into integers at once and
// matched as integers, so a code this cudarc version does not list (a newer
// driver) takes the generic path.
pub(super) const CUDA_SUCCESS: u32 = sys::CUresult::CUDA_SUCCESS as u32;
pub(super) const CUDA_ERROR_OUT_OF_MEMORY: u32 = sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY as u32;
pub(super) const CUDA_ERROR_NOT_READY: u32 = sys::CUresult::CUDA_ERROR_NOT_READY as u32;
pub(super) const CUDA_ERROR_NOT_FOUND: u32 = sys::CUresult::CUDA_ERROR_NOT_FOUND as u32;
pub(super) const CUDA_ERROR_INVALID_PTX: u32 = sys::CUresult::CUDA_ERROR_INVALID_PTX as u32;

/// Codes after which the context is unusable until the process exits (the
/// driver documents each as leaving the process in an inconsistent state).
const STICKY_CODES: &[u32] = &[
    sys::CUresult::CUDA_ERROR_ECC_UNCORRECTABLE as u32,
    sys::CUresult::CUDA_ERROR_ILLEGAL_ADDRESS as u32,
    sys::CUresult::CUDA_ERROR_LAUNCH_TIMEOUT as u32,
    sys::CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED as u32,
    sys::CUresult::CUDA_ERROR_ASSERT as u32,
    sys::CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR as u32,
    sys::CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION as u32,
    sys::CUresult::CUDA_ERROR_MISALIGNED_ADDRESS as u32,
    sys::CUresult::CUDA_ERROR_INVALID_ADDRESS_SPACE as u32,
    sys::CUresult::CUDA_ERROR_INVALID_PC as u32,
    sys::CUresult::CUDA_ERROR_LAUNCH_FAILED as u32,
    sys::CUresult::CUDA_ERROR_EXTERNAL_DEVICE as u32,
];

/// Whether `code` breaks the context for good.
pub(super) fn is_sticky_code(code: u32) -> bool {
    STICKY_CODES.contains(&code)
}

/// The driver's name for `r` (`CUDA_ERROR_...`).
#[cold]
pub(super) fn error_name(r: sys::CUresult) -> String {
    let mut name: *const c_char = ptr::null();
    // SAFETY: `r` came from a driver call, so the library is loaded and
    // `cuGetErrorName` was checked to exist; it needs no context and writes
    // one pointer to a static NUL-terminated string (or fails).
    let ok = unsafe { sys::cuGetErrorName(r, &mut name) } as u32 == CUDA_SUCCESS;
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
    pub(super) fn check(&self, r: sys::CUresult, during: &'static str) -> Result<()> {
        if r as u32 == CUDA_SUCCESS {
            Ok(())
        } else {
            Err(self.fail(r, during))
        }
    }

    /// As [`Self::check`], with out-of-memory reported as such.
    #[inline]
    pub(super) fn check_alloc(
        &self,
        r: sys::CUresult,
        requested: usize,
        during: &'static str,
    ) -> Result<()> {
        match r as u32 {
            CUDA_SUCCESS => Ok(()),
            CUDA_ERROR_OUT_OF_MEMORY => Err(Error::OutOfMemory { requested, during }),
            _ => Err(self.fail(r, during)),
        }
    }

    /// The error for a failed call; remembers the first sticky one.
    #[cold]
    pub(super) fn fail(&self, r: sys::CUresult, during: &'static str) -> Error {
        let code = r as u32;
        if is_sticky_code(code) {
            let (code, name) = self.sticky.get_or_init(|| (code as i32, error_name(r)));
            sticky_error(*code, name)
        } else {
            Error::Driver {
                code: code as i32,
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
pub(super) fn check_free(r: sys::CUresult, during: &'static str) -> Result<()> {
    if r as u32 == CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::Driver {
            code: r as u32 as i32,
            name: error_name(r),
            during,
        })
    }
}
