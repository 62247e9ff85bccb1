//! B16's fused CG step captured by hand (issue 38 item 3, row
//! `B16/cg-small-fused-capture`, ratio `B16-graphed-vs-capture`): what a
//! cudarc user writes to graph the iteration without this library. The
//! same five operations as [`Cg::fused_step`] (cuSPARSE's SpMV with the
//! default algorithm, cuBLAS's `Ddot` in device pointer mode, the same
//! two kernels compiled by NVRTC and launched with the same grid) on
//! vectors of their own, through raw calls on one stream: descriptors,
//! handles and workspaces made once, `GRAPHED_STEPS` steps captured once
//! (`cuStreamBeginCapture`), instantiated, and each run a `cuGraphLaunch`
//! with no host code in between. The graphed scope runs the body and
//! compares its recording at every run; this is the floor it is measured
//! against.

use super::*;
use cudarc::cublas::sys as cublas;
use cudarc::cusparse::sys as cusparse;
use cudarc::driver::sys as cu;
use std::ffi::c_void;

fn ok(r: cu::CUresult, what: &str) {
    assert_eq!(r, cu::CUresult::CUDA_SUCCESS, "B16 hand capture: {what}");
}

fn ok_blas(r: cublas::cublasStatus_t, what: &str) {
    assert_eq!(
        r,
        cublas::cublasStatus_t::CUBLAS_STATUS_SUCCESS,
        "B16 hand capture: {what}"
    );
}

fn ok_sparse(r: cusparse::cusparseStatus_t, what: &str) {
    assert_eq!(
        r,
        cusparse::cusparseStatus_t::CUSPARSE_STATUS_SUCCESS,
        "B16 hand capture: {what}"
    );
}

/// The buffers behind the raw pointers: the matrix's indices, the values
/// and vectors, the workspaces.
type Owned = (Vec<Buffer<i32>>, Vec<Buffer<f64>>, Vec<Buffer<u8>>);

/// The step's state as raw pointers, the handles and the instantiated
/// graph of [`GRAPHED_STEPS`] steps. The buffers are owned here (their
/// pointers taken once, R10: escaped, used by nothing else).
pub(super) struct Hand {
    /// Keeps the buffers alive while the graph holds their pointers:
    /// rp, ci, v (as bytes of their own types), b, x, r, p, q, rr, rr_new,
    /// pq, the SpMV's and the dots' workspaces.
    _bufs: Owned,
    /// b, x, r, p, q, rr, rr_new, pq.
    ptr: [u64; 8],
    n: usize,
    stream: u64,
    blas: cublas::cublasHandle_t,
    sparse: cusparse::cusparseHandle_t,
    descr: (
        cusparse::cusparseSpMatDescr_t,
        cusparse::cusparseDnVecDescr_t,
        cusparse::cusparseDnVecDescr_t,
    ),
    spmv_ws: u64,
    module: cu::CUmodule,
    kernels: (cu::CUfunction, cu::CUfunction),
    graph: cu::CUgraph,
    exec: cu::CUgraphExec,
}

impl Hand {
    /// The Poisson system of an `n` x `n` grid on `t`'s stream (which it
    /// then uses alone: `t` is the caller's and submits nothing else while
    /// this lives), its steps captured.
    pub(super) fn new(t: &TaskContext, n: usize) -> Hand {
        let (rp, ci, v) = common::poisson::poisson(n);
        let len = n * n;
        let nnz = v.len();
        let mut ints = vec![t.from_host(&rp).unwrap(), t.from_host(&ci).unwrap()];
        let mut f = vec![
            t.from_host(&v).unwrap(),
            t.from_host(&vec![1.0f64; len]).unwrap(),
        ];
        for _ in 0..4 {
            f.push(t.zeros::<f64>(len).unwrap());
        }
        for _ in 0..3 {
            f.push(t.zeros::<f64>(1).unwrap());
        }
        let stream = t.cu_stream();
        let ip: Vec<u64> = ints.iter_mut().map(|b| t.raw_ptr(b).unwrap()).collect();
        let fp: Vec<u64> = f.iter_mut().map(|b| t.raw_ptr(b).unwrap()).collect();
        let ptr: [u64; 8] = fp[1..9].try_into().unwrap();
        let cs = stream as cu::CUstream;
        let mut blas = std::ptr::null_mut();
        let mut sparse = std::ptr::null_mut();
        let mut a = std::ptr::null_mut();
        let mut dx = std::ptr::null_mut();
        let mut dy = std::ptr::null_mut();
        let f64t = cusparse::cudaDataType::CUDA_R_64F;
        let i32i = cusparse::cusparseIndexType_t::CUSPARSE_INDEX_32I;
        let (one, zero) = (1.0f64, 0.0f64);
        let mut ws_bytes = 0usize;
        // SAFETY: for every call below, the handles and descriptors are made
        // here and live until `Drop`; every address is of a buffer owned
        // by `_bufs` with the lengths given (`len` values, 1 for the
        // scalars, `nnz` for the matrix's, the workspaces' sizes); the
        // runtime's context is current on this thread (`t`'s calls made
        // it so); the stream is `t`'s, which nothing else uses meanwhile.
        unsafe {
            ok_blas(cublas::cublasCreate_v2(&mut blas), "cublasCreate");
            ok_blas(
                cublas::cublasSetStream_v2(blas, cs as cublas::cudaStream_t),
                "cublasSetStream",
            );
            ok_blas(
                cublas::cublasSetPointerMode_v2(
                    blas,
                    cublas::cublasPointerMode_t::CUBLAS_POINTER_MODE_DEVICE,
                ),
                "cublasSetPointerMode",
            );
            ok_sparse(cusparse::cusparseCreate(&mut sparse), "cusparseCreate");
            ok_sparse(
                cusparse::cusparseSetStream(sparse, cs as cusparse::cudaStream_t),
                "cusparseSetStream",
            );
            ok_sparse(
                cusparse::cusparseCreateCsr(
                    &mut a,
                    len as i64,
                    len as i64,
                    nnz as i64,
                    ip[0] as usize as *mut c_void,
                    ip[1] as usize as *mut c_void,
                    fp[0] as usize as *mut c_void,
                    i32i,
                    i32i,
                    cusparse::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
                    f64t,
                ),
                "cusparseCreateCsr",
            );
            // x is p (ptr[3]), y is q (ptr[4]).
            ok_sparse(
                cusparse::cusparseCreateDnVec(
                    &mut dx,
                    len as i64,
                    ptr[3] as usize as *mut c_void,
                    f64t,
                ),
                "cusparseCreateDnVec",
            );
            ok_sparse(
                cusparse::cusparseCreateDnVec(
                    &mut dy,
                    len as i64,
                    ptr[4] as usize as *mut c_void,
                    f64t,
                ),
                "cusparseCreateDnVec",
            );
            ok_sparse(
                cusparse::cusparseSpMV_bufferSize(
                    sparse,
                    cusparse::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
                    (&one as *const f64).cast(),
                    a,
                    dx,
                    (&zero as *const f64).cast(),
                    dy,
                    f64t,
                    cusparse::cusparseSpMVAlg_t::CUSPARSE_SPMV_ALG_DEFAULT,
                    &mut ws_bytes,
                ),
                "cusparseSpMV_bufferSize",
            );
        }
        // The SpMV's workspace, and the dots' (cuBLAS's reductions need
        // one in a capture: the library's graphed dot takes 4 MiB too).
        let mut bytes = vec![
            t.zeros::<u8>(ws_bytes.max(1)).unwrap(),
            t.zeros::<u8>(4 << 20).unwrap(),
        ];
        let wp: Vec<u64> = bytes.iter_mut().map(|b| t.raw_ptr(b).unwrap()).collect();
        // SAFETY: as above; the workspace is the dots' alone.
        unsafe {
            ok_blas(
                cublas::cublasSetWorkspace_v2(blas, wp[1] as usize as *mut c_void, 4 << 20),
                "cublasSetWorkspace",
            );
        }
        let src = cudarc::nvrtc::compile_ptx(FUSED_SRC).expect("NVRTC compiles the fused kernels");
        let image = std::ffi::CString::new(src.to_src()).unwrap();
        let mut module = std::ptr::null_mut();
        let mut kernels = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: a NUL-terminated PTX image; valid out-pointers; the
        // names are the source's entries (extern "C").
        unsafe {
            ok(
                cu::cuModuleLoadData(&mut module, image.as_ptr().cast()),
                "cuModuleLoadData",
            );
            ok(
                cu::cuModuleGetFunction(&mut kernels.0, module, c"b16_update".as_ptr()),
                "cuModuleGetFunction",
            );
            ok(
                cu::cuModuleGetFunction(&mut kernels.1, module, c"b16_xpay".as_ptr()),
                "cuModuleGetFunction",
            );
        }
        let mut h = Hand {
            _bufs: (ints, f, bytes),
            ptr,
            n: len,
            stream,
            blas,
            sparse,
            descr: (a, dx, dy),
            spmv_ws: wp[0],
            module,
            kernels,
            graph: std::ptr::null_mut(),
            exec: std::ptr::null_mut(),
        };
        h.restart();
        // SAFETY: a capture of this thread's calls on the stream, which
        // nothing else uses; the steps queue only stream work (no
        // allocation, no synchronization: the workspaces are set).
        unsafe {
            ok(
                cu::cuStreamBeginCapture_v2(
                    cs,
                    cu::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                ),
                "cuStreamBeginCapture",
            );
            for _ in 0..GRAPHED_STEPS {
                h.step();
            }
            ok(
                cu::cuStreamEndCapture(cs, &mut h.graph),
                "cuStreamEndCapture",
            );
            ok(
                cu::cuGraphInstantiateWithFlags(&mut h.exec, h.graph, 0),
                "cuGraphInstantiate",
            );
        }
        h.sync();
        h
    }

    /// `x = 0`, `r = p = b`, `rr = r . r`, queued.
    pub(super) fn restart(&self) {
        let [b, x, r, p, _, rr, ..] = self.ptr;
        let bytes = 8 * self.n;
        let cs = self.stream as cu::CUstream;
        // SAFETY: as in `new`: `n` values each, on the stream alone.
        unsafe {
            ok(cu::cuMemsetD8Async(x, 0, bytes, cs), "cuMemsetD8Async");
            ok(
                cu::cuMemcpyDtoDAsync_v2(r, b, bytes, cs),
                "cuMemcpyDtoDAsync",
            );
            ok(
                cu::cuMemcpyDtoDAsync_v2(p, b, bytes, cs),
                "cuMemcpyDtoDAsync",
            );
            self.dot(r, r, rr);
        }
    }

    /// `out = x . y` (cuBLAS, device pointer mode), queued.
    ///
    /// # Safety
    ///
    /// `x`, `y` of `n` values and `out` of one, of this state's buffers.
    unsafe fn dot(&self, x: u64, y: u64, out: u64) {
        let p = |a: u64| a as usize as *const f64;
        // SAFETY: the caller's.
        ok_blas(
            unsafe {
                cublas::cublasDdot_v2(
                    self.blas,
                    self.n as i32,
                    p(x),
                    1,
                    p(y),
                    1,
                    out as usize as *mut f64,
                )
            },
            "cublasDdot",
        );
    }

    /// One fused step, queued (as [`Cg::fused_step`]); `rr` and `rr_new`
    /// swap, so an even number of steps leaves them where they were.
    unsafe fn step(&mut self) {
        let [_, x, r, p, q, rr, rr_new, pq] = self.ptr;
        let (one, zero) = (1.0f64, 0.0f64);
        let cfg = LaunchConfig::for_elements(self.n, 256);
        let n = self.n as u64;
        // SAFETY: the descriptors are of p (x) and q (y), the workspace
        // of the size cuSPARSE asked for; the rest as in `new`.
        unsafe {
            ok_sparse(
                cusparse::cusparseSpMV(
                    self.sparse,
                    cusparse::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
                    (&one as *const f64).cast(),
                    self.descr.0,
                    self.descr.1,
                    (&zero as *const f64).cast(),
                    self.descr.2,
                    cusparse::cudaDataType::CUDA_R_64F,
                    cusparse::cusparseSpMVAlg_t::CUSPARSE_SPMV_ALG_DEFAULT,
                    self.spmv_ws as usize as *mut c_void,
                ),
                "cusparseSpMV",
            );
            self.dot(p, q, pq);
        }
        raw::launch(
            self.kernels.0 as u64,
            self.stream,
            cfg.grid[0],
            cfg.block[0],
            &mut [x, r, p, q, rr, pq, n],
        );
        // SAFETY: as above.
        unsafe { self.dot(r, r, rr_new) };
        raw::launch(
            self.kernels.1 as u64,
            self.stream,
            cfg.grid[0],
            cfg.block[0],
            &mut [p, r, rr_new, rr, n],
        );
        self.ptr.swap(5, 6);
    }

    /// One run: the graph of [`GRAPHED_STEPS`] steps, launched.
    pub(super) fn launch(&self) {
        // SAFETY: the instantiated graph, on the stream it was captured
        // from; its buffers live.
        ok(
            unsafe { cu::cuGraphLaunch(self.exec, self.stream as cu::CUstream) },
            "cuGraphLaunch",
        );
    }

    /// Waits for the stream.
    pub(super) fn sync(&self) {
        // SAFETY: a live stream.
        ok(
            unsafe { cu::cuStreamSynchronize(self.stream as cu::CUstream) },
            "cuStreamSynchronize",
        );
    }

    /// `r . r` now (after a [`Hand::sync`]).
    pub(super) fn rr(&self) -> f64 {
        let mut v = 0.0f64;
        // SAFETY: one f64 of `rr`'s buffer into a local; synchronous.
        ok(
            unsafe { cu::cuMemcpyDtoH_v2((&mut v as *mut f64).cast(), self.ptr[5], 8) },
            "cuMemcpyDtoH",
        );
        v
    }
}

impl Drop for Hand {
    fn drop(&mut self) {
        self.sync();
        // SAFETY: made in `new`, used by nothing after the sync.
        unsafe {
            cu::cuGraphExecDestroy(self.exec);
            cu::cuGraphDestroy(self.graph);
            cu::cuModuleUnload(self.module);
            cusparse::cusparseDestroySpMat(self.descr.0);
            cusparse::cusparseDestroyDnVec(self.descr.1);
            cusparse::cusparseDestroyDnVec(self.descr.2);
            cusparse::cusparseDestroy(self.sparse);
            cublas::cublasDestroy_v2(self.blas);
        }
    }
}
