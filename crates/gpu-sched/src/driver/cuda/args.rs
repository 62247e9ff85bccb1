//! A launch's kernel arguments in the `kernelParams` layout of
//! `cuLaunchKernel`: each value in a slot of its own, and a pointer to it.

use super::MAX_KERNEL_ARGS;
use crate::error::{Error, Result};
use crate::kernel::{KernelArg, ValueBytes};
use std::ffi::c_void;

/// One kernel argument's value, at offset 0 whatever its type.
#[derive(Clone, Copy)]
#[repr(C)]
pub(super) union ArgSlot {
    u64: u64,
    u32: u32,
    i32: i32,
    f32: f32,
    f64: f64,
    i64: i64,
    u8: u8,
    u16: u16,
    bytes: [u8; ValueBytes::MAX],
}

impl ArgSlot {
    pub(super) const ZERO: ArgSlot = ArgSlot { u64: 0 };
}

/// Writes each argument into `slots` and a pointer to it into `ptrs`, the
/// `kernelParams` layout of `cuLaunchKernel`. No allocation.
pub(super) fn pack_args(
    args: &[KernelArg],
    slots: &mut [ArgSlot; MAX_KERNEL_ARGS],
    ptrs: &mut [*mut c_void; MAX_KERNEL_ARGS],
) -> Result<()> {
    if args.len() > MAX_KERNEL_ARGS {
        return Err(too_many_args("(launch)", args.len()));
    }
    for (slot, arg) in slots.iter_mut().zip(args) {
        *slot = match *arg {
            KernelArg::Ptr(v) | KernelArg::U64(v) => ArgSlot { u64: v },
            KernelArg::U32(v) => ArgSlot { u32: v },
            KernelArg::I32(v) => ArgSlot { i32: v },
            KernelArg::F32(v) => ArgSlot { f32: v },
            KernelArg::F64(v) => ArgSlot { f64: v },
            KernelArg::I64(v) => ArgSlot { i64: v },
            KernelArg::U8(v) => ArgSlot { u8: v },
            KernelArg::F16(v) | KernelArg::Bf16(v) => ArgSlot { u16: v },
            KernelArg::Value(v) => ArgSlot { bytes: v.padded() },
        };
    }
    let base = slots.as_mut_ptr();
    for (i, p) in ptrs.iter_mut().enumerate().take(args.len()) {
        *p = base.wrapping_add(i).cast();
    }
    Ok(())
}

#[cold]
pub(super) fn too_many_args(kernel: &'static str, n: usize) -> Error {
    Error::BadKernelArgs {
        kernel,
        problem: format!("{n} arguments; the CUDA backend passes at most {MAX_KERNEL_ARGS}"),
    }
}
