//! Where tasks run (review issues 5 and 7): a task spawned from a side of
//! a join runs on the pool that runs the join (a pool of its own inside its
//! `install`, as Rayon's spawns do), and the tasks of a scope opened
//! outside every pool run on the global pool's workers or on the calling
//! thread, whose scope end runs those no worker started (documented on
//! `gpu::scope`, where this differs from Rayon), never anywhere else.

mod common;

use common::rayon_port::tiny_gpu_op;
use gpu::{Scope, ThreadPool};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::ThreadId;

/// How many tasks each check spawns.
const TASKS: usize = 32;

/// Counts the tasks run, and those run on a worker of `pool`. Shared
/// through an `Arc`: a join side's tasks cannot borrow from the test (its
/// scope's lifetime is the side's own).
struct Seen {
    pool: ThreadPool,
    ran: AtomicUsize,
    on_pool: AtomicUsize,
}

impl Seen {
    /// A pool of 3 workers and no task seen yet.
    fn new() -> Arc<Self> {
        Arc::new(Seen {
            pool: gpu::ThreadPoolBuilder::new()
                .num_threads(3)
                .build()
                .unwrap(),
            ran: AtomicUsize::new(0),
            on_pool: AtomicUsize::new(0),
        })
    }

    fn record(&self) {
        self.ran.fetch_add(1, Ordering::Relaxed);
        if self.pool.current_thread_index().is_some() {
            self.on_pool.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `TASKS` tasks spawned from `s`, each spawning one more; every other
    /// one with a GPU operation.
    fn spawn_from<'scope>(self: &Arc<Self>, s: &Scope<'_, 'scope>) {
        for i in 0..TASKS {
            let seen = self.clone();
            s.spawn(move |t| {
                seen.record();
                if i % 2 == 0 {
                    tiny_gpu_op(t)?;
                }
                t.spawn(move |_| {
                    seen.record();
                    Ok(())
                });
                Ok(())
            });
        }
    }

    #[track_caller]
    fn check(&self, want: usize) {
        assert_eq!(self.ran.load(Ordering::Relaxed), want, "tasks run");
        assert_eq!(
            self.on_pool.load(Ordering::Relaxed),
            want,
            "tasks run on the pool's workers"
        );
    }
}

/// `gpu::join` inside a pool's `install`: tasks spawned from both sides
/// (and the tasks they spawn) run on that pool. (They ran on the global
/// pool: the sides have no Rayon scope, and their spawns went to it.)
#[test]
fn spawns_from_gpu_join_sides_run_on_the_pool() {
    let seen = Seen::new();
    seen.pool
        .install(|| {
            gpu::join(
                |a| {
                    seen.spawn_from(a);
                    Ok(())
                },
                |b| {
                    seen.spawn_from(b);
                    Ok(())
                },
            )
        })
        .unwrap();
    seen.check(4 * TASKS);
}

/// `Scope::join` in a scope of a pool of its own: the same.
#[test]
fn spawns_from_scope_join_sides_run_on_the_pool() {
    let seen = Seen::new();
    seen.pool
        .scope(|s| {
            s.join(
                |a| {
                    seen.spawn_from(a);
                    Ok(())
                },
                |b| {
                    seen.spawn_from(b);
                    Ok(())
                },
            )?;
            Ok(())
        })
        .unwrap();
    seen.check(4 * TASKS);
}

/// A scope inside a join side, inside a pool's `install`: its tasks run on
/// that pool too.
#[test]
fn a_scope_in_a_join_side_runs_on_the_pool() {
    let seen = Seen::new();
    seen.pool
        .install(|| {
            gpu::join(
                |_a| {
                    gpu::scope(|s| {
                        seen.spawn_from(s);
                        Ok(())
                    })
                },
                |b| {
                    b.scope(|s| {
                        seen.spawn_from(s);
                        Ok(())
                    })
                },
            )
        })
        .unwrap();
    seen.check(4 * TASKS);
}

/// Counts the tasks that ran on the calling thread, or off every worker.
struct Placement {
    caller: ThreadId,
    ran: AtomicUsize,
    on_caller: AtomicUsize,
    off_worker: AtomicUsize,
}

impl Placement {
    fn new() -> Self {
        Placement {
            caller: std::thread::current().id(),
            ran: AtomicUsize::new(0),
            on_caller: AtomicUsize::new(0),
            off_worker: AtomicUsize::new(0),
        }
    }

    fn record(&self) {
        self.ran.fetch_add(1, Ordering::Relaxed);
        if std::thread::current().id() == self.caller {
            self.on_caller.fetch_add(1, Ordering::Relaxed);
        }
        if rayon_core::current_thread_index().is_none() {
            self.off_worker.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// For a scope opened outside every pool: every task ran, each on a
    /// worker or on the calling thread (which runs those no worker has
    /// started when the scope ends), none on any other thread.
    #[track_caller]
    fn check_outside(&self, want: usize) {
        assert_eq!(self.ran.load(Ordering::Relaxed), want, "tasks run");
        assert_eq!(
            self.off_worker.load(Ordering::Relaxed),
            self.on_caller.load(Ordering::Relaxed),
            "tasks run off the workers, elsewhere than on the calling thread"
        );
    }
}

/// Many short tasks: the scope's end finds most of them not started yet,
/// and runs those on the calling thread.
const SHORT_TASKS: usize = 256;

/// `gpu::scope` from a thread outside every pool: the body runs here, its
/// tasks (and theirs) on the global pool's workers, or here, where the
/// scope's end runs those no worker started (documented on `gpu::scope`:
/// no thread wake-up for a scope of one small task); never on another
/// thread.
#[test]
fn tasks_of_a_scope_opened_outside_run_on_workers_or_the_caller() {
    let seen = Placement::new();
    let seen = &seen;
    gpu::scope(|s| {
        for i in 0..SHORT_TASKS {
            s.spawn(move |t| {
                seen.record();
                if i % 16 == 0 {
                    tiny_gpu_op(t)?;
                    t.spawn(move |_| {
                        seen.record();
                        Ok(())
                    });
                }
                Ok(())
            });
        }
        assert_eq!(
            std::thread::current().id(),
            seen.caller,
            "the body runs here"
        );
        Ok(())
    })
    .unwrap();
    seen.check_outside(SHORT_TASKS + SHORT_TASKS / 16);
}

/// `gpu::in_place_scope` and `Scope::join` from outside every pool: the
/// same (`b` of a join there is a task of the pool; `a` runs here).
#[test]
fn tasks_of_an_in_place_scope_and_its_joins_run_on_workers_or_the_caller() {
    let seen = Placement::new();
    let seen = &seen;
    gpu::in_place_scope(|s| {
        for _ in 0..SHORT_TASKS {
            s.spawn(move |_| {
                seen.record();
                Ok(())
            });
        }
        for _ in 0..SHORT_TASKS {
            let (here, ()) = s.join(
                |_a| Ok(std::thread::current().id()),
                |_b| {
                    seen.record();
                    Ok(())
                },
            )?;
            assert_eq!(here, seen.caller, "a join's `a` runs here");
        }
        Ok(())
    })
    .unwrap();
    seen.check_outside(2 * SHORT_TASKS);
}
