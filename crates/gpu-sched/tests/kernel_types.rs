//! The kernel parameter types ML code uses (issue 40, item 4), on both
//! backends: `i64`, `u8`, `bool`, `half::f16`, `half::bf16` scalars, a
//! `#[repr(C)]` struct by value (`Value<T>`), and buffers of `f16`, `bf16`
//! and `i64`, each reaching the kernel (and the host implementation) with
//! its bits; signatures that disagree with the PTX entry in size or kind
//! refused.

mod common;

use common::{backend_tests, error, says};
use gpu_sched::half::{bf16, f16};
use gpu_sched::{DeviceRepr, Error, In, LaunchConfig, Out, Runtime, Value};

/// `every_scalar` and `half_buffers`, from the CUDA C in the file's
/// header (NVRTC 12.0).
const PTX: &str = include_str!("data/every_scalar.ptx");

/// The C struct `Params { double x; int n; int m; }`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Params {
    x: f64,
    n: i32,
    m: i32,
}

// SAFETY: `#[repr(C)]`, 16 bytes of plain numbers with no padding (8 + 4 +
// 4, aligned to 8): the C struct's layout, any bits a value.
unsafe impl DeviceRepr for Params {}

/// `every_scalar`'s signature.
type EveryScalar = (Out<f32>, i64, u8, bool, f16, bf16, Value<Params>);

/// `every_scalar`'s host implementation: what the kernel writes.
fn every_scalar_host(out: &mut [f32], a: i64, b: u8, c: bool, h: f16, g: bf16, p: Params) {
    out[..8].copy_from_slice(&[
        a as f32,
        f32::from(b),
        if c { 1.0 } else { 0.0 },
        h.to_f32(),
        g.to_f32(),
        p.x as f32,
        p.n as f32,
        p.m as f32,
    ]);
}

/// Each scalar type, two sets of values (`bool` both ways, a negative
/// `i64` beyond 32 bits, an `f16` and a `bf16` that are not `f32`s' upper
/// halves by accident): the kernel's output is the host's, bit for bit.
fn every_scalar_type_reaches_the_kernel(rt: &Runtime) {
    let m = rt.load_ptx(PTX).unwrap();
    let k = m
        .kernel::<EveryScalar>("every_scalar")
        .unwrap()
        .with_host(every_scalar_host);
    let t = rt.begin_task().unwrap();
    let sets = [
        (
            -(1i64 << 40) + 3,
            200u8,
            true,
            1.5f32,
            -2.75f32,
            (0.1, -7, 9),
        ),
        (
            12345,
            0,
            false,
            -0.000_061_035_156,
            3.0e38,
            (-1.0e300, i32::MIN, i32::MAX),
        ),
    ];
    for (a, b, c, h, g, (x, n, mm)) in sets {
        let (h, g) = (f16::from_f32(h), bf16::from_f32(g));
        let p = Params { x, n, m: mm };
        let mut out = t.zeros::<f32>(8).unwrap();
        // SAFETY: the kernel and its host twin write out[0..8] only, and
        // `out` has 8 elements.
        unsafe {
            k.launch(
                &t,
                LaunchConfig::linear(1, 1),
                (&mut out, a, b, c, h, g, Value(p)),
            )
            .unwrap()
        };
        let got = t.to_vec(&out).unwrap();
        let mut want = [0f32; 8];
        every_scalar_host(&mut want, a, b, c, h, g, p);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want), "{got:?} vs {want:?}");
    }
}
backend_tests!(every_scalar_type_reaches_the_kernel);

/// `half_buffers` as `(Out<f16>, In<f16>, In<i64>, u64)` and as the same
/// over `bf16`: a gather through `i64` indices moves each element's bits.
fn half_and_i64_buffers(rt: &Runtime) {
    let m = rt.load_ptx(PTX).unwrap();
    let n = 1000usize;
    let idx: Vec<i64> = (0..n as i64).map(|i| (i * 7919) % n as i64).collect();
    let t = rt.begin_task().unwrap();
    let di = t.from_host(&idx).unwrap();
    let cfg = LaunchConfig::for_elements(n, 128);

    fn gather<T: Copy>(out: &mut [T], inp: &[T], idx: &[i64], n: u64) {
        for i in 0..n as usize {
            out[i] = inp[idx[i] as usize];
        }
    }
    let k16 = m
        .kernel::<(Out<f16>, In<f16>, In<i64>, u64)>("half_buffers")
        .unwrap()
        .with_host(gather::<f16>);
    let xs: Vec<f16> = (0..n)
        .map(|i| f16::from_f32(i as f32 * 0.25 - 100.0))
        .collect();
    let x = t.from_host(&xs).unwrap();
    let mut y = t.zeros::<f16>(n).unwrap();
    // SAFETY: the kernel reads idx[i] (each < n) and x[idx[i]], writes
    // y[i], for i < n; every buffer has n elements.
    unsafe { k16.launch(&t, cfg, (&mut y, &x, &di, n as u64)).unwrap() };
    let got = t.to_vec(&y).unwrap();
    assert!((0..n).all(|i| got[i].to_bits() == xs[idx[i] as usize].to_bits()));

    let kb = m
        .kernel::<(Out<bf16>, In<bf16>, In<i64>, u64)>("half_buffers")
        .unwrap()
        .with_host(gather::<bf16>);
    let xs: Vec<bf16> = (0..n)
        .map(|i| bf16::from_f32(1.0e30 / (i as f32 + 1.0)))
        .collect();
    let x = t.from_host(&xs).unwrap();
    let mut y = t.zeros::<bf16>(n).unwrap();
    // SAFETY: as above.
    unsafe { kb.launch(&t, cfg, (&mut y, &x, &di, n as u64)).unwrap() };
    let got = t.to_vec(&y).unwrap();
    assert!((0..n).all(|i| got[i].to_bits() == xs[idx[i] as usize].to_bits()));
}
backend_tests!(half_and_i64_buffers);

/// The PTX entry's sizes and kinds decide: an `f64` for the `.u64` (a
/// float for an integer), a `u32` for the `.u8` (4 bytes for 1), an `i32`
/// for the 2-byte `__half` struct, a 12-byte value for the 16-byte struct
/// are refused, each naming the parameter; an `f16` and a `bf16` fit
/// either 2-byte struct, and a `Value` of any 16-byte type the struct.
fn signatures_are_checked_by_size_and_kind(rt: &Runtime) {
    let m = rt.load_ptx(PTX).unwrap();
    let bad = |e: Error, parts: &[&str]| {
        assert!(matches!(e, Error::BadKernelArgs { .. }), "{e:?}");
        says(&e, parts);
    };
    type P = Value<Params>;
    bad(
        error(m.kernel::<(Out<f32>, f64, u8, bool, f16, bf16, P)>("every_scalar")),
        &["parameter 1"],
    );
    bad(
        error(m.kernel::<(Out<f32>, i64, u32, bool, f16, bf16, P)>("every_scalar")),
        &["parameter 2"],
    );
    bad(
        error(m.kernel::<(Out<f32>, i64, u8, bool, i32, bf16, P)>("every_scalar")),
        &["parameter 4"],
    );
    bad(
        error(m.kernel::<(Out<f32>, i64, u8, bool, f16, bf16, Value<[u32; 3]>)>("every_scalar")),
        &["parameter 6"],
    );
    m.kernel::<(Out<f32>, i64, u8, u8, bf16, f16, Value<[u64; 2]>)>("every_scalar")
        .unwrap();
}
backend_tests!(signatures_are_checked_by_size_and_kind);

/// A CUDA C source whose declarations say more than its PTX: `y` is
/// written (`float*`), `x` only read (`const float*`), `z` holds doubles,
/// `w` is a pointer behind a typedef.
const DECLARED: &str = r#"
typedef float* fptr;
extern "C" __global__ void declared(float* y, const float* x, double* z, fptr w, int n) {
    if (n > 0) { y[0] = x[0]; z[0] = 1.0; w[0] = 2.0f; }
}
"#;

/// The source's declarations decide too, on both backends (NVRTC on a
/// GPU, the reader on the host): `In` for the non-const `y` and `Out` for
/// the const `x` are refused, so are `f32` elements for the `double*`, a
/// buffer for the `int` and a scalar for a pointer; the pointer behind a
/// typedef is judged by the PTX alone (any 8-byte parameter where the
/// reader has no PTX, a buffer under NVRTC).
fn signatures_are_checked_against_the_source(rt: &Runtime) {
    let m = rt.compile_cuda(DECLARED, &[]).unwrap();
    type Good = (Out<f32>, In<f32>, Out<f64>, Out<f32>, i32);
    m.kernel::<Good>("declared").unwrap();
    let bad = |r: gpu_sched::Result<()>, parts: &[&str]| {
        let e = error(r);
        assert!(matches!(e, Error::BadKernelArgs { .. }), "{e:?}");
        says(&e, parts);
    };
    bad(
        m.kernel::<(In<f32>, In<f32>, Out<f64>, Out<f32>, i32)>("declared")
            .map(drop),
        &["parameter 0", "non-const", "declare Out"],
    );
    bad(
        m.kernel::<(Out<f32>, Out<f32>, Out<f64>, Out<f32>, i32)>("declared")
            .map(drop),
        &["parameter 1", "points to const", "declare In"],
    );
    bad(
        m.kernel::<(Out<f32>, In<f32>, Out<f32>, Out<f32>, i32)>("declared")
            .map(drop),
        &["parameter 2", "8-byte float"],
    );
    bad(
        m.kernel::<(Out<f32>, In<f32>, Out<f64>, Out<f32>, Out<i32>)>("declared")
            .map(drop),
        &["parameter 4"],
    );
    bad(
        m.kernel::<(u64, In<f32>, Out<f64>, Out<f32>, i32)>("declared")
            .map(drop),
        &["parameter 0", "pointer"],
    );
}
backend_tests!(signatures_are_checked_against_the_source);
