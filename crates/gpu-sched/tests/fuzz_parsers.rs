//! Property-based fuzzing of what the runtime reads of its users (DESIGN "Soundness": bad
//! input is a typed error, never a panic, abort or hang), through the
//! public API on the host backend:
//!
//! - the PTX checker ([`Runtime::load_ptx`]) and the CUDA C signature
//!   reader ([`Runtime::compile_cuda`] without NVRTC), with the typed
//!   kernels' signature check ([`LoadedModule::kernel`]): a random valid
//!   module rendered in many spellings must come back as exactly its
//!   kernels, each accepting exactly the signatures a reference model
//!   accepts, with the reason the reference gives; mutated and random text
//!   must give a module or a typed error;
//! - [`LaunchConfig`]'s constructors and check, and a launch with a random
//!   configuration (the verdict of a reference);
//! - the NCCL calls' argument checks (buffer counts, ranks, devices,
//!   lengths; the pairing of a group's sends and receives) on simulated
//!   devices: the verdict of a reference, and on success the values of a
//!   reference.
//!
//! Cases per property: `FUZZ_CASES` (default [`DEFAULT_CASES`]);
//! `cargo xtask fuzz` runs 10 million in release. A case that runs for
//! more than [`HANG`] ends the process (a hang is a failure here).
//! `reader_agrees_with_nvrtc_on_the_corpus` (ignored; a GPU machine)
//! checks the readers' verdicts on `tests/data/parser_corpus.txt` against
//! NVRTC and the driver's JIT.

#[allow(unused_macros, unused_imports)] // only `runtime` is used here
mod common;

use gpu_sched::nccl::{Communicator, ReduceOp};
use gpu_sched::{
    BackendChoice, Buffer, Error, In, LaunchConfig, LoadedModule, Out, Runtime, RuntimeOptions,
};
use proptest::prelude::*;
use proptest::sample::{select, Index};
use std::cell::RefCell;
use std::sync::Mutex;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------
// Cases, hangs, runtimes
// ---------------------------------------------------------------------

/// Cases per property without `FUZZ_CASES`.
const DEFAULT_CASES: u32 = 10_000;

/// Longest a case may run before the process is ended as hung (a case
/// takes well under a millisecond to a few; debug builds on a loaded
/// machine included).
const HANG: Duration = Duration::from_secs(60);

/// A loaded module per case is cached by its runtime: a runtime serves
/// this many cases, then a new one starts (memory stays bounded over
/// millions of cases).
const CASES_PER_RUNTIME: u32 = 500;

fn config() -> ProptestConfig {
    let cases = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    ProptestConfig {
        cases,
        failure_persistence: None,
        max_shrink_iters: 2048,
        // Much cheaper than the default ChaCha in debug builds, where it
        // took most of the time.
        rng_algorithm: proptest::test_runner::RngAlgorithm::XorShift,
        ..ProptestConfig::default()
    }
}

/// The cases running now: what and since when, for the watchdog.
static RUNNING: Mutex<Vec<(u64, &'static str, Instant)>> = Mutex::new(Vec::new());

/// A case in progress; the watchdog ends the process when one outlives
/// [`HANG`] (a hung case never returns, so no assertion could see it).
struct Case(u64);

impl Case {
    fn start(what: &'static str) -> Case {
        static WATCHDOG: std::sync::Once = std::sync::Once::new();
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        WATCHDOG.call_once(|| {
            std::thread::spawn(|| loop {
                std::thread::sleep(Duration::from_millis(500));
                let running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
                if let Some((_, what, _)) = running.iter().find(|(_, _, t)| t.elapsed() > HANG) {
                    eprintln!("fuzz_parsers: a case of `{what}` ran for more than {HANG:?}: hung");
                    std::process::exit(101);
                }
            });
        });
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        RUNNING
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((id, what, Instant::now()));
        Case(id)
    }
}

impl Drop for Case {
    fn drop(&mut self) {
        RUNNING
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(id, _, _)| *id != self.0);
    }
}

/// A host runtime of `devices` simulated devices.
fn host_runtime(devices: usize) -> Runtime {
    Runtime::new(RuntimeOptions {
        backend: BackendChoice::Host,
        host_devices: devices,
        ..RuntimeOptions::default()
    })
    .expect("the host backend starts")
}

thread_local! {
    /// This thread's runtime for loading modules, and the cases it served.
    static LOADER: RefCell<Option<(Runtime, u32)>> = const { RefCell::new(None) };
}

/// `f` on this thread's loading runtime (renewed every
/// [`CASES_PER_RUNTIME`] calls).
fn with_loader<R>(f: impl FnOnce(&Runtime) -> R) -> R {
    LOADER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.as_ref().is_none_or(|(_, n)| *n >= CASES_PER_RUNTIME) {
            *slot = Some((host_runtime(1), 0));
        }
        let (rt, n) = slot.as_mut().expect("set above");
        *n += 1;
        f(rt)
    })
}

/// Whether NVRTC is installed here: then `compile_cuda` compiles on the
/// host backend too, and the CUDA C reader is not what runs.
fn nvrtc_present() -> bool {
    static PRESENT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // SAFETY: loads the NVRTC library if there is one (its initialisers
    // run, as for any use of it); nothing is called through it.
    *PRESENT.get_or_init(|| unsafe { cudarc::nvrtc::sys::is_culib_present() })
}

// ---------------------------------------------------------------------
// Signatures and the reference verdict
// ---------------------------------------------------------------------

/// A typed kernel parameter, as a test value.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum K {
    /// `In<f32>`.
    PtrR,
    /// `Out<f32>`.
    PtrW,
    U64,
    U32,
    I32,
    F32,
    F64,
}

const KINDS: [K; 7] = [K::PtrR, K::PtrW, K::U64, K::U32, K::I32, K::F32, K::F64];

/// A parameter as the PTX passes it: its size, and its kind.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct P {
    bytes: usize,
    kind: T,
}

/// What a PTX parameter's type says of its bits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum T {
    /// `.uN`, `.sN`.
    Int,
    /// `.fN`.
    Float,
    /// `.bN`: untyped bits, checked by size only.
    Bits,
}

const fn int(bytes: usize) -> P {
    P {
        bytes,
        kind: T::Int,
    }
}

const fn float(bytes: usize) -> P {
    P {
        bytes,
        kind: T::Float,
    }
}

const fn bits(bytes: usize) -> P {
    P {
        bytes,
        kind: T::Bits,
    }
}

/// The reference: whether `k` may stand for `p` (pointers and 64-bit
/// integers are 8-byte integers, `u32`/`i32` 4-byte ones, ...; untyped
/// bits take any kind of their size, their bits being passed as they are).
fn fits(p: P, k: K) -> bool {
    let typed = match k {
        K::PtrR | K::PtrW | K::U64 => int(8),
        K::U32 | K::I32 => int(4),
        K::F32 => float(4),
        K::F64 => float(8),
    };
    p == typed || (p.kind == T::Bits && p.bytes == typed.bytes)
}

/// A parameter as a CUDA C source declares it, for the reference of the
/// check of signatures against sources: a pointer or not, to const or
/// not, and the pointee's type where it is a number type.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct D {
    pointer: bool,
    to_const: bool,
    ty: Option<P>,
}

/// A scalar's declaration: its type, `None` where the reader does not
/// know it (then it is not checked: it may be a pointer's typedef).
const fn scalar(ty: Option<P>) -> D {
    D {
        pointer: false,
        to_const: false,
        ty,
    }
}

/// A kernel as the tests know it: its name, what PTX passes for its
/// parameters (`None`: not checked), and how its source declares them
/// (`None`: no source, or not read).
type Kern = (String, Option<Vec<P>>, Option<Vec<D>>);

/// The typed kernels that stand for `p`, if any.
fn kinds_for(p: P) -> Vec<K> {
    KINDS.iter().copied().filter(|&k| fits(p, k)).collect()
}

/// `$body` with `$t` the Rust type of kind `$k`.
macro_rules! with_kind {
    ($k:expr, $t:ident, $body:block) => {
        match $k {
            K::PtrR => {
                type $t = In<f32>;
                $body
            }
            K::PtrW => {
                type $t = Out<f32>;
                $body
            }
            K::U64 => {
                type $t = u64;
                $body
            }
            K::U32 => {
                type $t = u32;
                $body
            }
            K::I32 => {
                type $t = i32;
                $body
            }
            K::F32 => {
                type $t = f32;
                $body
            }
            K::F64 => {
                type $t = f64;
                $body
            }
        }
    };
}

/// The most parameters of a signature the tests look kernels up with.
const MAX_SIG: usize = 3;

/// `m.kernel::<S>(name)` for the signature `sig` (1 to [`MAX_SIG`]
/// parameters), `Ok` or its error.
fn lookup(m: &LoadedModule, name: &str, sig: &[K]) -> gpu_sched::Result<()> {
    match *sig {
        [a] => with_kind!(a, A, { m.kernel::<(A,)>(name).map(drop) }),
        [a, b] => with_kind!(a, A, {
            with_kind!(b, B, { m.kernel::<(A, B)>(name).map(drop) })
        }),
        [a, b, c] => with_kind!(a, A, {
            with_kind!(b, B, {
                with_kind!(c, C, { m.kernel::<(A, B, C)>(name).map(drop) })
            })
        }),
        _ => unreachable!("signatures of 1 to {MAX_SIG} parameters"),
    }
}

/// The reference's verdict on looking up a kernel of parameters `params`
/// (`None`: not known, so not checked) with `sig`: `Ok`, or a part of the
/// message the refusal must have.
fn verdict(params: Option<&[P]>, decls: Option<&[D]>, sig: &[K]) -> Result<(), String> {
    ptx_verdict(params, sig).and_then(|()| source_verdict(decls, sig))
}

/// The verdict of the source's declarations (`None`: not checked): a
/// buffer for each pointer and a scalar for each other parameter; `In`
/// for a pointer to const, `Out` for one to non-const; the element type
/// (`f32` here) of a pointee's size and kind where that is a number type.
fn source_verdict(decls: Option<&[D]>, sig: &[K]) -> Result<(), String> {
    let Some(decls) = decls else {
        return Ok(());
    };
    if decls.len() != sig.len() {
        return Err(format!(
            "the source declares {} parameters; the signature {}",
            decls.len(),
            sig.len()
        ));
    }
    for (i, (d, &k)) in decls.iter().zip(sig).enumerate() {
        if !d.pointer && d.ty.is_none() {
            // A scalar of a type the reader does not know (maybe a pointer
            // behind a typedef): not checked.
            continue;
        }
        let buffer = matches!(k, K::PtrR | K::PtrW);
        match (d.pointer, buffer) {
            (true, false) => return Err(format!("parameter {i} is a pointer in the source")),
            (false, true) => return Err(format!("parameter {i} is not a pointer in the source")),
            (false, false) => continue,
            (true, true) => {}
        }
        if k == K::PtrW && d.to_const {
            return Err(format!("parameter {i} points to const"));
        }
        if k == K::PtrR && !d.to_const {
            return Err(format!("parameter {i} points to non-const"));
        }
        match d.ty {
            Some(p) if p != float(4) => {
                return Err(format!("parameter {i} points to {}-byte", p.bytes))
            }
            _ => {}
        }
    }
    Ok(())
}

/// The verdict of the PTX parameters alone.
fn ptx_verdict(params: Option<&[P]>, sig: &[K]) -> Result<(), String> {
    let Some(params) = params else {
        return Ok(());
    };
    if params.len() != sig.len() {
        return Err(format!(
            "takes {} parameters; the signature declares {}",
            params.len(),
            sig.len()
        ));
    }
    match params.iter().zip(sig).position(|(&p, &k)| !fits(p, k)) {
        None => Ok(()),
        Some(i) => {
            let p = params[i];
            let kind = match p.kind {
                T::Int => "integer",
                T::Float => "float",
                T::Bits => "untyped value",
            };
            Err(format!("parameter {i} is a {}-byte {kind}", p.bytes))
        }
    }
}

/// Checks the lookup of `name` in `m` with `sig` against [`verdict`].
fn check_lookup(
    m: &LoadedModule,
    (name, params, decls): (&str, Option<&[P]>, Option<&[D]>),
    sig: &[K],
    src: &str,
) -> Result<(), TestCaseError> {
    let got = lookup(m, name, sig);
    match (verdict(params, decls, sig), got) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(want), Err(e @ Error::BadKernelArgs { .. })) if e.to_string().contains(&want) => {
            Ok(())
        }
        (want, got) => Err(TestCaseError::fail(format!(
            "kernel `{name}` with {sig:?}: the reference says {want:?} (its parameters: \
             {params:?}, declared {decls:?}), the runtime {got:?}\n--- source ---\n{src}"
        ))),
    }
}

/// A signature to look a kernel up with: `MAX_SIG` kinds and a length.
fn signature() -> impl Strategy<Value = Vec<K>> {
    prop::collection::vec(select(&KINDS[..]), 1..=MAX_SIG)
}

/// The signatures a kernel of `params` is checked with: `random`, and the
/// reference's own (one of its kinds per parameter, chosen by `pick`)
/// where it has one that a lookup can use.
fn signatures_for(params: Option<&[P]>, random: &[K], pick: &Index) -> Vec<Vec<K>> {
    let mut out = vec![random.to_vec()];
    if let Some(params) = params {
        let own: Option<Vec<K>> = params
            .iter()
            .map(|&p| {
                let ks = kinds_for(p);
                (!ks.is_empty()).then(|| *pick.get(&ks))
            })
            .collect();
        if let Some(own) = own.filter(|s| (1..=MAX_SIG).contains(&s.len())) {
            out.push(own);
        }
    }
    out
}

/// Separators between tokens: whitespace, comments (holding what a
/// careless reader would take for syntax) and line breaks.
fn separators() -> impl Strategy<Value = Vec<&'static str>> {
    const SEPS: &[&str] = &[
        " ",
        " ",
        " ",
        "  ",
        "\n",
        "\t",
        "\n\t",
        " /* a, (b) [c] {d} */ ",
        "/**/",
        " // x, ) } .entry y( \n",
        "\r\n",
    ];
    prop::collection::vec(select(SEPS), 8)
}

/// Hands out separators in turn.
struct Seps<'a>(&'a [&'static str], usize);

impl Seps<'_> {
    fn next(&mut self) -> &'static str {
        self.1 += 1;
        self.0[self.1 % self.0.len()]
    }

    /// A separator or nothing (where C and PTX need none).
    fn maybe(&mut self) -> &'static str {
        let s = self.next();
        if self.1 % 3 == 0 {
            ""
        } else {
            s
        }
    }
}

// ---------------------------------------------------------------------
// CUDA C
// ---------------------------------------------------------------------

/// Scalar C types, in several spellings each, and what PTX passes for
/// them (`None`: not a plain scalar, so the kernel is not checked).
fn c_scalars() -> Vec<(&'static str, Option<P>)> {
    let long = std::mem::size_of::<std::ffi::c_long>();
    vec![
        ("float", Some(float(4))),
        ("double", Some(float(8))),
        ("int", Some(int(4))),
        ("signed", Some(int(4))),
        ("signed int", Some(int(4))),
        ("unsigned", Some(int(4))),
        ("unsigned int", Some(int(4))),
        ("int unsigned", Some(int(4))),
        ("uint32_t", Some(int(4))),
        ("int32_t", Some(int(4))),
        ("long", Some(int(long))),
        ("unsigned long", Some(int(long))),
        ("long int", Some(int(long))),
        ("long long", Some(int(8))),
        ("long long int", Some(int(8))),
        ("unsigned long long", Some(int(8))),
        ("long unsigned long int", Some(int(8))),
        ("signed long long", Some(int(8))),
        ("size_t", Some(int(8))),
        ("std::size_t", Some(int(8))),
        ("::size_t", Some(int(8))),
        ("uint64_t", Some(int(8))),
        ("int64_t", Some(int(8))),
        ("ptrdiff_t", Some(int(8))),
        ("short", Some(int(2))),
        ("unsigned short int", Some(int(2))),
        ("int16_t", Some(int(2))),
        ("char", Some(int(1))),
        ("signed char", Some(int(1))),
        ("unsigned char", Some(int(1))),
        ("bool", Some(int(1))),
        ("uint8_t", Some(int(1))),
        ("__half", None),
        ("float2", None),
        ("MyStruct", None),
        ("struct S", None),
        ("Pair<int, float>", None),
        ("Vec<float*, 3>", None),
        ("long double", None),
        ("ns::Type", None),
    ]
}

/// One C parameter: its text, and what PTX passes for it.
#[derive(Clone, Debug)]
struct CParam {
    text: String,
    want: Option<P>,
    /// How it is declared (`None`: not read, a reference).
    decl: Option<D>,
}

/// A C parameter: a scalar, a pointer or array of any type (a pointer,
/// whatever it points to), or a reference (not plain), each with random
/// qualifiers, attributes, a name or none, and a default argument.
fn c_param() -> impl Strategy<Value = CParam> {
    (
        select(c_scalars()),
        0..14u8,
        0..6u8,
        prop::option::weighted(0.85, "[a-z_][a-z0-9_]{0,6}"),
        0..8u8,
        separators(),
    )
        .prop_map(|((ty, p), style, quals, name, deco, seps)| {
            let mut s = Seps(&seps, 0);
            let name = name.map(|n| format!("p_{n}"));
            let named = name.clone().unwrap_or_default();
            let mut t = String::new();
            match deco {
                0 => t.push_str("[[maybe_unused]]"),
                1 => t.push_str("__attribute__((unused))"),
                _ => {}
            }
            t.push_str(s.maybe());
            let lead = match quals % 3 {
                1 => "const",
                2 => "volatile",
                _ => "",
            };
            let pointee = |to_const: bool, ty: Option<P>| D {
                pointer: true,
                to_const,
                ty,
            };
            let (text, want, decl) = match style {
                // Scalars.
                0..=4 => {
                    let grid = if quals == 4 {
                        "__grid_constant__ const"
                    } else {
                        lead
                    };
                    let default = if style == 3 && name.is_some() {
                        " = 4"
                    } else {
                        ""
                    };
                    // `__grid_constant__`: passed in the parameter space
                    // as untyped bytes (`.b8 [N]`), checked by size only.
                    let p = if quals == 4 {
                        p.map(|p| bits(p.bytes))
                    } else {
                        p
                    };
                    (
                        format!("{grid}{}{ty}{}{named}{default}", s.next(), s.next()),
                        p,
                        scalar(p),
                    )
                }
                // `T* p`, `T *p`, `T * const p`, `const T* __restrict__ p`, ...
                // `__grid_constant__ T* const p`: untyped bytes too.
                5..=9 => {
                    let grid = style == 8 && quals == 4;
                    let (lead, after) = if grid {
                        ("__grid_constant__", "const")
                    } else {
                        let after = ["", "const", "__restrict__", "restrict", "volatile"]
                            [usize::from(quals) % 5];
                        (lead, after)
                    };
                    let stars = if style == 9 { "**" } else { "*" };
                    // `const` before the only `*` points to const; before
                    // the first of two, to a pointer to const (non-const
                    // itself), whose pointee is a pointer.
                    let decl = if style == 9 {
                        pointee(false, None)
                    } else {
                        pointee(lead == "const" && !grid, p)
                    };
                    (
                        format!(
                            "{lead}{}{ty}{}{stars}{}{after}{}{named}",
                            s.next(),
                            s.maybe(),
                            s.maybe(),
                            s.next()
                        ),
                        Some(if grid { bits(8) } else { int(8) }),
                        decl,
                    )
                }
                // `T p[]`, `T p[16]`, `T p[N]`, `T (*p)[4]`: pointers too.
                10..=13 => {
                    let decl = match style {
                        10 => format!("{named}{}[]", s.maybe()),
                        11 => format!("{named}{}[{}16{}]", s.maybe(), s.maybe(), s.maybe()),
                        12 => format!("{named}[N]"),
                        _ => format!("({}*{}{named}){}[4]", s.maybe(), s.maybe(), s.maybe()),
                    };
                    (
                        format!("{lead}{}{ty}{}{decl}", s.next(), s.next()),
                        Some(int(8)),
                        pointee(lead == "const", p),
                    )
                }
                _ => unreachable!(),
            };
            t.push_str(&text);
            // A reference now and then: not a plain parameter.
            if style == 0 && quals == 5 {
                return CParam {
                    text: format!("{ty}&{}{named}", s.next()),
                    want: None,
                    decl: None,
                };
            }
            CParam {
                text: format!("{}{t}{}", s.maybe(), s.maybe()),
                want,
                decl: Some(decl),
            }
        })
}

/// One `extern "C" __global__` kernel of a generated source.
#[derive(Clone, Debug)]
struct CKernel {
    params: Vec<CParam>,
    /// How its declaration is spelled.
    form: u8,
    /// Which body it has.
    body: u8,
    /// Whether `void` spells an empty list.
    void: bool,
}

impl CKernel {
    /// What PTX passes for its parameters (`None` where one is not plain).
    fn want(&self) -> Option<Vec<P>> {
        self.params.iter().map(|p| p.want).collect()
    }

    /// How its parameters are declared (`None` where one is not read).
    fn decls(&self) -> Option<Vec<D>> {
        self.params.iter().map(|p| p.decl).collect()
    }
}

fn c_kernel() -> impl Strategy<Value = CKernel> {
    prop_oneof![
        3 => prop::collection::vec(c_param(), 0..=MAX_SIG),
        1 => prop::collection::vec(c_param(), 4..12),
    ]
    .prop_flat_map(|params| (Just(params), 0..8u8, 0..6u8, any::<bool>()))
    .prop_map(|(params, form, body, void)| CKernel {
        params,
        form,
        body,
        void,
    })
}

/// Bodies with braces, parentheses, literals and comments that a reader
/// must not take for declarations.
const C_BODIES: &[&str] = &[
    "{}",
    "{ if (threadIdx.x) { return; } }",
    "{ const char* s = \"}{ ) __global__ void x(int) {} // \"; (void)s; }",
    "{ int a[3] = {1, 2, 3}; /* } __global__ */ (void)a; }",
    "{ char c = '}'; char d = '\\''; (void)c; (void)d; }",
    "{\n#if 0\n}\n#endif\n}",
];

/// Things around the kernels that are not kernels CUDA finds by name.
const C_DISTRACTORS: &[&str] = &[
    "__global__ void mangled(float* y) {}\n",
    "// extern \"C\" __global__ void commented(int n) {}\n",
    "/* extern \"C\" __global__ void commented2(int n) {} */\n",
    "template <typename T> __global__ void templ(T* y, int n) {}\n",
    "extern \"C\" { template <typename T> __global__ void templ_c(T* y) {} }\n",
    "#define DEF extern \"C\" __global__ void macro_k(int n) {}\n",
    "#define LONG_MACRO(x) \\\n  extern \"C\" __global__ void cont(int n) {}\n",
    "static __device__ float helper(float x, int n) { return x * n; }\n",
    "extern \"C\" __device__ int dev_fn(int (*f)(int), int x) { return f(x); }\n",
    "struct S { int a, b; };\n",
    "extern \"C++\" __global__ void cpp(int n) {}\n",
    "const char* text = \"extern \\\"C\\\" __global__ void in_string(int n) {}\";\n",
    "#include <cuda_fp16.h>\n",
];

/// A generated CUDA C source: its text and its kernels (names and
/// parameters, in order).
#[derive(Clone, Debug)]
struct CSource {
    text: String,
    kernels: Vec<Kern>,
}

fn c_source() -> impl Strategy<Value = CSource> {
    (
        prop::collection::vec(("[a-zA-Z0-9_]{0,8}", c_kernel()), 0..4),
        prop::collection::vec(prop::option::of(select(C_DISTRACTORS)), 5),
        separators(),
    )
        .prop_map(|(kernels, distractors, seps)| {
            let mut s = Seps(&seps, 0);
            let mut text = String::new();
            let mut later = String::new();
            let mut out = Vec::new();
            for (i, (suffix, k)) in kernels.iter().enumerate() {
                if let Some(d) = distractors[i % distractors.len()] {
                    text.push_str(d);
                }
                let name = format!("k{i}{suffix}");
                let list = if k.params.is_empty() && k.void {
                    "void".to_owned()
                } else {
                    k.params
                        .iter()
                        .map(|p| p.text.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                };
                let body = C_BODIES[usize::from(k.body) % C_BODIES.len()];
                let head = match k.form {
                    0 => format!("extern \"C\" __global__ void {name}"),
                    1 => format!("extern \"C\" __global__ void __launch_bounds__(256, 2) {name}"),
                    2 => format!(
                        "extern{}\"C\"{}__global__{}__launch_bounds__( (128) ){}void{}{name}",
                        s.maybe(),
                        s.next(),
                        s.next(),
                        s.next(),
                        s.next()
                    ),
                    3 => format!("extern \"C\" __global__ __attribute__((noinline)) void {name}"),
                    4 => format!("extern \"C\"\n__global__\nvoid\n{name}\n"),
                    _ => format!("__global__ void {name}"),
                };
                let decl = format!("{head}{}({list}){}", s.maybe(), s.maybe());
                match k.form {
                    // In an `extern "C"` block.
                    5 => text.push_str(&format!("extern \"C\" {{\n{decl}{body}\n}}\n")),
                    // Declared, then defined after the other kernels.
                    6 => {
                        text.push_str(&format!("extern \"C\" {decl};\n"));
                        later.push_str(&format!("extern \"C\" {decl}{body}\n"));
                    }
                    // Declared in a block, defined outside it.
                    7 => {
                        text.push_str(&format!("extern \"C\" {{ {decl}; }}\n"));
                        later.push_str(&format!("extern \"C\" {decl}{body}\n"));
                    }
                    _ => text.push_str(&format!("{decl}{body}\n")),
                }
                out.push((name, k.want(), k.decls()));
            }
            for d in distractors.iter().skip(kernels.len()).flatten() {
                text.push_str(d);
            }
            text.push_str(&later);
            CSource { text, kernels: out }
        })
}

// ---------------------------------------------------------------------
// PTX
// ---------------------------------------------------------------------

/// PTX parameter spellings (`{n}`: the name) and what they pass: `.uN`
/// and `.sN` integers, `.fN` floats, `.bN` untyped bits; `.ptr` (after any
/// type, as the JIT takes it) keeps the type.
const PTX_PARAMS: &[(&str, P)] = &[
    (".u64 {n}", int(8)),
    (".s64 {n}", int(8)),
    (".b64 {n}", bits(8)),
    (".u64 .ptr .global .align 8 {n}", int(8)),
    (".u64 .ptr .align 16 {n}", int(8)),
    (".u64 .ptr .const {n}", int(8)),
    (".b64 .ptr .global {n}", bits(8)),
    (".align 8 .b8 {n}[8]", bits(8)),
    (".b32 {n}[2]", bits(8)),
    (".u32 {n}[2]", int(8)),
    (".u32 {n}", int(4)),
    (".s32 {n}", int(4)),
    (".b32 {n}", bits(4)),
    (".align 4 .b8 {n}[4]", bits(4)),
    (".u16 {n}[2]", int(4)),
    (".b16 {n}[2]", bits(4)),
    (".f32 {n}", float(4)),
    (".f32 .ptr {n}", float(4)),
    (".f64 .ptr .global .align 8 {n}", float(8)),
    (".u32 .ptr .shared {n}", int(4)),
    (".f64 {n}", float(8)),
    (".align 8 .f64 {n}", float(8)),
    (".f32 {n}[2]", float(8)),
    (".u8 {n}", int(1)),
    (".s16 {n}", int(2)),
    (".b8 {n}[12]", bits(12)),
    (".align 16 .b8 {n}[16]", bits(16)),
    (".b8 {n}[0]", bits(0)),
];

/// Bodies of entries: registers, loads of the parameters, nested blocks,
/// brackets and parentheses.
const PTX_BODIES: &[&str] = &[
    "{\n\tret;\n}",
    "{\n\t.reg .b64 %rd<3>;\n\tmov.u64 %rd1, 0;\n\t{\n\t\t.reg .pred %p;\n\t}\n\tret;\n}",
    "{\n\t.reg .b32 %r<2>;\n\tmov.u32 %r1, %tid.x;\n$L__done:\n\tret;\n}",
    "{ .local .align 4 .b8 buf[8]; ret; }",
];

/// Directives and functions around the entries.
const PTX_DISTRACTORS: &[&str] = &[
    ".global .align 4 .b8 data[16];\n",
    ".extern .func (.param .b32 r) vprintf (.param .b64 f, .param .b64 a);\n",
    ".func (.param .b32 r) helper(.param .b32 a, .param .f32 b)\n{\n\tret;\n}\n",
    "// .entry commented(.param .u64 x)\n",
    "/* .visible .entry commented2(\n.param .u32 y\n) { ret; } */\n",
    ".file 1 \"/src//kernels.cu\"\n",
    ".const .align 8 .b8 table[64];\n",
];

/// A generated PTX module: its text and its entries (names and
/// parameters, in order).
#[derive(Clone, Debug)]
struct PtxModule {
    text: String,
    kernels: Vec<Kern>,
}

/// One PTX entry: its name suffix, parameters (spellings), form and body.
type PtxEntry = (String, Vec<(&'static str, P)>, u8, u8);

fn ptx_entry() -> impl Strategy<Value = PtxEntry> {
    (
        "[a-zA-Z0-9_$]{0,8}",
        prop_oneof![
            3 => prop::collection::vec(select(PTX_PARAMS), 0..=MAX_SIG),
            1 => prop::collection::vec(select(PTX_PARAMS), 4..14),
        ],
        0..8u8,
        0..8u8,
    )
}

fn ptx_module() -> impl Strategy<Value = PtxModule> {
    (
        prop::collection::vec(ptx_entry(), 0..4),
        prop::collection::vec(prop::option::of(select(PTX_DISTRACTORS)), 5),
        0..4u8,
        separators(),
    )
        .prop_map(|(entries, distractors, header, seps)| {
            let mut s = Seps(&seps, 0);
            let mut text = match header {
                0 => ".version 8.0\n.target sm_70\n.address_size 64\n".to_owned(),
                1 => {
                    "//\n// Generated\n//\n\n.version 7.0\n.target sm_75, debug\n.address_size 64\n"
                        .to_owned()
                }
                2 => "/* header */ .version\t8.3 .target sm_90a .address_size 64\n".to_owned(),
                _ => ".target sm_80\n.version 8.0\n".to_owned(),
            };
            let mut out = Vec::new();
            for (i, (suffix, params, form, body)) in entries.iter().enumerate() {
                if let Some(d) = distractors[i % distractors.len()] {
                    text.push_str(d);
                }
                let name = format!("k{i}{suffix}");
                let list: Vec<String> = params
                    .iter()
                    .enumerate()
                    .map(|(j, (spelling, _))| {
                        let p = spelling
                            .replace("{n}", &format!("{name}_param_{j}"))
                            .replace(' ', s.next());
                        format!("{}.param{}{p}{}", s.maybe(), s.next(), s.maybe())
                    })
                    .collect();
                let visibility = [".visible ", ".weak ", ""][usize::from(*form) % 3];
                let list = if params.is_empty() && form % 2 == 1 {
                    // PTX's other form: no parameter list at all.
                    String::new()
                } else {
                    format!("{}({}){}", s.maybe(), list.join(","), s.maybe())
                };
                let tuning = match form {
                    4 => "\n.maxntid 256, 1, 1\n",
                    5 => "\n.reqntid 64\n.minnctapersm 2\n",
                    _ => "\n",
                };
                let body = PTX_BODIES[usize::from(*body) % PTX_BODIES.len()];
                text.push_str(&format!(
                    "{visibility}.entry{}{name}{list}{tuning}{body}\n",
                    s.next()
                ));
                out.push((name, Some(params.iter().map(|(_, p)| *p).collect()), None));
            }
            for d in distractors.iter().skip(entries.len()).flatten() {
                text.push_str(d);
            }
            PtxModule { text, kernels: out }
        })
}

// ---------------------------------------------------------------------
// Valid modules: exactly their kernels, exactly their verdicts
// ---------------------------------------------------------------------

/// Checks a loaded module against the kernels it was generated with: the
/// names in order, whether it is checked, and each kernel's verdict on
/// the signatures [`signatures_for`] gives, and an unknown name.
fn check_module(
    m: &LoadedModule,
    kernels: &[Kern],
    random: &[K],
    pick: &Index,
    src: &str,
) -> Result<(), TestCaseError> {
    let names: Vec<&str> = kernels.iter().map(|(n, _, _)| n.as_str()).collect();
    prop_assert_eq!(m.kernel_names(), names, "the kernels of\n{}", src);
    let checked = kernels.iter().all(|(_, p, _)| p.is_some());
    prop_assert_eq!(m.is_checked(), checked, "is_checked of\n{}", src);
    for (name, params, decls) in kernels {
        for sig in signatures_for(params.as_deref(), random, pick) {
            check_lookup(m, (name, params.as_deref(), decls.as_deref()), &sig, src)?;
        }
    }
    let missing = lookup(m, "no_such_kernel", random);
    prop_assert!(
        matches!(missing, Err(Error::NoSuchKernel(_))),
        "an unknown name: {:?}",
        missing
    );
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    /// A random PTX module, spelled at random: loaded, with exactly its
    /// entries, each accepting exactly the signatures the reference does.
    #[test]
    fn ptx_modules_read_back_exactly(
        m in ptx_module(), random in signature(), pick in any::<Index>(),
    ) {
        let _case = Case::start("ptx_modules_read_back_exactly");
        with_loader(|rt| {
            let loaded = rt.load_ptx(m.text.clone()).map_err(|e| {
                TestCaseError::fail(format!("refused: {e}\n--- PTX ---\n{}", m.text))
            })?;
            check_module(&loaded, &m.kernels, &random, &pick, &m.text)
        })?;
    }

    /// A random CUDA C source, spelled at random, read by the host
    /// backend without NVRTC: exactly its `extern "C"` kernels, each
    /// checked (when every parameter is plain) exactly as the reference.
    #[test]
    fn cuda_c_signatures_read_back_exactly(
        src in c_source(), random in signature(), pick in any::<Index>(),
    ) {
        if nvrtc_present() {
            // `compile_cuda` compiles here: the reader does not run.
            return Ok(());
        }
        let _case = Case::start("cuda_c_signatures_read_back_exactly");
        with_loader(|rt| {
            let loaded = rt.compile_cuda(&src.text, &[]).map_err(|e| {
                TestCaseError::fail(format!("refused: {e}\n--- source ---\n{}", src.text))
            })?;
            prop_assert!(!loaded.is_compiled());
            check_module(&loaded, &src.kernels, &random, &pick, &src.text)
        })?;
    }
}

// ---------------------------------------------------------------------
// Mutated and random text: a module or a typed error, never a panic
// ---------------------------------------------------------------------

/// Pieces of syntax that mutations insert.
const TOKENS: &[&str] = &[
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    ",",
    ";",
    "<",
    ">",
    "*",
    "&",
    "=",
    "#",
    "\\",
    "\"",
    "'",
    "\n",
    "/*",
    "*/",
    "//",
    ".entry",
    ".param",
    ".u64",
    ".b8",
    ".align",
    ".ptr",
    ".version",
    ".target",
    "__global__",
    "extern \"C\"",
    "extern",
    "\"C\"",
    "template",
    "void",
    "int",
    "unsigned",
    "[99999999999999999999]",
    "[18446744073709551615]",
    "__launch_bounds__(",
    "__attribute__((",
    "[[",
    "]]",
    "é",
    "\u{0}",
    "\u{feff}",
    "𝔘",
    "%r1",
    "$L",
    " ",
];

/// One change to a text, at a place given as a fraction of its length.
#[derive(Clone, Debug)]
enum Mutation {
    Delete(Index, usize),
    Insert(Index, &'static str),
    Duplicate(Index, usize),
    Truncate(Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        1 => (any::<Index>(), 1..24usize).prop_map(|(i, n)| Mutation::Delete(i, n)),
        3 => (any::<Index>(), select(TOKENS)).prop_map(|(i, t)| Mutation::Insert(i, t)),
        1 => (any::<Index>(), 1..40usize).prop_map(|(i, n)| Mutation::Duplicate(i, n)),
        1 => any::<Index>().prop_map(Mutation::Truncate),
    ]
}

/// `text` with `mutations` applied (on characters, so any text results).
fn mutate(text: &str, mutations: &[Mutation]) -> String {
    let mut c: Vec<char> = text.chars().collect();
    for m in mutations {
        let at = |i: &Index, len: usize| if len == 0 { 0 } else { i.index(len + 1) };
        match m {
            Mutation::Delete(i, n) => {
                let a = at(i, c.len()).min(c.len());
                let b = (a + n).min(c.len());
                c.drain(a..b);
            }
            Mutation::Insert(i, t) => {
                let a = at(i, c.len()).min(c.len());
                c.splice(a..a, t.chars());
            }
            Mutation::Duplicate(i, n) => {
                let a = at(i, c.len()).min(c.len());
                let b = (a + n).min(c.len());
                let copy: Vec<char> = c[a..b].to_vec();
                c.splice(b..b, copy);
            }
            Mutation::Truncate(i) => {
                let a = at(i, c.len()).min(c.len());
                c.truncate(a);
            }
        }
    }
    c.into_iter().collect()
}

/// Text to feed both readers: a valid module mutated, a soup of tokens,
/// or anything at all.
fn hostile_text() -> impl Strategy<Value = String> {
    let mutated = prop_oneof![
        ptx_module().prop_map(|m| m.text),
        c_source().prop_map(|s| s.text),
    ];
    prop_oneof![
        4 => (mutated, prop::collection::vec(mutation(), 1..8))
            .prop_map(|(text, ms)| mutate(&text, &ms)),
        2 => prop::collection::vec(select(TOKENS), 0..80).prop_map(|t| t.join("")),
        1 => prop::collection::vec(select(TOKENS), 0..40)
            .prop_map(|t| format!(".version 8.0\n.target sm_70\n.entry k({})\n{{}}", t.join(" "))),
        1 => any::<String>(),
    ]
}

/// Every kernel of a module that loaded, looked up with `sig`: found (and
/// accepted or refused with a reason), and an unknown name not found.
fn look_up_all(m: &LoadedModule, sig: &[K]) -> Result<(), TestCaseError> {
    for name in m.kernel_names() {
        match lookup(m, name, sig) {
            Ok(()) | Err(Error::BadKernelArgs { .. }) => {}
            Err(e) => return Err(TestCaseError::fail(format!("kernel `{name}`: {e:?}"))),
        }
    }
    let missing = lookup(m, "\u{1}not a name", sig);
    prop_assert!(
        matches!(missing, Err(Error::NoSuchKernel(_))),
        "{:?}",
        missing
    );
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    /// Hostile text as PTX: a module whose every entry can be looked up,
    /// or `BadPtx`; never a panic.
    #[test]
    fn hostile_ptx_is_a_module_or_bad_ptx(text in hostile_text(), sig in signature()) {
        let _case = Case::start("hostile_ptx_is_a_module_or_bad_ptx");
        with_loader(|rt| match rt.load_ptx(text.clone()) {
            Ok(m) => look_up_all(&m, &sig),
            Err(Error::BadPtx { problem }) => {
                prop_assert!(!problem.is_empty());
                Ok(())
            }
            Err(e) => Err(TestCaseError::fail(format!("{e:?} for {text:?}"))),
        })?;
    }

    /// Hostile text as CUDA C, read without NVRTC: a module whose every
    /// kernel can be looked up; never a panic.
    #[test]
    fn hostile_cuda_c_is_read_without_panicking(text in hostile_text(), sig in signature()) {
        if nvrtc_present() {
            return Ok(());
        }
        let _case = Case::start("hostile_cuda_c_is_read_without_panicking");
        with_loader(|rt| match rt.compile_cuda(&text, &[]) {
            Ok(m) => look_up_all(&m, &sig),
            Err(e) => Err(TestCaseError::fail(format!("{e:?} for {text:?}"))),
        })?;
    }
}

// ---------------------------------------------------------------------
// Launch configurations
// ---------------------------------------------------------------------

/// The reference: whether CUDA takes `cfg` (every dimension at least 1;
/// at most 1024 threads a block, (1024, 1024, 64) a dimension; a grid of
/// at most (2^31 - 1, 65535, 65535); at most 48 KiB of dynamic shared
/// memory).
fn launchable(cfg: &LaunchConfig) -> bool {
    let [gx, gy, gz] = cfg.grid.map(u64::from);
    let [bx, by, bz] = cfg.block.map(u64::from);
    gx >= 1
        && gy >= 1
        && gz >= 1
        && (1..=1024).contains(&bx)
        && (1..=1024).contains(&by)
        && (1..=64).contains(&bz)
        && bx * by * bz <= 1024
        && gx < 1 << 31
        && gy <= 65_535
        && gz <= 65_535
        && cfg.shared_mem_bytes <= 48 * 1024
}

/// A dimension: small, near a limit, or anything.
fn dim() -> impl Strategy<Value = u32> {
    prop_oneof![
        0..4u32,
        0..2048u32,
        select(vec![
            63,
            64,
            65,
            1023,
            1024,
            1025,
            65_535,
            65_536,
            (1 << 31) - 1,
            1 << 31
        ]),
        any::<u32>(),
    ]
}

fn launch_config() -> impl Strategy<Value = LaunchConfig> {
    ([dim(), dim(), dim()], [dim(), dim(), dim()], dim()).prop_map(|(grid, block, smem)| {
        LaunchConfig {
            grid,
            block,
            shared_mem_bytes: smem,
        }
    })
}

/// A count of elements: small, near a limit, or anything.
fn count() -> impl Strategy<Value = usize> {
    prop_oneof![
        0..3000usize,
        select(vec![
            65_535 * 8 * 256,
            usize::MAX / 2,
            usize::MAX - 1,
            usize::MAX
        ]),
        any::<usize>(),
    ]
}

/// A PTX module of one entry that takes nothing and does nothing.
const NOOP_PTX: &str = ".version 7.0\n.target sm_70\n.address_size 64\n\
                        .visible .entry noop(.param .u64 n)\n{\n\tret;\n}\n";

proptest! {
    #![proptest_config(config())]

    /// The constructors never panic, keep the block asked for, cover the
    /// elements (up to the cap of 65 535 * 8 blocks) and give a
    /// configuration the check takes exactly when the reference does.
    #[test]
    fn launch_configs_are_built_and_checked_as_the_reference(
        n in count(), ny in count(), block in dim(), by in dim(), cfg in launch_config(),
    ) {
        let _case = Case::start("launch_configs_are_built_and_checked_as_the_reference");
        let e = LaunchConfig::for_elements(n, block);
        prop_assert_eq!(e.block, [block, 1, 1]);
        prop_assert_eq!(e.shared_mem_bytes, 0);
        let g = u64::from(e.grid[0]);
        prop_assert!((1..=65_535 * 8).contains(&g), "{:?}", e);
        let covered = u128::from(g) * u128::from(block.max(1));
        prop_assert!(covered >= (n as u128).min(65_535 * 8 * u128::from(block.max(1))));
        prop_assert_eq!(e.check().is_ok(), launchable(&e), "{:?}", e);
        prop_assert_eq!(e.check().is_ok(), (1..=1024).contains(&block));

        let g2 = LaunchConfig::for_grid_2d(n, ny, block, by);
        prop_assert_eq!(g2.block, [block, by, 1]);
        prop_assert!(g2.grid[0] >= 1 && g2.grid[1] >= 1 && g2.grid[2] == 1, "{:?}", g2);
        prop_assert_eq!(g2.check().is_ok(), launchable(&g2), "{:?}", g2);

        let l = LaunchConfig::linear(block, by);
        prop_assert_eq!(l.check().is_ok(), launchable(&l), "{:?}", l);
        prop_assert_eq!(cfg.check().is_ok(), launchable(&cfg), "{:?}", cfg);
        if let Err(why) = cfg.check() {
            prop_assert!(!why.is_empty());
        }
    }

    /// A launch with a random configuration on the host backend: `Ok`
    /// exactly when the reference takes it, `BadLaunch` otherwise.
    #[test]
    fn launches_are_refused_exactly_as_the_reference(
        cfg in launch_config(), n in count(), block in dim(), built in any::<bool>(),
    ) {
        let _case = Case::start("launches_are_refused_exactly_as_the_reference");
        let cfg = if built { LaunchConfig::for_elements(n, block) } else { cfg };
        with_loader(|rt| {
            let k = rt
                .load_ptx(NOOP_PTX)
                .and_then(|m| m.kernel::<(u64,)>("noop"))
                .expect("the no-op kernel loads")
                .with_host(|_n: u64| {});
            let t = rt.begin_task().expect("a task");
            // SAFETY: the kernel and its host implementation touch no
            // memory, whatever the configuration.
            let r = unsafe { k.launch(&t, cfg, (0u64,)) };
            match (launchable(&cfg), r) {
                (true, Ok(())) | (false, Err(Error::BadLaunch { .. })) => {}
                (want, got) => {
                    return Err(TestCaseError::fail(format!(
                        "{cfg:?}: the reference says launchable={want}, the launch {got:?}"
                    )))
                }
            }
            t.synchronize().map_err(|e| TestCaseError::fail(format!("{e}")))?;
            Ok(())
        })?;
    }
}

// ---------------------------------------------------------------------
// NCCL's argument checks, on simulated devices
// ---------------------------------------------------------------------

/// The most simulated devices of a communicator here.
const MAX_DEVICES: usize = 3;

thread_local! {
    /// Per device count: a runtime of that many host devices and its
    /// communicator; and a runtime of another group (its buffers are of
    /// no device of the communicators).
    static COMMS: RefCell<Vec<(Runtime, Communicator)>> = const { RefCell::new(Vec::new()) };
    static FOREIGN: Runtime = host_runtime(1);
}

/// `f` with a communicator over `n` host devices, and the runtime of
/// another group.
fn with_comm<R>(n: usize, f: impl FnOnce(&Runtime, &Communicator, &Runtime) -> R) -> R {
    COMMS.with(|cell| {
        let mut comms = cell.borrow_mut();
        while comms.len() < n {
            let rt = host_runtime(comms.len() + 1);
            let comm = Communicator::all_devices(&rt).expect("a host communicator");
            comms.push((rt, comm));
        }
        let (rt, comm) = &comms[n - 1];
        FOREIGN.with(|foreign| f(rt, comm, foreign))
    })
}

/// A collective and its root (broadcast).
#[derive(Clone, Copy, Debug)]
enum Coll {
    AllReduce,
    AllReduceInto,
    Broadcast(usize),
    ReduceScatter,
    AllGather,
}

/// A buffer of a call: a wrong length instead of the right one, and
/// whether it is on a wrong device.
#[derive(Clone, Copy, Debug)]
struct BufSpec {
    wrong_len: Option<usize>,
    wrong_device: bool,
}

fn buf_spec() -> impl Strategy<Value = BufSpec> {
    (
        prop::option::weighted(0.1, 0..13usize),
        prop::bool::weighted(0.05),
    )
        .prop_map(|(wrong_len, wrong_device)| BufSpec {
            wrong_len,
            wrong_device,
        })
}

/// A list of buffers: one per rank, or (now and then) another number.
fn buf_specs(n: usize) -> impl Strategy<Value = Vec<BufSpec>> {
    prop_oneof![
        8 => prop::collection::vec(buf_spec(), n),
        1 => prop::collection::vec(buf_spec(), 0..=n + 1),
    ]
}

#[derive(Clone, Debug)]
struct CollCase {
    devices: usize,
    coll: Coll,
    count: usize,
    send: Vec<BufSpec>,
    recv: Vec<BufSpec>,
    op: ReduceOp,
    seed: u32,
}

fn coll_case() -> impl Strategy<Value = CollCase> {
    (1..=MAX_DEVICES).prop_flat_map(|n| {
        let coll = prop_oneof![
            Just(Coll::AllReduce),
            Just(Coll::AllReduceInto),
            (0..=n).prop_map(Coll::Broadcast),
            Just(Coll::ReduceScatter),
            Just(Coll::AllGather),
        ];
        let op = select(vec![
            ReduceOp::Sum,
            ReduceOp::Prod,
            ReduceOp::Max,
            ReduceOp::Min,
        ]);
        (
            coll,
            0..6usize,
            buf_specs(n),
            buf_specs(n),
            op,
            any::<u32>(),
        )
            .prop_map(move |(coll, count, send, recv, op, seed)| CollCase {
                devices: n,
                coll,
                count,
                send,
                recv,
                op,
                seed,
            })
    })
}

/// An error kind, for the reference.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    BadCollective,
    WrongDevice,
    LengthMismatch,
}

fn kind_of(e: &Error) -> Option<Kind> {
    match e {
        Error::BadCollective { .. } => Some(Kind::BadCollective),
        Error::WrongDevice { .. } => Some(Kind::WrongDevice),
        Error::LengthMismatch { .. } => Some(Kind::LengthMismatch),
        _ => None,
    }
}

/// Rank `r`'s element `i` of a case seeded `seed`.
fn value(seed: u32, r: usize, i: usize) -> u32 {
    (seed.wrapping_add(r as u32 * 31).wrapping_add(i as u32 * 7)) % 13 + 1
}

fn reduce(op: ReduceOp, vals: impl Iterator<Item = u32>) -> u32 {
    vals.reduce(|a, b| match op {
        ReduceOp::Sum => a.wrapping_add(b),
        ReduceOp::Prod => a.wrapping_mul(b),
        ReduceOp::Max => a.max(b),
        ReduceOp::Min => a.min(b),
    })
    .expect("at least one rank")
}

/// Synchronizes every device of `rt`'s group and checks for races.
fn settle(rt: &Runtime, n: usize) -> Result<(), TestCaseError> {
    for d in 0..n {
        let dev = rt
            .device(d)
            .map_err(|e| TestCaseError::fail(format!("{e}")))?;
        dev.synchronize()
            .map_err(|e| TestCaseError::fail(format!("synchronize: {e}")))?;
        let races = dev.races();
        prop_assert!(races.is_empty(), "races: {:?}", races);
    }
    Ok(())
}

/// A list of a call's buffers: as generated, as made, and how many times
/// the call's count each holds.
type BufList<'a> = (&'a [BufSpec], &'a [Buffer<u32>], usize);

/// Runs a collective case; the reference's verdict, and on success its
/// values.
fn run_collective(c: &CollCase) -> Result<(), TestCaseError> {
    let n = c.devices;
    let fail = |e: Error| TestCaseError::fail(format!("{e}"));
    with_comm(n, |rt, comm, foreign| {
        // The right lengths: (send or in place, receive).
        let (ts, tr) = match c.coll {
            Coll::ReduceScatter => (n, 1),
            Coll::AllGather => (1, n),
            _ => (1, 1),
        };
        let make =
            |specs: &[BufSpec], times: usize, data: bool| -> gpu_sched::Result<Vec<Buffer<u32>>> {
                specs
                    .iter()
                    .enumerate()
                    .map(|(local, s)| {
                        let len = s.wrong_len.unwrap_or(c.count * times);
                        let dev = match (s.wrong_device, n) {
                            (true, 1) => foreign.clone(),
                            (true, _) => rt.device((local + 1) % n)?,
                            (false, _) => rt.device(local % n)?,
                        };
                        let v: Vec<u32> = (0..len)
                            .map(|i| if data { value(c.seed, local, i) } else { 0 })
                            .collect();
                        dev.begin_task()?.from_host(&v)
                    })
                    .collect()
            };
        let in_place = matches!(c.coll, Coll::AllReduce | Coll::Broadcast(_));
        let mut send = make(&c.send, ts, true).map_err(fail)?;
        let mut recv = if in_place {
            Vec::new()
        } else {
            make(&c.recv, tr, false).map_err(fail)?
        };

        // The reference's verdict: the kinds of error the call may give.
        let mut bad = Vec::new();
        if let Coll::Broadcast(root) = c.coll {
            if root >= n {
                bad.push(Kind::BadCollective);
            }
        }
        let lists: Vec<BufList<'_>> = if in_place {
            vec![(&c.send, &send, 1)]
        } else {
            vec![(&c.send, &send, ts), (&c.recv, &recv, tr)]
        };
        if lists.iter().any(|(specs, _, _)| specs.len() != n) {
            bad.push(Kind::BadCollective);
        } else {
            let unit = send[0].len() / ts;
            for (specs, bufs, times) in &lists {
                for (s, b) in specs.iter().zip(bufs.iter()) {
                    if s.wrong_device {
                        bad.push(Kind::WrongDevice);
                    }
                    if b.len() != unit * times {
                        bad.push(Kind::LengthMismatch);
                    }
                }
            }
        }

        let r = {
            let sends: Vec<&Buffer<u32>> = send.iter().collect();
            let mut recvs: Vec<&mut Buffer<u32>> = recv.iter_mut().collect();
            match c.coll {
                Coll::AllReduce => {
                    let mut b: Vec<&mut Buffer<u32>> = send.iter_mut().collect();
                    comm.all_reduce(&mut b, c.op)
                }
                Coll::Broadcast(root) => {
                    let mut b: Vec<&mut Buffer<u32>> = send.iter_mut().collect();
                    comm.broadcast(&mut b, root)
                }
                Coll::AllReduceInto => comm.all_reduce_into(&sends, &mut recvs, c.op),
                Coll::ReduceScatter => comm.reduce_scatter(&sends, &mut recvs, c.op),
                Coll::AllGather => comm.all_gather(&sends, &mut recvs),
            }
        };
        match r {
            Ok(()) => {
                prop_assert!(
                    bad.is_empty(),
                    "{:?} went through; the reference says {:?}",
                    c,
                    bad
                );
                let out = if in_place { &send } else { &recv };
                // The call's count, from the buffers (wrong lengths can agree).
                let cnt = send[0].len() / ts;
                for (r, b) in out.iter().enumerate() {
                    let got = b.to_vec().map_err(fail)?;
                    let want: Vec<u32> = (0..got.len())
                        .map(|i| match c.coll {
                            Coll::AllReduce | Coll::AllReduceInto => {
                                reduce(c.op, (0..n).map(|q| value(c.seed, q, i)))
                            }
                            Coll::Broadcast(root) => value(c.seed, root, i),
                            Coll::ReduceScatter => {
                                reduce(c.op, (0..n).map(|q| value(c.seed, q, r * cnt + i)))
                            }
                            Coll::AllGather => value(c.seed, i / cnt.max(1), i % cnt.max(1)),
                        })
                        .collect();
                    prop_assert_eq!(got, want, "rank {} of {:?}", r, c);
                }
            }
            Err(e) => {
                let k = kind_of(&e);
                prop_assert!(
                    k.is_some_and(|k| bad.contains(&k)),
                    "{:?}: {:?}; the reference allows {:?}",
                    c,
                    e,
                    bad
                );
            }
        }
        drop((send, recv));
        settle(rt, n)
    })
}

/// One send or receive of a group: local rank, peer, length, element type
/// (`f32` or `u32`), and whether its buffer is on a wrong device.
#[derive(Clone, Copy, Debug)]
struct P2p {
    send: bool,
    local: usize,
    peer: usize,
    len: usize,
    f32: bool,
    wrong_device: bool,
}

#[derive(Clone, Debug)]
struct GroupCase {
    devices: usize,
    ops: Vec<P2p>,
    seed: u32,
}

fn group_case() -> impl Strategy<Value = GroupCase> {
    (1..=MAX_DEVICES).prop_flat_map(|n| {
        // Transfers (each a send and its receive), then a few changes.
        let transfer = (0..n, 0..n, 0..5usize, any::<bool>());
        let change = (any::<Index>(), 0..6u8, 0..=n);
        (
            prop::collection::vec(transfer, 0..5),
            prop::collection::vec(change, 0..2),
            any::<u32>(),
        )
            .prop_flat_map(move |(transfers, changes, seed)| {
                let mut ops: Vec<P2p> = transfers
                    .iter()
                    .flat_map(|&(from, to, len, f32)| {
                        let op = |send, local, peer| P2p {
                            send,
                            local,
                            peer,
                            len,
                            f32,
                            wrong_device: false,
                        };
                        [op(true, from, to), op(false, to, from)]
                    })
                    .collect();
                for (at, what, v) in changes {
                    if ops.is_empty() {
                        break;
                    }
                    let i = at.index(ops.len());
                    match what {
                        0 => {
                            ops.remove(i);
                        }
                        1 => ops[i].len = v + 5,
                        2 => ops[i].f32 = !ops[i].f32,
                        3 => ops[i].peer = v,
                        4 => ops[i].local = v,
                        _ => ops[i].wrong_device = true,
                    }
                }
                (Just(ops).prop_shuffle(), Just(seed))
            })
            .prop_map(move |(ops, seed)| GroupCase {
                devices: n,
                ops,
                seed,
            })
    })
}

/// The reference's verdict on a group: the error kind, or the pairs
/// (send index, receive index) that move data.
fn group_verdict(n: usize, ops: &[P2p]) -> Result<Vec<(usize, usize)>, Kind> {
    for op in ops {
        if op.local >= n || op.peer >= n {
            return Err(Kind::BadCollective);
        }
        if op.wrong_device {
            return Err(Kind::WrongDevice);
        }
    }
    let mut used = vec![false; ops.len()];
    let mut pairs = Vec::new();
    for (i, s) in ops.iter().enumerate().filter(|(_, o)| o.send) {
        let j = (0..ops.len())
            .find(|&j| !used[j] && !ops[j].send && ops[j].local == s.peer && ops[j].peer == s.local)
            .ok_or(Kind::BadCollective)?;
        used[j] = true;
        if ops[j].f32 != s.f32 {
            return Err(Kind::BadCollective);
        }
        if ops[j].len != s.len {
            return Err(Kind::LengthMismatch);
        }
        pairs.push((i, j));
    }
    if (0..ops.len()).any(|j| !ops[j].send && !used[j]) {
        return Err(Kind::BadCollective);
    }
    Ok(pairs)
}

/// A group's buffer, of either element type.
enum GBuf {
    U(Buffer<u32>),
    F(Buffer<f32>),
}

fn run_group(c: &GroupCase) -> Result<(), TestCaseError> {
    let n = c.devices;
    let fail = |e: Error| TestCaseError::fail(format!("{e}"));
    with_comm(n, |rt, comm, foreign| {
        let mut bufs: Vec<GBuf> = Vec::new();
        for (k, op) in c.ops.iter().enumerate() {
            let dev = match (op.wrong_device, n) {
                (true, 1) => foreign.clone(),
                (true, _) => rt.device((op.local + 1) % n).map_err(fail)?,
                (false, _) => rt.device(op.local % n).map_err(fail)?,
            };
            let t = dev.begin_task().map_err(fail)?;
            let v: Vec<u32> = (0..op.len)
                .map(|i| if op.send { value(c.seed, k, i) } else { 0 })
                .collect();
            bufs.push(if op.f32 {
                GBuf::F(
                    t.from_host(&v.iter().map(|&x| x as f32).collect::<Vec<_>>())
                        .map_err(fail)?,
                )
            } else {
                GBuf::U(t.from_host(&v).map_err(fail)?)
            });
        }
        let want = group_verdict(n, &c.ops);
        let r = {
            let mut slots: Vec<Option<&mut GBuf>> = bufs.iter_mut().map(Some).collect();
            comm.group(|g| {
                for (k, op) in c.ops.iter().enumerate() {
                    let b = slots[k].take().expect("each buffer once");
                    match (op.send, b) {
                        (true, GBuf::U(b)) => g.send(op.local, &*b, op.peer)?,
                        (true, GBuf::F(b)) => g.send(op.local, &*b, op.peer)?,
                        (false, GBuf::U(b)) => g.recv(op.local, b, op.peer)?,
                        (false, GBuf::F(b)) => g.recv(op.local, b, op.peer)?,
                    }
                }
                Ok(())
            })
        };
        match (want, r) {
            (Ok(pairs), Ok(())) => {
                for (i, j) in pairs {
                    let want: Vec<u32> = (0..c.ops[i].len).map(|x| value(c.seed, i, x)).collect();
                    let got: Vec<u32> = match &bufs[j] {
                        GBuf::U(b) => b.to_vec().map_err(fail)?,
                        GBuf::F(b) => b
                            .to_vec()
                            .map_err(fail)?
                            .iter()
                            .map(|&x| x as u32)
                            .collect(),
                    };
                    prop_assert_eq!(got, want, "receive {} of send {} in {:?}", j, i, c);
                }
            }
            (Err(k), Err(e)) if kind_of(&e) == Some(k) => {}
            (want, got) => {
                return Err(TestCaseError::fail(format!(
                    "{c:?}: the reference says {want:?}, the group {got:?}"
                )))
            }
        }
        drop(bufs);
        settle(rt, n)
    })
}

proptest! {
    #![proptest_config(config())]

    /// A collective with random buffer counts, devices, lengths and root:
    /// refused with a reason the reference gives, or done with the
    /// reference's values; no race, no hang.
    #[test]
    fn collectives_check_their_arguments_as_the_reference(c in coll_case()) {
        let _case = Case::start("collectives_check_their_arguments_as_the_reference");
        run_collective(&c)?;
    }

    /// A group of random sends and receives: refused exactly as the
    /// reference, or each receive holding its send's data; no race, no
    /// hang (a refused group leaves nothing waiting).
    #[test]
    fn groups_pair_sends_and_receives_as_the_reference(c in group_case()) {
        let _case = Case::start("groups_pair_sends_and_receives_as_the_reference");
        run_group(&c)?;
    }
}

// ---------------------------------------------------------------------
// The corpus: the readers' verdicts here, NVRTC's and the JIT's on a GPU
// ---------------------------------------------------------------------

/// One record of `tests/data/parser_corpus.txt` (its header says how
/// they are written).
#[derive(Debug)]
struct Record {
    title: String,
    /// `ptx` or `cuda`.
    lang: String,
    /// PTX: whether the checker (and the JIT) take it.
    ok: bool,
    kernels: Vec<Kern>,
    text: String,
}

/// One parameter's bytes and kind as the corpus writes it (`8i`).
fn corpus_param(p: &str, title: &str) -> P {
    let (n, k) = p.split_at(p.len() - 1);
    let bytes = n.parse().expect("a size");
    let kind = match k {
        "i" => T::Int,
        "f" => T::Float,
        "b" => T::Bits,
        _ => panic!("{title}: a kind `i`, `f` or `b`: {p}"),
    };
    P { bytes, kind }
}

/// An `expect` line's parameters: `?`, `-` or a list.
fn corpus_params(list: &str, title: &str) -> Option<Vec<P>> {
    match list {
        "?" => None,
        "-" => Some(Vec::new()),
        list => Some(list.split(',').map(|p| corpus_param(p, title)).collect()),
    }
}

/// A `decl` line's declarations: `-` or a list of `s` with its type
/// (`s4i`), `?` (a scalar of a type the reader does not know), `p`, `c`, a
/// pointer with its pointee's type (`c4f`).
fn corpus_decls(list: &str, title: &str) -> Vec<D> {
    if list == "-" {
        return Vec::new();
    }
    list.split(',')
        .map(|d| match d.split_at(1) {
            ("?", "") => scalar(None),
            ("s", ty) => scalar(Some(corpus_param(ty, title))),
            (pc @ ("p" | "c"), ty) => D {
                pointer: true,
                to_const: pc == "c",
                ty: (!ty.is_empty()).then(|| corpus_param(ty, title)),
            },
            _ => panic!("{title}: a declaration `s`, `p..` or `c..`: {d}"),
        })
        .collect()
}

fn corpus() -> Vec<Record> {
    let text = include_str!("data/parser_corpus.txt");
    let mut out = Vec::new();
    for chunk in text.split("\n==== ").skip(1) {
        let (head, body) = chunk.split_once("\n----\n").expect("a `----` line");
        let mut lines = head.lines();
        let first = lines.next().expect("a header");
        let mut words = first.splitn(3, ' ');
        let lang = words.next().expect("a language").to_owned();
        let (ok, title) = match lang.as_str() {
            "ptx" => {
                let verdict = words.next().expect("ok or refused");
                (verdict == "ok", words.next().unwrap_or_default().to_owned())
            }
            _ => (true, first[lang.len()..].trim().to_owned()),
        };
        let (mut kernels, mut decls) = (Vec::new(), Vec::new());
        for l in lines {
            let mut w = l.split_whitespace();
            let key = w.next();
            let name = w.next().expect("a kernel name").to_owned();
            let list = w.next().expect("its parameters");
            match key {
                Some("expect") => kernels.push((name, corpus_params(list, &title), None)),
                Some("decl") => decls.push((name, corpus_decls(list, &title))),
                _ => panic!("{title}: `expect` or `decl`: {l}"),
            }
        }
        for (name, d) in decls {
            let k = kernels
                .iter_mut()
                .find(|k| k.0 == name)
                .unwrap_or_else(|| panic!("{title}: `decl {name}` of no kernel"));
            k.2 = Some(d);
        }
        out.push(Record {
            title,
            lang,
            ok,
            kernels,
            text: body.to_owned(),
        });
    }
    out
}

/// Every signature of 1 to [`MAX_SIG`] parameters.
fn all_signatures() -> Vec<Vec<K>> {
    let mut out: Vec<Vec<K>> = KINDS.iter().map(|&k| vec![k]).collect();
    let mut last = out.clone();
    for _ in 1..MAX_SIG {
        last = last
            .iter()
            .flat_map(|s| {
                KINDS.iter().map(move |&k| {
                    let mut s = s.clone();
                    s.push(k);
                    s
                })
            })
            .collect();
        out.extend(last.iter().cloned());
    }
    out
}

/// Checks each kernel of `m` against `want` with every signature:
/// exactly the reference's verdicts.
fn check_all_signatures(m: &LoadedModule, want: &[Kern], what: &str) -> Result<(), TestCaseError> {
    for (name, params, decls) in want {
        for sig in all_signatures() {
            check_lookup(m, (name, params.as_deref(), decls.as_deref()), &sig, what)?;
        }
    }
    Ok(())
}

/// The corpus on the host backend: PTX taken or refused as recorded, and
/// (without NVRTC) CUDA C read as recorded: its kernels, each with every
/// signature of up to three parameters judged as the recorded parameters
/// say.
#[test]
fn corpus_verdicts_on_the_host() {
    let rt = host_runtime(1);
    let records = corpus();
    assert!(
        records.len() >= 20,
        "the corpus has {} records",
        records.len()
    );
    for r in &records {
        let what = format!("{} `{}`", r.lang, r.title);
        let m = match r.lang.as_str() {
            "ptx" => match rt.load_ptx(r.text.clone()) {
                Ok(m) => {
                    assert!(r.ok, "{what}: taken, but the corpus says refused");
                    m
                }
                Err(e) => {
                    assert!(!r.ok, "{what}: refused ({e}), but the corpus says taken");
                    assert!(matches!(e, Error::BadPtx { .. }), "{what}: {e:?}");
                    continue;
                }
            },
            _ if nvrtc_present() => continue,
            _ => rt.compile_cuda(&r.text, &[]).unwrap(),
        };
        let names: Vec<&str> = r.kernels.iter().map(|(n, _, _)| n.as_str()).collect();
        assert_eq!(m.kernel_names(), names, "{what}");
        check_all_signatures(&m, &r.kernels, &what).unwrap_or_else(|e| panic!("{what}: {e}"));
    }
}

/// The corpus against NVRTC and the driver's JIT (ignored: needs a GPU, as
/// the `::cuda` tests; run with `--ignored` there): each PTX record is
/// taken by the JIT exactly when the corpus says so, and those taken have
/// every recorded entry; each CUDA C record compiles with NVRTC, its
/// unmangled entries are the kernels recorded, and where the corpus gives
/// their parameters, the compiled PTX's parameters judge every signature
/// as the recorded ones do. With `corpus_verdicts_on_the_host`, the
/// readers agree with NVRTC and the JIT on the corpus.
#[test]
#[ignore = "needs a CUDA GPU"]
fn reader_agrees_with_nvrtc_on_the_corpus() {
    let rt = common::runtime(gpu_sched::BackendKind::Cuda);
    let ctx = cudarc::driver::CudaContext::new(0).expect("a CUDA device");
    let mut disagreements = Vec::new();
    for r in corpus() {
        let what = format!("{} `{}`", r.lang, r.title);
        match r.lang.as_str() {
            "ptx" => {
                // The JIT alone, without the runtime's checker in front.
                let jit = ctx.load_module(cudarc::nvrtc::Ptx::from_src(r.text.clone()));
                match (&jit, r.ok) {
                    (Ok(module), true) => {
                        for (name, _, _) in &r.kernels {
                            if let Err(e) = module.load_function(name) {
                                disagreements.push(format!("{what}: no entry `{name}`: {e:?}"));
                            }
                        }
                    }
                    (Err(_), false) => {}
                    (Ok(_), false) => disagreements
                        .push(format!("{what}: the JIT takes what the checker refuses")),
                    (Err(e), true) => disagreements.push(format!(
                        "{what}: the JIT refuses what the checker takes: {e:?}"
                    )),
                }
            }
            _ => {
                let m = match rt.compile_cuda(&r.text, &[]) {
                    Ok(m) => m,
                    Err(e) => {
                        disagreements.push(format!("{what}: NVRTC refuses it: {e}"));
                        continue;
                    }
                };
                assert!(m.is_compiled(), "{what}: compiled by NVRTC");
                let mut names: Vec<&str> = m
                    .kernel_names()
                    .into_iter()
                    .filter(|n| !n.starts_with("_Z"))
                    .collect();
                names.sort_unstable();
                let mut want: Vec<&str> = r.kernels.iter().map(|(n, _, _)| n.as_str()).collect();
                want.sort_unstable();
                if names != want {
                    disagreements.push(format!(
                        "{what}: NVRTC's entries {names:?}, the reader's {want:?}"
                    ));
                    continue;
                }
                let checked: Vec<_> = r
                    .kernels
                    .iter()
                    .filter(|(_, p, _)| p.is_some())
                    .cloned()
                    .collect();
                if let Err(e) = check_all_signatures(&m, &checked, &what) {
                    disagreements.push(format!("{what}: {e}"));
                }
            }
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} disagreement(s):\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
}
