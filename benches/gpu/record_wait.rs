//! B1-B2: recording and waiting an event, tracked against raw.

use super::*;

pub(crate) fn b1_b2_record_wait(c: &mut Criterion) {
    let rt = rt();
    let t = rt.begin_task().unwrap();
    let ev = rt.event().unwrap();
    let mut g = c.benchmark_group("B1");
    bench_drained(&mut g, "tracked", &t, 4096, || {
        t.record(&ev).unwrap();
    });
    if cuda() {
        bench_drained(&mut g, "raw", &t, 4096, || {
            raw::record(ev.cu_event(), t.cu_stream());
        });
    }
    g.finish();
    let other = rt.begin_task().unwrap();
    other.record(&ev).unwrap();
    let mut g = c.benchmark_group("B2");
    bench_drained(&mut g, "tracked", &t, 4096, || {
        t.wait(&ev).unwrap();
    });
    if cuda() {
        bench_drained(&mut g, "raw", &t, 4096, || {
            raw::wait(t.cu_stream(), ev.cu_event());
        });
    }
    g.finish();
    t.synchronize().unwrap();
}
