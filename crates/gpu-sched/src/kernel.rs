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
    /// What CUDA refuses of a configuration, said before anything is
    /// submitted, on both backends: a grid or block dimension of 0, more
    /// than 1024 threads a block (x, y <= 1024, z <= 64), a grid beyond
    /// 2^31 - 1 blocks in x or 65 535 in y and z, more than 48 KiB of
    /// dynamic shared memory (the default without an opt-in).
    pub fn check(&self) -> Result<(), String> {
        let [gx, gy, gz] = self.grid;
        let [bx, by, bz] = self.block;
        if self.grid.contains(&0) || self.block.contains(&0) {
            return Err(format!(
                "a grid of {:?} blocks of {:?} threads: every dimension must be at least 1",
                self.grid, self.block
            ));
        }
        // Saturating: three dimensions of up to 2^32 - 1 overflow a u64.
        let threads = u64::from(bx)
            .saturating_mul(u64::from(by))
            .saturating_mul(u64::from(bz));
        if bx > 1024 || by > 1024 || bz > 64 || threads > 1024 {
            return Err(format!(
                "blocks of {:?} threads ({threads}): at most 1024 a block, (1024, 1024, 64) a dimension",
                self.block
            ));
        }
        if gx > i32::MAX as u32 || gy > 65_535 || gz > 65_535 {
            return Err(format!(
                "a grid of {:?} blocks: at most (2^31 - 1, 65535, 65535)",
                self.grid
            ));
        }
        if self.shared_mem_bytes > 48 * 1024 {
            return Err(format!(
                "{} bytes of dynamic shared memory: at most 49152",
                self.shared_mem_bytes
            ));
        }
        Ok(())
    }

    /// A 1-D launch of `grid` blocks of `block` threads.
    pub const fn linear(grid: u32, block: u32) -> Self {
        LaunchConfig {
            grid: [grid, 1, 1],
            block: [block, 1, 1],
            shared_mem_bytes: 0,
        }
    }

    /// A 2-D launch covering `nx` x `ny` elements (one thread each) with
    /// blocks of `bx` x `by` threads. A block dimension of 0 is kept (the
    /// grid counted as for 1): the launch refuses it.
    pub fn for_grid_2d(nx: usize, ny: usize, bx: u32, by: u32) -> Self {
        let blocks =
            |n: usize, b: u32| n.div_ceil(b.max(1) as usize).clamp(1, u32::MAX as usize) as u32;
        LaunchConfig {
            grid: [blocks(nx, bx), blocks(ny, by), 1],
            block: [bx, by, 1],
            shared_mem_bytes: 0,
        }
    }

    /// A 1-D launch covering `n` elements with `block` threads per block,
    /// grid-stride kernels assumed (the grid is capped at 65 535 * 8 blocks).
    ///
    /// A `block` of 0 is kept as it is (the grid counted as for blocks of
    /// one thread), as [`LaunchConfig::for_grid_2d`] does: the launch
    /// refuses it ([`LaunchConfig::check`], `Error::BadLaunch`), and this
    /// never panics.
    pub fn for_elements(n: usize, block: u32) -> Self {
        let blocks = n.div_ceil(block.max(1) as usize).clamp(1, 65_535 * 8);
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

/// A typed kernel's host implementation with its signature erased: over a
/// launch's arguments and its buffers' lengths in elements (see
/// `crate::typed`).
pub(crate) type ErasedHost = dyn Fn(&[KernelArg], &[usize]) + Send + Sync;

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

#[cfg(test)]
mod test;
