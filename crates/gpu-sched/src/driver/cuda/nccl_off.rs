//! NCCL, the CUDA backend's collectives, in a build without any of
//! gpu-sched's `nccl-*` features (so without cudarc's NCCL bindings): every
//! call is [`Error::NcclUnavailable`], as when `libnccl` is missing
//! (`nccl.rs` is the module of a build with one).

use crate::driver::collective::{Collectives, Comms};
use crate::driver::Driver;
use crate::error::{Error, Result};
use std::sync::Arc;

/// The CUDA backend's collectives, of a build without NCCL.
#[derive(Debug)]
pub(crate) struct Nccl;

impl Collectives for Nccl {
    fn init_all(&self, _driver: &Arc<dyn Driver>, _ordinals: &[usize]) -> Result<Box<dyn Comms>> {
        Err(unavailable())
    }

    fn init_rank(
        &self,
        _driver: &Arc<dyn Driver>,
        _id: &[u8; 128],
        _nranks: usize,
        _rank: usize,
    ) -> Result<Box<dyn Comms>> {
        Err(unavailable())
    }
}

/// [`Error::NcclUnavailable`], saying why.
fn unavailable() -> Error {
    Error::NcclUnavailable(
        "this build has no NCCL bindings (gpu-scope or gpu-sched without an `nccl-*` \
         feature: add the one the project's cudarc selects, or `nccl-02028`)"
            .into(),
    )
}

/// A new unique id: [`Error::NcclUnavailable`] in this build.
pub(crate) fn unique_id() -> Result<[u8; 128]> {
    Err(unavailable())
}
