//! Kernel modules: PTX for the CUDA backend and a host function per kernel
//! for the host backend, with the parameter list both check launches against.

use crate::driver::{KernelArg, LaunchConfig};

/// One kernel parameter's type.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Param {
    /// A device pointer the kernel reads.
    PtrRead,
    /// A device pointer the kernel writes (and may read).
    PtrWrite,
    /// `unsigned long long`.
    U64,
    /// `unsigned int`.
    U32,
    /// `int`.
    I32,
    /// `float`.
    F32,
    /// `double`.
    F64,
}

impl Param {
    /// Whether `arg` has this parameter's type.
    pub fn matches(self, arg: &KernelArg) -> bool {
        matches!(
            (self, arg),
            (Param::PtrRead | Param::PtrWrite, KernelArg::Ptr(_))
                | (Param::U64, KernelArg::U64(_))
                | (Param::U32, KernelArg::U32(_))
                | (Param::I32, KernelArg::I32(_))
                | (Param::F32, KernelArg::F32(_))
                | (Param::F64, KernelArg::F64(_))
        )
    }
}

/// A kernel's host implementation, run by the host backend on a stream
/// thread.
///
/// # Safety
///
/// Callers pass arguments that match the kernel's [`Param`] list, with every
/// pointer a live host-backend allocation large enough for the launch.
pub type HostKernelFn = unsafe fn(args: &[KernelArg], cfg: LaunchConfig);

/// One kernel of a module.
#[derive(Clone, Copy, Debug)]
pub struct KernelDef {
    /// The PTX entry name.
    pub name: &'static str,
    /// The parameter list.
    pub params: &'static [Param],
    /// The host implementation.
    pub host: HostKernelFn,
}

/// A module: PTX text and its kernels.
#[derive(Clone, Copy, Debug)]
pub struct Module {
    /// A name for messages.
    pub name: &'static str,
    /// The PTX (CUDA backend).
    pub ptx: &'static str,
    /// The kernels.
    pub kernels: &'static [KernelDef],
}
