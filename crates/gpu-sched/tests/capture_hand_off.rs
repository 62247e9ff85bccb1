//! X7 (DESIGN "Beyond the seed"): a hand-off to a stream being captured
//! waits for nothing, neither on the device nor on the host. What it
//! queues runs only when the graph is launched, captured operations stamp
//! nothing (R12), and the launch hands every buffer the graph touches off
//! again on its own stream: the launch waits for the earlier work. Before
//! X7 such a hand-off synchronized the old stream on the host, so a
//! capture blocked behind unrelated work still queued elsewhere.

mod common;

use common::{assert_no_races, backend_tests, OPENED_BY_TEST};
use gpu_kernels as k;
use gpu_sched::{Reason, Runtime};

/// Elements per buffer: not a multiple of the block size.
const N: usize = 1001;

/// A write of `x` in flight behind a gate on another task's stream; a
/// capture that scales `x` returns at once, with no wait; its launch waits
/// for the write on the device and sees its values.
fn x7_a_capture_waits_for_nothing_and_its_launch_waits(rt: &Runtime) {
    let writer = rt.begin_task().unwrap();
    let p = rt.begin_task().unwrap();
    let mut x = writer.zeros::<f32>(N).unwrap();
    let mut y = p.zeros::<f32>(N).unwrap();
    writer.synchronize().unwrap();
    p.synchronize().unwrap();
    let g = rt.gate().unwrap();
    k::gate(&writer, &g, OPENED_BY_TEST).unwrap();
    k::fill(&writer, &mut x, 3.0).unwrap();

    let before = rt.counters();
    let graph = p
        .capture(|c| {
            k::scale(c, &mut x, 2.0)?;
            k::copy(c, &x, &mut y)
        })
        .unwrap();
    let d = rt.counters().since(&before);
    assert_eq!((d.device_waits, d.host_syncs), (0, 0), "{d:?}");
    // The writer's use, once for the scale and once for the copy (the
    // scale, captured, did not stamp).
    assert_eq!(d.avoided(Reason::Captured), 2, "{d:?}");
    assert!(
        !g.timed_out(),
        "the capture waited on the host for the gated write"
    );
    assert_eq!(
        x.uses().writer().map(|w| w.stream),
        Some(writer.stream_id()),
        "captured operations do not stamp"
    );

    // The launch hands `x` off from the writer's stream: a device wait.
    let before = rt.counters();
    p.launch_graph(&graph)
        .write(&mut x)
        .write(&mut y)
        .submit()
        .unwrap();
    let d = rt.counters().since(&before);
    assert_eq!((d.device_waits, d.host_syncs), (1, 0), "{d:?}");
    g.open();
    let got = p.to_vec(&y).unwrap();
    assert!(got.iter().all(|&v| v == 6.0), "{:?}", &got[..4]);
    assert!(!g.timed_out(), "the gate was opened by the test");
    assert_no_races(rt);
}
backend_tests!(x7_a_capture_waits_for_nothing_and_its_launch_waits);
