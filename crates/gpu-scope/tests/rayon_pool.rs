//! rayon-core's own tests of the thread pool
//! (`rayon-core/src/thread_pool/test.rs`), ported to `gpu`'s global pool.
//! `gpu` has no local `ThreadPool` yet: the global pool is built once for
//! this test binary, with one worker thread (as most of Rayon's pool tests
//! build theirs), through `gpu::ThreadPoolBuilder::build_global`; tasks
//! still take streams of their own. Most tests run twice: CPU-only, and
//! (`_gpu`) with GPU work in each task whose result is read back.
//!
//! Every test runs at the same size in debug and release builds, but
//! `workers_stop`'s joins (2^14 leaves in debug, 2^16 in release).
//!
//! Left out (they need what `gpu` does not have):
//!
//! | rayon-core test                  | why it is left out                                                |
//! |----------------------------------|-------------------------------------------------------------------|
//! | `sleeper_stop`                   | drops a local `ThreadPool` and waits for its workers to stop      |
//! | `failed_thread_stack`            | needs start and exit handlers and a local `ThreadPool` (note: `build_global` panics rather than returning `Err` when a worker cannot start) |
//! | `panic_thread_name`              | needs `thread_name`, start and exit handlers, a local `ThreadPool`|
//! | `mutual_install`                 | needs two local `ThreadPool`s                                     |
//! | `mutual_install_sleepy`          | needs two local `ThreadPool`s                                     |
//! | `scope_lifo_order`               | needs `ThreadPool::scope`; `gpu` does not specify sibling order   |
//! | `scope_fifo_order`               | no `scope_fifo` / `spawn_fifo`                                    |
//! | `spawn_lifo_order`               | no pool-level `spawn`; `gpu` does not specify the order           |
//! | `spawn_fifo_order`               | no `spawn_fifo`                                                   |
//! | `nested_fifo_scopes`             | no `scope_fifo`; needs local `ThreadPool`s                        |
//! | `in_place_scope_fifo_no_deadlock`| no `in_place_scope_fifo`                                          |
//! | `yield_now_to_spawn`             | no pool-level `spawn`, no `yield_now`                             |
//! | `yield_local_to_spawn`           | no pool-level `spawn`, no `yield_local`                           |
//!
//! Ported in part: `workers_stop` (its work inside `install`; the pool is
//! global and never dropped), `check_thread_pool_new` (as `build_global`
//! and `current_num_threads`), `nested_scopes` (ten nested scopes of the
//! one global pool rather than one scope in each of ten pools).
//!
//! Since these were ported, `gpu::ThreadPool` (a pool of its own) exists:
//! the tests that need one are ported in `rayon_local_pool.rs`.

mod common;

use common::rayon_port::*;
use gpu::Scope;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::OnceLock;

/// The global pool's worker threads in this binary.
const THREADS: usize = 1;

/// Builds the global pool (once, before anything uses it: every test calls
/// this first) and holds [`together`].
fn pool() -> std::sync::RwLockReadGuard<'static, ()> {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        gpu::ThreadPoolBuilder::new()
            .num_threads(THREADS)
            .build_global()
            .map_err(|e| e.to_string())
    });
    assert_eq!(built, &Ok(()), "building the global pool");
    together()
}

/// Whether this thread is one of the global pool's workers.
fn on_worker() -> bool {
    std::thread::current()
        .name()
        .is_some_and(|n| n.starts_with("gpu-worker-"))
}

// ----- check_thread_pool_new, panic_propagate ---------------------------

/// Port of rayon-core `thread_pool/test.rs`: `check_thread_pool_new`, for
/// the global pool: it has the threads asked for, `install` runs on one of
/// them, and it cannot be built twice.
#[test]
fn check_thread_pool_new() {
    let _g = pool();
    assert_eq!(gpu::current_num_threads(), THREADS);
    let name = gpu::install(|| std::thread::current().name().map(String::from));
    assert_eq!(name.as_deref(), Some("gpu-worker-0"));
    let twice = gpu::ThreadPoolBuilder::new()
        .num_threads(3)
        .build_global()
        .expect_err("the global pool was built twice");
    // A typed error, as Rayon's.
    assert!(twice.is_global_pool_already_started(), "{twice}");
    assert!(twice.to_string().contains("already started"), "{twice}");
    assert_eq!(gpu::current_num_threads(), THREADS);
}

/// Port of rayon-core `thread_pool/test.rs`: `panic_propagate`.
#[test]
#[should_panic(expected = "Hello, world!")]
fn panic_propagate() {
    let _g = pool();
    gpu::install(|| {
        panic!("Hello, world!");
    });
}

/// Port of rayon-core `thread_pool/test.rs`: `panic_propagate`, after GPU
/// work in a scope opened on the worker.
#[test]
#[should_panic(expected = "Hello, world!")]
fn panic_propagate_gpu() {
    let _g = pool();
    gpu::install(|| {
        assert_eq!(gpu::scope(|s| through_gpu(s, 5)).unwrap(), 5);
        panic!("Hello, world!");
    });
}

/// Port of rayon-core `thread_pool/test.rs`: `panic_propagate`, caught,
/// then the pool's one worker (which the panic unwound) used again.
#[test]
fn install_after_panic_propagate() {
    let _g = pool();
    let msg = expect_panic(|| gpu::install(|| panic!("Hello, world!")));
    assert_eq!(msg, "Hello, world!");
    assert!(gpu::install(on_worker));
    assert_eq!(
        gpu::install(|| gpu::scope(|s| through_gpu(s, 3))).unwrap(),
        3
    );
}

// ----- workers_stop ----------------------------------------------------------

/// Rayon's `join_a_lot`, counting the leaves (each reading its 1 back from
/// the device with `with_gpu`).
fn join_a_lot(n: usize, leaves: &AtomicUsize, with_gpu: bool) -> gpu::Result<()> {
    if n > 0 {
        gpu::join(
            |_| join_a_lot(n - 1, leaves, with_gpu),
            |_| join_a_lot(n - 1, leaves, with_gpu),
        )?;
    } else {
        let one = if with_gpu {
            gpu::with_task(|t| through_gpu(t, 1))?
        } else {
            1
        };
        leaves.fetch_add(one as usize, Ordering::Relaxed);
    }
    Ok(())
}

/// Port of rayon-core `thread_pool/test.rs`: `workers_stop`, the work part
/// (`join_a_lot` inside `install`; 2^16 leaves rather than 2^22, 2^14 in a
/// debug build). The global pool is never dropped, so its workers' stop is
/// not tested.
#[test]
fn workers_stop() {
    let _g = pool();
    let n = if cfg!(debug_assertions) { 14 } else { 16 };
    let leaves = AtomicUsize::new(0);
    gpu::install(|| {
        assert!(on_worker());
        join_a_lot(n, &leaves, false)
    })
    .unwrap();
    assert_eq!(leaves.into_inner(), 1 << n);
    assert_eq!(gpu::current_num_threads(), THREADS);
}

/// Port of rayon-core `thread_pool/test.rs`: `workers_stop`, the work part,
/// each of the 2^10 leaves reading its 1 back from the device.
#[test]
fn workers_stop_gpu() {
    let _g = pool();
    let leaves = AtomicUsize::new(0);
    gpu::install(|| join_a_lot(10, &leaves, true)).unwrap();
    assert_eq!(leaves.into_inner(), 1 << 10);
}

// ----- self_install ---------------------------------------------------------

/// Port of rayon-core `thread_pool/test.rs`: `self_install` (the pool's
/// only worker installs into its own pool).
#[test]
fn self_install() {
    let _g = pool();
    // If the inner `install` blocks, then nothing will actually run it!
    assert!(gpu::install(|| gpu::install(|| true)));
}

/// Port of rayon-core `thread_pool/test.rs`: `self_install`, the inner
/// `install` doing GPU work in a scope whose task is spawned (and must run
/// although the only worker is busy installing).
#[test]
fn self_install_gpu() {
    let _g = pool();
    let got = gpu::install(|| {
        gpu::install(|| {
            let mut x = 0;
            gpu::scope(|s| {
                s.spawn(|t| {
                    x = through_gpu(t, 9)?;
                    Ok(())
                });
                Ok(())
            })
            .map(|()| x)
        })
    });
    assert_eq!(got.unwrap(), 9);
}

// ----- nested_scopes --------------------------------------------------------

/// Opens `depth` nested scopes, then calls `op` with all of them; the
/// scopes share the invariant lifetime `'scope`, so a task spawned into
/// any of them may borrow what outlives the outermost.
fn nest<'scope, OP>(depth: usize, scopes: Vec<&Scope<'_, 'scope>>, op: OP) -> gpu::Result<()>
where
    OP: FnOnce(&[&Scope<'_, 'scope>]),
{
    if depth > 0 {
        gpu::in_place_scope(move |s| {
            // This move reduces the reference lifetimes by variance to match s,
            // but the actual scopes are still tied to the invariant 'scope.
            let mut scopes = scopes;
            scopes.push(s);
            nest(depth - 1, scopes, op)
        })
    } else {
        op(&scopes);
        Ok(())
    }
}

/// Port of rayon-core `thread_pool/test.rs`: `nested_scopes`: ten nested
/// scopes (`gpu::in_place_scope`: a `&Scope` is not `Send`, so a `Vec` of
/// them cannot move into `gpu::scope`'s body) of the one global pool
/// rather than one scope in each of ten pools; a task spawned into each.
#[test]
fn nested_scopes() {
    let _g = pool();
    let counter = AtomicUsize::new(0);
    nest(10, vec![], |scopes| {
        for &s in scopes {
            s.spawn(|_| {
                // Our 'scope lets us borrow the counter in every scope.
                counter.fetch_add(1, Ordering::Relaxed);
                Ok(())
            });
        }
    })
    .unwrap();
    assert_eq!(counter.into_inner(), 10);
}

/// Port of rayon-core `thread_pool/test.rs`: `nested_scopes`, each task's
/// 1 read back from the device.
#[test]
fn nested_scopes_gpu() {
    let _g = pool();
    let counter = AtomicUsize::new(0);
    nest(10, vec![], |scopes| {
        for &s in scopes {
            s.spawn(|t| {
                counter.fetch_add(through_gpu(t, 1)? as usize, Ordering::Relaxed);
                Ok(())
            });
        }
    })
    .unwrap();
    assert_eq!(counter.into_inner(), 10);
}

// ----- in_place_scope_no_deadlock -------------------------------------------

/// Port of rayon-core `thread_pool/test.rs`: `in_place_scope_no_deadlock`:
/// the body blocks the calling thread until the task it spawned ran on
/// the pool's only worker.
#[test]
fn in_place_scope_no_deadlock() {
    let _g = pool();
    let (tx, rx) = channel();
    let rx_ref = &rx;
    gpu::in_place_scope(move |s| {
        // With regular scopes this closure would never run because this scope op
        // itself would block the only worker thread.
        s.spawn(move |_| {
            tx.send(on_worker()).unwrap();
            Ok(())
        });
        assert!(rx_ref.recv().unwrap(), "the task ran on the worker");
        Ok(())
    })
    .unwrap();
}

/// Port of rayon-core `thread_pool/test.rs`: `in_place_scope_no_deadlock`,
/// the task sending a value read back from the device.
#[test]
fn in_place_scope_no_deadlock_gpu() {
    let _g = pool();
    let (tx, rx) = channel();
    let rx_ref = &rx;
    gpu::in_place_scope(move |s| {
        tiny_gpu_op(s)?;
        s.spawn(move |t| {
            tx.send(through_gpu(t, 4)?).unwrap();
            Ok(())
        });
        assert_eq!(rx_ref.recv().unwrap(), 4);
        Ok(())
    })
    .unwrap();
}

/// Port of rayon-core `thread_pool/test.rs`: `in_place_scope_no_deadlock`,
/// through `gpu::scope`, whose body also runs on the calling thread (so it
/// does not block the only worker either).
#[test]
fn scope_no_deadlock() {
    let _g = pool();
    let (tx, rx) = channel();
    let rx_ref = std::sync::Mutex::new(rx);
    gpu::scope(|s| {
        s.spawn(move |t| {
            tx.send(through_gpu(t, 6)?).unwrap();
            Ok(())
        });
        assert_eq!(rx_ref.lock().unwrap().recv().unwrap(), 6);
        Ok(())
    })
    .unwrap();
}
