//! rayon-core's own tests of `scope` (`rayon-core/src/scope/test.rs`),
//! ported to `gpu::scope`, `gpu::in_place_scope` and `Scope::scope` as a
//! Rayon user would port them: the body and every spawned closure take the
//! task's `&gpu::Scope` and return a `gpu::Result`. Most run twice: with
//! CPU-only task bodies, and (`_gpu`) with GPU work in each task (a tiny
//! operation, or a value written on the device and read back, so that the
//! GPU work's result is checked).
//!
//! Every test runs at the same size in debug and release builds.
//!
//! Left out (they need what `gpu` does not have):
//!
//! | rayon-core test                  | why it is left out                                           |
//! |----------------------------------|--------------------------------------------------------------|
//! | `lifo_order`                     | needs a local 1-thread `ThreadPool`; `gpu` does not specify the order of sibling tasks |
//! | `fifo_order`                     | no `scope_fifo` / `spawn_fifo`; needs a local `ThreadPool`   |
//! | `nested_lifo_order`              | as `lifo_order`                                              |
//! | `nested_fifo_order`              | as `fifo_order`                                              |
//! | `nested_lifo_fifo_order`         | as `fifo_order`                                              |
//! | `nested_fifo_lifo_order`         | as `fifo_order`                                              |
//! | `mixed_lifo_order`               | as `lifo_order`                                              |
//! | `mixed_fifo_order`               | as `fifo_order`                                              |
//! | `mixed_lifo_fifo_order`          | as `fifo_order`                                              |
//! | `mixed_fifo_lifo_order`          | as `fifo_order`                                              |
//! | `static_scope_fifo`              | no `scope_fifo`                                              |
//! | `mixed_lifetime_scope_fifo`      | no `scope_fifo`                                              |
//! | `scope_spawn_broadcast`          | no `spawn_broadcast`                                         |
//! | `scope_fifo_spawn_broadcast`     | no `scope_fifo`, no `spawn_broadcast`                        |
//! | `scope_spawn_broadcast_nested`   | no `spawn_broadcast`                                         |
//! | `scope_spawn_broadcast_barrier`  | no `spawn_broadcast`; needs a local 7-thread `ThreadPool`    |
//! | `scope_spawn_broadcast_panic_one`| no `spawn_broadcast`; needs a local 7-thread `ThreadPool`    |
//! | `scope_spawn_broadcast_panic_many`| no `spawn_broadcast`; needs a local 7-thread `ThreadPool`   |
//!
//! `linear_stack_growth` runs on a local 1-thread pool in Rayon, where all
//! tasks run on one thread; here the tasks run on the scope's thread and on
//! the global pool's workers, and the port measures each thread's stack.
//!
//! Since these were ported, `gpu::ThreadPool` (a pool of its own) exists:
//! the tests that need one are ported in `rayon_local_pool.rs`.

mod common;

use common::assert_nothing_held;
use common::rayon_port::*;
use gpu::{Scope, TaskContext};
use std::collections::HashMap;
use std::iter::once;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread::ThreadId;

// ----- scope_empty, scope_result, scope_two ------------------------------

/// Port of rayon-core `scope/test.rs`: `scope_empty`.
#[test]
fn scope_empty() {
    let _g = together();
    gpu::scope(|_| Ok(())).unwrap();
}

/// Port of rayon-core `scope/test.rs`: `scope_empty`, the body doing a
/// tiny GPU operation.
#[test]
fn scope_empty_gpu() {
    let _g = together();
    gpu::scope(|s| tiny_gpu_op(s)).unwrap();
}

/// Port of rayon-core `scope/test.rs`: `scope_result`.
#[test]
fn scope_result() {
    let _g = together();
    let x = gpu::scope(|_| Ok(22)).unwrap();
    assert_eq!(x, 22);
}

/// Port of rayon-core `scope/test.rs`: `scope_result`, the value going
/// through the device.
#[test]
fn scope_result_gpu() {
    let _g = together();
    let x = gpu::scope(|s| through_gpu(s, 22)).unwrap();
    assert_eq!(x, 22);
}

/// Port of rayon-core `scope/test.rs`: `scope_result`, the body's error
/// (Rayon has no `Result`: its counterpart).
#[test]
fn scope_result_error() {
    let _g = together();
    let r = gpu::scope(|_| -> gpu::Result<u32> { Err(gpu::Error::ZeroChunk) });
    assert!(matches!(r, Err(gpu::Error::ZeroChunk)), "{r:?}");
}

/// Port of rayon-core `scope/test.rs`: `scope_two`.
#[test]
fn scope_two() {
    let _g = together();
    let counter = &AtomicUsize::new(0);
    gpu::scope(|s| {
        s.spawn(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        s.spawn(move |_| {
            counter.fetch_add(10, Ordering::SeqCst);
            Ok(())
        });
        Ok(())
    })
    .unwrap();

    let v = counter.load(Ordering::SeqCst);
    assert_eq!(v, 11);
}

/// Port of rayon-core `scope/test.rs`: `scope_two`, each task's number
/// going through the device.
#[test]
fn scope_two_gpu() {
    let _g = together();
    let counter = &AtomicUsize::new(0);
    gpu::scope(|s| {
        s.spawn(move |t| {
            counter.fetch_add(through_gpu(t, 1)? as usize, Ordering::SeqCst);
            Ok(())
        });
        s.spawn(move |t| {
            counter.fetch_add(through_gpu(t, 10)? as usize, Ordering::SeqCst);
            Ok(())
        });
        Ok(())
    })
    .unwrap();

    let v = counter.load(Ordering::SeqCst);
    assert_eq!(v, 11);
}

/// Port of rayon-core `scope/test.rs`: `scope_two`, through
/// `gpu::in_place_scope` with a body that is not `Send`.
#[test]
fn scope_two_in_place() {
    let _g = together();
    let counter = &AtomicUsize::new(0);
    let not_send = std::rc::Rc::new(10);
    gpu::in_place_scope(|s| {
        let ten = *not_send;
        s.spawn(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        s.spawn(move |t| {
            counter.fetch_add(through_gpu(t, ten)? as usize, Ordering::SeqCst);
            Ok(())
        });
        Ok(())
    })
    .unwrap();
    assert_eq!(counter.load(Ordering::SeqCst), 11);
}

// ----- scope_divide_and_conquer ------------------------------------------

fn divide_and_conquer<'scope>(
    scope: &Scope<'_, 'scope>,
    counter: &'scope AtomicUsize,
    size: usize,
    with_gpu: bool,
) -> gpu::Result<()> {
    if size > 1 {
        if with_gpu {
            tiny_gpu_op(scope)?;
        }
        scope.spawn(move |scope| divide_and_conquer(scope, counter, size / 2, with_gpu));
        scope.spawn(move |scope| divide_and_conquer(scope, counter, size / 2, with_gpu));
    } else {
        // count the leaves
        let one = if with_gpu { through_gpu(scope, 1)? } else { 1 };
        counter.fetch_add(one as usize, Ordering::SeqCst);
    }
    Ok(())
}

fn divide_and_conquer_seq(counter: &AtomicUsize, size: usize) {
    if size > 1 {
        divide_and_conquer_seq(counter, size / 2);
        divide_and_conquer_seq(counter, size / 2);
    } else {
        // count the leaves
        counter.fetch_add(1, Ordering::SeqCst);
    }
}

fn check_divide_and_conquer(with_gpu: bool) {
    let counter_p = &AtomicUsize::new(0);
    gpu::scope(|s| {
        s.spawn(move |s| divide_and_conquer(s, counter_p, 1024, with_gpu));
        Ok(())
    })
    .unwrap();

    let counter_s = &AtomicUsize::new(0);
    divide_and_conquer_seq(counter_s, 1024);

    let p = counter_p.load(Ordering::SeqCst);
    let s = counter_s.load(Ordering::SeqCst);
    assert_eq!(s, 1024);
    assert_eq!(p, s);
}

/// Port of rayon-core `scope/test.rs`: `scope_divide_and_conquer`.
#[test]
fn scope_divide_and_conquer() {
    let _g = together();
    check_divide_and_conquer(false);
}

/// Port of rayon-core `scope/test.rs`: `scope_divide_and_conquer`, each
/// inner task doing a tiny GPU operation and each leaf counting a 1 read
/// back from the device (2,047 tasks); then nothing is left held.
#[test]
fn scope_divide_and_conquer_gpu() {
    let _g = alone();
    check_divide_and_conquer(true);
    assert_nothing_held(gpu::runtime().unwrap());
}

// ----- update_tree -------------------------------------------------------

struct Tree<T: Send> {
    value: T,
    children: Vec<Tree<T>>,
}

impl<T: Send> Tree<T> {
    fn iter(&self) -> std::vec::IntoIter<&T> {
        once(&self.value)
            .chain(self.children.iter().flat_map(Tree::iter))
            .collect::<Vec<_>>() // seems like it shouldn't be needed... but prevents overflow
            .into_iter()
    }

    fn update<OP>(&mut self, op: OP) -> gpu::Result<()>
    where
        OP: Fn(&TaskContext, &mut T) -> gpu::Result<()> + Sync,
    {
        gpu::scope(|s| self.update_in_scope(&op, s))
    }

    fn update_in_scope<'scope, OP>(
        &'scope mut self,
        op: &'scope OP,
        scope: &Scope<'_, 'scope>,
    ) -> gpu::Result<()>
    where
        OP: Fn(&TaskContext, &mut T) -> gpu::Result<()> + Sync,
    {
        let Tree {
            ref mut value,
            ref mut children,
        } = *self;
        scope.spawn(move |scope| {
            for child in children {
                scope.spawn(move |scope| child.update_in_scope(op, scope));
            }
            Ok(())
        });

        op(scope, value)
    }
}

/// A random tree of `depth` levels with at least 100 nodes (the first
/// trees the seed draws may be smaller: drawn again).
fn random_tree(depth: usize) -> Tree<u32> {
    assert!(depth > 0);
    let mut rng = XorShift::seeded();
    loop {
        let tree = random_tree1(depth, &mut rng);
        if tree.iter().len() >= 100 {
            return tree;
        }
    }
}

fn random_tree1(depth: usize, rng: &mut XorShift) -> Tree<u32> {
    let children = if depth == 0 {
        vec![]
    } else {
        (0..rng.below(4)) // somewhere between 0 and 3 children at each level
            .map(|_| random_tree1(depth - 1, rng))
            .collect()
    };

    Tree {
        value: rng.below(1_000_000),
        children,
    }
}

fn check_update_tree(op: impl Fn(&TaskContext, &mut u32) -> gpu::Result<()> + Sync) {
    let mut tree: Tree<u32> = random_tree(10);
    let values: Vec<u32> = tree.iter().cloned().collect();
    tree.update(op).unwrap();
    let new_values: Vec<u32> = tree.iter().cloned().collect();
    assert_eq!(values.len(), new_values.len());
    for (&i, &j) in values.iter().zip(&new_values) {
        assert_eq!(i + 1, j);
    }
}

/// Port of rayon-core `scope/test.rs`: `update_tree`.
#[test]
fn update_tree() {
    let _g = together();
    check_update_tree(|_, v| {
        *v += 1;
        Ok(())
    });
}

/// Port of rayon-core `scope/test.rs`: `update_tree`, each node's new
/// value computed through the device.
#[test]
fn update_tree_gpu() {
    let _g = together();
    check_update_tree(|t, v| {
        *v = u32::try_from(through_gpu(t, u64::from(*v) + 1)?).unwrap();
        Ok(())
    });
}

// ----- linear_stack_growth -----------------------------------------------

/// The lowest and highest stack address each thread ran a task of a
/// countdown at.
#[derive(Default)]
struct StackSpans(Mutex<HashMap<ThreadId, (usize, usize)>>);

impl StackSpans {
    fn record(&self) {
        let top_of_stack = 0u8;
        let q = std::hint::black_box(&top_of_stack) as *const u8 as usize;
        let mut spans = self.0.lock().unwrap();
        let e = spans.entry(std::thread::current().id()).or_insert((q, q));
        *e = (e.0.min(q), e.1.max(q));
    }

    /// The largest span of stack one thread ran tasks of the countdown in.
    fn max_span(&self) -> usize {
        let spans = self.0.lock().unwrap();
        spans.values().map(|(lo, hi)| hi - lo).max().unwrap_or(0)
    }
}

fn the_final_countdown<'scope>(
    s: &Scope<'_, 'scope>,
    spans: &'scope StackSpans,
    n: usize,
    with_gpu: bool,
) -> gpu::Result<()> {
    spans.record();
    if with_gpu {
        tiny_gpu_op(s)?;
    }
    if n > 0 {
        s.spawn(move |s| the_final_countdown(s, spans, n - 1, with_gpu));
    }
    Ok(())
}

/// The largest stack span of one thread over a countdown of `n` tasks.
fn countdown_span(n: usize, with_gpu: bool) -> usize {
    let spans = StackSpans::default();
    gpu::scope(|s| the_final_countdown(s, &spans, n, with_gpu)).unwrap();
    spans.max_span()
}

/// A task spawned by a task runs after its spawner returned, not inside
/// it: a chain of 500 spawns takes no more stack on any thread than a
/// chain of 5. (A task run inside its spawner's frames would add a
/// nested scope's worth of frames per level: more than 2 KB in a release
/// build, over a megabyte for 500 levels.)
fn check_linear_stack_growth(with_gpu: bool) {
    /// The span may differ by how a thread came to run a task (the
    /// scope's body, or the scope's end helping), not by the depth.
    const SLACK: usize = 64 << 10;
    let when_5 = countdown_span(5, with_gpu);
    let when_500 = countdown_span(500, with_gpu);
    println!("largest stack span of one thread: {when_5} bytes for 5 tasks, {when_500} for 500");
    assert!(
        when_500 <= when_5 + SLACK,
        "stack usage grows with the chain: {when_5} bytes for 5, {when_500} for 500"
    );
}

/// Port of rayon-core `scope/test.rs`: `linear_stack_growth`, on the
/// global pool (each thread's stack measured separately).
#[test]
fn linear_stack_growth() {
    let _g = together();
    check_linear_stack_growth(false);
}

/// Port of rayon-core `scope/test.rs`: `linear_stack_growth`, each task
/// doing a tiny GPU operation.
#[test]
fn linear_stack_growth_gpu() {
    let _g = together();
    check_linear_stack_growth(true);
}

// ----- panics ------------------------------------------------------------

/// Port of rayon-core `scope/test.rs`: `panic_propagate_scope`.
#[test]
#[should_panic(expected = "Hello, world!")]
fn panic_propagate_scope() {
    let _g = together();
    gpu::scope(|_| -> gpu::Result<()> { panic!("Hello, world!") }).unwrap();
}

/// Port of rayon-core `scope/test.rs`: `panic_propagate_scope`, after a
/// tiny GPU operation.
#[test]
#[should_panic(expected = "Hello, world!")]
fn panic_propagate_scope_gpu() {
    let _g = together();
    gpu::scope(|s| -> gpu::Result<()> {
        tiny_gpu_op(s)?;
        panic!("Hello, world!")
    })
    .unwrap();
}

/// Port of rayon-core `scope/test.rs`: `panic_propagate_spawn`.
#[test]
#[should_panic(expected = "Hello, world!")]
fn panic_propagate_spawn() {
    let _g = together();
    gpu::scope(|s| {
        s.spawn(|_| panic!("Hello, world!"));
        Ok(())
    })
    .unwrap();
}

/// Port of rayon-core `scope/test.rs`: `panic_propagate_spawn`, the body
/// and the task doing GPU work first.
#[test]
#[should_panic(expected = "Hello, world!")]
fn panic_propagate_spawn_gpu() {
    let _g = together();
    gpu::scope(|s| {
        tiny_gpu_op(s)?;
        s.spawn(|t| {
            tiny_gpu_op(t)?;
            panic!("Hello, world!")
        });
        Ok(())
    })
    .unwrap();
}

/// Port of rayon-core `scope/test.rs`: `panic_propagate_nested_spawn`.
#[test]
#[should_panic(expected = "Hello, world!")]
fn panic_propagate_nested_spawn() {
    let _g = together();
    gpu::scope(|s| {
        s.spawn(|s| {
            s.spawn(|s| {
                s.spawn(|_| panic!("Hello, world!"));
                Ok(())
            });
            Ok(())
        });
        Ok(())
    })
    .unwrap();
}

/// Port of rayon-core `scope/test.rs`: `panic_propagate_nested_spawn`,
/// every task doing GPU work first.
#[test]
#[should_panic(expected = "Hello, world!")]
fn panic_propagate_nested_spawn_gpu() {
    let _g = together();
    gpu::scope(|s| {
        s.spawn(|s| {
            tiny_gpu_op(s)?;
            s.spawn(|s| {
                tiny_gpu_op(s)?;
                s.spawn(|t| {
                    tiny_gpu_op(t)?;
                    panic!("Hello, world!")
                });
                Ok(())
            });
            Ok(())
        });
        Ok(())
    })
    .unwrap();
}

/// Port of rayon-core `scope/test.rs`: `panic_propagate_nested_scope_spawn`
/// (the inner scope a new `gpu::scope` opened inside a task).
#[test]
#[should_panic(expected = "Hello, world!")]
fn panic_propagate_nested_scope_spawn() {
    let _g = together();
    gpu::scope(|s| {
        s.spawn(|_| {
            gpu::scope(|s| {
                s.spawn(|_| panic!("Hello, world!"));
                Ok(())
            })
        });
        Ok(())
    })
    .unwrap();
}

/// Port of rayon-core `scope/test.rs`: `panic_propagate_nested_scope_spawn`,
/// the inner scope the task's own (`Scope::scope`), every task doing GPU
/// work first.
#[test]
#[should_panic(expected = "Hello, world!")]
fn panic_propagate_nested_scope_spawn_gpu() {
    let _g = together();
    gpu::scope(|s| {
        s.spawn(|t| {
            tiny_gpu_op(t)?;
            t.scope(|s| {
                s.spawn(|u| {
                    tiny_gpu_op(u)?;
                    panic!("Hello, world!")
                });
                Ok(())
            })
        });
        Ok(())
    })
    .unwrap();
}

/// Port of rayon-core `scope/test.rs`: `panic_propagate_still_execute_1`.
#[test]
fn panic_propagate_still_execute_1() {
    let _g = together();
    let mut x = false;
    let msg = expect_panic(|| {
        gpu::scope(|s| {
            s.spawn(|_| panic!("Hello, world!")); // job A
            s.spawn(|_| {
                x = true; // job B, should still execute even though A panics
                Ok(())
            });
            Ok(())
        })
    });
    assert_eq!(msg, "Hello, world!");
    assert!(x, "job b failed to execute");
}

/// Port of rayon-core `scope/test.rs`: `panic_propagate_still_execute_1`,
/// job A panicking after GPU work, job B's value read back from the
/// device; then nothing is left held.
#[test]
fn panic_propagate_still_execute_1_gpu() {
    let _g = alone();
    let mut x = 0;
    let msg = expect_panic(|| {
        gpu::scope(|s| {
            s.spawn(|t| {
                tiny_gpu_op(t)?;
                panic!("Hello, world!")
            });
            s.spawn(|t| {
                x = through_gpu(t, 7)?;
                Ok(())
            });
            Ok(())
        })
    });
    assert_eq!(msg, "Hello, world!");
    assert_eq!(x, 7, "job b failed to execute");
    assert_nothing_held(gpu::runtime().unwrap());
}

/// Port of rayon-core `scope/test.rs`: `panic_propagate_still_execute_2`.
#[test]
fn panic_propagate_still_execute_2() {
    let _g = together();
    let mut x = false;
    let msg = expect_panic(|| {
        gpu::scope(|s| {
            s.spawn(|_| {
                x = true; // job B, should still execute even though A panics
                Ok(())
            });
            s.spawn(|_| panic!("Hello, world!")); // job A
            Ok(())
        })
    });
    assert_eq!(msg, "Hello, world!");
    assert!(x, "job b failed to execute");
}

/// Port of rayon-core `scope/test.rs`: `panic_propagate_still_execute_2`,
/// with GPU work in both jobs.
#[test]
fn panic_propagate_still_execute_2_gpu() {
    let _g = together();
    let mut x = 0;
    let msg = expect_panic(|| {
        gpu::scope(|s| {
            s.spawn(|t| {
                x = through_gpu(t, 7)?;
                Ok(())
            });
            s.spawn(|t| {
                tiny_gpu_op(t)?;
                panic!("Hello, world!")
            });
            Ok(())
        })
    });
    assert_eq!(msg, "Hello, world!");
    assert_eq!(x, 7, "job b failed to execute");
}

/// Port of rayon-core `scope/test.rs`: `panic_propagate_still_execute_3`.
#[test]
fn panic_propagate_still_execute_3() {
    let _g = together();
    let mut x = false;
    let msg = expect_panic(|| {
        gpu::scope(|s| -> gpu::Result<()> {
            s.spawn(|_| {
                x = true; // spawned job should still execute despite later panic
                Ok(())
            });
            panic!("Hello, world!");
        })
    });
    assert_eq!(msg, "Hello, world!");
    assert!(x, "panic after spawn, spawn failed to execute");
}

/// Port of rayon-core `scope/test.rs`: `panic_propagate_still_execute_3`,
/// the body panicking after GPU work, the job's value read back from the
/// device.
#[test]
fn panic_propagate_still_execute_3_gpu() {
    let _g = together();
    let mut x = 0;
    let msg = expect_panic(|| {
        gpu::scope(|s| -> gpu::Result<()> {
            tiny_gpu_op(s)?;
            s.spawn(|t| {
                x = through_gpu(t, 7)?;
                Ok(())
            });
            panic!("Hello, world!");
        })
    });
    assert_eq!(msg, "Hello, world!");
    assert_eq!(x, 7, "panic after spawn, spawn failed to execute");
}

/// Port of rayon-core `scope/test.rs`: `panic_propagate_still_execute_3`,
/// through `gpu::in_place_scope`.
#[test]
fn panic_propagate_still_execute_3_in_place() {
    let _g = together();
    let mut x = false;
    let msg = expect_panic(|| {
        gpu::in_place_scope(|s| -> gpu::Result<()> {
            s.spawn(|_| {
                x = true;
                Ok(())
            });
            panic!("Hello, world!");
        })
    });
    assert_eq!(msg, "Hello, world!");
    assert!(x, "panic after spawn, spawn failed to execute");
}

/// Port of rayon-core `scope/test.rs`: `panic_propagate_still_execute_4`.
#[test]
fn panic_propagate_still_execute_4() {
    let _g = together();
    let mut x = false;
    let msg = expect_panic(|| {
        gpu::scope(|s| {
            s.spawn(|_| panic!("Hello, world!"));
            x = true;
            Ok(())
        })
    });
    assert_eq!(msg, "Hello, world!");
    assert!(x, "panic in spawn tainted scope");
}

/// Port of rayon-core `scope/test.rs`: `panic_propagate_still_execute_4`,
/// the job panicking after GPU work, the body going on with GPU work whose
/// value is read back.
#[test]
fn panic_propagate_still_execute_4_gpu() {
    let _g = together();
    let mut x = 0;
    let msg = expect_panic(|| {
        gpu::scope(|s| {
            s.spawn(|t| {
                tiny_gpu_op(t)?;
                panic!("Hello, world!")
            });
            x = through_gpu(s, 7)?;
            Ok(())
        })
    });
    assert_eq!(msg, "Hello, world!");
    assert_eq!(x, 7, "panic in spawn tainted scope");
}

/// Port of rayon-core `scope/test.rs`: `panic_propagate_still_execute_1`,
/// with an error for the panic (the `Result` counterpart): job B still
/// runs and the scope returns job A's error.
#[test]
fn error_propagate_still_execute() {
    let _g = together();
    let mut x = 0;
    let r = gpu::scope(|s| {
        s.spawn(|_| Err(gpu::Error::ZeroChunk)); // job A
        s.spawn(|t| {
            x = through_gpu(t, 7)?; // job B
            Ok(())
        });
        Ok(())
    });
    assert!(matches!(r, Err(gpu::Error::ZeroChunk)), "{r:?}");
    assert_eq!(x, 7, "job b failed to execute");
}

// ----- static_scope, mixed_lifetime_scope --------------------------------

/// Port of rayon-core `scope/test.rs`: `static_scope`.
#[test]
fn static_scope() {
    let _g = together();
    static COUNTER: AtomicUsize = AtomicUsize::new(0);

    let mut range = 0..100;
    let sum = range.clone().sum();
    let iter = &mut range;

    COUNTER.store(0, Ordering::Relaxed);
    gpu::scope(|s: &Scope<'_, 'static>| {
        // While we're allowed the locally borrowed iterator,
        // the spawns must be static.
        for i in iter {
            s.spawn(move |_| {
                COUNTER.fetch_add(i, Ordering::Relaxed);
                Ok(())
            });
        }
        Ok(())
    })
    .unwrap();

    assert_eq!(COUNTER.load(Ordering::Relaxed), sum);
}

/// Port of rayon-core `scope/test.rs`: `static_scope`, each number going
/// through the device.
#[test]
fn static_scope_gpu() {
    let _g = together();
    static COUNTER: AtomicUsize = AtomicUsize::new(0);

    let mut range = 0..100;
    let sum = range.clone().sum();
    let iter = &mut range;

    COUNTER.store(0, Ordering::Relaxed);
    gpu::scope(|s: &Scope<'_, 'static>| {
        for i in iter {
            s.spawn(move |t| {
                COUNTER.fetch_add(through_gpu(t, i as u64)? as usize, Ordering::Relaxed);
                Ok(())
            });
        }
        Ok(())
    })
    .unwrap();

    assert_eq!(COUNTER.load(Ordering::Relaxed), sum);
}

fn increment<'slice, 'counter>(
    counters: &'slice [&'counter AtomicUsize],
    with_gpu: bool,
) -> gpu::Result<()> {
    gpu::scope(move |s: &Scope<'_, 'counter>| {
        // We can borrow 'slice here, but the spawns can only borrow 'counter.
        for &c in counters {
            s.spawn(move |t| {
                let one = if with_gpu { through_gpu(t, 1)? } else { 1 };
                c.fetch_add(one as usize, Ordering::Relaxed);
                Ok(())
            });
        }
        Ok(())
    })
}

/// Port of rayon-core `scope/test.rs`: `mixed_lifetime_scope`.
#[test]
fn mixed_lifetime_scope() {
    let _g = together();
    let counter = AtomicUsize::new(0);
    increment(&[&counter; 100], false).unwrap();
    assert_eq!(counter.into_inner(), 100);
}

/// Port of rayon-core `scope/test.rs`: `mixed_lifetime_scope`, each
/// increment going through the device.
#[test]
fn mixed_lifetime_scope_gpu() {
    let _g = together();
    let counter = AtomicUsize::new(0);
    increment(&[&counter; 100], true).unwrap();
    assert_eq!(counter.into_inner(), 100);
}
