//! The runtime's device context as cudarc's (DESIGN "Numerical libraries and foreign work"): the same primary
//! context, so cudarc's streams, buffers and libraries work with the
//! runtime's memory and streams.

use super::Runtime;
use crate::error::{Error, Result};
use crate::BackendKind;
use cudarc::driver::CudaContext;
use std::sync::Arc;

impl Runtime {
    /// This runtime's device context as cudarc's `CudaContext`: the
    /// device's *primary* context, which the CUDA backend retains and makes
    /// current on its threads, so cudarc's streams, events, buffers and
    /// library handles made from it work with the runtime's memory and
    /// streams (`TaskContext::adopt_cudarc`, `TaskContext::into_cudarc`).
    /// Made on first use and kept (one retain of the primary context).
    ///
    /// cudarc tracks its own buffers with an event per use when its context
    /// runs several streams (its *event tracking*, on by default); that
    /// tracking and the runtime's ledger do not see each other, so a buffer
    /// is tracked by one of them at a time: crossing over
    /// (`adopt_cudarc`, `into_cudarc`) orders the handover with one event
    /// wait, and nothing else waits twice. cudarc's first `new_stream` on a
    /// context synchronizes the whole device once (its switch to
    /// multi-stream mode): make streams before the work starts.
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] on the host backend; a driver error from
    /// cudarc; [`Error::WrongDevice`] if cudarc's context is not this
    /// runtime's (it cannot be, for a primary context).
    pub fn cuda_context(&self) -> Result<Arc<CudaContext>> {
        if self.backend() != BackendKind::Cuda {
            return Err(Error::Unsupported(
                "cudarc's context on the host backend (it has no CUDA context)",
            ));
        }
        if let Some(c) = self.inner.cudarc.get() {
            return Ok(c.clone());
        }
        let ctx = CudaContext::new(self.ordinal())?;
        if ctx.cu_ctx() as usize as u64 != self.driver().peer_handles().0 {
            return Err(Error::WrongDevice {
                what: "cudarc's primary context",
            });
        }
        Ok(self.inner.cudarc.get_or_init(|| ctx).clone())
    }
}
