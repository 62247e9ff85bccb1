//! Issue 13, "bring your own kernel" (DESIGN "Users' kernels and chunk iterators"), on both backends: a user's
//! kernel from PTX text and from CUDA C through NVRTC, typed launches with
//! host implementations in safe Rust, the checks the host backend makes as
//! CUDA would (each a typed error, before anything is submitted), the
//! module cache, and kernels of one runtime refused by another.
//!
//! The kernels add as the CPU does (a rounded multiply, then a rounded
//! add: no fused multiply-add), so results are compared bit for bit.

mod common;

use common::{assert_no_races, backend_tests, error, same_backend, says, OPENED_BY_TEST};
use gpu_kernels as k;
use gpu_sched::{
    BackendKind, Buffer, DeviceSlice, DeviceSliceMut, Error, In, Kernel, LaunchConfig, Out,
    Runtime, RuntimeOptions, TaskContext,
};

/// Elements per buffer: not a multiple of any block size used here.
const N: usize = 1001;

/// The `a` of `y = a * x + y`.
const A: f32 = 1.5;

/// `y[i] = a * x[i] + y[i]` for `i < n`, a grid-stride loop, written by
/// hand. Parameters: `y`, `x` (pointers), `a`, `n`.
const SAXPY_PTX: &str = r"
// y[i] = a * x[i] + y[i], i < n, grid-stride
.version 7.0
.target sm_70
.address_size 64

.visible .entry saxpy(
	.param .u64 saxpy_y,
	.param .u64 saxpy_x,
	.param .f32 saxpy_a,
	.param .u64 saxpy_n
)
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<5>;
	.reg .b32 	%r<5>;
	.reg .b64 	%rd<10>;

	ld.param.u64 	%rd1, [saxpy_y];
	ld.param.u64 	%rd2, [saxpy_x];
	ld.param.f32 	%f1, [saxpy_a];
	ld.param.u64 	%rd3, [saxpy_n];
	cvta.to.global.u64 	%rd1, %rd1;
	cvta.to.global.u64 	%rd2, %rd2;
	mov.u32 	%r1, %ctaid.x;
	mov.u32 	%r2, %ntid.x;
	mov.u32 	%r3, %tid.x;
	mov.u32 	%r4, %nctaid.x;
	mul.wide.u32 	%rd4, %r1, %r2;
	cvt.u64.u32 	%rd5, %r3;
	add.s64 	%rd4, %rd4, %rd5;
	mul.wide.u32 	%rd6, %r4, %r2;

$L__saxpy_loop:
	setp.ge.u64 	%p1, %rd4, %rd3;
	@%p1 bra 	$L__saxpy_done;
	shl.b64 	%rd7, %rd4, 2;
	add.s64 	%rd8, %rd2, %rd7;
	ld.global.f32 	%f2, [%rd8];
	add.s64 	%rd9, %rd1, %rd7;
	ld.global.f32 	%f3, [%rd9];
	mul.rn.f32 	%f4, %f1, %f2;
	add.rn.f32 	%f4, %f4, %f3;
	st.global.f32 	[%rd9], %f4;
	add.s64 	%rd4, %rd4, %rd6;
	bra.uni 	$L__saxpy_loop;

$L__saxpy_done:
	ret;
}
";

/// The same computation in CUDA C, for NVRTC (`__fmul_rn`/`__fadd_rn`:
/// no contraction into a fused multiply-add).
const SAXPY_CU: &str = r#"
extern "C" __global__ void saxpy_c(float* y, const float* x, float a, unsigned long long n)
{
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < n; i += stride) {
        y[i] = __fadd_rn(__fmul_rn(a, x[i]), y[i]);
    }
}
"#;

/// CUDA C that does not compile: an undeclared identifier.
const BROKEN_CU: &str = r#"
extern "C" __global__ void broken(float* y)
{
    y[0] = undeclared_thing_13;
}
"#;

/// The kernels' signature: `(float* y, const float* x, float a, unsigned
/// long long n)`.
type Saxpy = (Out<f32>, In<f32>, f32, u64);

/// The host implementation, safe Rust over slices.
fn saxpy_host(y: &mut [f32], x: &[f32], a: f32, n: u64) {
    let n = n as usize;
    for (y, &x) in y[..n].iter_mut().zip(&x[..n]) {
        *y += a * x;
    }
}

/// A safe wrapper, as a user writes one: `y = a * x + y` over all of `y`,
/// the kernel's length taken from the buffers.
fn saxpy(
    t: &TaskContext,
    kernel: &Kernel<Saxpy>,
    cfg: LaunchConfig,
    a: f32,
    x: &(impl DeviceSlice<f32> + ?Sized),
    y: &mut (impl DeviceSliceMut<f32> + ?Sized),
) -> gpu_sched::Result<()> {
    if x.len() != y.len() {
        return Err(Error::LengthMismatch {
            what: "saxpy's x",
            expected: y.len(),
            got: x.len(),
        });
    }
    let n = y.len() as u64;
    // SAFETY: both the device kernels (a loop over `i < n`) and the host
    // implementation touch `y[i]` and `x[i]` for `i < n` only, whatever the
    // configuration; `n` is the length of both buffers (checked above); `x`
    // is only read.
    unsafe { kernel.launch(t, cfg, (y, x, a, n)) }
}

/// The inputs: `x` and `y` of `n` elements, neither constant.
fn inputs(n: usize) -> (Vec<f32>, Vec<f32>) {
    let x = (0..n).map(|i| i as f32 * 0.5 - 3.0).collect();
    let y = (0..n).map(|i| (i % 7) as f32 * 1.25 + 0.25).collect();
    (x, y)
}

/// The plain CPU loop the kernels must match.
fn reference(a: f32, x: &[f32], y: &[f32]) -> Vec<f32> {
    x.iter().zip(y).map(|(&x, &y)| a * x + y).collect()
}

/// Bit-for-bit equality, reporting the first difference.
#[track_caller]
fn assert_same(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
        panic!(
            "{what}: element {i} of {} is {}, the CPU gives {}",
            got.len(),
            got[i],
            want[i]
        );
    }
}

/// Whether NVRTC can be loaded on this machine (what `compile_cuda` asks).
fn nvrtc_present() -> bool {
    // SAFETY: loads the NVRTC library if there is one (its initialisers
    // run, as for any use of it); nothing is called through it.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Whether `compile_cuda` really compiles on `rt`: always on CUDA (the GPU
/// machine must have NVRTC), on the host backend where NVRTC is installed.
fn compiles(rt: &Runtime) -> bool {
    rt.backend() == BackendKind::Cuda || nvrtc_present()
}

/// `saxpy` from PTX text, from the runtime's checks to the values: the
/// module lists its one entry, and the typed kernel with its host
/// implementation computes what the CPU loop computes, with a configuration
/// covering the elements, with a grid-stride one of 2 blocks of 64 threads,
/// with one thread, and over a view in the middle of a buffer (the
/// elements either side of it unchanged).
fn ptx_kernel_matches_the_cpu(rt: &Runtime) {
    let m = rt.load_ptx(SAXPY_PTX.to_owned()).unwrap();
    assert_eq!(m.kernel_names(), ["saxpy"]);
    let kernel = m.kernel::<Saxpy>("saxpy").unwrap().with_host(saxpy_host);
    assert_eq!(kernel.name(), "saxpy");
    let t = rt.begin_task().unwrap();
    let (xs, ys) = inputs(N);
    let want = reference(A, &xs, &ys);
    let x = t.from_host(&xs).unwrap();
    for cfg in [
        LaunchConfig::for_elements(N, 256),
        LaunchConfig::linear(2, 64),
        LaunchConfig::linear(1, 1),
    ] {
        let mut y = t.from_host(&ys).unwrap();
        saxpy(&t, &kernel, cfg, A, &x, &mut y).unwrap();
        assert_same(&t.to_vec(&y).unwrap(), &want, &format!("{cfg:?}"));
    }

    // Over the middle view of three: only its elements change.
    let chunk = 400;
    let xs_mid = &xs[chunk..2 * chunk];
    let x_mid = t.from_host(xs_mid).unwrap();
    let mut y = t.from_host(&ys).unwrap();
    {
        let mut split = y.split_chunks(chunk).unwrap();
        let mut views = split.views();
        assert_eq!(views.len(), 3);
        saxpy(
            &t,
            &kernel,
            LaunchConfig::for_elements(chunk, 128),
            A,
            &x_mid,
            &mut views[1],
        )
        .unwrap();
        drop(views);
        t.rejoin(split).unwrap();
    }
    let mut want_mid = ys.clone();
    want_mid[chunk..2 * chunk].copy_from_slice(&want[chunk..2 * chunk]);
    assert_same(&t.to_vec(&y).unwrap(), &want_mid, "the middle view");
    let e = error(saxpy(
        &t,
        &kernel,
        LaunchConfig::linear(1, 1),
        A,
        &x_mid,
        &mut y,
    ));
    assert!(matches!(e, Error::LengthMismatch { .. }), "{e:?}");
}
backend_tests!(ptx_kernel_matches_the_cpu);

/// A typed kernel's buffers are handed off like any other operation's:
/// a built-in `fill` of `x` behind a gate on one stream, then `saxpy`
/// reading `x` on another (it must wait: one device wait), and `saxpy`'s
/// write of `y` behind a gate, then a built-in `copy` reading `y` on a
/// third stream (one device wait). The values are the CPU's once the gates
/// open, and the race detector saw nothing.
fn ptx_kernel_hand_offs(rt: &Runtime) {
    let kernel = rt
        .load_ptx(SAXPY_PTX.to_owned())
        .unwrap()
        .kernel::<Saxpy>("saxpy")
        .unwrap()
        .with_host(saxpy_host);
    let p = rt.begin_task().unwrap();
    let q = rt.begin_task().unwrap();
    let r = rt.begin_task().unwrap();
    let (_, ys) = inputs(N);
    let mut x = p.zeros::<f32>(N).unwrap();
    let mut y = q.from_host(&ys).unwrap();
    p.synchronize().unwrap();
    q.synchronize().unwrap();

    // A built-in writer, the typed kernel reading on another stream.
    let g = rt.gate().unwrap();
    k::gate(&p, &g, OPENED_BY_TEST).unwrap();
    k::fill(&p, &mut x, 2.0).unwrap();
    let before = rt.counters();
    saxpy(
        &q,
        &kernel,
        LaunchConfig::for_elements(N, 256),
        A,
        &x,
        &mut y,
    )
    .unwrap();
    let d = rt.counters().since(&before);
    assert_eq!(d.device_waits, 1, "saxpy waits for the fill of x: {d:?}");
    g.open();
    let want = reference(A, &[2.0; N], &ys);
    assert_same(&q.to_vec(&y).unwrap(), &want, "saxpy after the fill");

    // The typed kernel writing, a built-in reader on another stream.
    let g2 = rt.gate().unwrap();
    k::gate(&q, &g2, OPENED_BY_TEST).unwrap();
    saxpy(&q, &kernel, LaunchConfig::linear(3, 32), A, &x, &mut y).unwrap();
    let mut out = r.zeros::<f32>(N).unwrap();
    r.synchronize().unwrap();
    let before = rt.counters();
    k::copy(&r, &y, &mut out).unwrap();
    let d = rt.counters().since(&before);
    assert_eq!(d.device_waits, 1, "the copy waits for saxpy's y: {d:?}");
    g2.open();
    let want = reference(A, &[2.0; N], &want);
    assert_same(&r.to_vec(&out).unwrap(), &want, "the copy of saxpy's y");
    assert!(!g.timed_out() && !g2.timed_out(), "a gate timed out");
    rt.synchronize().unwrap();
    assert_no_races(rt);
}
backend_tests!(ptx_kernel_hand_offs);

/// CUDA C through NVRTC: `compile_cuda` loads the source on every backend
/// (on the host backend without NVRTC, from the `extern "C"` kernels' names
/// and parameter types in the source), the kernel computes what the CPU and
/// its host implementation compute, and a signature that disagrees with the
/// source is `BadKernelArgs` either way. A name not in the source is
/// `NoSuchKernel`.
fn cuda_c_through_nvrtc(rt: &Runtime) {
    let compiled = compiles(rt);
    let m = rt
        .compile_cuda(SAXPY_CU, &[])
        .unwrap_or_else(|e| panic!("compile_cuda (NVRTC present: {}): {e}", nvrtc_present()));
    assert_eq!(m.kernel_names(), ["saxpy_c"]);
    let kernel = m.kernel::<Saxpy>("saxpy_c").unwrap().with_host(saxpy_host);
    let t = rt.begin_task().unwrap();
    let (xs, ys) = inputs(N);
    let x = t.from_host(&xs).unwrap();
    let mut y = t.from_host(&ys).unwrap();
    saxpy(&t, &kernel, LaunchConfig::linear(2, 128), A, &x, &mut y).unwrap();
    assert_same(&t.to_vec(&y).unwrap(), &reference(A, &xs, &ys), "saxpy_c");

    // Checked either way: NVRTC's PTX, or (host backend without NVRTC) the
    // parameter types read from the source.
    assert!(m.is_checked());
    assert_eq!(m.is_compiled(), compiled);
    let e = error(m.kernel::<(Out<f32>, In<f32>, u64, u64)>("saxpy_c"));
    assert!(
        matches!(
            e,
            Error::BadKernelArgs {
                kernel: "saxpy_c",
                ..
            }
        ),
        "{e:?}"
    );
    says(&e, &["parameter 2", "4-byte float", "U64"]);
    let e = error(m.kernel::<Saxpy>("saxpy"));
    assert!(
        matches!(&e, Error::NoSuchKernel(n) if n == "saxpy"),
        "{e:?}"
    );
}
backend_tests!(cuda_c_through_nvrtc);

/// A source NVRTC refuses is `Error::Compile` whose log names the
/// undeclared identifier, each time (a failure is not cached). On the host
/// backend without NVRTC the source is not compiled: it loads by its
/// names, and its kernel, without a host implementation, cannot launch.
fn nvrtc_compile_error(rt: &Runtime) {
    for _ in 0..2 {
        let r = rt.compile_cuda(BROKEN_CU, &[]);
        if compiles(rt) {
            let e = error(r);
            let Error::Compile { log } = &e else {
                panic!("expected Error::Compile, got {e:?}")
            };
            assert!(log.contains("undeclared_thing_13"), "the log: {log}");
            says(&e, &["did not compile", "undeclared_thing_13"]);
        } else {
            let m = r.unwrap();
            assert_eq!(m.kernel_names(), ["broken"]);
            let kernel = m.kernel::<(Out<f32>,)>("broken").unwrap();
            let t = rt.begin_task().unwrap();
            let mut y = t.zeros::<f32>(1).unwrap();
            // SAFETY: refused before anything runs (no host implementation).
            let e = error(unsafe { kernel.launch(&t, LaunchConfig::linear(1, 1), (&mut y,)) });
            assert!(matches!(e, Error::NoHostImplementation { .. }), "{e:?}");
        }
    }
}
backend_tests!(nvrtc_compile_error);

/// PTX the runtime refuses is `BadPtx` on both backends, each time (a
/// failure is not cached): text that is not PTX, a missing `.target`, an
/// entry whose parameter list is not closed, a parameter of no PTX type.
/// PTX whose header and entries are well formed but whose body is not is
/// the driver JIT's to refuse: `BadPtx` on CUDA; the host backend, which
/// does not parse instructions, loads it.
fn bad_ptx(rt: &Runtime) {
    let cases: [(&str, &str); 4] = [
        ("this is not PTX at all", "`.version`"),
        (
            ".version 7.0\n.address_size 64\n.visible .entry k()\n{\n ret;\n}\n",
            "`.target`",
        ),
        (
            ".version 7.0\n.target sm_70\n.visible .entry k(.param .u64 a\n{\n ret;\n}\n",
            "not closed",
        ),
        (
            ".version 7.0\n.target sm_70\n.visible .entry k(.param .q99 a)\n{\n ret;\n}\n",
            "cannot read parameter",
        ),
    ];
    for (ptx, why) in cases {
        for _ in 0..2 {
            let e = error(rt.load_ptx(ptx));
            assert!(matches!(e, Error::BadPtx { .. }), "{ptx:?}: {e:?}");
            says(&e, &["not loadable PTX", why]);
        }
    }
    let bad_body = ".version 7.0\n.target sm_70\n.address_size 64\n\
        .visible .entry bad_body(.param .u64 p)\n{\n\tfrobnicate.u64 %rd1, 3;\n\tret;\n}\n";
    let r = rt.load_ptx(bad_body);
    match rt.backend() {
        BackendKind::Cuda => {
            let e = error(r);
            assert!(matches!(e, Error::BadPtx { .. }), "{e:?}");
            says(&e, &["the driver's JIT refused it"]);
        }
        BackendKind::Host => assert_eq!(r.unwrap().kernel_names(), ["bad_body"]),
    }
    // The runtime still loads good PTX.
    assert!(rt.load_ptx(SAXPY_PTX).is_ok());
}
backend_tests!(bad_ptx);

/// A kernel name not in the module is `NoSuchKernel`, and a signature that
/// disagrees with the PTX entry is `BadKernelArgs` saying how: too few or
/// too many parameters, `u64` or `i32` for the `f32`, `f64` for the `f32`
/// (a size), `f32` for the `u64` length.
fn kernel_lookup_errors(rt: &Runtime) {
    let m = rt.load_ptx(SAXPY_PTX).unwrap();
    let e = error(m.kernel::<Saxpy>("saxpz"));
    assert!(
        matches!(&e, Error::NoSuchKernel(n) if n == "saxpz"),
        "{e:?}"
    );
    says(&e, &["saxpz"]);

    #[track_caller]
    fn bad_args<T: std::fmt::Debug>(r: gpu_sched::Result<T>, parts: &[&str]) {
        let e = error(r);
        assert!(
            matches!(
                e,
                Error::BadKernelArgs {
                    kernel: "saxpy",
                    ..
                }
            ),
            "{e:?}"
        );
        says(&e, parts);
    }
    bad_args(
        m.kernel::<(Out<f32>, In<f32>, f32)>("saxpy"),
        &["takes 4 parameters", "declares 3"],
    );
    bad_args(
        m.kernel::<(Out<f32>, In<f32>, f32, u64, u64)>("saxpy"),
        &["takes 4 parameters", "declares 5"],
    );
    bad_args(
        m.kernel::<(Out<f32>, In<f32>, u64, u64)>("saxpy"),
        &["parameter 2", "4-byte float", "U64"],
    );
    bad_args(
        m.kernel::<(Out<f32>, In<f32>, i32, u64)>("saxpy"),
        &["parameter 2", "4-byte float", "I32"],
    );
    bad_args(
        m.kernel::<(Out<f32>, In<f32>, f64, u64)>("saxpy"),
        &["parameter 2", "4-byte float", "F64"],
    );
    bad_args(
        m.kernel::<(Out<f32>, In<f32>, f32, f32)>("saxpy"),
        &["parameter 3", "8-byte integer", "F32"],
    );
    assert!(m.kernel::<Saxpy>("saxpy").is_ok());
}
backend_tests!(kernel_lookup_errors);

/// Configurations CUDA refuses, each `BadLaunch` naming the kernel, with
/// `y`'s values and stamps unchanged (nothing submitted): a grid of 0 in x
/// and in z, a block of 0, a block of 4096 threads, 2048 threads as
/// 32x32x2, a block z of 65, a grid y of 65 536, 48 KiB + 1 of dynamic
/// shared memory. Through a loaded typed kernel and through a built-in one
/// (`gpu_kernels::AXPY_F32`). The limits themselves (1024
/// threads, 48 KiB) launch and compute the CPU's values.
fn bad_launch_configs(rt: &Runtime) {
    let kernel = rt
        .load_ptx(SAXPY_PTX)
        .unwrap()
        .kernel::<Saxpy>("saxpy")
        .unwrap()
        .with_host(saxpy_host);
    let axpy = &k::AXPY_F32;
    let t = rt.begin_task().unwrap();
    let (xs, ys) = inputs(N);
    let x = t.from_host(&xs).unwrap();
    let mut y = t.from_host(&ys).unwrap();
    t.synchronize().unwrap();
    let with_smem = |bytes| LaunchConfig {
        shared_mem_bytes: bytes,
        ..LaunchConfig::linear(4, 256)
    };
    let bad = [
        (LaunchConfig::linear(0, 256), "at least 1"),
        (
            LaunchConfig {
                grid: [4, 1, 0],
                ..LaunchConfig::linear(4, 256)
            },
            "at least 1",
        ),
        (LaunchConfig::linear(4, 0), "at least 1"),
        (LaunchConfig::linear(1, 4096), "at most 1024"),
        (
            LaunchConfig {
                block: [32, 32, 2],
                ..LaunchConfig::linear(1, 1)
            },
            "at most 1024",
        ),
        (
            LaunchConfig {
                block: [1, 1, 65],
                ..LaunchConfig::linear(1, 1)
            },
            "at most 1024",
        ),
        (
            LaunchConfig {
                grid: [1, 65_536, 1],
                ..LaunchConfig::linear(1, 32)
            },
            "65535",
        ),
        (with_smem(48 * 1024 + 1), "49152"),
    ];
    let uses = format!("{:?}", y.uses());
    for (cfg, why) in bad {
        let e = error(saxpy(&t, &kernel, cfg, A, &x, &mut y));
        assert!(
            matches!(&e, Error::BadLaunch { kernel, .. } if kernel == "saxpy"),
            "{cfg:?}: {e:?}"
        );
        says(&e, &["saxpy", why]);

        let n = y.len();
        // SAFETY: axpy_f32 touches `x[i]`, `y[i]` for `i < n` only, `n`
        // the length of both.
        let e = error(unsafe { axpy.launch(&t, cfg, (A, &x, &mut y, n)) });
        assert!(
            matches!(&e, Error::BadLaunch { kernel, .. } if kernel == "axpy_f32"),
            "{cfg:?}: {e:?}"
        );
        says(&e, &["axpy_f32", why]);
        assert_eq!(format!("{:?}", y.uses()), uses, "{cfg:?}: y was stamped");
    }
    assert_same(&t.to_vec(&y).unwrap(), &ys, "y after refused launches");

    // At the limits: both launch.
    let mut want = ys;
    for cfg in [LaunchConfig::linear(1, 1024), with_smem(48 * 1024)] {
        saxpy(&t, &kernel, cfg, A, &x, &mut y).unwrap();
        want = reference(A, &xs, &want);
        let n = y.len();
        // SAFETY: as above.
        unsafe { axpy.launch(&t, cfg, (A, &x, &mut y, n)) }.unwrap();
        want = reference(A, &xs, &want);
        assert_same(&t.to_vec(&y).unwrap(), &want, &format!("{cfg:?}"));
    }
}
backend_tests!(bad_launch_configs);

/// A kernel without a host implementation: on the host backend its launch
/// is `NoHostImplementation` naming it (nothing submitted: `y` unchanged);
/// on CUDA the same launch runs and computes the CPU's values. Both for the
/// hand-written PTX and for a built-in kernel loaded from `gpu-kernels`'
/// PTX as a typed kernel (the checks accept NVRTC's PTX).
fn no_host_implementation(rt: &Runtime) {
    let t = rt.begin_task().unwrap();
    let (xs, ys) = inputs(N);
    let x = t.from_host(&xs).unwrap();
    let mut y = t.from_host(&ys).unwrap();
    let cfg = LaunchConfig::for_elements(N, 256);

    let kernel = rt
        .load_ptx(SAXPY_PTX)
        .unwrap()
        .kernel::<Saxpy>("saxpy")
        .unwrap();
    let r = saxpy(&t, &kernel, cfg, A, &x, &mut y);
    let axpy = rt
        .load_ptx(k::KERNELS_PTX)
        .unwrap()
        .kernel::<(f32, In<f32>, Out<f32>, u64)>("axpy_f32")
        .unwrap();
    // SAFETY: axpy_f32 touches `x[i]`, `y[i]` for `i < N` only, both of N
    // elements.
    let r2 = unsafe { axpy.launch(&t, cfg, (A, &x, &mut y, N)) };
    match rt.backend() {
        BackendKind::Host => {
            for (r, name) in [(r, "saxpy"), (r2, "axpy_f32")] {
                let e = error(r);
                assert!(
                    matches!(&e, Error::NoHostImplementation { kernel } if kernel == name),
                    "{e:?}"
                );
                says(&e, &[name, "with_host"]);
            }
            assert_same(&t.to_vec(&y).unwrap(), &ys, "y after refused launches");
        }
        BackendKind::Cuda => {
            r.unwrap();
            r2.unwrap();
            let want = reference(A, &xs, &reference(A, &xs, &ys));
            assert_same(&t.to_vec(&y).unwrap(), &want, "saxpy then axpy_f32");
        }
    }
}
backend_tests!(no_host_implementation);

/// Modules are cached per runtime, source and options: the same PTX text
/// loaded twice (from two distinct `String`s) is the same module, and a
/// kernel looked up in either launches (each launch applied once); other
/// text, or the same text in another runtime, is another module. The same
/// for CUDA C, where other options give another module.
fn modules_are_cached(rt: &Runtime) {
    let m1 = rt.load_ptx(String::from(SAXPY_PTX)).unwrap();
    let m2 = rt.load_ptx(SAXPY_PTX.to_owned()).unwrap();
    assert!(m1.same(&m2), "{m1:?} and {m2:?}: loaded twice");
    assert_eq!(m1.kernel_names(), m2.kernel_names());
    let other = rt
        .load_ptx(format!("{SAXPY_PTX}// another text\n"))
        .unwrap();
    assert!(!m1.same(&other), "another text, the same module");
    let rt2 = same_backend(rt, RuntimeOptions::default());
    let elsewhere = rt2.load_ptx(SAXPY_PTX).unwrap();
    assert!(!m1.same(&elsewhere), "another runtime, the same module");

    let t = rt.begin_task().unwrap();
    let (xs, ys) = inputs(N);
    let x = t.from_host(&xs).unwrap();
    let mut y = t.from_host(&ys).unwrap();
    let mut want = ys;
    for m in [&m1, &m2, &other] {
        let kernel = m.kernel::<Saxpy>("saxpy").unwrap().with_host(saxpy_host);
        saxpy(&t, &kernel, LaunchConfig::linear(4, 64), A, &x, &mut y).unwrap();
        want = reference(A, &xs, &want);
        assert_same(
            &t.to_vec(&y).unwrap(),
            &want,
            "a launch through a cached module",
        );
    }

    let c1 = rt.compile_cuda(SAXPY_CU, &[]).unwrap();
    let c2 = rt.compile_cuda(SAXPY_CU, &[]).unwrap();
    assert!(c1.same(&c2), "CUDA C compiled twice");
    let fast = rt.compile_cuda(SAXPY_CU, &["--use_fast_math"]).unwrap();
    assert!(!c1.same(&fast), "other options, the same module");
    assert!(!c1.same(&m1));
    assert_eq!(fast.kernel_names(), ["saxpy_c"]);
    rt2.synchronize().unwrap();
    assert_no_races(&rt2);
}
backend_tests!(modules_are_cached);

/// A kernel belongs to its runtime: launched on another runtime's task it
/// is `WrongDevice` ("the kernel"), and a buffer of another runtime passed
/// to it is `WrongDevice` ("a kernel argument"); nothing is submitted (the
/// buffer unchanged). The kernel of the task's own runtime then launches.
fn wrong_device(rt: &Runtime) {
    let rt2 = same_backend(rt, RuntimeOptions::default());
    let k1 = rt
        .load_ptx(SAXPY_PTX)
        .unwrap()
        .kernel::<Saxpy>("saxpy")
        .unwrap()
        .with_host(saxpy_host);
    let k2 = rt2
        .load_ptx(SAXPY_PTX)
        .unwrap()
        .kernel::<Saxpy>("saxpy")
        .unwrap()
        .with_host(saxpy_host);
    let (xs, ys) = inputs(N);
    let t1 = rt.begin_task().unwrap();
    let t2 = rt2.begin_task().unwrap();
    let x1 = t1.from_host(&xs).unwrap();
    let x2 = t2.from_host(&xs).unwrap();
    let mut y2: Buffer<f32> = t2.from_host(&ys).unwrap();
    let cfg = LaunchConfig::for_elements(N, 256);

    let e = error(saxpy(&t2, &k1, cfg, A, &x2, &mut y2));
    assert!(
        matches!(e, Error::WrongDevice { what: "the kernel" }),
        "{e:?}"
    );
    let e = error(saxpy(&t2, &k2, cfg, A, &x1, &mut y2));
    assert!(
        matches!(
            e,
            Error::WrongDevice {
                what: "a kernel argument"
            }
        ),
        "{e:?}"
    );
    assert_same(&t2.to_vec(&y2).unwrap(), &ys, "y after refused launches");
    saxpy(&t2, &k2, cfg, A, &x2, &mut y2).unwrap();
    assert_same(
        &t2.to_vec(&y2).unwrap(),
        &reference(A, &xs, &ys),
        "k2 on rt2",
    );
    rt2.synchronize().unwrap();
    assert_no_races(&rt2);
}
backend_tests!(wrong_device);
