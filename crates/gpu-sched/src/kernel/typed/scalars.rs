//! The scalar parameters of typed kernels: the numbers (`u64` .. `f64`,
//! `i64`, `u8`), `bool`, `half`'s `f16` and `bf16`, and [`Value<T>`], a
//! plain-old-data struct passed by value; each as a [`KernelParam`] (what
//! the runtime checks, what a host implementation receives) and as an
//! [`Arg`] (how a launch lays it out).

use super::{sealed, Arg, ArgList, KernelParam};
use crate::buffer::DeviceRepr;
use crate::kernel::{CParam, KernelArg, Param, ValueBytes};

macro_rules! scalar_param {
    ($($t:ty => $p:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl KernelParam for $t {
            const PARAM: Param = Param::$p;
            const C: CParam = CParam {
                buffer: false,
                write: false,
                bytes: std::mem::size_of::<$t>(),
                kind: <$t as DeviceRepr>::C_KIND,
            };
            type Host<'a> = $t;
            unsafe fn host<'a>(arg: KernelArg, _len: usize) -> Self::Host<'a> {
                match arg {
                    KernelArg::$p(v) => v,
                    _ => unreachable!("the launch pushed a {} for it", stringify!($t)),
                }
            }
        }
    )*};
}
scalar_param!(u64 => U64, u32 => U32, i32 => I32, f32 => F32, f64 => F64, i64 => I64,
    u8 => U8);

impl sealed::Sealed for bool {}
impl KernelParam for bool {
    const PARAM: Param = Param::U8;
    const C: CParam = CParam::scalar(1);
    type Host<'a> = bool;
    unsafe fn host<'a>(arg: KernelArg, _len: usize) -> Self::Host<'a> {
        match arg {
            KernelArg::U8(v) => v != 0,
            _ => unreachable!("the launch pushed a u8 for a bool"),
        }
    }
}

macro_rules! half_param {
    ($($t:ty => $p:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl KernelParam for $t {
            const PARAM: Param = Param::$p;
            const C: CParam = CParam::scalar(2);
            type Host<'a> = $t;
            unsafe fn host<'a>(arg: KernelArg, _len: usize) -> Self::Host<'a> {
                match arg {
                    KernelArg::$p(bits) => <$t>::from_bits(bits),
                    _ => unreachable!("the launch pushed a {} for it", stringify!($t)),
                }
            }
        }
    )*};
}
half_param!(half::f16 => F16, half::bf16 => Bf16);

/// A kernel parameter passed by value whose type is a plain-old-data
/// [`DeviceRepr`] of at most [`ValueBytes::MAX`] bytes, a `#[repr(C)]`
/// struct declared alike in the CUDA C source (`struct Params { float a;
/// unsigned n; }` passed as `Params p`): in the signature as `Value<T>`,
/// passed as `Value(t)`, and the host implementation gets the `T`. The
/// runtime checks its size against the PTX entry; that the C struct has
/// the same fields in the same order is the [`DeviceRepr`] implementor's
/// promise. A larger `T` is a compile-time error where the signature is
/// used:
///
/// ```compile_fail
/// use gpu_sched::{raw::Param, KernelParam, Value};
/// // 40 bytes: more than `ValueBytes::MAX`.
/// const P: Param = <Value<[u64; 5]> as KernelParam>::PARAM;
/// let _ = P;
/// ```
///
/// ```
/// use gpu_sched::{raw::Param, KernelParam, Value};
/// const P: Param = <Value<[u64; 4]> as KernelParam>::PARAM;
/// assert_eq!(P, Param::Value { size: 32 });
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Value<T>(pub T);

impl<T: DeviceRepr> Value<T> {
    /// The size, checked at compile time.
    const SIZE: u8 = {
        assert!(
            std::mem::size_of::<T>() <= ValueBytes::MAX,
            "a kernel parameter passed by value has at most 32 bytes; pass a larger one in a buffer"
        );
        std::mem::size_of::<T>() as u8
    };
}

impl<T: DeviceRepr> sealed::Sealed for Value<T> {}
impl<T: DeviceRepr> KernelParam for Value<T> {
    const PARAM: Param = Param::Value { size: Self::SIZE };
    const C: CParam = CParam::scalar(Self::SIZE as usize);
    type Host<'a> = T;
    unsafe fn host<'a>(arg: KernelArg, _len: usize) -> Self::Host<'a> {
        let KernelArg::Value(v) = arg else {
            unreachable!("the launch pushed a value's bytes for it")
        };
        debug_assert_eq!(v.as_bytes().len(), std::mem::size_of::<T>());
        // SAFETY: `v` holds the bytes of a `T` (`Arg::push` for
        // `Value<T>`), and `T: DeviceRepr` is plain old data, so any
        // bytes are a value; read unaligned, as the array is bytes.
        unsafe { v.as_bytes().as_ptr().cast::<T>().read_unaligned() }
    }
}

macro_rules! scalar_arg {
    ($($t:ty => $p:ty, $v:ident),*) => {$(
        impl<'b> Arg<'b, $p> for $t {
            fn push(self, l: &mut ArgList<'b>) {
                l.push(KernelArg::$v(self as $p), 0);
            }
        }
    )*};
}
scalar_arg!(u64 => u64, U64, usize => u64, U64, u32 => u32, U32, i32 => i32, I32,
    f32 => f32, F32, f64 => f64, F64, i64 => i64, I64, u8 => u8, U8);

impl<'b> Arg<'b, bool> for bool {
    fn push(self, l: &mut ArgList<'b>) {
        l.push(KernelArg::U8(u8::from(self)), 0);
    }
}

impl<'b> Arg<'b, half::f16> for half::f16 {
    fn push(self, l: &mut ArgList<'b>) {
        l.push(KernelArg::F16(self.to_bits()), 0);
    }
}

impl<'b> Arg<'b, half::bf16> for half::bf16 {
    fn push(self, l: &mut ArgList<'b>) {
        l.push(KernelArg::Bf16(self.to_bits()), 0);
    }
}

impl<'b, T: DeviceRepr> Arg<'b, Value<T>> for Value<T> {
    fn push(self, l: &mut ArgList<'b>) {
        // The size check, at compile time.
        let _ = Value::<T>::SIZE;
        // SAFETY: `T: DeviceRepr` is plain old data without padding, so all
        // of its `size_of::<T>()` bytes are initialized.
        let bytes = unsafe {
            std::slice::from_raw_parts((&self.0 as *const T).cast::<u8>(), std::mem::size_of::<T>())
        };
        let v = ValueBytes::new(bytes).expect("Value::SIZE bounds the size");
        l.push(KernelArg::Value(v), 0);
    }
}
