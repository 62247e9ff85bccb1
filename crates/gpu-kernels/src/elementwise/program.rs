//! A body as CUDA C, and as a program the host backend runs over blocks of
//! elements: one truth, two printings.

use super::expr::{Bin, Body, Expr, Func, Var};
use super::Real;
use std::fmt::Write;

/// Elements a host program works on at once.
pub(super) const BLOCK: usize = 64;

/// One step of a host program: a stack machine over blocks of
/// [`BLOCK`] elements.
#[derive(Clone, Copy, Debug)]
enum Step {
    Num(f64),
    Load(Var),
    Store(Var),
    Neg,
    Not,
    Bin(Bin),
    Select,
    /// A function and its arity.
    Call(Func, usize),
}

/// A body compiled for the host.
#[derive(Clone, Debug)]
pub(super) struct Program {
    steps: Vec<Step>,
    depth: usize,
    locals: usize,
}

impl Program {
    pub(super) fn new(body: &Body) -> Self {
        let mut p = Program {
            steps: Vec::new(),
            depth: 0,
            locals: body.locals.len(),
        };
        for s in &body.statements {
            let d = p.expr(&s.value, 0);
            p.depth = p.depth.max(d);
            p.steps.push(Step::Store(s.target));
        }
        p
    }

    /// Emits `e`, whose evaluation starts with `below` values on the
    /// stack; returns the deepest the stack gets.
    fn expr(&mut self, e: &Expr, below: usize) -> usize {
        match e {
            Expr::Num(v) => {
                self.steps.push(Step::Num(*v));
                below + 1
            }
            Expr::Var(v) => {
                self.steps.push(Step::Load(*v));
                below + 1
            }
            Expr::Neg(a) | Expr::Not(a) => {
                let d = self.expr(a, below);
                self.steps.push(if matches!(e, Expr::Neg(_)) {
                    Step::Neg
                } else {
                    Step::Not
                });
                d
            }
            Expr::Bin(op, a, b) => {
                let d = self.expr(a, below).max(self.expr(b, below + 1));
                self.steps.push(Step::Bin(*op));
                d
            }
            Expr::Select(c, a, b) => {
                let d = self
                    .expr(c, below)
                    .max(self.expr(a, below + 1))
                    .max(self.expr(b, below + 2));
                self.steps.push(Step::Select);
                d
            }
            Expr::Call(f, args) => {
                let mut d = below;
                for (k, a) in args.iter().enumerate() {
                    d = d.max(self.expr(a, below + k));
                }
                self.steps.push(Step::Call(*f, args.len()));
                d
            }
        }
    }

    /// Runs the body over `n` elements: `inputs[k][i]`, `scalars[k]`,
    /// `outputs[k][i]` (read where the body reads it, written where it
    /// assigns it).
    pub(super) fn run<T: Real>(
        &self,
        inputs: &[&[T]],
        scalars: &[T],
        outputs: &mut [&mut [T]],
        n: usize,
    ) {
        let mut stack = vec![[T::default(); BLOCK]; self.depth.max(1)];
        let mut locals = vec![[T::default(); BLOCK]; self.locals];
        let mut start = 0;
        while start < n {
            let len = BLOCK.min(n - start);
            let mut sp = 0;
            for step in &self.steps {
                match *step {
                    Step::Num(v) => {
                        stack[sp][..len].fill(T::from_f64(v));
                        sp += 1;
                    }
                    Step::Load(v) => {
                        let dst = &mut stack[sp][..len];
                        match v {
                            Var::Input(k) => dst.copy_from_slice(&inputs[k][start..start + len]),
                            Var::Output(k) => dst.copy_from_slice(&outputs[k][start..start + len]),
                            Var::Scalar(k) => dst.fill(scalars[k]),
                            Var::Local(k) => dst.copy_from_slice(&locals[k][..len]),
                        }
                        sp += 1;
                    }
                    Step::Store(v) => {
                        sp -= 1;
                        let src = &stack[sp][..len];
                        match v {
                            Var::Output(k) => {
                                outputs[k][start..start + len].copy_from_slice(src);
                            }
                            Var::Local(k) => locals[k][..len].copy_from_slice(src),
                            Var::Input(_) | Var::Scalar(_) => {
                                unreachable!("the parser refuses assigning an input or a scalar")
                            }
                        }
                    }
                    Step::Neg => stack[sp - 1][..len].iter_mut().for_each(|x| *x = -*x),
                    Step::Not => stack[sp - 1][..len]
                        .iter_mut()
                        .for_each(|x| *x = T::truth(*x == T::default())),
                    Step::Bin(op) => {
                        sp -= 1;
                        let (lo, hi) = stack.split_at_mut(sp);
                        let (a, b) = (&mut lo[sp - 1][..len], &hi[0][..len]);
                        a.iter_mut().zip(b).for_each(|(a, &b)| *a = bin(op, *a, b));
                    }
                    Step::Select => {
                        sp -= 2;
                        let (lo, hi) = stack.split_at_mut(sp);
                        let c = &mut lo[sp - 1][..len];
                        for i in 0..len {
                            c[i] = if c[i] != T::default() {
                                hi[0][i]
                            } else {
                                hi[1][i]
                            };
                        }
                    }
                    Step::Call(f, arity) => {
                        sp -= arity - 1;
                        let (lo, hi) = stack.split_at_mut(sp);
                        let a = &mut lo[sp - 1][..len];
                        for i in 0..len {
                            a[i] = match arity {
                                1 => T::call1(f, a[i]),
                                2 => T::call2(f, a[i], hi[0][i]),
                                _ => a[i].fma(hi[0][i], hi[1][i]),
                            };
                        }
                    }
                }
            }
            debug_assert_eq!(sp, 0);
            start += len;
        }
    }
}

fn bin<T: Real>(op: Bin, a: T, b: T) -> T {
    let zero = T::default();
    match op {
        Bin::Add => a + b,
        Bin::Sub => a - b,
        Bin::Mul => a * b,
        Bin::Div => a / b,
        Bin::Eq => T::truth(a == b),
        Bin::Ne => T::truth(a != b),
        Bin::Lt => T::truth(a < b),
        Bin::Le => T::truth(a <= b),
        Bin::Gt => T::truth(a > b),
        Bin::Ge => T::truth(a >= b),
        Bin::And => T::truth(a != zero && b != zero),
        Bin::Or => T::truth(a != zero || b != zero),
    }
}

/// The kernel `name` of `body`, in CUDA C: parameters in the fixed order
/// of [`super::Params`] (4 inputs, 3 outputs, 4 scalars, the length),
/// those the body does not use unnamed.
pub(super) fn cuda_source<T: Real>(
    name: &str,
    body: &Body,
    names: &super::expr::Names<'_>,
) -> String {
    let ty = T::C_TYPE;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// Generated by gpu_kernels::Elementwise from `{name}`'s expression.\n\
         extern \"C\" __global__ void {name}("
    );
    let mut params = Vec::new();
    for k in 0..super::MAX_INPUTS {
        params.push(format!("const {ty}* __restrict__ gk_in{k}"));
    }
    for k in 0..super::MAX_OUTPUTS {
        params.push(format!("{ty}* __restrict__ gk_out{k}"));
    }
    for k in 0..super::MAX_SCALARS {
        params.push(format!("{ty} gk_s{k}"));
    }
    params.push("unsigned long long gk_n".to_owned());
    let _ = writeln!(s, "    {}) {{", params.join(",\n    "));
    let _ = writeln!(
        s,
        "  for (unsigned long long gk_i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;\n       \
         gk_i < gk_n; gk_i += (unsigned long long)blockDim.x * gridDim.x) {{"
    );
    for (k, x) in names.inputs.iter().enumerate() {
        let _ = writeln!(s, "    const {ty} {x} = gk_in{k}[gk_i];");
    }
    for (k, x) in names.scalars.iter().enumerate() {
        let _ = writeln!(s, "    const {ty} {x} = gk_s{k};");
    }
    for (k, x) in names.outputs.iter().enumerate() {
        if body.reads_output[k] {
            let _ = writeln!(s, "    {ty} {x} = gk_out{k}[gk_i];");
        } else {
            let _ = writeln!(s, "    {ty} {x};");
        }
    }
    for x in &body.locals {
        let _ = writeln!(s, "    {ty} {x};");
    }
    for st in &body.statements {
        let target = var_name(st.target, names, body);
        let _ = writeln!(s, "    {target} = {};", c_expr::<T>(&st.value, names, body));
    }
    for (k, x) in names.outputs.iter().enumerate() {
        let _ = writeln!(s, "    gk_out{k}[gk_i] = {x};");
    }
    s.push_str("  }\n}\n");
    s
}

fn var_name<'a>(v: Var, names: &'a super::expr::Names<'_>, body: &'a Body) -> &'a str {
    match v {
        Var::Input(k) => &names.inputs[k],
        Var::Scalar(k) => &names.scalars[k],
        Var::Output(k) => &names.outputs[k],
        Var::Local(k) => &body.locals[k],
    }
}

/// `e` in C, every subexpression in parentheses; comparisons and logic
/// give `1` or `0` of the element type, as on the host.
fn c_expr<T: Real>(e: &Expr, names: &super::expr::Names<'_>, body: &Body) -> String {
    let ty = T::C_TYPE;
    let go = |e: &Expr| c_expr::<T>(e, names, body);
    match e {
        Expr::Num(v) => T::c_literal(T::from_f64(*v)),
        Expr::Var(v) => var_name(*v, names, body).to_owned(),
        Expr::Neg(a) => format!("(-{})", go(a)),
        Expr::Not(a) => format!("(({}) == ({ty})0 ? ({ty})1 : ({ty})0)", go(a)),
        Expr::Bin(op, a, b) => {
            let (a, b) = (go(a), go(b));
            let arith = |s: &str| format!("({a} {s} {b})");
            let test = |s: &str| format!("(({a} {s} {b}) ? ({ty})1 : ({ty})0)");
            match op {
                Bin::Add => arith("+"),
                Bin::Sub => arith("-"),
                Bin::Mul => arith("*"),
                Bin::Div => arith("/"),
                Bin::Eq => test("=="),
                Bin::Ne => test("!="),
                Bin::Lt => test("<"),
                Bin::Le => test("<="),
                Bin::Gt => test(">"),
                Bin::Ge => test(">="),
                Bin::And => format!("(({a} != ({ty})0 && {b} != ({ty})0) ? ({ty})1 : ({ty})0)"),
                Bin::Or => format!("(({a} != ({ty})0 || {b} != ({ty})0) ? ({ty})1 : ({ty})0)"),
            }
        }
        Expr::Select(c, a, b) => format!("(({} != ({ty})0) ? {} : {})", go(c), go(a), go(b)),
        Expr::Call(f, args) => {
            let args: Vec<String> = args.iter().map(go).collect();
            format!("{}{}({})", f.c_name(), T::C_SUFFIX, args.join(", "))
        }
    }
}
