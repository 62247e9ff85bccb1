//! B12: an NCCL all-reduce (sum, f32, in place) over every device of the
//! process through the library (`gpu::nccl::Communicator::all_reduce`, a
//! tracked operation a device) against raw NCCL calls (`ncclCommInitAll`'s
//! communicators, `ncclAllReduce` a device inside one group) on the same
//! buffers and streams, 1 MiB to 1 GiB. Each size: a few warm-up calls,
//! then `n` calls queued back to back and the devices synchronized, the
//! time a call their mean; the two alternate for `ROUNDS` rounds and each
//! row is the median. Prints one JSON row a line
//! (`{"name": .., "value": .., "unit": "ns"}`), read by
//! `cargo xtask bench --multi-gpu`; needs two GPUs and NCCL. `--quick`:
//! 1 MiB only, one round. On the host backend (`GPU_BACKEND=host`, two
//! simulated devices) only the library's rows are printed: there is no raw
//! NCCL to compare with, so no ratio comes of them.
//!
//! ```text
//! cargo bench -p gpu-benches --bench nccl [-- --quick]
//! ```

use cudarc::nccl::{result as nccl, sys};
use gpu::nccl::{Communicator, ReduceOp};
use gpu::raw::RawTask;
use gpu::{BackendChoice, BackendKind, Buffer, Runtime, RuntimeOptions, TaskContext};
use std::time::Instant;

/// Rounds of (library, raw) a size.
const ROUNDS: usize = 5;
/// Sizes, bytes.
const SIZES: [usize; 6] = [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Never NVLink multicast (it can take the host's GPUs out of service).
    std::env::set_var("NCCL_NVLS_ENABLE", "0");
    let quick = std::env::args().any(|a| a == "--quick");
    let rt = Runtime::new(RuntimeOptions {
        backend: BackendChoice::Auto,
        host_devices: 2,
        ..RuntimeOptions::default()
    })?;
    let n = rt.device_count();
    if n < 2 {
        return Err(format!("B12 needs two GPUs; the driver reports {n}").into());
    }
    let cuda = rt.backend() == BackendKind::Cuda;
    if !cuda {
        eprintln!("B12: host backend: the library's rows only (no raw NCCL here)");
    }
    let (sizes, rounds): (&[usize], usize) = if quick {
        (&SIZES[..1], 1)
    } else {
        (&SIZES, ROUNDS)
    };
    let devices = (0..n)
        .map(|d| rt.device(d))
        .collect::<gpu::Result<Vec<_>>>()?;
    let comm = Communicator::all_devices(&rt)?;
    let raw = if cuda { Some(RawComms::new(n)?) } else { None };
    let tasks = devices
        .iter()
        .map(Runtime::begin_task)
        .collect::<gpu::Result<Vec<_>>>()?;
    for &bytes in sizes {
        let len = bytes / 4;
        let mut bufs = tasks
            .iter()
            .map(|t| t.zeros::<f32>(len))
            .collect::<gpu::Result<Vec<Buffer<f32>>>>()?;
        let calls = if quick {
            3
        } else {
            (8usize << 30).div_ceil(bytes).clamp(5, 200)
        };
        let (mut lib, mut raw_t) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            lib.push(time(calls, &devices, || {
                let mut refs: Vec<&mut Buffer<f32>> = bufs.iter_mut().collect();
                Ok(comm.all_reduce(&mut refs, ReduceOp::Sum)?)
            })?);
            if let Some(raw) = &raw {
                let ptrs = tasks
                    .iter()
                    .zip(bufs.iter_mut())
                    .map(|(t, b)| t.raw_ptr(b))
                    .collect::<gpu::Result<Vec<u64>>>()?;
                raw_t.push(time(calls, &devices, || {
                    raw.all_reduce(&ptrs, len, &tasks)
                })?);
            }
        }
        let name = label(bytes);
        row(&format!("B12/library-{name}"), median(&mut lib));
        if !raw_t.is_empty() {
            row(&format!("B12/raw-{name}"), median(&mut raw_t));
        }
    }
    drop(raw);
    Ok(())
}

/// `1MiB`, `1GiB`.
fn label(bytes: usize) -> String {
    if bytes >= 1 << 30 {
        format!("{}GiB", bytes >> 30)
    } else {
        format!("{}MiB", bytes >> 20)
    }
}

/// A row in nanoseconds (what `cargo xtask bench` reads).
fn row(name: &str, us: f64) {
    let ns = us * 1e3;
    println!("{{\"name\": \"{name}\", \"value\": {ns:.1}, \"unit\": \"ns\"}}");
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Microseconds a call of `f`: 3 warm-up calls, then `calls` back to back
/// and every device synchronized.
fn time(
    calls: usize,
    devices: &[Runtime],
    mut f: impl FnMut() -> Result<(), Box<dyn std::error::Error>>,
) -> Result<f64, Box<dyn std::error::Error>> {
    for _ in 0..3 {
        f()?;
    }
    for d in devices {
        d.synchronize()?;
    }
    let start = Instant::now();
    for _ in 0..calls {
        f()?;
    }
    for d in devices {
        d.synchronize()?;
    }
    Ok(start.elapsed().as_secs_f64() * 1e6 / calls as f64)
}

/// Raw NCCL communicators, one a device, as a user without the library
/// makes them.
struct RawComms {
    comms: Vec<sys::ncclComm_t>,
}

impl RawComms {
    fn new(n: usize) -> Result<RawComms, String> {
        let mut comms = vec![std::ptr::null_mut(); n];
        let devs: Vec<i32> = (0..n as i32).collect();
        // SAFETY: `comms` has room for `n` handles and `devs` lists `n`
        // valid ordinals.
        unsafe { nccl::comm_init_all(comms.as_mut_ptr(), n as i32, devs.as_ptr()) }
            .map_err(|e| format!("ncclCommInitAll: {e:?}"))?;
        Ok(RawComms { comms })
    }

    /// One in-place all-reduce of `len` f32 at `ptrs` (one a device), on
    /// the tasks' streams, in one group.
    fn all_reduce(
        &self,
        ptrs: &[u64],
        len: usize,
        tasks: &[TaskContext],
    ) -> Result<(), Box<dyn std::error::Error>> {
        let fail = |e: nccl::NcclError| format!("raw NCCL: {e:?}");
        nccl::group_start().map_err(fail)?;
        for ((&p, &c), t) in ptrs.iter().zip(&self.comms).zip(tasks) {
            // SAFETY: `p` is a live buffer of `len` f32 on the device of
            // `c`, and `t`'s stream is that device's; nothing else uses the
            // buffer until the devices are synchronized.
            unsafe {
                nccl::all_reduce(
                    p as *const _,
                    p as *mut _,
                    len,
                    sys::ncclDataType_t::ncclFloat32,
                    sys::ncclRedOp_t::ncclSum,
                    c,
                    t.cu_stream() as sys::cudaStream_t,
                )
            }
            .map_err(fail)?;
        }
        nccl::group_end().map_err(fail)?;
        Ok(())
    }
}

impl Drop for RawComms {
    fn drop(&mut self) {
        for &c in &self.comms {
            // SAFETY: each communicator came from `ncclCommInitAll` and is
            // destroyed once, after the devices were synchronized.
            let _ = unsafe { nccl::comm_destroy(c) };
        }
    }
}
