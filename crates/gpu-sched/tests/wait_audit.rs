//! The host backend's wait audit (`Runtime::set_wait_audit`): every device
//! wait a hand-off inserts is counted, once, as needed or unnecessary by
//! the race detector's clocks, and a known unnecessary wait (what a wait
//! taught, an earlier wait of the same stream had already ordered) is
//! counted as one.

use gpu_sched::raw::RawTask;
use gpu_sched::{BackendChoice, FaultInjector, Runtime, RuntimeOptions, WaitAudit};
use std::time::Duration;

fn audited() -> (Runtime, std::sync::Arc<FaultInjector>) {
    let faults = FaultInjector::new();
    let rt = Runtime::new(RuntimeOptions {
        backend: BackendChoice::Host,
        fault_injection: Some(faults.clone()),
        ..Default::default()
    })
    .unwrap();
    assert!(rt.set_wait_audit(true), "the host backend audits");
    (rt, faults)
}

fn device_waits(faults: &FaultInjector) -> u64 {
    faults
        .names()
        .iter()
        .filter(|n| **n == "wait_event")
        .count() as u64
}

#[test]
fn every_device_wait_is_judged_once() {
    let (rt, faults) = audited();
    let setup = rt.begin_task().unwrap();
    let mut a = setup.zeros::<f32>(1024).unwrap();
    let mut b = setup.zeros::<f32>(1024).unwrap();
    let mut c = setup.zeros::<f32>(1024).unwrap();
    setup.synchronize().unwrap();
    drop(setup);
    assert_eq!(rt.wait_audit(), Some(WaitAudit::default()));

    // `t` writes `a`, then `b`, behind a gate: not done while `u` hands
    // them off to its stream.
    let t = rt.begin_task().unwrap();
    let g = rt.gate().unwrap();
    gpu_kernels::gate(&t, &g, Duration::from_secs(20)).unwrap();
    gpu_kernels::fill(&t, &mut a, 1.0).unwrap();
    gpu_kernels::fill(&t, &mut b, 2.0).unwrap();
    let u = rt.begin_task().unwrap();
    assert_ne!(u.stream_id(), t.stream_id());
    let before = device_waits(&faults);
    // `c += a`: a wait for `t`'s stream, which orders the fill of `a`.
    gpu_kernels::axpy(&u, 1.0, &a, &mut c).unwrap();
    // `c += b`: the fill of `b` came before the event that wait waited
    // for, and `t` closed its epoch after each fill (DESIGN "Beyond the
    // seed (X1-X8)", X6): the wait taught `u` so, and it waits no more.
    gpu_kernels::axpy(&u, 1.0, &b, &mut c).unwrap();
    let waits = device_waits(&faults) - before;
    assert_eq!(waits, 1);
    g.open();
    rt.synchronize().unwrap();
    assert!(rt.races().is_empty(), "{:?}", rt.races());
    assert_eq!(u.to_vec(&c).unwrap(), vec![3.0; 1024]);
    let audit = rt.wait_audit().unwrap();
    assert_eq!(audit.needed + audit.unnecessary, waits, "{audit}");
    assert_eq!(audit.needed, 1, "{audit}");
    assert_eq!(audit.unclassified, 0, "{audit}");

    // Off: nothing more is counted.
    assert!(rt.set_wait_audit(false));
    let v = rt.begin_task().unwrap();
    gpu_kernels::scale(&v, &mut a, 2.0).unwrap();
    gpu_kernels::scale(&t, &mut a, 2.0).unwrap();
    rt.synchronize().unwrap();
    assert_eq!(rt.wait_audit(), Some(audit));
}

/// A wait the ledger asks for although the work is already ordered: an
/// escaped buffer (R10) moving to another stream waits for everything its
/// stream queued, whatever the facts, here for a fill the host saw done.
#[test]
fn a_wait_for_work_already_ordered_is_unnecessary() {
    let (rt, faults) = audited();
    let t = rt.begin_task().unwrap();
    let mut a = t.zeros::<f32>(1024).unwrap();
    gpu_kernels::fill(&t, &mut a, 1.0).unwrap();
    t.synchronize().unwrap();
    t.raw_ptr(&mut a).unwrap();
    let u = rt.begin_task().unwrap();
    assert_ne!(u.stream_id(), t.stream_id());
    let before = device_waits(&faults);
    gpu_kernels::scale(&u, &mut a, 3.0).unwrap();
    assert_eq!(
        device_waits(&faults) - before,
        1,
        "R10: a wait, facts or not"
    );
    rt.synchronize().unwrap();
    assert!(rt.races().is_empty(), "{:?}", rt.races());
    assert_eq!(u.to_vec(&a).unwrap(), vec![3.0; 1024]);
    let audit = rt.wait_audit().unwrap();
    assert_eq!(
        audit,
        WaitAudit {
            needed: 0,
            unnecessary: 1,
            unclassified: 0
        }
    );
    assert!(audit.unnecessary_share() == 1.0);
}
