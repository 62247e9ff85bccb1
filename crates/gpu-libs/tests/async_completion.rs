//! Completion as futures, with a library's results: the await of a
//! fence checks the factorization results it carries as
//! `Fence::synchronize` does (moved here from gpu-sched's
//! `async_completion.rs` with the libraries).

// gpu-sched's test helpers, one copy for both crates' tests.
#[path = "../../gpu-sched/tests/common/mod.rs"]
mod common;

use common::{backend_tests, OPENED_BY_TEST};
use gpu_kernels as k;
use gpu_libs::solver::Potrf;
use gpu_sched::plumbing::TaskHooks;
use gpu_sched::{Error, Runtime};
use std::time::Duration;

/// A current-thread tokio runtime: one thread runs every task, so a poll
/// that blocked would stop them all.
fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// The await of a failing factorization's final fence returns its error,
/// as `Fence::synchronize` does; so does that of a fence that carries a
/// joined task's failure (taken over with `after_fence`), whose work is
/// held by a gate while the await starts.
fn awaiting_a_failing_factorization_returns_its_error(rt: &Runtime) {
    let c = rt.begin_task().unwrap();
    let mut a = c.from_host(&[-1.0f64]).unwrap();
    Potrf::new(1).run(&c, &mut a).unwrap();
    let f = c.final_fence().unwrap();
    drop(c);
    match current_thread().block_on(async { f.await }) {
        Err(Error::NotPositiveDefinite { minor: 1, .. }) => {}
        r => panic!("expected the factorization's failure, got {r:?}"),
    }
    // A grandchild's failure, behind a gate, carried by the child's fence.
    let c = rt.begin_task().unwrap();
    let gate = rt.gate().unwrap();
    let mut a = c.from_host(&[-1.0f64]).unwrap();
    k::gate(&c, &gate, OPENED_BY_TEST).unwrap();
    Potrf::new(1).run(&c, &mut a).unwrap();
    let f = c.final_fence().unwrap();
    drop(c);
    let p = rt.begin_task().unwrap();
    p.take_results_of(&f);
    let mut b = p.from_host(&[4.0f64]).unwrap();
    Potrf::new(1).run(&p, &mut b).unwrap();
    let g = p.final_fence().unwrap();
    drop(p);
    current_thread().block_on(async {
        let opener = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            gate.open();
        };
        let (_, r) = tokio::join!(opener, async { g.await });
        match r {
            Err(Error::NotPositiveDefinite { minor: 1, .. }) => {}
            r => panic!("expected the joined task's failure, got {r:?}"),
        }
    });
    assert!(!gate.timed_out(), "the gate timed out");
    drop(f);
    // Nothing left over for the runtime's synchronize.
    rt.synchronize().unwrap();
}
backend_tests!(awaiting_a_failing_factorization_returns_its_error);
