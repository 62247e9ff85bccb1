//! Tracing with a library call: the trace file, valid JSON after every
//! flush, with graph launches and library calls (moved here from
//! gpu-sched's `trace.rs` with the libraries).

// gpu-sched's test helpers, one copy for both crates' tests.
#[path = "../../gpu-sched/tests/common/mod.rs"]
mod common;

use common::backend_tests;
use gpu_kernels as k;
use gpu_libs::blas::Gemm;
use gpu_sched::{GraphCache, Runtime};
use std::path::Path;

/// The trace file parsed as JSON (a panic if it is not): its events'
/// names, after checking each is a complete span (`"ph": "X"`) with a
/// start and a duration.
fn trace_file_names(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("the trace file is not valid JSON ({e}):\n{text}"));
    let events = v.as_array().expect("a JSON array");
    events
        .iter()
        .map(|e| {
            assert_eq!(e["ph"], "X", "{e}");
            assert!(
                e["ts"].is_number() && e["dur"].as_f64().unwrap() >= 0.0,
                "{e}"
            );
            e["name"].as_str().expect("a name").to_owned()
        })
        .collect()
}

/// Runs of a graphed scope (two fills: a graph of two nodes, built once
/// and launched three times), a captured graph launched with
/// `launch_graph`, and a library call (`cublasSgemm_v2`), traced to a file:
/// the file is valid JSON as soon as tracing starts, after a flush without
/// a stop (as at the end of a top-level scope), and after the stop, and it
/// has a span for each graph launch and for the library call.
fn a_trace_file_is_json_and_sees_graphs_and_library_calls(rt: &Runtime) {
    const N: usize = 4096;
    let path = std::env::temp_dir().join(format!(
        "gpu-sched-trace-{}-{}.json",
        std::process::id(),
        rt.backend()
    ));
    let t = rt.begin_task().unwrap();
    let mut x = t.zeros::<f32>(N).unwrap();
    let mut y = t.zeros::<f32>(N).unwrap();
    let a = t.from_host(&[1.0f32; 16]).unwrap();
    let b = t.from_host(&[2.0f32; 16]).unwrap();
    let mut c = t.zeros::<f32>(16).unwrap();
    let graph = t.capture(|t| k::fill(t, &mut y, 5.0)).unwrap();
    rt.synchronize().unwrap();

    rt.trace_to_file(&path).unwrap();
    assert!(trace_file_names(&path).is_empty());
    let mut cache = GraphCache::default();
    for i in 0..3 {
        t.graphed_scope(&mut cache, || {
            k::fill(&t, &mut x, i as f32)?;
            k::fill(&t, &mut y, -(i as f32))
        })
        .unwrap();
    }
    assert_eq!(cache.stats().builds, 1, "{:?}", cache.stats());
    assert_eq!(cache.stats().nodes, 2, "{:?}", cache.stats());
    t.launch_graph(&graph).write(&mut y).submit().unwrap();
    Gemm::new(4, 4, 4).run(&t, &a, &b, &mut c).unwrap();
    // A flush without a stop: the spans of the work done so far, in a
    // complete JSON document.
    rt.synchronize().unwrap();
    rt.trace_flush();
    let names = trace_file_names(&path);
    let count = |names: &[String], n: &str| names.iter().filter(|s| *s == n).count();
    assert_eq!(count(&names, "graph(2 nodes)"), 3, "{names:?}");
    assert_eq!(count(&names, "graph"), 1, "{names:?}");
    assert_eq!(count(&names, "cublasSgemm_v2"), 1, "{names:?}");
    // The graphed scopes' fills are in their graphs, not spans of their own.
    assert_eq!(count(&names, "fill_f32"), 0, "{names:?}");

    // One more operation after the flush, then the stop: the file has
    // every span `trace_stop` returned, and still parses.
    k::fill(&t, &mut x, 9.0).unwrap();
    let spans = rt.trace_stop().unwrap();
    let names = trace_file_names(&path);
    assert_eq!(names.len(), spans.len(), "{names:?}");
    assert_eq!(count(&names, "fill_f32"), 1, "{names:?}");
    let graph_span = spans.iter().find(|s| s.name == "graph(2 nodes)").unwrap();
    assert_eq!(graph_span.stream, t.stream_id());
    assert_eq!(t.to_vec(&x).unwrap()[0], 9.0);
    assert_eq!(t.to_vec(&c).unwrap()[0], 8.0);
    let _ = std::fs::remove_file(&path);
}
backend_tests!(a_trace_file_is_json_and_sees_graphs_and_library_calls);
