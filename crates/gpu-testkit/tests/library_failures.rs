//! DESIGN "Where a failure goes" ("Where a failure goes") in random programs: the random task
//! DAGs of `gpu_testkit::dag` with Cholesky factorizations in their tasks,
//! some of which fail (injected at random from the seed: a matrix that is
//! not positive definite, known only after the device ran it). Each
//! top-level call (`scope_on`, `in_place_scope`, `join`, a top-level chunk
//! iterator) must return `Error::NotPositiveDefinite` exactly when a task
//! it covers (the caller, a child, a grandchild, a nested scope, a join
//! side, a chunk, a split's or a temporary's scope, another device) had a
//! failure; a wait inside a task reports one exactly when the task holds
//! one; every value, the factors' too, is the model's, in the calls that
//! failed as well; an unrelated task's `to_vec` after each call keeps its
//! data; and `Runtime::synchronize` has nothing left to report.
//!
//! On the global runtime (the host backend in CI, the GPU on the GPU
//! machine), plus two simulated devices on the host backend. The large run
//! is `cargo xtask stress --library-failures`.

use gpu::{BackendChoice, Runtime, RuntimeOptions};
use gpu_testkit::dag;
use std::time::Duration;

/// How long a run may go without finishing a top-level call.
const STALL: Duration = Duration::from_secs(60);

#[track_caller]
fn run(rt: &Runtime, cfg: &dag::Config) -> dag::Report {
    let report = dag::run_watched(rt, cfg, STALL, |_| true).unwrap_or_else(|e| panic!("{e}"));
    println!("seed {} ({} device(s)): {report}", cfg.seed, cfg.devices);
    assert!(report.tasks >= cfg.tasks, "{report}");
    assert_eq!(report.wrong, 0, "seed {}: {report}", cfg.seed);
    assert_eq!(report.races, 0, "seed {}: {report}", cfg.seed);
    report
}

#[test]
fn injected_library_failures_reach_their_calls_and_nothing_else() {
    let rt = gpu::runtime().expect("the global runtime starts");
    let mut all = dag::Report::default();
    for seed in [1, 2, 3] {
        let r = run(rt, &dag::Config::with_failures(seed, 3000));
        for (k, n) in r.census {
            *all.census.entry(k).or_default() += n;
        }
    }
    // Another device: tasks placed with `spawn_on`, calls of the second
    // device's runtime (a host runtime of two devices: `in_place_scope`
    // and `join` run as `scope_on` there).
    let two = Runtime::new(RuntimeOptions {
        backend: BackendChoice::Host,
        host_devices: 2,
        ..RuntimeOptions::default()
    })
    .expect("the host backend starts");
    let cfg = dag::Config {
        devices: 2,
        ..dag::Config::with_failures(4, 1500)
    };
    for (k, n) in run(&two, &cfg).census {
        *all.census.entry(k).or_default() += n;
    }
    println!("library operations:\n{}", all.library_census());
    for k in dag::LIBRARY_KINDS {
        assert!(all.count(k) > 0, "no `{k}`: {:?}", all.census);
    }
}
