//! Kernels as the backends see them: a launch's arguments and
//! configuration, each parameter's kind (what PTX entries are checked
//! against) and the erased host implementations the host backend runs. A
//! leaf: this file uses nothing else of the crate.
//!
//! The kernel wing. Beside this file, each in a row of its own of lib.rs's
//! layer table (the wing spans the layers: the driver takes this file's
//! types, typed kernels take a task): `ptx.rs` (what is checked of PTX
//! text before a backend loads it), `modules.rs` (the modules a runtime
//! loaded, which it holds), `typed.rs` (typed kernels: users' `Kernel`s
//! and the `Builtin` statics) and `loader.rs` (users' modules, PTX or CUDA
//! C). This file only declares them: it names none of them.

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
    /// `long long`.
    I64(i64),
    /// `unsigned char`, or a `bool` (0 or 1).
    U8(u8),
    /// `__half`, by its bits.
    F16(u16),
    /// `__nv_bfloat16`, by its bits.
    Bf16(u16),
    /// A value of a plain-old-data type passed by value (a `#[repr(C)]`
    /// struct), by its bytes.
    Value(ValueBytes),
}

/// The bytes of a value passed by value ([`KernelArg::Value`]): at most
/// [`ValueBytes::MAX`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ValueBytes {
    bytes: [u8; ValueBytes::MAX],
    len: u8,
}

impl ValueBytes {
    /// The largest value passed by value, in bytes (a `double4`).
    pub const MAX: usize = 32;

    /// The bytes of `bytes`, or `None` beyond [`ValueBytes::MAX`].
    pub fn new(bytes: &[u8]) -> Option<ValueBytes> {
        let mut b = [0u8; Self::MAX];
        b.get_mut(..bytes.len())?.copy_from_slice(bytes);
        Some(ValueBytes {
            bytes: b,
            len: bytes.len() as u8,
        })
    }

    /// The value's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// The bytes, padded with zeros to [`ValueBytes::MAX`].
    pub(crate) fn padded(&self) -> [u8; Self::MAX] {
        self.bytes
    }
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

/// What an element type is in C, as far as a kernel's signature is
/// checked against a CUDA C source ([`crate::DeviceRepr::C_KIND`]): a
/// buffer of it fits a pointer to a C type of its size and kind.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum CKind {
    /// Not said (a struct, a complex number): any pointer fits.
    Unknown,
    /// An integer (of the type's size).
    Int,
    /// A floating-point number (of the type's size).
    Float,
}

/// A kernel parameter as a CUDA C source declares it, for the check of a
/// signature against the source (`LoadedModule::kernel`).
#[doc(hidden)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CParam {
    /// A buffer (a pointer in C), rather than a scalar.
    pub buffer: bool,
    /// A buffer the kernel writes: a pointer to non-const in C.
    pub write: bool,
    /// The element's (or the scalar's) bytes.
    pub bytes: usize,
    /// The element's (or the scalar's) kind.
    pub kind: CKind,
}

impl CParam {
    /// A scalar of `bytes` (its C type not compared: the PTX check
    /// compares its size and kind).
    pub const fn scalar(bytes: usize) -> CParam {
        CParam {
            buffer: false,
            write: false,
            bytes,
            kind: CKind::Unknown,
        }
    }
}

/// A kernel parameter as a CUDA C source declares it (read by
/// `loader.rs`): a pointer (to const or not) or a scalar, and its
/// (pointee's) type's bytes and kind where it is a number type the reader
/// knows. A scalar of a type the reader does not know (a struct, or a
/// typedef or macro that may stand for a pointer: `fptr y`) is not
/// checked at all (`ty: None` and not a pointer).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct CDecl {
    pub(crate) pointer: bool,
    pub(crate) to_const: bool,
    pub(crate) ty: Option<(usize, CKind)>,
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
    /// `long long`.
    I64,
    /// `unsigned char` or `bool`.
    U8,
    /// `__half`.
    F16,
    /// `__nv_bfloat16`.
    Bf16,
    /// A plain-old-data value of `size` bytes passed by value.
    Value {
        /// Its size in bytes (at most [`ValueBytes::MAX`]).
        size: u8,
    },
}

impl Param {
    /// The parameter's size in bytes.
    pub const fn size(self) -> usize {
        match self {
            Param::PtrRead | Param::PtrWrite | Param::U64 | Param::I64 | Param::F64 => 8,
            Param::U32 | Param::I32 | Param::F32 => 4,
            Param::F16 | Param::Bf16 => 2,
            Param::U8 => 1,
            Param::Value { size } => size as usize,
        }
    }
}

/// A typed kernel's host implementation with its signature erased: over a
/// launch's arguments and its buffers' lengths in elements (see
/// `typed.rs`).
pub(crate) type ErasedHost = dyn Fn(&[KernelArg], &[usize]) + Send + Sync;

/// A built-in kernel's host implementation, reached through the kernel's
/// static (`crate::Builtin`), its signature erased.
pub(crate) trait BuiltinHost: Sync {
    /// Runs the host implementation on one launch's arguments.
    ///
    /// # Safety
    ///
    /// `args` and `lens` are a launch's of this kernel, as its signature
    /// lays them out: each buffer live, ordered for the stream's thread and
    /// not otherwise referenced while it runs.
    unsafe fn call(&self, args: &[KernelArg], lens: &[usize]);
}

/// A module of built-in kernels: PTX text and the kernels in it, each
/// declared once as a `Builtin` static beside its host implementation.
/// Loaded into a runtime on the first launch of one of its kernels, checked
/// against the PTX then (every entry's parameters against its signature),
/// and kept for the runtime's life.
#[derive(Debug)]
pub struct BuiltinModule {
    name: &'static str,
    ptx: &'static str,
    entries: &'static [BuiltinEntry],
}

impl BuiltinModule {
    /// The module `name` (for messages) of `ptx`, with `entries`, one per
    /// `Builtin` of it (`gpu-kernels` makes both lists with one macro
    /// from the same declarations).
    pub const fn new(
        name: &'static str,
        ptx: &'static str,
        entries: &'static [BuiltinEntry],
    ) -> Self {
        BuiltinModule { name, ptx, entries }
    }

    /// The module's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    pub(crate) fn ptx(&self) -> &'static str {
        self.ptx
    }

    pub(crate) fn entries(&self) -> &'static [BuiltinEntry] {
        self.entries
    }
}

/// One kernel of a [`BuiltinModule`]: its PTX entry name and its
/// signature's parameters (`BuiltinEntry::of::<S>(name)`).
#[derive(Clone, Copy, Debug)]
pub struct BuiltinEntry {
    name: &'static str,
    params: &'static [Param],
}

impl BuiltinEntry {
    pub(crate) const fn new(name: &'static str, params: &'static [Param]) -> Self {
        BuiltinEntry { name, params }
    }

    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    pub(crate) fn params(&self) -> &'static [Param] {
        self.params
    }
}

pub(crate) mod loader;
pub(crate) mod modules;
pub(crate) mod ptx;
#[cfg(test)]
mod test;
pub(crate) mod typed;
