//! Tracing: spans per operation, Chrome trace and SVG output. (The trace
//! file, with graph launches and a library call, is tested with the
//! libraries: gpu-libs's `tests/trace.rs`.)

use gpu_sched::trace::{chrome_trace, svg_timeline};
use gpu_sched::Runtime;
use std::time::Duration;

#[test]
fn traced_operations_become_spans_on_their_streams() {
    let rt = Runtime::host().unwrap();
    let a = rt.begin_task().unwrap();
    let b = rt.begin_task().unwrap();
    let mut x = a.zeros::<f32>(1024).unwrap();
    let mut y = b.zeros::<f32>(1024).unwrap();
    rt.synchronize().unwrap();
    rt.trace_start().unwrap();
    gpu_kernels::spin_touch(&a, &mut x, Duration::from_millis(20)).unwrap();
    gpu_kernels::fill(&b, &mut y, 2.0).unwrap();
    let spans = rt.trace_stop().unwrap();
    let names: Vec<_> = spans.iter().map(|s| s.name).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.contains(&"spin_touch_f32") && names.contains(&"fill_f32"));
    let spin = spans.iter().find(|s| s.name == "spin_touch_f32").unwrap();
    let fill = spans.iter().find(|s| s.name == "fill_f32").unwrap();
    assert_eq!(spin.stream, a.stream_id());
    assert_eq!(fill.stream, b.stream_id());
    assert!(spin.dur_us >= 20_000.0, "the spin took {} us", spin.dur_us);
    assert!(fill.start_us >= 0.0 && fill.dur_us >= 0.0);
    // The two streams overlap: the fill starts before the spin ends.
    assert!(fill.start_us < spin.start_us + spin.dur_us);
    let json = chrome_trace(&spans);
    assert!(json.starts_with('[') && json.trim_end().ends_with(']'));
    assert_eq!(json.matches("\"ph\": \"X\"").count(), 2);
    let svg = svg_timeline("test", &spans);
    assert!(svg.contains("<svg") && svg.contains("stream") && svg.contains("spin_touch_f32"));
    // Tracing is off again: no new spans.
    gpu_kernels::fill(&b, &mut y, 3.0).unwrap();
    rt.trace_start().unwrap();
    assert!(rt.trace_stop().unwrap().is_empty());
}
