//! Errors around a library's results (moved here from gpu-sched's
//! `errors.rs` with the libraries): a wait that keeps failing, on a
//! dropped task's unchecked factorization result.

use gpu_sched::{Error, Runtime};
use std::time::Duration;

/// A wait that keeps failing on a device that reports no broken context
/// ends with a typed, sticky error after the runtime's wait limit where the
/// memory it guards is the runtime's (here a dropped task's unchecked
/// result, whose word is then kept, never reused): no abort, and every
/// later such wait fails at once. A copy through borrowed host memory goes
/// on waiting past the limit (returning would let the copy write memory
/// the caller got back) and returns once the driver answers again, with
/// the data.
#[test]
fn a_wait_that_keeps_failing_is_a_sticky_error_not_an_abort() {
    let faults = gpu_sched::FaultInjector::new();
    let rt = Runtime::new(gpu_sched::RuntimeOptions {
        backend: gpu_sched::BackendChoice::Host,
        fault_injection: Some(faults.clone()),
        wait_limit: Duration::from_millis(50),
        ..Default::default()
    })
    .unwrap();
    let t = rt.begin_task().unwrap();
    let x = t.from_host(&[1.0f32, 2.0]).unwrap();
    {
        let u = rt.begin_task().unwrap();
        let mut a = u.from_host(&[4.0f64]).unwrap();
        gpu_libs::solver::Potrf::new(1).run(&u, &mut a).unwrap();
    }
    faults.fail_always("event_sync", gpu_sched::FaultKind::Driver);
    assert!(rt.synchronize().is_err());
    faults.disarm();
    match rt.synchronize() {
        Err(e @ Error::DeviceUnresponsive { .. }) => assert!(e.is_sticky()),
        r => panic!("expected the sticky unresponsive error, got {r:?}"),
    }
    // Borrowed memory: the copy's wait fails for longer than the limit,
    // then the driver answers again.
    faults.fail_always("stream_sync", gpu_sched::FaultKind::Driver);
    let healer = {
        let faults = faults.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            faults.disarm();
        })
    };
    assert_eq!(t.to_vec(&x).unwrap(), [1.0, 2.0]);
    healer.join().unwrap();
}
