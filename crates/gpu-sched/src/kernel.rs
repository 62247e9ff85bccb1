//! Kernels as the backends see them: modules (PTX for the CUDA backend and
//! a host function per kernel for the host backend), each kernel's parameter
//! list that launches are checked against, and a launch's arguments and
//! configuration. A leaf: it uses nothing else of the crate.

/// One kernel argument, passed by value.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum KernelArg {
    /// A device pointer.
    Ptr(u64),
    /// `unsigned long long`.
    U64(u64),
    /// `unsigned int`.
    U32(u32),
    /// `int`.
    I32(i32),
    /// `float`.
    F32(f32),
    /// `double`.
    F64(f64),
}

/// A launch's grid, block and dynamic shared memory.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct LaunchConfig {
    /// Blocks in the grid.
    pub grid: [u32; 3],
    /// Threads per block.
    pub block: [u32; 3],
    /// Dynamic shared memory, bytes.
    pub shared_mem_bytes: u32,
}

impl LaunchConfig {
    /// A 1-D launch of `grid` blocks of `block` threads.
    pub const fn linear(grid: u32, block: u32) -> Self {
        LaunchConfig {
            grid: [grid, 1, 1],
            block: [block, 1, 1],
            shared_mem_bytes: 0,
        }
    }

    /// A 1-D launch covering `n` elements with `block` threads per block,
    /// grid-stride kernels assumed (the grid is capped at 65 535 * 8 blocks).
    pub fn for_elements(n: usize, block: u32) -> Self {
        let blocks = n.div_ceil(block as usize).clamp(1, 65_535 * 8);
        LaunchConfig::linear(blocks as u32, block)
    }
}

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
