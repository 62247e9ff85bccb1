//! The ledger's precision on real workloads (issue 39, item 2; DESIGN
//! "Tests"): B13's DAG, the tiled Cholesky of `11-cholesky` and the CG of
//! `12-cg-sparse`, each run by the runtime, on the host backend, with its
//! wait audit on (`gpu::Runtime::set_wait_audit`): every device wait a
//! hand-off inserts is judged, as its stream reaches it, needed or not by
//! the race detector's vector clocks (needed: it orders an earlier
//! conflicting access that nothing ordered before it).
//!
//! Not a criterion bench (`harness = false`): it prints one JSON row a
//! line, `ledger/<workload>-needed`, `-unnecessary`, `-unclassified` and
//! `-classified` (needed and unnecessary; unit `waits`), which `cargo
//! xtask bench` reads and makes `ratio/ledger-unnecessary-<workload>` of
//! (the unnecessary share of the classified waits; goal <= 0.05). A filter
//! (criterion's argument) that does not name `ledger` skips it. The
//! random programs' row comes from the oracle test (`cargo xtask bench`
//! runs it too).
//!
//! Always the host backend, since only it has the detector: `GPU_BACKEND`
//! is set to `host` before the runtime opens, on a GPU machine too. The
//! DAGs are the workloads' own; what the host has seen complete when a
//! task hands a buffer off depends on timing, which is the CPU's here.
//!
//! ```text
//! cargo bench -p gpu-benches --bench waits
//! ```

use common::cg::{load, Cg};
use common::cholesky::{factor, factor_with_panel, panel_tasks, tasks, Tiles};
use gpu::sparse::Csr;
use gpu::{Runtime, WaitAudit};
use gpu_testkit::b13;

/// The grid of the CG's Poisson matrix (`n x n` unknowns), and its steps.
const CG_GRID: usize = 64;
const CG_STEPS: usize = 30;

/// The Cholesky's tiles (`T x T` of `B x B`) and tasks (`11-cholesky`'s
/// host defaults, doubled in tiles).
const T: usize = 12;
const B: usize = 16;
const STREAMS: usize = 16;

fn rows(workload: &str, a: WaitAudit) {
    for (what, n) in [
        ("needed", a.needed),
        ("unnecessary", a.unnecessary),
        ("unclassified", a.unclassified),
        ("classified", a.needed + a.unnecessary),
    ] {
        println!("{{\"name\": \"ledger/{workload}-{what}\", \"value\": {n}, \"unit\": \"waits\"}}");
    }
    eprintln!("ledger/{workload}: {a}");
}

/// `body` with the audit on, from zero, after everything before it is done;
/// its counts once everything it queued is done.
fn audited(rt: &Runtime, body: impl FnOnce() -> gpu::Result<()>) -> gpu::Result<WaitAudit> {
    rt.synchronize()?;
    assert!(rt.set_wait_audit(true), "the host backend audits");
    body()?;
    rt.synchronize()?;
    let a = rt.wait_audit().expect("the host backend audits");
    rt.set_wait_audit(false);
    let races = rt.races();
    assert!(races.is_empty(), "races: {races:?}");
    Ok(a)
}

/// B13's DAG of `b13::HOST_TASKS` tasks, checked against its model.
fn b13(rt: &Runtime) -> gpu::Result<WaitAudit> {
    let tasks = b13::dag(b13::SEED, b13::HOST_TASKS, b13::BUFFERS);
    let pristine = b13::pristine()?;
    let mut bufs = b13::buffers()?;
    let t = rt.begin_task()?;
    b13::reset(&t, &pristine, &mut bufs)?;
    t.synchronize()?;
    let a = audited(rt, || b13::run(&bufs, &tasks))?;
    let diff = b13::first_difference(&bufs, &b13::model(&tasks))?;
    assert!(
        diff.is_none(),
        "B13: buffer {diff:?} differs from the model"
    );
    Ok(a)
}

/// The tiled Cholesky on `STREAMS` tasks, then with the panel on two tasks
/// of their own (`11-cholesky`'s last run).
fn cholesky(rt: &Runtime) -> gpu::Result<WaitAudit> {
    let setup = rt.begin_task()?;
    let original = Tiles::test_matrix(&setup, T, B)?;
    setup.synchronize()?;
    let mut total = WaitAudit::default();
    for panel in [0, 2] {
        let mut a = original.copy(&setup)?;
        setup.synchronize()?;
        let (w, p) = (tasks(rt, STREAMS)?, panel_tasks(rt, panel)?);
        let got = audited(rt, || {
            factor_with_panel(&w, &p, &mut a)?;
            // The factor's tasks end here: their streams' epochs close.
            drop((w, p));
            Ok(())
        })?;
        total.needed += got.needed;
        total.unnecessary += got.unnecessary;
        total.unclassified += got.unclassified;
    }
    // The plain `factor` too (one task), for its values.
    let mut a = original.copy(&setup)?;
    let one = tasks(rt, 1)?;
    one[0].after_fence(setup.fence()?)?;
    factor(&one, &mut a)?;
    one[0].synchronize()?;
    Ok(total)
}

/// `12-cg-sparse`'s CG (`common::cg`) on the Poisson matrix of a
/// `CG_GRID` grid: `CG_STEPS` steps, 10 a run of one `gpu::Graphed`, the
/// residual read on the host after each run, as there.
fn cg(rt: &Runtime) -> gpu::Result<WaitAudit> {
    let (rp, ci, v) = common::poisson::poisson(CG_GRID);
    let n = rp.len() - 1;
    let b = vec![1.0f64; n];
    audited(rt, || {
        gpu::scope(|s| {
            let (k, _) = load(s)?;
            let a = Csr::from_host(s, n, n, &rp, &ci, &v)?;
            let mut cg = Cg::new(s, &b)?;
            let mut graphed = gpu::Graphed::on(s.runtime());
            for _ in 0..CG_STEPS / 10 {
                graphed.scope(|g| {
                    for _ in 0..10 {
                        cg.step(g, &a, &k)?;
                    }
                    Ok(())
                })?;
                s.to_vec(&cg.rr)?;
            }
            Ok(())
        })
    })
}

fn main() -> gpu::Result<()> {
    // cargo bench passes --bench; the first other argument is a filter.
    if let Some(f) = std::env::args().skip(1).find(|a| !a.starts_with("--")) {
        if !"ledger".contains(&f) && !f.contains("ledger") {
            eprintln!("ledger: filter `{f}` does not name ledger; skipped");
            return Ok(());
        }
    }
    // Before the runtime opens, from this one thread (edition 2021).
    std::env::set_var("GPU_BACKEND", "host");
    let rt = Runtime::global()?;
    assert_eq!(rt.backend(), gpu::BackendKind::Host);
    rows("b13", b13(rt)?);
    rows("cholesky", cholesky(rt)?);
    rows("cg", cg(rt)?);
    Ok(())
}
