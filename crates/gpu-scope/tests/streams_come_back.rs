//! DESIGN "Streams are a resource": streams are a resource. A burst of live tasks that each submit GPU
//! work takes more streams than the ledger tracks (they are then shared,
//! never an error), and once the burst is over and its streams are idle the
//! pool gives back every stream beyond its warm size: the live counts fall
//! back to the warm size plus what is in use (on the host backend the
//! streams' threads end with them).

mod common;

use common::assert_no_races;
use gpu::{Runtime, RuntimeOptions, Scope, ThreadPoolBuilder};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicUsize};

const WARM: usize = 4;

/// What the deepest task of a chain saw, all the others live.
#[derive(Default)]
struct Deepest {
    shared: AtomicBool,
    streams: AtomicUsize,
}

/// A chain of `n` nested joins, each level a task that binds a stream (a
/// small GPU operation) and holds it while the rest of the chain runs.
fn chain(s: &Scope<'_, '_>, n: usize, deepest: &Deepest) -> gpu::Result<()> {
    let mut b = s.zeros::<f32>(4)?;
    gpu_kernels::fill(s, &mut b, n as f32)?;
    if n == 0 {
        let l = s.runtime().ledger();
        deepest.shared.store(l.is_shared(s.stream_id()), Relaxed);
        deepest.streams.store(l.stream_count(), Relaxed);
        return Ok(());
    }
    s.join(|_a| Ok(()), |t| chain(t, n - 1, deepest))?;
    assert_eq!(s.to_vec(&b)?, vec![n as f32; 4]);
    Ok(())
}

#[test]
fn a_burst_of_streams_comes_back() {
    let rt = Runtime::new(RuntimeOptions {
        warm_streams: WARM,
        ..RuntimeOptions::default()
    })
    .unwrap();
    let before = rt.live();
    // Nesting is bounded by the stack, as in Rayon: a pool of its own with
    // room for 300 levels in a debug build.
    let pool = ThreadPoolBuilder::new()
        .num_threads(4)
        .stack_size(64 << 20)
        .build()
        .unwrap();
    let deepest = Deepest::default();
    pool.install(|| gpu::scope_on(&rt, |s| chain(s, 300, &deepest)))
        .unwrap();
    assert_eq!(
        deepest.streams.load(Relaxed),
        256,
        "the burst took every stream the ledger tracks"
    );
    assert!(
        deepest.shared.load(Relaxed),
        "more live tasks than streams: the deepest shares one"
    );
    rt.synchronize().unwrap();
    // A task that ends gives its stream back, and the pool trims itself to
    // its warm size: the burst's streams are idle now (their end-of-work
    // flags are set, or they ended idle).
    let t = rt.begin_task().unwrap();
    t.synchronize().unwrap();
    drop(t);
    let after = rt.live();
    assert_eq!(after.streams_in_use, before.streams_in_use, "{after:?}");
    assert!(
        after.streams <= WARM + after.streams_in_use,
        "back to the warm size plus what is in use: {after:?} (before the burst: {before:?})"
    );
    assert_eq!(rt.ledger().stream_count(), after.streams);
    assert_no_races(&rt);

    // The slots left are reused: a second burst works the same.
    pool.install(|| gpu::scope_on(&rt, |s| chain(s, 50, &deepest)))
        .unwrap();
    rt.synchronize().unwrap();
    let t = rt.begin_task().unwrap();
    t.synchronize().unwrap();
    drop(t);
    let again = rt.live();
    assert!(again.streams <= WARM + again.streams_in_use, "{again:?}");
    assert_no_races(&rt);
}
