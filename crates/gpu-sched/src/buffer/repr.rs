//! The element types of device memory ([`DeviceRepr`]): plain old data,
//! and what each is in C, for the check of kernel signatures against CUDA
//! C sources.

use crate::kernel::CKind;

/// Element types that can live in device memory.
///
/// # Safety
///
/// Implementors are plain old data: any bit pattern the device writes is a
/// valid value, with no padding, no pointers and no drop glue.
pub unsafe trait DeviceRepr: Copy + Send + Sync + 'static {
    /// What the type is in C: a buffer of it fits a kernel parameter that
    /// points to a C type of its size and kind (checked against CUDA C
    /// sources, `LoadedModule::kernel`); [`CKind::Unknown`] (the default)
    /// fits any pointer.
    const C_KIND: CKind = CKind::Unknown;
}

// SAFETY: primitive numbers are plain old data.
unsafe impl DeviceRepr for f32 {
    const C_KIND: CKind = CKind::Float;
}
// SAFETY: as above.
unsafe impl DeviceRepr for f64 {
    const C_KIND: CKind = CKind::Float;
}
// SAFETY: as above.
unsafe impl DeviceRepr for u8 {
    const C_KIND: CKind = CKind::Int;
}
// SAFETY: as above.
unsafe impl DeviceRepr for u32 {
    const C_KIND: CKind = CKind::Int;
}
// SAFETY: as above.
unsafe impl DeviceRepr for i32 {
    const C_KIND: CKind = CKind::Int;
}
// SAFETY: as above.
unsafe impl DeviceRepr for u64 {
    const C_KIND: CKind = CKind::Int;
}
// SAFETY: as above.
unsafe impl DeviceRepr for i64 {
    const C_KIND: CKind = CKind::Int;
}
// SAFETY: as above.
unsafe impl DeviceRepr for i8 {
    const C_KIND: CKind = CKind::Int;
}
// SAFETY: as above.
unsafe impl DeviceRepr for u16 {
    const C_KIND: CKind = CKind::Int;
}
// SAFETY: as above.
unsafe impl DeviceRepr for i16 {
    const C_KIND: CKind = CKind::Int;
}
// SAFETY: an array of plain-old-data elements is plain old data: its
// elements lie back to back with no padding (an element's size is a
// multiple of its alignment). Its C type (`float4`, a struct) is not
// said: any pointer fits.
unsafe impl<T: DeviceRepr, const N: usize> DeviceRepr for [T; N] {}
// SAFETY: `half`'s types are `#[repr(transparent)]` over a `u16`, and every
// bit pattern is a value (a NaN, perhaps), as for `f32`. A 2-byte float in
// C (`__half`, `__nv_bfloat16`: types the source reader does not know, so
// any pointer to them fits; not `unsigned short*`).
unsafe impl DeviceRepr for half::f16 {
    const C_KIND: CKind = CKind::Float;
}
// SAFETY: as above.
unsafe impl DeviceRepr for half::bf16 {
    const C_KIND: CKind = CKind::Float;
}
// SAFETY: `Complex<T>` is `#[repr(C)]` `{ re: T, im: T }`: two values of
// one plain-old-data type (so no padding between or after them), every bit
// pattern a value. `Complex<f32>` and `Complex<f64>` have the layouts of
// cuFFT's `cufftComplex` and `cufftDoubleComplex`.
unsafe impl<T: DeviceRepr> DeviceRepr for num_complex::Complex<T> {}
