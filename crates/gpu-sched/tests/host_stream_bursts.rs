//! Defect 6: on the host backend a stream is a thread, and the stream pool
//! retires the streams a burst of live tasks made once they are idle (DESIGN "Streams are a resource").
//! The retired streams' threads were never joined: each kept its stack
//! mapped, about 76 MiB of address space a burst of 40 tasks, 1.5 GiB over
//! 20 bursts. Now a destroyed stream's thread is joined once it has run
//! what was queued (and its slot reused), so the process's address space
//! stays where the first bursts left it.
//!
//! One test in its own binary (process): the address space measured is
//! this test's alone.

use gpu_kernels as k;
use gpu_sched::{BackendChoice, Runtime, RuntimeOptions};

const WARM: usize = 4;
const BURST: usize = 40;
const BURSTS: usize = 20;

/// The process's address space (`VmSize`), in bytes.
fn address_space() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmSize:"))
        .expect("a VmSize line");
    let kib: usize = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("VmSize in kB");
    kib << 10
}

/// A burst of `BURST` live tasks, each with work on its own stream; then
/// the streams are idle and the pool trims itself back to its warm size.
fn burst(rt: &Runtime) {
    let tasks: Vec<_> = (0..BURST).map(|_| rt.begin_task().unwrap()).collect();
    let mut bufs = Vec::new();
    for (i, t) in tasks.iter().enumerate() {
        let mut b = t.alloc::<f32>(16).unwrap();
        k::fill(t, &mut b, i as f32).unwrap();
        bufs.push(b);
    }
    for (i, (t, b)) in tasks.iter().zip(&bufs).enumerate() {
        assert_eq!(t.to_vec(b).unwrap(), vec![i as f32; 16]);
    }
    drop(bufs);
    drop(tasks);
    rt.synchronize().unwrap();
    // A task's end trims the pool: every stream of the burst is idle now.
    let t = rt.begin_task().unwrap();
    t.synchronize().unwrap();
    drop(t);
    let live = rt.live();
    assert!(
        live.streams <= WARM + live.streams_in_use,
        "the burst's streams were retired: {live:?}"
    );
}

#[test]
fn bursts_of_tasks_do_not_grow_the_address_space() {
    if !cfg!(target_os = "linux") {
        return;
    }
    let rt = Runtime::new(RuntimeOptions {
        backend: BackendChoice::Host,
        warm_streams: WARM,
        ..RuntimeOptions::default()
    })
    .unwrap();
    // The first bursts settle what stays: allocator arenas, cached stacks.
    burst(&rt);
    burst(&rt);
    let before = address_space();
    for _ in 0..BURSTS {
        burst(&rt);
    }
    let grown = address_space().saturating_sub(before);
    // Before the fix: about 76 MiB a burst, 1.4 GiB here. A quarter of
    // what a burst's stacks take (2 MiB a thread) over the bursts is room
    // for the allocator, never for the threads.
    let bound = BURSTS * BURST * (2 << 20) / 4;
    assert!(
        grown < bound,
        "{BURSTS} bursts of {BURST} tasks grew the address space by {} MiB (bound {} MiB)",
        grown >> 20,
        bound >> 20
    );
    assert!(rt.races().is_empty(), "{:?}", rt.races());
}
