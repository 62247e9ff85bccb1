//! # 10: MPI ranks, the seed's scenario for real (feature `mpi`)
//!
//! Every rank holds a boundary buffer, a halo buffer and an interior
//! buffer. The parent task writes the boundary, spawns a child that
//! finishes it and exchanges it with the neighbouring ranks through MPI
//! ([`gpu::mpi::sendrecv`]), and queues the long interior work on its own
//! stream after the spawn. The exchange waits for the boundary's producers
//! only, never for the interior: here the interior is held behind a gate
//! that only the child opens, once its exchange returned, so an exchange
//! that waited for the interior would return only after the gate gave up
//! (and the check below fails, on every run: no timing is involved).
//!
//! Then: `send` and `recv` between pairs of ranks (and a message shorter
//! than its buffer, a typed error), and `all_reduce_sum`. It checks every
//! result, prints each failure, then rank 0 prints `N passed, M failed`
//! (summed over the ranks), and every rank exits non-zero if any check
//! failed.
//!
//! ```text
//! cargo build -p gpu-scope --features mpi --example 10-mpi
//! GPU_BACKEND=host mpirun --allow-run-as-root --oversubscribe -np 2 target/debug/examples/10-mpi
//! # the staged path (pinned host memory) on the host backend:
//! GPU_BACKEND=host GPU_MPI_STAGING=1 mpirun --allow-run-as-root --oversubscribe -np 2 target/debug/examples/10-mpi
//! # one GPU per rank (device = rank on its node % device count):
//! GPU_BACKEND=cuda mpirun --allow-run-as-root -np 2 -x GPU_BACKEND target/debug/examples/10-mpi
//! ```

use gpu::mpi::rsmpi::{
    self,
    collective::{CommunicatorCollectives, SystemOperation},
    topology::{Communicator, SimpleCommunicator},
    Threading,
};
use gpu::mpi::SharedComm;
use gpu::{Runtime, RuntimeOptions};
use gpu_kernels as k;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Elements of the boundary and halo buffers (more than Open MPI's eager
/// limit, so a send really waits for its receive).
const NB: usize = 16 << 10;
/// Elements of the interior buffer.
const NI: usize = 1 << 20;
/// How long the interior work spins (after the gate opens).
const SPIN: Duration = Duration::from_millis(200);
/// How long the gate waits before giving up: never reached when the
/// exchange does not wait for the interior.
const GATE_TIMEOUT: Duration = Duration::from_secs(60);

/// Pass/fail counts of this rank; failures are printed as they happen.
struct Checks {
    rank: i32,
    passed: u64,
    failed: u64,
}

impl Checks {
    fn check(&mut self, what: &str, ok: bool, detail: impl FnOnce() -> String) {
        if ok {
            self.passed += 1;
        } else {
            self.failed += 1;
            eprintln!("rank {}: FAILED {what}: {}", self.rank, detail());
        }
    }

    fn all(&mut self, what: &str, v: &[f32], want: f32) {
        let bad = v.iter().position(|&x| x != want);
        self.check(what, bad.is_none(), || {
            let i = bad.unwrap_or(0);
            format!("element {i} is {}, {want} expected", v[i])
        });
    }
}

fn main() {
    // Tasks call MPI from worker threads.
    let (universe, threading) =
        rsmpi::initialize_with_threading(Threading::Multiple).expect("MPI initializes");
    // A rank that stops early leaves the others waiting in MPI for good: a
    // panic, or an error, ends the whole job (MPI_Abort).
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        SimpleCommunicator::world().abort(101)
    }));
    let world = universe.world();
    let rank = world.rank();
    let mut c = Checks {
        rank,
        passed: 0,
        failed: 0,
    };
    c.check(
        "MPI allows calls from any thread",
        threading == Threading::Multiple,
        || format!("{threading:?}"),
    );
    if let Err(e) = run(world, &mut c) {
        eprintln!("rank {rank}: error: {e}");
        SimpleCommunicator::world().abort(2)
    }

    // The totals over every rank, printed by rank 0.
    let world = universe.world();
    let mine = [c.passed, c.failed];
    let mut total = [0u64; 2];
    world.all_reduce_into(&mine[..], &mut total[..], SystemOperation::sum());
    if rank == 0 {
        println!("{} passed, {} failed", total[0], total[1]);
    }
    drop(universe);
    if total[1] > 0 {
        std::process::exit(1);
    }
}

/// Every check of this rank.
fn run(world: SimpleCommunicator, c: &mut Checks) -> gpu::Result<()> {
    // A communicator that tasks may share (it checks the threading level).
    let world = SharedComm::new(world)?;
    let rt = rank_runtime(&world)?;
    if world.rank() == 0 {
        println!(
            "{} ranks, {} backend, MPI path {:?} (CUDA-aware: {})",
            world.size(),
            rt.backend(),
            gpu::mpi::path(&rt),
            gpu::mpi::cuda_aware()
        );
    }
    seed_scenario(&rt, &world, c)?;
    send_recv(&rt, &world, c)?;
    all_reduce(&rt, &world, c)?;
    nccl_by_rank(&rt, &world, c)
}

/// NCCL with one device a process: rank 0 makes the unique id, MPI
/// broadcasts its bytes, every rank joins (`Communicator::with_id`) and
/// all-reduces a device buffer. The host backend has no NCCL across
/// processes: there it must say so (`Unsupported`).
fn nccl_by_rank(rt: &Runtime, world: &SharedComm, c: &mut Checks) -> gpu::Result<()> {
    use gpu::mpi::rsmpi::collective::Root;
    use gpu::nccl::{Communicator as Nccl, ReduceOp, UniqueId};
    let (rank, size) = (world.rank(), world.size());
    let root = world.process_at_rank(0);
    if rt.backend() == gpu::BackendKind::Host {
        let id = UniqueId::from_bytes([0; 128]);
        // SAFETY: refused before any rank could meet (host backend).
        let r = unsafe { Nccl::with_id(rt, id, rank as usize, size as usize) };
        c.check(
            "NCCL by rank on the host backend is Unsupported",
            matches!(r, Err(gpu::Error::Unsupported(_))),
            || format!("{:?}", r.map(|_| ())),
        );
        return Ok(());
    }
    let mut bytes = [0u8; 128];
    if rank == 0 {
        bytes = *Nccl::unique_id()?.as_bytes();
    }
    root.broadcast_into(&mut bytes[..]);
    // SAFETY: every rank runs this function: one all-reduce of 2^20 f32
    // with `Sum`, the only call on the communicator.
    let comm = unsafe {
        Nccl::with_id(
            rt,
            UniqueId::from_bytes(bytes),
            rank as usize,
            size as usize,
        )?
    };
    let t = rt.begin_task()?;
    let mut b = t.from_host(&vec![(rank + 1) as f32; 1 << 20])?;
    // A slow write first: the all-reduce must wait for it on the device.
    k::spin_touch(&t, &mut b, Duration::from_millis(20))?;
    comm.all_reduce(&mut [&mut b], ReduceOp::Sum)?;
    let want = (size * (size + 1) / 2 + size) as f32;
    let got = t.to_vec(&b)?;
    c.check(
        "NCCL all-reduce by rank (unique id through MPI)",
        got.iter().all(|&x| x == want),
        || format!("{:?}, {want} expected", &got[..4]),
    );
    Ok(())
}

/// This rank's runtime: with `GPU_BACKEND=cuda`, one GPU per rank (the
/// rank's index on its node, modulo the node's devices); otherwise the
/// default (`GPU_BACKEND=host`: the host backend).
fn rank_runtime(world: &SharedComm) -> gpu::Result<Runtime> {
    let mut opts = RuntimeOptions::default();
    if std::env::var("GPU_BACKEND").as_deref() == Ok("cuda") {
        let local = world.split_shared(0).rank() as usize;
        let devices = cudarc::driver::CudaContext::device_count()
            .map_err(|e| gpu::Error::NoDevice(format!("counting devices: {e:?}")))?;
        opts.device = local % (devices.max(1) as usize);
        println!("rank {}: device {}", world.rank(), opts.device);
    }
    Runtime::new(opts)
}

/// The seed's scenario: the boundary goes to the neighbours while the
/// interior work, queued after it on the parent's stream, is still held.
fn seed_scenario(rt: &Runtime, world: &SharedComm, c: &mut Checks) -> gpu::Result<()> {
    let (rank, size) = (world.rank(), world.size());
    let setup = rt.begin_task()?;
    let mut boundary = setup.zeros::<f32>(NB)?;
    let mut halo = setup.zeros::<f32>(NB)?;
    let mut interior = setup.zeros::<f32>(NI)?;
    setup.synchronize()?;
    drop(setup);

    let gate = rt.gate()?;
    let interior_queued = AtomicBool::new(false);
    let exchanged_while_held = AtomicBool::new(false);
    let exchanged_at = std::sync::Mutex::new(None);
    world.barrier(); // the ranks start the scenario together
    let start = Instant::now();
    gpu::scope_on(rt, |s| {
        k::fill(s, &mut boundary, (rank + 1) as f32)?; // the boundary's producer
        s.spawn(|t| {
            // Ordered after the fill by the spawn's fence.
            k::add_scalar(t, &mut boundary, 0.5)?;
            // Start only once the interior is queued behind the gate, so
            // that a wait for it could not be missed.
            let queued = Instant::now();
            while !interior_queued.load(Ordering::SeqCst) {
                assert!(
                    queued.elapsed() < GATE_TIMEOUT,
                    "the interior never got queued"
                );
                std::thread::yield_now();
            }
            let right = world.process_at_rank((rank + 1) % size);
            let left = world.process_at_rank((rank + size - 1) % size);
            let r = gpu::mpi::sendrecv(t, &boundary, &right, &mut halo, &left, 7);
            // The gate is still closed: had the exchange waited for the
            // interior, it would have returned only after the gate gave up.
            exchanged_while_held.store(!gate.timed_out(), Ordering::SeqCst);
            *exchanged_at.lock().unwrap() = Some(start.elapsed());
            gate.open();
            r
        });
        // The interior work, on the parent's stream after the spawn: held
        // until the child's exchange returned, then long.
        k::gate(s, &gate, GATE_TIMEOUT)?;
        k::spin_touch(s, &mut interior, SPIN)?;
        k::add_scalar(s, &mut interior, 1.0)?;
        interior_queued.store(true, Ordering::SeqCst);
        Ok(())
    })?;
    c.check(
        "the exchange returned before the interior work (the gate had not given up)",
        exchanged_while_held.load(Ordering::SeqCst),
        || "the gate timed out: the exchange waited for the interior".to_string(),
    );
    let t = rt.begin_task()?;
    let from = (rank + size - 1) % size;
    c.all(
        "the halo holds the left neighbour's boundary",
        &t.to_vec(&halo)?,
        (from + 1) as f32 + 0.5,
    );
    c.all(
        "the boundary was not changed by its send",
        &t.to_vec(&boundary)?,
        (rank + 1) as f32 + 0.5,
    );
    c.all(
        "the interior work ran, after the scope",
        &t.to_vec(&interior)?,
        2.0,
    );
    // The interior ran on after the exchange: at least its spin, since
    // the gate opened only once the exchange had returned.
    let (exchanged, done) = (*exchanged_at.lock().unwrap(), start.elapsed());
    c.check(
        "the interior ran on after the exchange",
        exchanged.is_some_and(|x| done >= x + SPIN),
        || format!("exchange returned at {exchanged:?}, interior done at {done:?}"),
    );
    c.check("no races", rt.races().is_empty(), || {
        format!("{:?}", rt.races())
    });
    Ok(())
}

/// `send` and `recv` between pairs of ranks (0 with 1, 2 with 3, ...):
/// the even rank sends first; then a message shorter than its buffer.
fn send_recv(rt: &Runtime, world: &SharedComm, c: &mut Checks) -> gpu::Result<()> {
    let rank = world.rank();
    let partner = rank ^ 1;
    if partner >= world.size() {
        println!("rank {rank}: no partner for send/recv; those checks are skipped");
        return Ok(());
    }
    let p = world.process_at_rank(partner);
    let t = rt.begin_task()?;
    let mine = t.from_host(&vec![(10 + rank) as f32; NB])?;
    let mut theirs = t.zeros::<f32>(NB)?;
    if rank % 2 == 0 {
        gpu::mpi::send(&t, &mine, &p, 1)?;
        gpu::mpi::recv(&t, &mut theirs, &p, 2)?;
    } else {
        gpu::mpi::recv(&t, &mut theirs, &p, 1)?;
        gpu::mpi::send(&t, &mine, &p, 2)?;
    }
    c.all(
        "recv got the partner's send",
        &t.to_vec(&theirs)?,
        (10 + partner) as f32,
    );

    // A view of 3 elements into a buffer of 4: a length mismatch, typed.
    let mut four = t.zeros::<f32>(4)?;
    if rank % 2 == 0 {
        gpu::mpi::send(&t, &mine.slice(..3)?, &p, 3)?;
    } else {
        let r = gpu::mpi::recv(&t, &mut four, &p, 3);
        c.check(
            "a short message is a LengthMismatch",
            matches!(
                r,
                Err(gpu::Error::LengthMismatch {
                    expected: 4,
                    got: 3,
                    ..
                })
            ),
            || format!("{r:?}"),
        );
    }
    Ok(())
}

/// `all_reduce_sum` over every rank; then mismatched lengths, refused
/// before MPI is called (on every rank, so no rank waits in it).
fn all_reduce(rt: &Runtime, world: &SharedComm, c: &mut Checks) -> gpu::Result<()> {
    let (rank, size) = (world.rank(), world.size());
    let t = rt.begin_task()?;
    let src = t.from_host(&vec![(rank + 1) as f64; 1000])?;
    let mut dst = t.zeros::<f64>(1000)?;
    gpu::mpi::all_reduce_sum(&t, &**world, &src, &mut dst)?;
    let want = (size * (size + 1) / 2) as f64;
    let got = t.to_vec(&dst)?;
    c.check("all_reduce_sum", got.iter().all(|&x| x == want), || {
        format!("{:?}, {want} expected", &got[..4])
    });
    let mut short = t.zeros::<f64>(999)?;
    let r = gpu::mpi::all_reduce_sum(&t, &**world, &src, &mut short);
    c.check(
        "all_reduce_sum of two lengths is a LengthMismatch",
        matches!(r, Err(gpu::Error::LengthMismatch { .. })),
        || format!("{r:?}"),
    );
    Ok(())
}
