//! Misuse of the user API: each gives a typed error whose message says what
//! was wrong and what to do, reaches the caller of the scope, and leaves the
//! buffers as they were and the runtime usable (but for the sticky error,
//! which is for good).

mod common;

use common::{assert_no_races, host, FILL_SHORT};
use gpu::iter::PipelineOptions;
use gpu::kernel::{LaunchConfig, Out};
use gpu::Error;
use gpu_kernels as k;

/// The error of `r`, which must have failed.
#[track_caller]
fn error<T: std::fmt::Debug>(r: gpu::Result<T>) -> Error {
    match r {
        Ok(v) => panic!("expected an error, got Ok({v:?})"),
        Err(e) => e,
    }
}

/// The message of `e` says each of `parts`.
#[track_caller]
fn says(e: &Error, parts: &[&str]) {
    let msg = e.to_string();
    for p in parts {
        assert!(msg.contains(p), "the message {msg:?} does not say {p:?}");
    }
}

#[test]
fn length_mismatch() {
    let rt = host();
    let t = rt.begin_task().unwrap();
    let x = t.from_host(&[1.0f32; 4]).unwrap();
    let mut y = t.from_host(&[2.0f32; 8]).unwrap();
    drop(t);

    let e = error(gpu::scope_on(&rt, |s| {
        let (x, y) = (&x, &mut y);
        s.spawn(move |t| k::axpy(t, 1.0, x, y));
        Ok(())
    }));
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                what: "axpy's x",
                expected: 8,
                got: 4
            }
        ),
        "{e:?}"
    );
    says(
        &e,
        &["axpy's x has 4 elements, 8 expected", "of equal length"],
    );

    let e = error(gpu::scope_on(&rt, |s| s.copy_from_host(&mut y, &[0.0; 3])));
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                expected: 8,
                got: 3,
                ..
            }
        ),
        "{e:?}"
    );
    says(&e, &["the host source", "of equal length"]);

    let mut out = vec![0.0f32; 3];
    let e = error(gpu::iter::par_map_on(
        &rt,
        &[1.0f32; 4],
        &mut out,
        PipelineOptions::default(),
        |t, a, b| t.copy(a, b),
    ));
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                what: "par_map's output",
                ..
            }
        ),
        "{e:?}"
    );
    says(&e, &["par_map's output has 3 elements, 4 expected"]);

    assert_eq!(y.to_vec().unwrap(), vec![2.0; 8]);
    assert_no_races(&rt);
}

#[test]
fn zero_chunk() {
    let rt = host();
    let mut b = rt.begin_task().unwrap().from_host(&[1.0f32; 16]).unwrap();

    let e = error(gpu::par_chunks_mut(&mut b, 0).for_each(|_, _| panic!("no chunk task may run")));
    assert!(matches!(e, Error::ZeroChunk), "{e:?}");
    says(&e, &["chunk size must be at least 1"]);

    let e = error(gpu::scope_on(&rt, |s| {
        s.par_chunks_mut(&mut b, 0, |_, _| panic!("no chunk task may run"))
    }));
    assert!(matches!(e, Error::ZeroChunk), "{e:?}");

    let mut out = vec![0.0f32; 4];
    let opts = PipelineOptions { chunk: 0, lanes: 2 };
    let e = error(gpu::iter::par_map_on(
        &rt,
        &[1.0f32; 4],
        &mut out,
        opts,
        |t, a, b| t.copy(a, b),
    ));
    assert!(matches!(e, Error::ZeroChunk), "{e:?}");

    assert_eq!(b.to_vec().unwrap(), vec![1.0; 16]);
    assert_no_races(&rt);
}

#[test]
fn a_buffer_or_event_of_another_runtime() {
    let (rt, other) = (host(), host());
    let mut mine = rt.begin_task().unwrap().from_host(&[1.0f32; 8]).unwrap();
    let mut theirs = other.begin_task().unwrap().from_host(&[2.0f32; 8]).unwrap();
    let their_event = other.event().unwrap();

    let e = error(gpu::scope_on(&rt, |s| {
        let (mine, theirs) = (&mut mine, &theirs);
        s.spawn(move |t| k::axpy(t, 1.0, theirs, mine));
        Ok(())
    }));
    assert!(
        matches!(
            e,
            Error::WrongDevice {
                what: "a kernel argument"
            }
        ),
        "{e:?}"
    );
    says(
        &e,
        &[
            "belongs to another device or runtime",
            "copy it to this device first",
        ],
    );

    let e = error(gpu::scope_on(&rt, |s| s.copy(&theirs, &mut mine)));
    assert!(
        matches!(
            e,
            Error::WrongDevice {
                what: "the source buffer"
            }
        ),
        "{e:?}"
    );

    let e = error(gpu::scope_on(&rt, |s| {
        s.host_sync_ptr(&mut theirs).map(drop)
    }));
    assert!(
        matches!(e, Error::WrongDevice { what: "the buffer" }),
        "{e:?}"
    );

    let e = error(gpu::scope_on(&rt, |s| s.record(&their_event)));
    assert!(
        matches!(e, Error::WrongDevice { what: "the event" }),
        "{e:?}"
    );
    says(&e, &["copy it to this device first"]);

    // Chunks of the other runtime's buffer, from a task of this one.
    let e = error(gpu::scope_on(&rt, |s| {
        s.par_chunks_mut(&mut theirs, 4, |t, c| k::fill(t, c, 0.0))
    }));
    assert!(matches!(e, Error::WrongDevice { .. }), "{e:?}");

    assert_eq!(mine.to_vec().unwrap(), vec![1.0; 8]);
    assert_eq!(theirs.to_vec().unwrap(), vec![2.0; 8]);
    assert_no_races(&rt);
    assert_no_races(&other);
}

/// `fill_f32` declared with signatures that disagree with its entry (and
/// [`common::FILL_SHORT`]): wrong argument lists that compile.
static MISDECLARED_U32: gpu::kernel::BuiltinModule = gpu::kernel::BuiltinModule::new(
    "misdeclared (u32)",
    k::KERNELS_PTX,
    &[gpu::kernel::BuiltinEntry::of::<(Out<f32>, u32, u64)>(
        "fill_f32",
    )],
);
/// `fill_f32` with a `u32` for its `float`.
static FILL_U32: gpu::kernel::Builtin<(Out<f32>, u32, u64)> =
    gpu::kernel::Builtin::<(Out<f32>, u32, u64)>::new(&MISDECLARED_U32, "fill_f32", |_, _, _| {});

#[test]
fn wrong_kernel_arguments() {
    let rt = host();
    let mut a = rt.begin_task().unwrap().from_host(&[1.0f32; 8]).unwrap();
    let cfg = LaunchConfig::for_elements(8, k::BLOCK);

    let e = error(gpu::scope_on(&rt, |s| {
        // SAFETY: the host implementation touches nothing, and the launch
        // is refused before anything is submitted.
        unsafe { FILL_SHORT.launch(s, cfg, (&mut a, 0.0f32)) }
    }));
    assert!(
        matches!(
            e,
            Error::BadKernelArgs {
                kernel: "fill_f32",
                ..
            }
        ),
        "{e:?}"
    );
    says(
        &e,
        &["fill_f32", "takes 3 parameters; the signature declares 2"],
    );

    let e = error(gpu::scope_on(&rt, |s| {
        // SAFETY: as above.
        unsafe { FILL_U32.launch(s, cfg, (&mut a, 0u32, 8usize)) }
    }));
    assert!(matches!(e, Error::BadKernelArgs { .. }), "{e:?}");
    says(&e, &["parameter 1 is a 4-byte float", "U32"]);

    assert_eq!(a.to_vec().unwrap(), vec![1.0; 8]);
    assert_no_races(&rt);
}

#[test]
fn host_sync_ptr_and_synchronize_during_a_capture() {
    let rt = host();
    let mut a = rt.begin_task().unwrap().from_host(&[1.0f32; 8]).unwrap();

    let e = error(gpu::scope_on(&rt, |s| {
        s.capture(|c| {
            k::add_scalar(c, &mut a, 1.0)?;
            c.host_sync_ptr(&mut a).map(drop)
        })
        .map(drop)
    }));
    assert!(
        matches!(
            e,
            Error::Capturing {
                what: "taking a host-sync pointer"
            }
        ),
        "{e:?}"
    );
    says(
        &e,
        &[
            "host-sync pointer",
            "is not allowed while",
            "do it before or after the recording",
        ],
    );

    let e = error(gpu::scope_on(&rt, |s| {
        s.spawn(|t| {
            t.capture(|c| {
                k::add_scalar(c, &mut a, 1.0)?;
                c.synchronize()
            })
            .map(drop)
        });
        Ok(())
    }));
    assert!(
        matches!(
            e,
            Error::Capturing {
                what: "synchronizing the stream"
            }
        ),
        "{e:?}"
    );
    says(
        &e,
        &[
            "synchronizing the stream",
            "do it before or after the recording",
        ],
    );

    // The captured work never ran; the runtime goes on.
    assert_eq!(a.to_vec().unwrap(), vec![1.0; 8]);
    gpu::scope_on(&rt, |s| k::add_scalar(s, &mut a, 1.0)).unwrap();
    assert_eq!(a.to_vec().unwrap(), vec![2.0; 8]);
    assert_no_races(&rt);
}

/// Host-only kernels; the PTX is checked on every backend.
static FAULTY: gpu::kernel::BuiltinModule = gpu::kernel::BuiltinModule::new(
    "faulty",
    ".version 7.0\n.target sm_70\n.visible .entry faulting_kernel(.param .u64 a)\n{\n\tret;\n}\n",
    &[gpu::kernel::BuiltinEntry::of::<(u64,)>("faulting_kernel")],
);
/// A kernel that faults (a panic in a host kernel breaks the context).
static FAULT: gpu::kernel::Builtin<(u64,)> =
    gpu::kernel::Builtin::<(u64,)>::new(&FAULTY, "faulting_kernel", |_| {
        panic!("faulting kernel (on purpose)")
    });

#[test]
fn using_the_pool_after_a_sticky_error() {
    let rt = host();
    let mut a = rt.begin_task().unwrap().from_host(&[1.0f32; 8]).unwrap();
    let e = error(gpu::scope_on(&rt, |s| {
        // SAFETY: the host kernel touches no memory (it fails on purpose).
        unsafe { FAULT.launch(s, LaunchConfig::linear(1, 1), (0u64,)) }?;
        s.synchronize()
    }));
    assert!(e.is_sticky(), "{e:?}");

    let e = error(gpu::scope_on(&rt, |s| {
        s.spawn(|t| k::fill(t, &mut a, 0.0));
        Ok(())
    }));
    assert!(matches!(e, Error::StickyDeviceError { .. }), "{e:?}");
    says(
        &e,
        &[
            "broken by an earlier error",
            "faulting kernel",
            "every call fails until the process restarts",
        ],
    );
    let e = error(gpu::par_chunks_mut(&mut a, 4).for_each(|t, c| k::fill(t, c, 0.0)));
    assert!(matches!(e, Error::StickyDeviceError { .. }), "{e:?}");
    let mut out = vec![0.0f32; 8];
    let e = error(gpu::iter::par_map_on(
        &rt,
        &[1.0f32; 8],
        &mut out,
        PipelineOptions::default(),
        |t, x, y| t.copy(x, y),
    ));
    assert!(matches!(e, Error::StickyDeviceError { .. }), "{e:?}");
}
