//! Element-wise kernels written once (CuPy's `ElementwiseKernel`): a
//! kernel from one expression over named inputs, scalars and outputs,
//! compiled to CUDA C through NVRTC on CUDA and run by the host backend
//! from the same expression, so no twin is written by hand. Launched as a
//! typed, tracked kernel: inputs are reads, outputs writes.
//!
//! ```
//! # fn main() -> gpu_sched::Result<()> {
//! use gpu_kernels::Elementwise;
//! let rt = gpu_sched::Runtime::global()?;
//! // z = a x + b y, elementwise; `z` may also be read (its old value).
//! let axpby = Elementwise::<f32>::new("axpby", &["x", "y"], &["a", "b"], &["z"], "z = a * x + b * y")?;
//! let t = rt.begin_task()?;
//! let x = t.from_host(&[1.0f32, 2.0, 3.0])?;
//! let y = t.from_host(&[10.0f32, 20.0, 30.0])?;
//! let mut z = t.zeros::<f32>(3)?;
//! axpby.run(&t, &[&x, &y], &[2.0, 0.5], &mut [&mut z])?;
//! assert_eq!(t.to_vec(&z)?, [7.0, 14.0, 21.0]);
//! # Ok(()) }
//! ```
//!
//! # The language
//!
//! The body is statements `name = expression`, separated by `;`. A name
//! is an input's element, a scalar, an output's element (assigned at least
//! once; read before its first assignment it is the buffer's old value) or
//! a local (a new name, assigned before it is read). Expressions: numbers,
//! `+ - * /`, unary `-`, comparisons `== != < <= > >=` and `&& || !`
//! (giving `1` or `0`; any value other than `0` is true), `c ? a : b`,
//! parentheses, and the functions `exp log sqrt abs sin cos tanh floor
//! ceil` (one argument), `pow min max` (two), `fma` (three: `a * b + c`,
//! rounded once).
//!
//! # Rounding
//!
//! The generated kernel is compiled without contraction (`--fmad=false`)
//! and evaluates the expression as written, each operation rounded to the
//! element type, as the host does: arithmetic, `sqrt`, `abs`, `floor`,
//! `ceil`, `min`, `max`, `fma`, comparisons and selections give the same
//! bits on both backends. `exp`, `log`, `sin`, `cos`, `tanh` and `pow`
//! are CUDA's and the host's libraries', which may differ in the last bits
//! ([`Elementwise::is_exact`] says whether a body uses them).
//!
//! # Limits
//!
//! At most [`MAX_INPUTS`] inputs, [`MAX_OUTPUTS`] outputs and
//! [`MAX_SCALARS`] scalars (the kernel's parameters are fixed: 12 with the
//! length, the most a launch takes); every buffer of a launch has the same
//! length. A body has at most 2048 tokens and nests at most 200 deep.
//! Names are C identifiers other than C++'s keywords, CUDA's built-in
//! variables, the math functions the kernel calls (`sqrt`, `sqrtf`,
//! `fmin`, ...) and names starting `gk_` or `__`: refused at
//! [`Elementwise::new`] on both backends, not left for NVRTC to find.

mod expr;
mod program;
#[cfg(test)]
mod test;

use gpu_sched::{
    DeviceRepr, DeviceSlice, DeviceSliceMut, Error, In, Kernel, KernelParam, LaunchConfig, Out,
    Result, TaskContext,
};
use std::sync::{Arc, Mutex};

/// Inputs a kernel can have.
pub const MAX_INPUTS: usize = 4;
/// Outputs a kernel can have.
pub const MAX_OUTPUTS: usize = 3;
/// Scalars a kernel can have.
pub const MAX_SCALARS: usize = 4;

/// The generated kernel's parameters: the inputs, the outputs, the
/// scalars (unused ones passed as empty, untouched), the length.
type Params<T> = (
    In<T>,
    In<T>,
    In<T>,
    In<T>,
    Out<T>,
    Out<T>,
    Out<T>,
    T,
    T,
    T,
    T,
    u64,
);

/// The element types of [`Elementwise`]: `f32` and `f64`.
pub trait Real:
    DeviceRepr
    + for<'a> KernelParam<Host<'a> = Self>
    + for<'b> gpu_sched::Arg<'b, Self>
    + Default
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
    + std::fmt::Debug
    + sealed::Sealed
{
    /// The C type (`float`, `double`).
    #[doc(hidden)]
    const C_TYPE: &'static str;
    /// The suffix of its C math functions (`f` for `float`).
    #[doc(hidden)]
    const C_SUFFIX: &'static str;
    #[doc(hidden)]
    fn from_f64(v: f64) -> Self;
    /// `v` as a C literal of the type, read back to the same bits.
    #[doc(hidden)]
    fn c_literal(v: Self) -> String;
    #[doc(hidden)]
    fn truth(b: bool) -> Self;
    #[doc(hidden)]
    fn fma(self, b: Self, c: Self) -> Self;
    #[doc(hidden)]
    fn call1(f: expr::Func, a: Self) -> Self;
    #[doc(hidden)]
    fn call2(f: expr::Func, a: Self, b: Self) -> Self;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

macro_rules! real {
    ($t:ty, $c:literal, $suffix:literal) => {
        impl Real for $t {
            const C_TYPE: &'static str = $c;
            const C_SUFFIX: &'static str = $suffix;
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn c_literal(v: Self) -> String {
                // Rust's `{:e}` is the shortest text that reads back to
                // the same value, as C's strtod/strtof do.
                if v.is_finite() {
                    format!("(({}){:e}{})", $c, v, $suffix)
                } else if v.is_nan() {
                    format!("(({}) __int_as_float(0x7fffffff))", $c)
                } else if v > 0.0 {
                    format!("(({})(1.0{} / 0.0{}))", $c, $suffix, $suffix)
                } else {
                    format!("(({})(-1.0{} / 0.0{}))", $c, $suffix, $suffix)
                }
            }
            fn truth(b: bool) -> Self {
                if b {
                    1.0
                } else {
                    0.0
                }
            }
            fn fma(self, b: Self, c: Self) -> Self {
                self.mul_add(b, c)
            }
            fn call1(f: expr::Func, a: Self) -> Self {
                use expr::Func::*;
                match f {
                    Exp => a.exp(),
                    Log => a.ln(),
                    Sqrt => a.sqrt(),
                    Abs => a.abs(),
                    Sin => a.sin(),
                    Cos => a.cos(),
                    Tanh => a.tanh(),
                    Floor => a.floor(),
                    _ => a.ceil(),
                }
            }
            fn call2(f: expr::Func, a: Self, b: Self) -> Self {
                use expr::Func::*;
                match f {
                    Pow => a.powf(b),
                    Min => a.min(b),
                    _ => a.max(b),
                }
            }
        }
    };
}
real!(f32, "float", "f");
real!(f64, "double", "");

/// An element-wise kernel from one expression: see the [module's
/// documentation](self).
pub struct Elementwise<T: Real> {
    name: String,
    inputs: Vec<String>,
    scalars: Vec<String>,
    outputs: Vec<String>,
    source: String,
    program: Arc<program::Program>,
    exact: bool,
    /// The kernel loaded into each runtime it ran on (by runtime id).
    loaded: Mutex<Vec<(gpu_sched::Runtime, Kernel<Params<T>>)>>,
}

impl<T: Real> std::fmt::Debug for Elementwise<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Elementwise")
            .field("name", &self.name)
            .field("inputs", &self.inputs)
            .field("scalars", &self.scalars)
            .field("outputs", &self.outputs)
            .finish_non_exhaustive()
    }
}

impl<T: Real> Elementwise<T> {
    /// The kernel `name` (a C identifier: the generated entry's name)
    /// computing `body` over elements of `inputs` and `outputs`, with
    /// `scalars` passed at each launch. Parsed and checked here; compiled
    /// (on CUDA, by NVRTC) at its first run on a runtime.
    ///
    /// # Errors
    ///
    /// [`Error::Compile`] saying what is wrong with the body (a syntax
    /// error, an unknown name or function, an input or scalar assigned, an
    /// output never assigned), a name that is not one, a name given twice,
    /// or more names than the limits.
    pub fn new(
        name: &str,
        inputs: &[&str],
        scalars: &[&str],
        outputs: &[&str],
        body: &str,
    ) -> Result<Self> {
        let bad = |why: String| Error::Compile {
            log: format!("elementwise kernel `{name}`: {why}"),
        };
        expr::check_name(name).map_err(bad)?;
        for (what, list, max) in [
            ("inputs", inputs, MAX_INPUTS),
            ("scalars", scalars, MAX_SCALARS),
            ("outputs", outputs, MAX_OUTPUTS),
        ] {
            if list.len() > max {
                return Err(bad(format!("{} {what}; at most {max}", list.len())));
            }
        }
        if outputs.is_empty() {
            return Err(bad("no output".to_owned()));
        }
        let all: Vec<&str> = inputs
            .iter()
            .chain(scalars)
            .chain(outputs)
            .copied()
            .collect();
        for (k, n) in all.iter().enumerate() {
            expr::check_name(n).map_err(bad)?;
            if all[..k].contains(n) || *n == name {
                return Err(bad(format!("`{n}` is named twice")));
            }
        }
        let owned = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let (inputs, scalars, outputs) = (owned(inputs), owned(scalars), owned(outputs));
        let names = expr::Names {
            inputs: &inputs,
            scalars: &scalars,
            outputs: &outputs,
        };
        let parsed = expr::parse(body, &names).map_err(bad)?;
        let source = program::cuda_source::<T>(name, &parsed, &names);
        let exact = parsed.statements.iter().all(|s| expr::exact(&s.value));
        Ok(Elementwise {
            name: name.to_owned(),
            source,
            program: Arc::new(program::Program::new(&parsed)),
            exact,
            inputs,
            scalars,
            outputs,
            loaded: Mutex::new(Vec::new()),
        })
    }

    /// The generated CUDA C.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the body gives the same bits on both backends: it calls
    /// none of `exp`, `log`, `sin`, `cos`, `tanh`, `pow` (see the module's
    /// Rounding).
    pub fn is_exact(&self) -> bool {
        self.exact
    }

    /// The kernel of `t`'s runtime, compiled and loaded at its first run.
    fn kernel(&self, t: &TaskContext) -> Result<Kernel<Params<T>>> {
        let rt = t.runtime();
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, k)) = loaded.iter().find(|(r, _)| r.same(rt)) {
            return Ok(k.clone());
        }
        let module = rt.compile_cuda(&self.source, &["--fmad=false"])?;
        let program = self.program.clone();
        let (ni, ns, no) = (self.inputs.len(), self.scalars.len(), self.outputs.len());
        let k = module.kernel::<Params<T>>(&self.name)?.with_host(
            move |i0: &[T],
                  i1: &[T],
                  i2: &[T],
                  i3: &[T],
                  o0: &mut [T],
                  o1: &mut [T],
                  o2: &mut [T],
                  s0: T,
                  s1: T,
                  s2: T,
                  s3: T,
                  n: u64| {
                let n = n as usize;
                let inputs = [i0, i1, i2, i3];
                let mut outputs = [o0, o1, o2];
                let scalars = [s0, s1, s2, s3];
                program.run(&inputs[..ni], &scalars[..ns], &mut outputs[..no], n);
            },
        );
        loaded.push((rt.clone(), k.clone()));
        Ok(k)
    }

    /// Runs the kernel over every element: `inputs` and `outputs` in the
    /// order of their names at [`Elementwise::new`], all of one length,
    /// and the scalars' values.
    ///
    /// # Errors
    ///
    /// [`Error::BadKernelArgs`] for a count of inputs, outputs or scalars
    /// other than declared; [`Error::LengthMismatch`] for buffers of
    /// different lengths; the first run on a runtime: [`Error::Compile`]
    /// or [`Error::NvrtcUnavailable`] on CUDA; the errors of a launch.
    pub fn run(
        &self,
        t: &TaskContext,
        inputs: &[&dyn DeviceSlice<T>],
        scalars: &[T],
        outputs: &mut [&mut dyn DeviceSliceMut<T>],
    ) -> Result<()> {
        let counts = [
            ("inputs", inputs.len(), self.inputs.len()),
            ("scalars", scalars.len(), self.scalars.len()),
            ("outputs", outputs.len(), self.outputs.len()),
        ];
        for (what, got, want) in counts {
            if got != want {
                return Err(Error::BadKernelArgs {
                    kernel: "elementwise",
                    problem: format!("`{}` takes {want} {what}, given {got}", self.name),
                });
            }
        }
        let n = outputs[0].len();
        for b in inputs
            .iter()
            .map(|b| b.len())
            .chain(outputs.iter().map(|b| b.len()))
        {
            if b != n {
                return Err(Error::LengthMismatch {
                    what: "an elementwise kernel's buffer",
                    expected: n,
                    got: b,
                });
            }
        }
        let k = self.kernel(t)?;
        let mut outs = outputs.iter_mut().map(|b| &mut **b);
        let (o0, o1, o2) = (outs.next(), outs.next(), outs.next());
        let i = |k: usize| inputs.get(k).map(|b| &**b);
        let s = |k: usize| scalars.get(k).copied().unwrap_or_default();
        let cfg = LaunchConfig::linear(crate::grid_for(n as u64), crate::BLOCK);
        let args = (
            i(0),
            i(1),
            i(2),
            i(3),
            o0,
            o1,
            o2,
            s(0),
            s(1),
            s(2),
            s(3),
            n as u64,
        );
        // SAFETY: the generated kernel (and the host program, from the
        // same expression) touches element `i < n` of each declared input
        // (reads) and output (reads and writes) only, in a grid-stride
        // loop bounded by `n`, the length of every buffer passed (checked
        // above); the slots left out (`None`: null, no elements) are named
        // by no expression, so never touched.
        unsafe { k.launch(t, cfg, args) }
    }
}
