//! The CG step of `12-cg-sparse` (and of the ledger's precision bench):
//! every operation a library call or a one-thread kernel of our own, the
//! factors `alpha = rr / pq` and `beta = rr_new / rr` computed on the
//! device, so that a step reads nothing back on the host.

use gpu::kernel::{In, Kernel, LaunchConfig, Out};
use gpu::sparse::{self, Csr};
use gpu::{blas, Buffer, Result, TaskContext};
use gpu_kernels::reduce::dot_into;

const SRC: &str = r#"
// out = sign * num / den, one thread.
extern "C" __global__ void cg_ratio(double* out, const double* num, const double* den, double sign) {
    if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = sign * num[0] / den[0];
}
"#;

/// `out[0] = sign * num[0] / den[0]`.
pub type Ratio = Kernel<(Out<f64>, In<f64>, In<f64>, f64)>;

/// The ratio kernel (CUDA C compiled at run time, with a host
/// implementation), and whether NVRTC compiled it.
///
/// # Errors
///
/// Compilation and loading errors.
pub fn load(t: &TaskContext) -> Result<(Ratio, bool)> {
    let m = t.runtime().compile_cuda(SRC, &[])?;
    let k =
        m.kernel("cg_ratio")?
            .with_host(|out: &mut [f64], num: &[f64], den: &[f64], sign: f64| {
                out[0] = sign * num[0] / den[0];
            });
    Ok((k, m.is_compiled()))
}

/// `out = sign * num / den` on the device, all three one-element buffers.
fn ratio(
    t: &TaskContext,
    k: &Ratio,
    out: &mut Buffer<f64>,
    (num, den): (&Buffer<f64>, &Buffer<f64>),
    sign: f64,
) -> Result<()> {
    for b in [out.len(), num.len(), den.len()] {
        if b != 1 {
            return Err(gpu::Error::LengthMismatch {
                what: "a CG scalar",
                expected: 1,
                got: b,
            });
        }
    }
    // SAFETY: one thread reads element 0 of `num` and `den` and writes
    // element 0 of `out`, all of one element (checked).
    unsafe { k.launch(t, LaunchConfig::for_elements(1, 32), (out, num, den, sign)) }
}

/// CG's vectors and its scalars on the device.
#[derive(Debug)]
pub struct Cg {
    /// The solution, from zero.
    pub x: Buffer<f64>,
    r: Buffer<f64>,
    p: Buffer<f64>,
    q: Buffer<f64>,
    /// `r . r`, of the last step.
    pub rr: Buffer<f64>,
    rr_new: Buffer<f64>,
    pq: Buffer<f64>,
    alpha: Buffer<f64>,
    neg_alpha: Buffer<f64>,
    beta: Buffer<f64>,
}

impl Cg {
    /// CG for `A x = b` from `x = 0`: `r = p = b`, `rr = r . r`.
    ///
    /// # Errors
    ///
    /// Allocation and driver errors.
    pub fn new(t: &TaskContext, b: &[f64]) -> Result<Cg> {
        let n = b.len();
        let sc = || t.zeros::<f64>(1);
        let mut cg = Cg {
            x: t.zeros(n)?,
            r: t.from_host(b)?,
            p: t.from_host(b)?,
            q: t.zeros(n)?,
            rr: sc()?,
            rr_new: sc()?,
            pq: sc()?,
            alpha: sc()?,
            neg_alpha: sc()?,
            beta: sc()?,
        };
        blas::dot(t, &cg.r, &cg.r, &mut cg.rr)?;
        Ok(cg)
    }

    /// One step on `t` (graphed or not): `spmv`, two dot products into
    /// device scalars, the factors by `k`, two `axpy_dev`, `scal_dev` and
    /// `axpy`.
    ///
    /// # Errors
    ///
    /// Library, length and driver errors.
    pub fn step(&mut self, t: &TaskContext, a: &Csr<f64>, k: &Ratio) -> Result<()> {
        let c = self;
        sparse::spmv(t, 1.0, a, &c.p, 0.0, &mut c.q)?; // q = A p
        dot_into(t, &c.p, &c.q, &mut c.pq)?;
        ratio(t, k, &mut c.alpha, (&c.rr, &c.pq), 1.0)?; // alpha = rr / pq
        ratio(t, k, &mut c.neg_alpha, (&c.rr, &c.pq), -1.0)?;
        blas::axpy_dev(t, &c.alpha, &c.p, &mut c.x)?; // x += alpha p
        blas::axpy_dev(t, &c.neg_alpha, &c.q, &mut c.r)?; // r -= alpha q
        dot_into(t, &c.r, &c.r, &mut c.rr_new)?;
        ratio(t, k, &mut c.beta, (&c.rr_new, &c.rr), 1.0)?; // beta = rr_new / rr
        blas::scal_dev(t, &c.beta, &mut c.p)?; // p = r + beta p
        blas::axpy(t, 1.0, &c.r, &mut c.p)?;
        std::mem::swap(&mut c.rr, &mut c.rr_new);
        Ok(())
    }
}
