//! Tests: the bench command's filters, goals, report and its check.

use super::torch::script_rows;
use super::*;

fn script(file: &str) -> &'static TorchScript {
    TORCH_SCRIPTS.iter().find(|t| t.file == file).unwrap()
}

#[test]
fn a_filter_runs_the_scripts_of_the_groups_it_names() {
    let (dag, pipeline) = (script("torch_dag.py"), script("torch_pipeline.py"));
    let runs = |f: Option<&str>| (selected_by(dag, f), selected_by(pipeline, f));
    assert_eq!(runs(None), (true, true));
    assert_eq!(runs(Some("B13")), (true, false));
    assert_eq!(runs(Some("B13/gpu-scope")), (true, false));
    assert_eq!(runs(Some("B7")), (false, true));
    // Criterion's "B1" matches B13/ and B14/ too.
    assert_eq!(runs(Some("B1")), (true, true));
    assert_eq!(runs(Some("B8/spawn")), (false, false));
}

#[test]
fn a_script_that_leaves_out_a_row_fails() {
    let dag = script("torch_dag.py");
    let line = |n: &str| format!("{{\"name\": \"{n}\", \"value\": 12.5, \"unit\": \"ns\"}}\n");
    let all: String = dag.rows.iter().map(|r| line(r)).collect();
    let rows = script_rows(dag, &all).unwrap();
    assert_eq!(rows.len(), dag.rows.len());
    assert_eq!(rows["B13/cuda-graph"], 12.5);
    let short: String = dag.rows[..dag.rows.len() - 1]
        .iter()
        .map(|r| line(r))
        .collect();
    let err = script_rows(dag, &short).unwrap_err();
    assert!(err.contains(dag.rows[dag.rows.len() - 1]), "{err}");
    assert!(script_rows(dag, "").is_err());
}

#[test]
fn a_missing_script_is_an_error_that_says_where_it_looked() {
    let dir = std::env::temp_dir().join(format!("xtask-bench-test-{}", std::process::id()));
    let err = find_script(&dir, "no_such_script.py").unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("no_such_script.py") && msg.contains("--no-torch"),
        "{msg}"
    );
    assert!(
        msg.contains(&dir.join("benches").display().to_string()),
        "{msg}"
    );
}

#[test]
fn the_repository_has_every_script() {
    for t in TORCH_SCRIPTS {
        assert!(
            workspace_root().join("benches").join(t.file).is_file(),
            "{}",
            t.file
        );
    }
}

#[test]
fn no_torch_names_every_row_it_leaves_out() {
    let all: Vec<&TorchScript> = TORCH_SCRIPTS.iter().collect();
    let note = torch_skipped_note(true, &all);
    for t in TORCH_SCRIPTS {
        for r in t.rows {
            assert!(note.contains(r), "{note}");
        }
    }
    assert!(torch_skipped_note(false, &all).is_empty());
}

#[test]
fn b13_ratios_are_the_library_over_each_baseline() {
    let mut rows = BTreeMap::from([
        ("B13/gpu-scope".to_string(), 30.0),
        ("B13/torch-8-streams".to_string(), 300.0),
        ("B13/cuda-graph".to_string(), 20.0),
    ]);
    add_ratios(&mut rows);
    assert_eq!(rows["ratio/B13-vs-torch"], 0.1);
    assert_eq!(rows["ratio/B13-vs-graph"], 1.5);
}

#[test]
fn issue_16_ratios_take_the_rows_they_name() {
    let mut rows = BTreeMap::from([
        ("B13/cuda-graph".to_string(), 20.0),
        ("B13/gpu-capture-replay".to_string(), 25.0),
        // The floor is the many-thread row, never the one-thread one.
        ("B13/raw-launches-1-thread".to_string(), 10.0),
        ("B13/raw-launches-16-threads".to_string(), 50.0),
        ("B7/transfer-bound".to_string(), 21.0),
        ("B7/host-copies".to_string(), 35.0),
        ("B7/par-map-pageable-8".to_string(), 42.0),
        ("B7/pageable-torch-4".to_string(), 210.0),
        ("B7/pageable-torch-8".to_string(), 168.0),
    ]);
    add_ratios(&mut rows);
    assert_eq!(rows["ratio/B13-capture-vs-graph"], 1.25);
    assert_eq!(rows["ratio/B13-raw-floor-vs-graph"], 2.5);
    assert_eq!(rows["ratio/B7-pageable"], 0.5);
    assert_eq!(rows["ratio/B7-pageable-floor"], 0.6);
    // The faster PyTorch pipeline over the library's.
    assert_eq!(rows["ratio/B7-pageable-vs-torch"], 4.0);
}

#[test]
fn a_flag_without_its_value_is_a_usage_error() {
    for flag in ["--filter", "--out", "--recompute"] {
        let r = run(&[flag.to_owned()]);
        assert!(
            matches!(r, Err(Error::Usage(ref m)) if m.contains(flag)),
            "{flag}: {r:?}"
        );
    }
}

#[test]
fn b5_cold_gives_each_run_and_the_least_speed_up() {
    let mut rows = BTreeMap::from([
        ("B5-cold/run-01-one-stream".to_string(), 320.0),
        ("B5-cold/run-01-siblings".to_string(), 40.0),
        ("B5-cold/run-02-one-stream".to_string(), 320.0),
        ("B5-cold/run-02-siblings".to_string(), 80.0),
        // A run without its siblings row gives no ratio.
        ("B5-cold/run-03-one-stream".to_string(), 320.0),
        ("B14/one-reduction".to_string(), 90.0),
        ("B14/par-chunks-sum".to_string(), 180.0),
        ("B14/par-chunks-sum-device".to_string(), 100.0),
    ]);
    add_ratios(&mut rows);
    assert_eq!(rows["ratio/B5-cold-run-01"], 8.0);
    assert_eq!(rows["ratio/B5-cold-run-02"], 4.0);
    assert!(!rows.contains_key("ratio/B5-cold-run-03"));
    assert_eq!(rows["ratio/B5-cold-min"], 4.0);
    // B14 is the device-combined sum; the host-combined one is stated.
    assert_eq!(rows["ratio/B14"], 0.9);
    assert_eq!(rows["ratio/B14-host-combine"], 0.5);
}

#[test]
fn a_bench_binary_s_json_rows_are_read() {
    let mut cmd = Command::new("sh");
    cmd.args([
        "-c",
        "echo 'criterion says hello'; echo '{\"name\": \"B5-cold/run-01-siblings\", \"value\": 41.5, \"unit\": \"ns\"}'",
    ]);
    let rows = run_printing_rows(cmd, Path::new("sh")).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows["B5-cold/run-01-siblings"], 41.5);
    let mut failing = Command::new("sh");
    failing.args(["-c", "exit 3"]);
    assert!(run_printing_rows(failing, Path::new("sh")).is_err());
}

#[test]
fn a_rows_group_is_its_prefix() {
    assert_eq!(
        row_group("B13/gpu-scope           time:   [1 ms 2 ms 3 ms]").as_deref(),
        Some("B13")
    );
    assert_eq!(
        row_group(r#"{"name": "B5-cold/run-01-siblings", "value": 1.0, "unit": "ns"}"#).as_deref(),
        Some("B5-cold")
    );
    assert_eq!(row_group("Benchmarking B13/gpu-scope: Warming up"), None);
    assert_eq!(
        row_group("                        time:   [1 ms 2 ms 3 ms]"),
        None
    );
    assert_eq!(row_group("B13: the graphed scope's build"), None);
}
