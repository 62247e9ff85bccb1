//! Deep nesting of joins on the workers' default stacks (review issue 7).
//!
//! A chain of joins that recurses in `b` runs on one worker's stack when no
//! other worker steals a level (always, on a pool of one thread). Each level
//! keeps Rayon's own join frames plus the `gpu` task of each side on that
//! stack, so a level costs more than Rayon's: the workers' default stack
//! (`gpu::ThreadPoolBuilder::stack_size`) is 16 MiB where Rayon's is Rust's
//! 2 MiB, and a chain of 4,096 levels runs there in a debug build (whose
//! frames are several times a release build's). A level that would start
//! too close to a worker's stack end is refused with
//! `Error::StackExhausted`, never a stack overflow (which aborts).
//!
//! [`bytes_per_level_against_rayon`] measures the stack a level takes, for
//! `gpu::join`, `Scope::join` and `rayon_core::join` in this binary (print
//! with `--nocapture`).

use std::sync::atomic::{AtomicUsize, Ordering};

/// How deep the chains on default stacks go.
const DEPTH: usize = 4096;

/// Where the stack is now: the address of a local of this frame.
#[inline(never)]
fn stack_here() -> usize {
    let probe = 0u8;
    std::hint::black_box(&probe) as *const u8 as usize
}

/// `n` nested `gpu::join`s recursing in `b`; returns the depth reached
/// and records where the stack is at the bottom.
fn join_chain(n: usize, bottom: &AtomicUsize) -> gpu::Result<usize> {
    if n == 0 {
        bottom.store(stack_here(), Ordering::Relaxed);
        return Ok(0);
    }
    let (one, below) = gpu::join(|_a| Ok(1), |_b| join_chain(n - 1, bottom))?;
    Ok(one + below)
}

/// [`join_chain`] through `Scope::join` inside the tasks.
fn scope_join_chain(s: &gpu::Scope<'_, '_>, n: usize, bottom: &AtomicUsize) -> gpu::Result<usize> {
    if n == 0 {
        bottom.store(stack_here(), Ordering::Relaxed);
        return Ok(0);
    }
    let (one, below) = s.join(|_a| Ok(1), |b| scope_join_chain(b, n - 1, bottom))?;
    Ok(one + below)
}

/// [`join_chain`] through `rayon_core::join`, for comparison.
fn rayon_chain(n: usize, bottom: &AtomicUsize) -> usize {
    if n == 0 {
        bottom.store(stack_here(), Ordering::Relaxed);
        return 0;
    }
    let (one, below) = rayon_core::join(|| 1, || rayon_chain(n - 1, bottom));
    one + below
}

/// A pool of one worker with the default stack: every level of a chain
/// runs on that one stack.
fn one_worker() -> gpu::ThreadPool {
    gpu::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
}

/// 4,096 nested `gpu::join`s in the global pool, default stacks.
#[test]
fn join_chain_on_the_global_pool() {
    let bottom = AtomicUsize::new(0);
    assert_eq!(join_chain(DEPTH, &bottom).unwrap(), DEPTH);
}

/// 4,096 nested `Scope::join`s in the global pool, default stacks.
#[test]
fn scope_join_chain_on_the_global_pool() {
    let bottom = AtomicUsize::new(0);
    let depth = gpu::install(|| gpu::scope(|s| scope_join_chain(s, DEPTH, &bottom))).unwrap();
    assert_eq!(depth, DEPTH);
}

/// 4,096 nested `gpu::join`s on one worker's default stack.
#[test]
fn join_chain_on_one_default_stack() {
    let p = one_worker();
    let bottom = AtomicUsize::new(0);
    assert_eq!(p.install(|| join_chain(DEPTH, &bottom)).unwrap(), DEPTH);
}

/// 4,096 nested `Scope::join`s on one worker's default stack (the scope's
/// body and every task on that worker).
#[test]
fn scope_join_chain_on_one_default_stack() {
    let p = one_worker();
    let bottom = AtomicUsize::new(0);
    let depth = p.install(|| gpu::scope(|s| scope_join_chain(s, DEPTH, &bottom)));
    assert_eq!(depth.unwrap(), DEPTH);
}

/// A chain far deeper than a small stack holds: the join that would start
/// too close to the stack's end returns `StackExhausted`, which goes up the
/// chain as an error (no abort); the pool works on afterwards.
#[test]
fn too_deep_is_an_error_not_an_overflow() {
    let p = gpu::ThreadPoolBuilder::new()
        .num_threads(1)
        .stack_size(256 << 10)
        .build()
        .unwrap();
    let bottom = AtomicUsize::new(0);
    let r = p.install(|| join_chain(1_000_000, &bottom));
    assert!(matches!(r, Err(gpu::Error::StackExhausted { .. })), "{r:?}");
    assert_eq!(
        bottom.load(Ordering::Relaxed),
        0,
        "the chain never reached its bottom"
    );
    let r = p.install(|| gpu::scope(|s| scope_join_chain(s, 1_000_000, &bottom)));
    assert!(matches!(r, Err(gpu::Error::StackExhausted { .. })), "{r:?}");
    // A chain that fits still runs there.
    assert_eq!(p.install(|| join_chain(8, &bottom)).unwrap(), 8);
}

/// The same with a GPU operation in every task: every level's `b` holds a
/// stream when the chain is refused, and the error still comes back.
#[test]
fn too_deep_with_gpu_work_is_an_error() {
    fn chain(n: usize) -> gpu::Result<usize> {
        if n == 0 {
            return Ok(0);
        }
        let ((), below) = gpu::join(
            |_a| Ok(()),
            |b| {
                let mut buf = b.zeros::<f32>(4)?;
                gpu_kernels::fill(b, &mut buf, 1.0)?;
                chain(n - 1)
            },
        )?;
        Ok(below + 1)
    }
    let p = gpu::ThreadPoolBuilder::new()
        .num_threads(1)
        .stack_size(256 << 10)
        .build()
        .unwrap();
    let r = p.install(|| chain(1_000_000));
    assert!(matches!(r, Err(gpu::Error::StackExhausted { .. })), "{r:?}");
}

/// Bytes of stack a level of a chain takes on one worker, for `gpu::join`,
/// `Scope::join` and `rayon_core::join` (the same chain shape; the chain
/// functions' own frames included).
#[test]
fn bytes_per_level_against_rayon() {
    const N: usize = 1000;
    let p = one_worker();
    let bottom = AtomicUsize::new(0);
    let per_level = |top: usize, depth: usize| {
        assert_eq!(depth, N);
        (top - bottom.load(Ordering::Relaxed)) / N
    };
    let (top, d) = p.install(|| (stack_here(), join_chain(N, &bottom).unwrap()));
    let gpu_join = per_level(top, d);
    let (top, d) = p.install(|| {
        let top = stack_here();
        (
            top,
            gpu::scope(|s| scope_join_chain(s, N, &bottom)).unwrap(),
        )
    });
    let scope_join = per_level(top, d);
    let (top, d) = p.install(|| (stack_here(), rayon_chain(N, &bottom)));
    let rayon_join = per_level(top, d);
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!(
        "stack bytes a level ({build}): gpu::join {gpu_join}, Scope::join {scope_join}, \
         rayon_core::join {rayon_join}"
    );
    assert!(rayon_join > 0 && gpu_join > 0 && scope_join > 0);
    // A level took over 8 times Rayon's in a debug build before the frames
    // were slimmed (10,320 bytes against 1,248), now about 2.5 times (3,168
    // against 1,296); in a release build about 10 times (2.7 KB against 256
    // bytes), now about 5 times (1,376 against 256).
    let most = if cfg!(debug_assertions) { 4 } else { 8 };
    assert!(
        gpu_join <= most * rayon_join && scope_join <= most * rayon_join,
        "gpu::join {gpu_join}, Scope::join {scope_join}, rayon_core::join {rayon_join}"
    );
}
