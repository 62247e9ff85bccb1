use super::*;
use gpu_sched::{BackendChoice, Runtime, RuntimeOptions};

fn host_rt() -> Runtime {
    Runtime::new(RuntimeOptions {
        backend: BackendChoice::Host,
        ..Default::default()
    })
    .unwrap()
}

fn compile_err<T: Real>(r: Result<Elementwise<T>>) -> String {
    match r {
        Err(Error::Compile { log }) => log,
        Err(e) => panic!("expected a compile error, got {e}"),
        Ok(k) => panic!("expected a compile error, got {k:?}"),
    }
}

#[test]
fn axpby_in_place_and_two_outputs() {
    let rt = host_rt();
    let t = rt.begin_task().unwrap();
    let x: Vec<f64> = (0..300).map(|i| i as f64 * 0.25 - 7.0).collect();
    let y: Vec<f64> = (0..300).map(|i| (i as f64).sqrt()).collect();
    let (bx, by) = (t.from_host(&x).unwrap(), t.from_host(&y).unwrap());
    // In place: `z` read before it is assigned; a local; two outputs.
    let k = Elementwise::<f64>::new(
        "two",
        &["x", "y"],
        &["a"],
        &["z", "w"],
        "s = a * x + y; z = z + s; w = s > 0 ? sqrt(s) : -s",
    )
    .unwrap();
    assert!(k.is_exact());
    let mut z = t.from_host(&vec![1.0f64; 300]).unwrap();
    let mut w = t.zeros::<f64>(300).unwrap();
    k.run(&t, &[&bx, &by], &[3.0], &mut [&mut z, &mut w])
        .unwrap();
    let (z, w) = (t.to_vec(&z).unwrap(), t.to_vec(&w).unwrap());
    for i in 0..300 {
        let s = 3.0 * x[i] + y[i];
        assert_eq!(z[i], 1.0 + s, "z[{i}]");
        assert_eq!(w[i], if s > 0.0 { s.sqrt() } else { -s }, "w[{i}]");
    }
}

#[test]
fn every_operator_and_function_as_rust_computes_it() {
    let rt = host_rt();
    let t = rt.begin_task().unwrap();
    let x: Vec<f32> = (0..130).map(|i| i as f32 * 0.37 - 20.0).collect();
    let y: Vec<f32> = (0..130).map(|i| 3.0 - i as f32 * 0.11).collect();
    let (bx, by) = (t.from_host(&x).unwrap(), t.from_host(&y).unwrap());
    type Case = (&'static str, fn(f32, f32) -> f32);
    let cases: [Case; 14] = [
        ("o = -x / y - 2.5e-1", |x, y| -x / y - 0.25),
        (
            "o = (x < y) + (x <= y) * 2 + (x == y) * 4 + (x != y) * 8",
            |x, y| {
                f32::from(x < y)
                    + f32::from(x <= y) * 2.0
                    + f32::from(x == y) * 4.0
                    + f32::from(x != y) * 8.0
            },
        ),
        (
            "o = (x > 0 && y > 0) + (x > 0 || y > 0) * 2 + !(x > y) * 4",
            |x, y| {
                f32::from(x > 0.0 && y > 0.0)
                    + f32::from(x > 0.0 || y > 0.0) * 2.0
                    + f32::from(x <= y) * 4.0
            },
        ),
        ("o = fma(x, y, 1.5)", |x, y| x.mul_add(y, 1.5)),
        ("o = min(x, y) - max(x, y) * abs(x)", |x, y| {
            x.min(y) - x.max(y) * x.abs()
        }),
        ("o = floor(x) + ceil(y)", |x, y| x.floor() + y.ceil()),
        ("o = sqrt(abs(x * y))", |x, y| (x * y).abs().sqrt()),
        ("o = exp(y)", |_, y| y.exp()),
        ("o = log(abs(x) + 1)", |x, _| (x.abs() + 1.0).ln()),
        ("o = sin(x) * cos(y)", |x, y| x.sin() * y.cos()),
        ("o = tanh(x)", |x, _| x.tanh()),
        ("o = pow(abs(y), 1.5)", |_, y| y.abs().powf(1.5)),
        ("o = x > y ? x - y : (y > 1 ? 1 : 0 - y)", |x, y| {
            if x > y {
                x - y
            } else if y > 1.0 {
                1.0
            } else {
                -y
            }
        }),
        ("o = x - y * 2 - 1 + x * (y - 3) / 7", |x, y| {
            x - y * 2.0 - 1.0 + x * (y - 3.0) / 7.0
        }),
    ];
    for (body, f) in cases {
        let k = Elementwise::<f32>::new("k", &["x", "y"], &[], &["o"], body).unwrap();
        let mut o = t.zeros::<f32>(130).unwrap();
        k.run(&t, &[&bx, &by], &[], &mut [&mut o]).unwrap();
        let got = t.to_vec(&o).unwrap();
        for i in 0..130 {
            assert_eq!(
                got[i].to_bits(),
                f(x[i], y[i]).to_bits(),
                "{body} at {i}: x {} y {}",
                x[i],
                y[i]
            );
        }
    }
}

#[test]
fn the_generated_source_is_as_the_host_computes() {
    let k = Elementwise::<f32>::new("saxpy", &["x"], &["a"], &["y"], "y = a * x + y").unwrap();
    let src = k.source();
    assert!(src.contains("extern \"C\" __global__ void saxpy("), "{src}");
    assert!(src.contains("const float a = gk_s0;"), "{src}");
    assert!(
        src.contains("float y = gk_out0[gk_i];"),
        "the output is read: {src}"
    );
    assert!(src.contains("y = ((a * x) + y);"), "{src}");
    // A literal reads back as the same float, in single precision.
    let k = Elementwise::<f32>::new("lit", &[], &[], &["y"], "y = 0.1").unwrap();
    assert!(k.source().contains("((float)1e-1f)"), "{}", k.source());
    let k = Elementwise::<f64>::new("lit", &[], &[], &["y"], "y = min(0.1, 1e300)").unwrap();
    assert!(
        k.source().contains("fmin(((double)1e-1), ((double)1e300))"),
        "{}",
        k.source()
    );
    assert!(
        !Elementwise::<f64>::new("e", &[], &[], &["y"], "y = exp(1)")
            .unwrap()
            .is_exact()
    );
}

#[test]
fn bad_bodies_and_names_are_refused_saying_why() {
    let e = |ins: &[&str], outs: &[&str], body: &str| {
        compile_err(Elementwise::<f32>::new("k", ins, &["a"], outs, body))
    };
    assert!(e(&["x"], &["y"], "y = x +").contains("expected a number"));
    assert!(e(&["x"], &["y"], "y = q").contains("`q`"));
    assert!(e(&["x"], &["y"], "x = 1; y = 2").contains("cannot be assigned"));
    assert!(e(&["x"], &["y"], "a = 1; y = 2").contains("cannot be assigned"));
    assert!(e(&["x"], &["y", "w"], "y = x").contains("`w` is never assigned"));
    assert!(e(&["x"], &["y"], "y = foo(x)").contains("not a function"));
    assert!(e(&["x"], &["y"], "y = min(x)").contains("takes 2"));
    assert!(e(&["x"], &["y"], "y = x $ 2").contains("unexpected `$`"));
    assert!(e(&["x"], &["y"], "y = t + 1; t = 2").contains("`t`"));
    assert!(e(&["x", "x"], &["y"], "y = x").contains("named twice"));
    assert!(e(&["float"], &["y"], "y = 1").contains("reserved"));
    assert!(e(&["gk_i"], &["y"], "y = 1").contains("kernel's own"));
    assert!(e(&["x"], &["y"], "").contains("assigns nothing"));
    assert!(e(&["a1", "a2", "a3", "a4", "a5"], &["y"], "y = 1").contains("at most 4"));
    assert!(e(&[], &[], "y = 1").contains("no output"));
    assert!(
        compile_err(Elementwise::<f32>::new("1k", &[], &[], &["y"], "y = 1"))
            .contains("not a name")
    );
    // Names NVRTC would refuse or that would hide a function the kernel
    // calls are refused here, on both backends.
    for name in ["class", "blockIdx", "expf", "fmin", "sqrt"] {
        assert!(e(&[name], &["y"], "y = 1").contains("reserved"), "{name}");
        assert!(
            e(&["x"], &["y"], &format!("{name} = x; y = 1")).contains("reserved"),
            "{name}"
        );
    }
    // Nesting beyond the limit is an error, not an overflowed stack.
    let deep = format!("y = {}x{}", "(".repeat(1000), ")".repeat(1000));
    assert!(e(&["x"], &["y"], &deep).contains("nests deeper"));
    let signs = format!("y = {}x", "-".repeat(1000));
    assert!(e(&["x"], &["y"], &signs).contains("signs"));
    let long = format!("y = x{}", " + x".repeat(3000));
    assert!(e(&["x"], &["y"], &long).contains("at most 2048"));
    let fine = format!("y = {}x{}", "(".repeat(100), ")".repeat(100));
    Elementwise::<f32>::new("k", &["x"], &[], &["y"], &fine).unwrap();
}

#[test]
fn counts_and_lengths_are_checked_before_anything_runs() {
    let rt = host_rt();
    let t = rt.begin_task().unwrap();
    let k = Elementwise::<f32>::new("k", &["x"], &["a"], &["y"], "y = a * x").unwrap();
    let x = t.from_host(&[1.0f32; 4]).unwrap();
    let mut y = t.zeros::<f32>(4).unwrap();
    let mut short = t.zeros::<f32>(3).unwrap();
    let r = k.run(&t, &[], &[1.0], &mut [&mut y]);
    assert!(matches!(r, Err(Error::BadKernelArgs { .. })), "{r:?}");
    let r = k.run(&t, &[&x], &[], &mut [&mut y]);
    assert!(matches!(r, Err(Error::BadKernelArgs { .. })), "{r:?}");
    let r = k.run(&t, &[&x], &[1.0], &mut [&mut short]);
    assert!(
        matches!(
            r,
            Err(Error::LengthMismatch {
                expected: 3,
                got: 4,
                ..
            })
        ),
        "{r:?}"
    );
    assert_eq!(t.to_vec(&short).unwrap(), [0.0; 3], "nothing ran");
    // Views of one buffer: disjoint halves, one read and one written.
    let mut both = t.from_host(&[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    {
        let mut split = both.split_at_mut(2).unwrap();
        let mut views = split.views();
        let (lo, hi) = views.split_at_mut(1);
        k.run(&t, &[&lo[0]], &[10.0], &mut [&mut hi[0]]).unwrap();
    }
    assert_eq!(t.to_vec(&both).unwrap(), [1.0, 2.0, 10.0, 20.0]);
}

#[test]
fn empty_buffers_launch_nothing_wrong() {
    let rt = host_rt();
    let t = rt.begin_task().unwrap();
    let k = Elementwise::<f64>::new("k", &["x"], &[], &["y"], "y = x + 1").unwrap();
    let x = t.zeros::<f64>(0).unwrap();
    let mut y = t.zeros::<f64>(0).unwrap();
    k.run(&t, &[&x], &[], &mut [&mut y]).unwrap();
    assert!(t.to_vec(&y).unwrap().is_empty());
}

/// Every generated source is a module with the kernel's entry, of the
/// kernel's parameters: compiled by NVRTC where it is installed (on CUDA,
/// or on the host with NVRTC on the library path), read by the host
/// backend's reader otherwise; with NVRTC, each function of the language
/// compiles in both precisions.
#[test]
fn generated_sources_load_with_their_entries() {
    let rt = host_rt();
    let bodies = [
        "z = exp(x) + log(x) + sqrt(x) + abs(x) + sin(x) + cos(x) + tanh(x)",
        "z = floor(x) + ceil(x) + pow(x, a) + min(x, a) + max(x, a) + fma(x, a, z)",
        "t = x < a && !(x >= a) || x == a; z = t ? -x / 3 : x != a",
    ];
    for body in bodies {
        let k32 = Elementwise::<f32>::new("k", &["x"], &["a"], &["z"], body).unwrap();
        let k64 = Elementwise::<f64>::new("k", &["x"], &["a"], &["z"], body).unwrap();
        for src in [k32.source(), k64.source()] {
            let m = rt.compile_cuda(src, &["--fmad=false"]).unwrap();
            assert_eq!(m.kernel_names(), ["k"], "{src}");
            if m.is_compiled() {
                assert!(m.is_checked());
            }
        }
        let t = rt.begin_task().unwrap();
        let x = t.from_host(&[0.5f32, 2.0]).unwrap();
        let mut z = t.zeros::<f32>(2).unwrap();
        k32.run(&t, &[&x], &[1.0], &mut [&mut z]).unwrap();
    }
}
