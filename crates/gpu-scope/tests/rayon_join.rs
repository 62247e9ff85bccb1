//! rayon-core's own tests of `join` (`rayon-core/src/join/test.rs`), ported
//! to `gpu::join` and `Scope::join` as a Rayon user would port them: each
//! closure takes the task's `&gpu::Scope` and returns a `gpu::Result`.
//! Most run twice: with CPU-only task bodies, and (`_gpu`) with a tiny GPU
//! operation in each task, which binds the task a stream.
//!
//! Added to them: Fibonacci through `join` (rayon-demo's
//! `fibonacci_join_1_2` and `fibonacci_join_2_1`), and a chain of 10,000
//! nested joins that recurse in `b`. With a GPU operation in every task,
//! both hold many more live tasks with a bound stream than the stream pool
//! has streams (256): the library used to fail with `TooManyStreams` there;
//! now a task binds a stream only at its first GPU operation, and shares
//! one when every stream is held.
//!
//! `gpu::join` runs on a pool worker (called from outside the pool it
//! moves to one, as Rayon's does), and a worker that takes a chain's `b`
//! runs the rest of the chain on its own stack: a level takes about 3 KB
//! in a debug build without GPU work (`stack_depth.rs` measures it; more
//! with the GPU operations), so 10,000 levels need more than the default
//! 16 MiB (4,096 fit there: `stack_depth.rs`). This binary builds the global pool with
//! [`WORKER_STACK`] bytes of stack per worker
//! (`gpu::ThreadPoolBuilder::stack_size`, as a Rayon user sets Rayon's).
//!
//! Sizes: debug and release builds sort 2^20 elements and compute
//! `fib(25)` and run the 10,000-deep chains; `join_counter_overflow` joins
//! 100,000 times in a row (20,000 in a debug build) rather than 500,000.
//!
//! Left out (they need what `gpu` does not have):
//!
//! | rayon-core test          | why it is left out                                          |
//! |--------------------------|-------------------------------------------------------------|
//! | `join_context_both`      | no `join_context` / `FnContext::migrated` in `gpu`          |
//! | `join_context_neither`   | no `join_context`; needs a local 1-thread `ThreadPool`      |
//! | `join_context_second`    | no `join_context`; needs a local 2-thread `ThreadPool`      |
//!
//! `sort_in_pool` and `join_counter_overflow` use a local `ThreadPool` in
//! rayon; they are ported on the global pool (`gpu::install`).
//!
//! Since these were ported, `gpu::ThreadPool` (a pool of its own) exists:
//! the tests that need one are ported in `rayon_local_pool.rs`.

mod common;

use common::assert_nothing_held;
use common::rayon_port::*;
use gpu::{Scope, TaskContext};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{OnceLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

/// The stack of each worker of the global pool: a 10,000-deep chain of
/// joins may run on one worker (about 30 MB of it in a debug build
/// without GPU work).
const WORKER_STACK: usize = 256 << 20;

/// Builds the global pool with [`WORKER_STACK`] (once, before anything
/// uses the pool: every test calls this first).
fn build_pool() {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        gpu::ThreadPoolBuilder::new()
            .stack_size(WORKER_STACK)
            .build_global()
            .map_err(|e| e.to_string())
    });
    assert_eq!(built, &Ok(()), "building the global pool");
}

/// [`together`], the pool built first.
fn shared() -> RwLockReadGuard<'static, ()> {
    build_pool();
    together()
}

/// [`alone`], the pool built first.
fn exclusive() -> RwLockWriteGuard<'static, ()> {
    build_pool();
    alone()
}

// ----- quicksort ---------------------------------------------------------

/// Rayon's `quick_sort` through `gpu::join`, down to one element. With
/// `gpu_above = Some(c)`, each task whose part is longer than `c`
/// elements first does a tiny GPU operation.
fn quick_sort<T: PartialOrd + Send>(v: &mut [T], gpu_above: Option<usize>) -> gpu::Result<()> {
    if v.len() <= 1 {
        return Ok(());
    }
    let mid = partition(v);
    let (lo, hi) = v.split_at_mut(mid);
    gpu::join(
        |a| sort_task(a, lo, gpu_above),
        |b| sort_task(b, hi, gpu_above),
    )?;
    Ok(())
}

fn sort_task<T: PartialOrd + Send>(
    t: &TaskContext,
    v: &mut [T],
    gpu_above: Option<usize>,
) -> gpu::Result<()> {
    if gpu_above.is_some_and(|c| v.len() > c) {
        tiny_gpu_op(t)?;
    }
    quick_sort(v, gpu_above)
}

/// [`quick_sort`] through `Scope::join` inside a task.
fn quick_sort_in<T: PartialOrd + Send>(
    t: &Scope<'_, '_>,
    v: &mut [T],
    gpu_above: Option<usize>,
) -> gpu::Result<()> {
    if gpu_above.is_some_and(|c| v.len() > c) {
        tiny_gpu_op(t)?;
    }
    if v.len() <= 1 {
        return Ok(());
    }
    let mid = partition(v);
    let (lo, hi) = v.split_at_mut(mid);
    t.join(
        |a| quick_sort_in(a, lo, gpu_above),
        |b| quick_sort_in(b, hi, gpu_above),
    )?;
    Ok(())
}

/// Sorts `n` seeded random numbers with `sort` and checks the result
/// against the standard library's sort.
#[track_caller]
fn check_sort(n: usize, sort: impl FnOnce(&mut [u32]) -> gpu::Result<()>) {
    let mut data = random_data(n);
    let mut sorted_data = data.clone();
    sorted_data.sort_unstable();
    assert!(data != sorted_data, "the input is not sorted already");
    sort(&mut data).unwrap();
    assert!(data.windows(2).all(|w| w[0] <= w[1]), "not sorted");
    assert_eq!(data, sorted_data);
}

/// Port of rayon-core `join/test.rs`: `sort`, on 2^20 elements rather
/// than 6 * 1024 (about 2^20 joins).
#[test]
fn sort() {
    let _g = shared();
    check_sort(1 << 20, |v| quick_sort(v, None));
}

/// Port of rayon-core `join/test.rs`: `sort`, on 2^16 elements, each task
/// with more than 64 elements doing a tiny GPU operation (about 2,000 of
/// them, many live at once).
#[test]
fn sort_gpu() {
    let _g = shared();
    check_sort(1 << 16, |v| quick_sort(v, Some(64)));
}

/// Port of rayon-core `join/test.rs`: `sort`, through `Scope::join` inside
/// a scope's task rather than `gpu::join`, on 2^16 elements.
#[test]
fn sort_in_task() {
    let _g = shared();
    check_sort(1 << 16, |v| gpu::scope(|s| quick_sort_in(s, v, None)));
}

/// Port of rayon-core `join/test.rs`: `sort`, through `Scope::join`, on
/// 2^16 elements, a tiny GPU operation in each task with more than 64.
#[test]
fn sort_in_task_gpu() {
    let _g = shared();
    check_sort(1 << 16, |v| gpu::scope(|s| quick_sort_in(s, v, Some(64))));
}

/// Port of rayon-core `join/test.rs`: `sort_in_pool` (12 * 1024 elements),
/// on the global pool through `gpu::install` (there is no local pool).
#[test]
fn sort_in_pool() {
    let _g = shared();
    check_sort(12 * 1024, |v| {
        gpu::install(|| {
            assert!(
                std::thread::current()
                    .name()
                    .is_some_and(|n| n.starts_with("gpu-worker-")),
                "install runs on a worker"
            );
            quick_sort(v, None)
        })
    });
}

/// Port of rayon-core `join/test.rs`: `sort_in_pool`, a tiny GPU operation
/// in each task with more than 64 elements.
#[test]
fn sort_in_pool_gpu() {
    let _g = shared();
    check_sort(12 * 1024, |v| gpu::install(|| quick_sort(v, Some(64))));
}

// ----- panics --------------------------------------------------------------

/// Port of rayon-core `join/test.rs`: `panic_propagate_a`.
#[test]
#[should_panic(expected = "Hello, world!")]
fn panic_propagate_a() {
    let _g = shared();
    gpu::join(
        |_| -> gpu::Result<()> { panic!("Hello, world!") },
        |_| Ok(()),
    )
    .unwrap();
}

/// Port of rayon-core `join/test.rs`: `panic_propagate_a`, both sides
/// doing GPU work first.
#[test]
#[should_panic(expected = "Hello, world!")]
fn panic_propagate_a_gpu() {
    let _g = shared();
    gpu::join(
        |a| -> gpu::Result<()> {
            tiny_gpu_op(a)?;
            panic!("Hello, world!")
        },
        |b| tiny_gpu_op(b),
    )
    .unwrap();
}

/// Port of rayon-core `join/test.rs`: `panic_propagate_b`.
#[test]
#[should_panic(expected = "Hello, world!")]
fn panic_propagate_b() {
    let _g = shared();
    gpu::join(
        |_| Ok(()),
        |_| -> gpu::Result<()> { panic!("Hello, world!") },
    )
    .unwrap();
}

/// Port of rayon-core `join/test.rs`: `panic_propagate_b`, both sides
/// doing GPU work first.
#[test]
#[should_panic(expected = "Hello, world!")]
fn panic_propagate_b_gpu() {
    let _g = shared();
    gpu::join(
        |a| tiny_gpu_op(a),
        |b| -> gpu::Result<()> {
            tiny_gpu_op(b)?;
            panic!("Hello, world!")
        },
    )
    .unwrap();
}

/// Port of rayon-core `join/test.rs`: `panic_propagate_both` (`a`'s panic
/// is the one re-raised).
#[test]
#[should_panic(expected = "Hello, world!")]
fn panic_propagate_both() {
    let _g = shared();
    gpu::join(
        |_| -> gpu::Result<()> { panic!("Hello, world!") },
        |_| -> gpu::Result<()> { panic!("Goodbye, world!") },
    )
    .unwrap();
}

/// Port of rayon-core `join/test.rs`: `panic_propagate_both`, both sides
/// doing GPU work first.
#[test]
#[should_panic(expected = "Hello, world!")]
fn panic_propagate_both_gpu() {
    let _g = shared();
    gpu::join(
        |a| -> gpu::Result<()> {
            tiny_gpu_op(a)?;
            panic!("Hello, world!")
        },
        |b| -> gpu::Result<()> {
            tiny_gpu_op(b)?;
            panic!("Goodbye, world!")
        },
    )
    .unwrap();
}

/// Waits (on the host) until `flag` is set, at most `limit`; whether it
/// was.
fn wait_for(flag: &AtomicBool, limit: Duration) -> bool {
    let start = Instant::now();
    while !flag.load(Ordering::SeqCst) {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::yield_now();
    }
    true
}

/// Port of rayon-core `join/test.rs`: `panic_propagate_both`, with `b`
/// panicking first (`a` waits until `b` is about to panic): `a`'s panic
/// is still the one re-raised, as in Rayon. Repeated, with and without
/// GPU work.
#[test]
fn panic_propagate_both_b_first() {
    let _g = shared();
    let b_first = AtomicUsize::new(0);
    for round in 0..20 {
        let with_gpu = round % 2 == 1;
        let b_panicking = AtomicBool::new(false);
        let msg = expect_panic(|| {
            gpu::join(
                |a| -> gpu::Result<()> {
                    if with_gpu {
                        tiny_gpu_op(a)?;
                    }
                    // `b` runs on a worker meanwhile (if no worker takes
                    // it, it runs after `a` and panics second).
                    if wait_for(&b_panicking, Duration::from_secs(5)) {
                        b_first.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    panic!("Hello, world!")
                },
                |b| -> gpu::Result<()> {
                    if with_gpu {
                        tiny_gpu_op(b)?;
                    }
                    b_panicking.store(true, Ordering::SeqCst);
                    panic!("Goodbye, world!")
                },
            )
        });
        assert_eq!(msg, "Hello, world!", "round {round}");
    }
    // A worker took `b` while `a` waited (the pool has idle workers).
    assert!(b_first.into_inner() > 0, "b never panicked first");
}

/// Port of rayon-core `join/test.rs`: `panic_b_still_executes`.
#[test]
fn panic_b_still_executes() {
    let _g = shared();
    let mut x = false;
    let msg = expect_panic(|| {
        gpu::join(
            |_| -> gpu::Result<()> { panic!("Hello, world!") },
            |_| {
                x = true;
                Ok(())
            },
        )
    });
    assert_eq!(msg, "Hello, world!");
    assert!(x, "closure b failed to execute");
}

/// Port of rayon-core `join/test.rs`: `panic_b_still_executes`, `b`
/// doing GPU work (its result read back); then every stream, event and
/// buffer of both tasks is back.
#[test]
fn panic_b_still_executes_gpu() {
    let _g = exclusive();
    let mut x = 0;
    let msg = expect_panic(|| {
        gpu::join(
            |a| -> gpu::Result<()> {
                tiny_gpu_op(a)?;
                panic!("Hello, world!")
            },
            |b| {
                x = through_gpu(b, 42)?;
                Ok(())
            },
        )
    });
    assert_eq!(msg, "Hello, world!");
    assert_eq!(x, 42, "closure b failed to execute");
    assert_nothing_held(gpu::runtime().unwrap());
}

/// Port of rayon-core `join/test.rs`: `panic_b_still_executes`, with an
/// error for the panic (the `Result` counterpart): `a`'s error is `join`'s
/// result, after `b` ran.
#[test]
fn error_b_still_executes() {
    let _g = shared();
    let ran_b = AtomicBool::new(false);
    let r = gpu::join(
        |_| -> gpu::Result<()> { Err(gpu::Error::ZeroChunk) },
        |b| {
            tiny_gpu_op(b)?;
            ran_b.store(true, Ordering::SeqCst);
            Ok(())
        },
    );
    assert!(matches!(r, Err(gpu::Error::ZeroChunk)), "{r:?}");
    assert!(ran_b.load(Ordering::SeqCst), "closure b failed to execute");
}

// ----- join_counter_overflow -------------------------------------------

/// Port of rayon-core `join/test.rs`: `join_counter_overflow` (500,000
/// joins in a row from outside the pool), on the global pool rather than a
/// 2-thread local one; 100,000 joins (20,000 in a debug build): each moves
/// to a worker and back, about 20 us on 2 CPUs.
#[test]
fn join_counter_overflow() {
    let _g = shared();
    let max: u32 = if cfg!(debug_assertions) {
        20_000
    } else {
        100_000
    };
    let mut i = 0;
    let mut j = 0;
    for _ in 0..max {
        gpu::join(
            |_| {
                i += 1;
                Ok(())
            },
            |_| {
                j += 1;
                Ok(())
            },
        )
        .unwrap();
    }
    assert_eq!(i, max);
    assert_eq!(j, max);
}

/// Port of rayon-core `join/test.rs`: `join_counter_overflow`, 2,000 joins
/// in a row with GPU work on both sides; then nothing is left held.
#[test]
fn join_counter_overflow_gpu() {
    let _g = exclusive();
    let max = 2_000;
    let mut i = 0;
    let mut j = 0;
    for _ in 0..max {
        gpu::join(
            |a| {
                tiny_gpu_op(a)?;
                i += 1;
                Ok(())
            },
            |b| {
                tiny_gpu_op(b)?;
                j += 1;
                Ok(())
            },
        )
        .unwrap();
    }
    assert_eq!(i, max);
    assert_eq!(j, max);
    assert_nothing_held(gpu::runtime().unwrap());
}

// ----- Fibonacci ---------------------------------------------------------

/// `fib(n)` through `gpu::join`, the larger part in `a` (rayon-demo's
/// `fibonacci_join_1_2`) or in `b` (`fibonacci_join_2_1`).
fn fib(n: u32, larger_first: bool) -> gpu::Result<u64> {
    if n < 2 {
        return Ok(u64::from(n));
    }
    let (x, y) = if larger_first {
        (n - 1, n - 2)
    } else {
        (n - 2, n - 1)
    };
    let (a, b) = gpu::join(|_| fib(x, larger_first), |_| fib(y, larger_first))?;
    Ok(a + b)
}

/// [`fib`] with GPU work in every task: a leaf's value goes through the
/// device (written there, read back), every other task does a tiny GPU
/// operation before it joins.
fn fib_gpu(n: u32) -> gpu::Result<u64> {
    if n < 2 {
        return Ok(u64::from(n));
    }
    let (a, b) = gpu::join(|a| fib_task(a, n - 1), |b| fib_task(b, n - 2))?;
    Ok(a + b)
}

fn fib_task(t: &TaskContext, n: u32) -> gpu::Result<u64> {
    if n < 2 {
        return through_gpu(t, u64::from(n));
    }
    tiny_gpu_op(t)?;
    fib_gpu(n)
}

const FIB_25: u64 = 75_025;

/// No rayon-core original: rayon-demo's `fibonacci_join_1_2`, `fib(25)`
/// (about 120,000 joins).
#[test]
fn fib_join_1_2() {
    let _g = shared();
    assert_eq!(fib(25, true).unwrap(), FIB_25);
}

/// No rayon-core original: rayon-demo's `fibonacci_join_2_1`, `fib(25)`.
#[test]
fn fib_join_2_1() {
    let _g = shared();
    assert_eq!(fib(25, false).unwrap(), FIB_25);
}

/// No rayon-core original: rayon-demo's `fibonacci_join_1_2`, `fib(16)`
/// with GPU work in every task (about 3,200 tasks, each binding a stream;
/// the leaves' values read back from the device); then nothing is left
/// held.
#[test]
fn fib_join_gpu() {
    let _g = exclusive();
    assert_eq!(fib_gpu(16).unwrap(), 987);
    assert_nothing_held(gpu::runtime().unwrap());
}

// ----- a 10,000-deep chain ---------------------------------------------

/// How deep the chains go.
const CHAIN: usize = 10_000;

/// What the deepest task of a chain saw.
#[derive(Debug, Default)]
struct Bottom {
    /// Levels below the top.
    depth: usize,
    /// The deepest task's stream was shared with another live task (every
    /// stream was held).
    shared: bool,
    /// Streams the ledger tracks then.
    streams: usize,
}

/// `n` nested joins through `gpu::join`, the recursion in `b`; `a` is
/// empty or does a tiny GPU operation, as does `b` before recursing.
fn chain(n: usize, with_gpu: bool) -> gpu::Result<Bottom> {
    if n == 0 {
        return Ok(Bottom::default());
    }
    let ((), bottom) = gpu::join(
        |a| if with_gpu { tiny_gpu_op(a) } else { Ok(()) },
        |b| {
            if with_gpu {
                tiny_gpu_op(b)?;
                if n == 1 {
                    return Ok(deepest(b));
                }
            }
            chain(n - 1, with_gpu)
        },
    )?;
    Ok(Bottom {
        depth: bottom.depth + 1,
        ..bottom
    })
}

/// [`chain`] through `Scope::join` inside the tasks (`a` runs in the
/// joining task, `b` is a new task).
fn chain_in(t: &Scope<'_, '_>, n: usize, with_gpu: bool) -> gpu::Result<Bottom> {
    if with_gpu {
        tiny_gpu_op(t)?;
    }
    if n == 0 {
        return Ok(if with_gpu {
            deepest(t)
        } else {
            Bottom::default()
        });
    }
    let ((), bottom) = t.join(
        |a| if with_gpu { tiny_gpu_op(a) } else { Ok(()) },
        |b| chain_in(b, n - 1, with_gpu),
    )?;
    Ok(Bottom {
        depth: bottom.depth + 1,
        ..bottom
    })
}

fn deepest(t: &TaskContext) -> Bottom {
    let rt = t.runtime();
    Bottom {
        depth: 0,
        shared: rt.ledger().is_shared(t.stream_id()),
        streams: rt.ledger().stream_count(),
    }
}

/// The streams a runtime has at most (`RuntimeOptions::max_streams`'
/// default), the reclaim stream among them.
const MAX_STREAMS: usize = 256;

/// Checks a chain with GPU work whose bottom had at least `bound` live
/// tasks holding a stream (the chain's only: under [`exclusive`]).
#[track_caller]
fn check_gpu_bottom(bottom: &Bottom, depth: usize, bound: usize) {
    println!("{bottom:?} with at least {bound} tasks holding a stream");
    assert_eq!(bottom.depth, depth);
    assert!(bound >= MAX_STREAMS);
    // Every stream was held: the deepest task shares one (this was
    // `TooManyStreams`).
    assert_eq!(bottom.streams, MAX_STREAMS, "{bottom:?}");
    assert!(bottom.shared, "{bottom:?}");
    assert_nothing_held(gpu::runtime().unwrap());
}

/// No rayon-core original: 10,000 nested `gpu::join`s, recursing in `b`,
/// CPU-only.
#[test]
fn chain_join() {
    let _g = shared();
    let bottom = chain(CHAIN, false).unwrap();
    assert_eq!(bottom.depth, CHAIN);
}

/// No rayon-core original: 10,000 nested `gpu::join`s, recursing in `b`,
/// with a tiny GPU operation in both tasks of every level: 10,000 to
/// 20,000 live tasks with a stream at the bottom, so the deepest one
/// shares a stream; then everything is given back.
#[test]
fn chain_join_gpu() {
    let _g = exclusive();
    let bottom = chain(CHAIN, true).unwrap();
    // Every level's `b` holds its stream while it recurses; its `a` may not
    // have bound one yet.
    check_gpu_bottom(&bottom, CHAIN, CHAIN);
}

/// No rayon-core original: 10,000 nested `Scope::join`s inside tasks,
/// recursing in `b`, CPU-only. The scope's body runs on the calling
/// thread, as do the first levels: a thread with a big stack.
#[test]
fn chain_in_task() {
    let _g = shared();
    let bottom = on_big_stack(BIG_STACK, || gpu::scope(|s| chain_in(s, CHAIN, false))).unwrap();
    assert_eq!(bottom.depth, CHAIN);
}

/// No rayon-core original: 10,000 nested `Scope::join`s inside tasks,
/// recursing in `b`, a tiny GPU operation in every task (10,001 live tasks
/// with a stream at the bottom); then everything is given back.
#[test]
fn chain_in_task_gpu() {
    let _g = exclusive();
    let bottom = on_big_stack(BIG_STACK, || gpu::scope(|s| chain_in(s, CHAIN, true))).unwrap();
    check_gpu_bottom(&bottom, CHAIN, CHAIN + 1);
}
