//! # 09: the 2D heat equation over every GPU of the process
//!
//! The grid's rows are split into one block per device. Each device holds
//! its block twice (the current and the next state) and two one-row halos
//! a side, by step parity: the rows just above and below its block, which
//! its neighbours write. A task a device (a `TaskContext` of that device's
//! runtime), all driven from one thread in program order (each buffer's
//! uses are ordered as they are submitted), queues each step:
//!
//! 1. its first and last rows of the next state (they read the halos);
//! 2. a peer copy of each into the neighbour's halo for the next step
//!    (`copy_peer`: NVLink where the devices are peers), on a second task
//!    of the device, so that they overlap the interior;
//! 3. its interior rows, which read no halo, so they never wait for a
//!    neighbour.
//!
//! Nobody writes a wait: each buffer carries its last writer and readers,
//! so a device's boundary rows wait on the device for the neighbour's copy
//! of the step before, and a copy into a halo waits for the neighbour's
//! reads of it two steps before. The result is checked against a CPU loop
//! over the whole grid; `--nx/--ny/--steps` size a timed run
//! (`cargo xtask bench --multi-gpu` runs B11 through it), `--no-halo`
//! leaves the exchange out (wrong results, for the cost of the exchange),
//! `--devices N` uses the first N devices.
//!
//! ```text
//! cargo run --release -p gpu-examples --example 09-multi-gpu-heat
//! ```
//!
//! On the host backend it simulates two devices (one race detector over
//! both, so a missing cross-device wait is reported).
//!
//! ## With MPI: one rank a GPU
//!
//! Built with the feature `mpi`, `--mpi` runs one block a rank under
//! `mpirun` (device = the rank's index on its node modulo its devices).
//! Each step a rank queues its boundary rows on one task and its interior
//! on another, then exchanges the boundary rows with its neighbours through
//! `gpu::mpi::sendrecv`: the send waits on the host for the boundary rows'
//! kernels only (the buffer's producers), not for the interior, which runs
//! on meanwhile; the received rows go into the halos as tracked copies.
//!
//! ```text
//! cargo build --release -p gpu-scope --features mpi --example 09-multi-gpu-heat
//! mpirun -np 2 target/release/examples/09-multi-gpu-heat --mpi
//! ```

use common::heat;
use common::heat_parts;

use gpu::{BackendChoice, BackendKind, Buffer, Runtime, RuntimeOptions};
use heat_parts::HeatPart;
use std::time::Instant;

/// The diffusion number (stable up to 1/4).
const ALPHA: f32 = 0.2;
/// Largest difference allowed against the CPU loop.
const TOLERANCE: f32 = 1e-5;

/// What one run does.
#[derive(Clone, Copy, Debug)]
struct Run {
    nx: usize,
    ny: usize,
    steps: usize,
    devices: usize,
    halo: bool,
    /// Compare with the CPU loop (small grids).
    check: bool,
    /// One rank a device, halos through MPI.
    mpi: bool,
}

/// One device's rows: global rows `g0 .. g0 + rows`.
struct Block {
    rt: Runtime,
    heat: HeatPart,
    g0: usize,
    rows: usize,
    u: Buffer<f32>,
    v: Buffer<f32>,
}

/// The halos of every device: `[device][above = 0, below = 1][parity]`,
/// each one row. A device reads its own; its neighbours write them.
type Halos = Vec<[[Buffer<f32>; 2]; 2]>;

fn parse() -> Result<Run, String> {
    let mut run = Run {
        nx: 0,
        ny: 0,
        steps: 0,
        devices: 0,
        halo: true,
        check: true,
        mpi: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> Result<usize, String> {
            args.next()
                .and_then(|v| v.parse().ok())
                .ok_or(format!("{name} takes a number"))
        };
        match a.as_str() {
            "--nx" => run.nx = num("--nx")?,
            "--ny" => run.ny = num("--ny")?,
            "--steps" => run.steps = num("--steps")?,
            "--devices" => run.devices = num("--devices")?,
            "--no-halo" => run.halo = false,
            "--mpi" => run.mpi = true,
            // The bundle's example runner passes an output folder.
            other if !other.starts_with("--") => {}
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(run)
}

/// The default sizes on `backend`, unless given.
fn sizes(run: &mut Run, backend: BackendKind) {
    let sized = run.nx > 0;
    if !sized {
        (run.nx, run.ny, run.steps) = match backend {
            BackendKind::Cuda => (256, 258, 50),
            BackendKind::Host => (64, 66, 10),
        };
    }
    run.check = !sized && run.halo;
}

/// Compares `got` with the CPU loop from `field`.
fn check(got: &[f32], field: Vec<f32>, run: &Run) -> Result<(), Box<dyn std::error::Error>> {
    let want = heat::reference(field, run.nx, run.ny, ALPHA, run.steps);
    let (worst, at) = heat::largest_difference(got, &want);
    println!(
        "  largest difference from the CPU loop: {worst:.2e} (row {}, col {})",
        at / run.nx,
        at % run.nx
    );
    if worst > TOLERANCE {
        return Err(
            format!("the field differs from the CPU loop by {worst:e} (> {TOLERANCE:e})").into(),
        );
    }
    println!("  matches the CPU loop (tolerance {TOLERANCE:e})");
    Ok(())
}

/// The timing line `cargo xtask bench --multi-gpu` reads.
fn report(backend: BackendKind, devices: usize, run: &Run, elapsed: std::time::Duration) {
    let ms = elapsed.as_secs_f64() * 1e3;
    let per_step = ms / (run.steps - 1).max(1) as f64;
    println!(
        "  {ms:.3} ms for {} steps ({per_step:.4} ms a step)",
        run.steps - 1
    );
    println!(
        "{{\"example\":\"09-multi-gpu-heat\",\"mode\":\"{}\",\"backend\":\"{backend}\",\"devices\":{devices},\"nx\":{},\"ny\":{},\"steps\":{},\"halo\":{},\"ms\":{ms:.4},\"ms_per_step\":{per_step:.5}}}",
        if run.mpi { "mpi" } else { "process" },
        run.nx,
        run.ny,
        run.steps - 1,
        run.halo,
    );
}

/// Rows of block `d` of `n` over `ny` rows, and its first global row.
fn block_rows(d: usize, n: usize, ny: usize) -> (usize, usize) {
    let rows = |d: usize| ny / n + usize::from(d < ny % n);
    ((0..d).map(rows).sum(), rows(d))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut run = parse()?;
    if run.mpi {
        #[cfg(feature = "mpi")]
        return by_rank::main(run);
        #[cfg(not(feature = "mpi"))]
        return Err("--mpi needs the example built with the feature mpi".into());
    }
    let rt = Runtime::new(RuntimeOptions {
        backend: BackendChoice::Auto,
        host_devices: 2,
        ..RuntimeOptions::default()
    })?;
    let backend = rt.backend();
    sizes(&mut run, backend);
    if run.devices == 0 {
        run.devices = rt.device_count();
    }
    let devices = (0..run.devices)
        .map(|d| rt.device(d))
        .collect::<gpu::Result<Vec<_>>>()?;
    println!(
        "09-multi-gpu-heat: backend {backend}; {} device(s) ({}); {}x{} grid, {} steps{}",
        devices.len(),
        devices[0].device_name(),
        run.nx,
        run.ny,
        run.steps,
        if run.halo { "" } else { "; no halo exchange" }
    );
    let field = heat::initial(run.nx, run.ny);
    let (mut blocks, mut halos) = upload(&devices, &run, &field)?;
    // One step first (loading kernels, warming pools), then the timed ones.
    steps(&mut blocks, &mut halos, &run, 0..1)?;
    for d in &devices {
        d.synchronize()?;
    }
    let start = Instant::now();
    steps(&mut blocks, &mut halos, &run, 1..run.steps)?;
    for d in &devices {
        d.synchronize()?;
    }
    report(backend, devices.len(), &run, start.elapsed());
    if backend == BackendKind::Host {
        let races = rt.races();
        if !races.is_empty() {
            return Err(format!("the race detector found {races:?}").into());
        }
        println!("  the race detector found no race across the devices");
    }
    if run.check {
        check(&download(&blocks, run.nx)?, field, &run)?;
    }
    Ok(())
}

/// Splits `field` into one block a device (and its halos for step 0).
fn upload(devices: &[Runtime], run: &Run, field: &[f32]) -> gpu::Result<(Vec<Block>, Halos)> {
    let (n, nx) = (devices.len(), run.nx);
    let mut blocks = Vec::with_capacity(n);
    let mut halos = Vec::with_capacity(n);
    for (d, rt) in devices.iter().enumerate() {
        let (g0, rows) = block_rows(d, n, run.ny);
        assert!(rows >= 3, "{rows} rows for device {d}: too few");
        let t = rt.begin_task()?;
        let own = &field[g0 * nx..(g0 + rows) * nx];
        // The rows next to the block (a copy of the block's own edge row
        // where the grid ends: never read, as the grid's edges are fixed).
        let above = if g0 > 0 {
            &field[(g0 - 1) * nx..g0 * nx]
        } else {
            &own[..nx]
        };
        let below = if g0 + rows < run.ny {
            &field[(g0 + rows) * nx..(g0 + rows + 1) * nx]
        } else {
            &own[(rows - 1) * nx..]
        };
        let pair = |row: &[f32]| -> gpu::Result<[Buffer<f32>; 2]> {
            Ok([t.from_host(row)?, t.from_host(row)?])
        };
        halos.push([pair(above)?, pair(below)?]);
        blocks.push(Block {
            heat: HeatPart::load(rt)?,
            rt: rt.clone(),
            g0,
            rows,
            u: t.from_host(own)?,
            v: t.from_host(own)?,
        });
    }
    Ok((blocks, halos))
}

/// Runs `range` of steps: a task a device, all driven from this thread in
/// program order (the order the ledger orders each buffer's uses in), so
/// every device's work is queued step by step while the devices run.
fn steps(
    blocks: &mut [Block],
    halos: &mut Halos,
    run: &Run,
    range: std::ops::Range<usize>,
) -> gpu::Result<()> {
    let n = blocks.len();
    let tasks = blocks
        .iter()
        .map(|b| b.rt.begin_task())
        .collect::<gpu::Result<Vec<_>>>()?;
    // The exchange's own task a device: its copies wait for the boundary
    // rows only, and the interior, queued on `tasks`, never behind them.
    let comm = blocks
        .iter()
        .map(|b| b.rt.begin_task())
        .collect::<gpu::Result<Vec<_>>>()?;
    let nx = run.nx;
    for step in range {
        let (p, q) = (step % 2, 1 - step % 2);
        // 1. Every device's boundary rows, from its halos.
        for (d, (b, t)) in blocks.iter_mut().zip(&tasks).enumerate() {
            let (above, below) = (&halos[d][0][p], &halos[d][1][p]);
            let (last, shape) = ((b.rows - 1) * nx, (nx, b.rows));
            let top = (above, &b.u, below);
            let g = (b.g0, run.ny);
            b.heat
                .step(t, &mut b.v.slice_mut(..nx)?, top, shape, (0, 1), g, ALPHA)?;
            let g_last = (b.g0 + b.rows - 1, run.ny);
            let end = &mut b.v.slice_mut(last..)?;
            b.heat
                .step(t, end, top, shape, (b.rows - 1, 1), g_last, ALPHA)?;
        }
        // 2. Into the neighbours' halos for the next step, on the
        // exchange's tasks.
        for (d, (b, t)) in blocks.iter().zip(&comm).enumerate() {
            let last = (b.rows - 1) * nx;
            if run.halo && d > 0 {
                t.copy_peer(&b.v.slice(..nx)?, &mut halos[d - 1][1][q])?;
            }
            if run.halo && d + 1 < n {
                t.copy_peer(&b.v.slice(last..)?, &mut halos[d + 1][0][q])?;
            }
        }
        // 3. The interiors: the block alone (the halo arguments are rows
        // of it, never read), so no neighbour's work is waited for.
        for (b, t) in blocks.iter_mut().zip(&tasks) {
            let (last, shape) = ((b.rows - 1) * nx, (nx, b.rows));
            let edge = b.u.slice(..nx)?;
            let inner = (&edge, &b.u, &edge);
            let g = (b.g0 + 1, run.ny);
            let out = &mut b.v.slice_mut(nx..last)?;
            b.heat
                .step(t, out, inner, shape, (1, b.rows - 2), g, ALPHA)?;
            std::mem::swap(&mut b.u, &mut b.v);
        }
    }
    Ok(())
}

/// The whole field, block by block.
fn download(blocks: &[Block], nx: usize) -> gpu::Result<Vec<f32>> {
    let mut field = Vec::new();
    for b in blocks {
        let v = b.rt.begin_task()?.to_vec(&b.u)?;
        assert_eq!(v.len(), b.rows * nx);
        field.extend_from_slice(&v);
    }
    Ok(field)
}

#[cfg(feature = "mpi")]
mod by_rank {
    //! `--mpi`: one block a rank.

    use super::{block_rows, check, heat, report, sizes, Run, ALPHA};
    use common::heat_parts::HeatPart;
    use gpu::mpi::rsmpi::{self, topology::Communicator, traits::*};
    use gpu::{Buffer, Runtime, RuntimeOptions};
    use std::time::Instant;

    pub(super) fn main(mut run: Run) -> Result<(), Box<dyn std::error::Error>> {
        let universe = rsmpi::initialize().ok_or("MPI did not initialize")?;
        let world = universe.world();
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        let mut opts = RuntimeOptions::default();
        if std::env::var("GPU_BACKEND").as_deref() == Ok("cuda") {
            let local = world.split_shared(0).rank() as usize;
            let count = cudarc::driver::CudaContext::device_count()
                .map_err(|e| format!("counting devices: {e:?}"))?;
            opts.device = local % (count.max(1) as usize);
        }
        let rt = Runtime::new(opts)?;
        let backend = rt.backend();
        sizes(&mut run, backend);
        let (g0, rows) = block_rows(rank, size, run.ny);
        let nx = run.nx;
        assert!(rows >= 3, "{rows} rows for rank {rank}: too few");
        if rank == 0 {
            println!(
                "09-multi-gpu-heat --mpi: backend {backend}; {size} ranks ({}); {}x{} grid, {} steps; MPI path {:?}",
                rt.device_name(),
                run.nx,
                run.ny,
                run.steps,
                gpu::mpi::path(&rt)
            );
        }
        let field = heat::initial(run.nx, run.ny);
        let heat = HeatPart::load(&rt)?;
        let (a, b) = (rt.begin_task()?, rt.begin_task()?);
        let own = &field[g0 * nx..(g0 + rows) * nx];
        let row = |g: usize| &field[g * nx..(g + 1) * nx];
        let mut above = a.from_host(if g0 > 0 { row(g0 - 1) } else { &own[..nx] })?;
        let mut below = a.from_host(if g0 + rows < run.ny {
            row(g0 + rows)
        } else {
            &own[(rows - 1) * nx..]
        })?;
        let (mut u, mut v): (Buffer<f32>, Buffer<f32>) = (a.from_host(own)?, a.from_host(own)?);
        a.synchronize()?;
        let up = (rank > 0).then(|| world.process_at_rank(rank as i32 - 1));
        let down = (rank + 1 < size).then(|| world.process_at_rank(rank as i32 + 1));
        let shape = (nx, rows);
        let last = (rows - 1) * nx;
        let mut step = |u: &mut Buffer<f32>, v: &mut Buffer<f32>| -> gpu::Result<()> {
            // The boundary rows on task `a`, the interior on task `b`.
            let halos = (&above, &*u, &below);
            heat.step(
                &a,
                &mut v.slice_mut(..nx)?,
                halos,
                shape,
                (0, 1),
                (g0, run.ny),
                ALPHA,
            )?;
            let g_last = (g0 + rows - 1, run.ny);
            heat.step(
                &a,
                &mut v.slice_mut(last..)?,
                halos,
                shape,
                (rows - 1, 1),
                g_last,
                ALPHA,
            )?;
            let edge = u.slice(..nx)?;
            let inner = (&edge, &*u, &edge);
            let out = &mut v.slice_mut(nx..last)?;
            heat.step(
                &b,
                out,
                inner,
                shape,
                (1, rows - 2),
                (g0 + 1, run.ny),
                ALPHA,
            )?;
            // The exchange: waits for the boundary kernels, not the
            // interior.
            if run.halo {
                if let Some(p) = &up {
                    gpu::mpi::sendrecv(&a, &v.slice(..nx)?, p, &mut above, p, 1)?;
                }
                if let Some(p) = &down {
                    gpu::mpi::sendrecv(&a, &v.slice(last..)?, p, &mut below, p, 1)?;
                }
            }
            std::mem::swap(u, v);
            Ok(())
        };
        step(&mut u, &mut v)?;
        a.synchronize()?;
        b.synchronize()?;
        world.barrier();
        let start = Instant::now();
        for _ in 1..run.steps {
            step(&mut u, &mut v)?;
        }
        a.synchronize()?;
        b.synchronize()?;
        world.barrier();
        let elapsed = start.elapsed();
        let mine = a.to_vec(&u)?;
        if rank == 0 {
            report(backend, size, &run, elapsed);
            let mut all = mine;
            for r in 1..size {
                let (got, _) = world.process_at_rank(r as i32).receive_vec::<f32>();
                all.extend_from_slice(&got);
            }
            if !rt.races().is_empty() {
                return Err(format!("races: {:?}", rt.races()).into());
            }
            if run.check {
                check(&all, field, &run)?;
            }
        } else {
            world.process_at_rank(0).send(&mine[..]);
        }
        Ok(())
    }
}
