//! Tests: the PTX check's arguments, its diff summary and its pinned nvcc options.

use super::*;

#[test]
fn unknown_argument_is_a_usage_error() {
    let result = run(&["--nope".to_owned()]);
    assert!(matches!(result, Err(Error::Usage(msg)) if msg.contains("--nope")));
}

#[test]
fn diff_summary_names_the_changed_span() {
    let summary = diff_summary("a\nb\nc\nd\n", "a\nB\nc\nd\n");
    assert!(
        summary.contains("from line 2: 1 committed lines replaced by 1 generated lines"),
        "{summary}"
    );
    assert!(
        summary.contains("- b") && summary.contains("+ B"),
        "{summary}"
    );
}

#[test]
fn diff_summary_counts_a_removed_line() {
    let summary = diff_summary("a\nb\nc\n", "a\nc\n");
    assert!(
        summary.contains("from line 2: 1 committed lines replaced by 0 generated lines"),
        "{summary}"
    );
}

#[test]
fn diff_summary_spots_line_ending_changes() {
    let summary = diff_summary("a\r\nb\r\n", "a\nb\n");
    assert!(summary.contains("line endings"), "{summary}");
}

#[test]
fn pinned_options_target_compute_70() {
    assert!(NVRTC_OPTIONS.contains(&"--gpu-architecture=compute_70"));
    assert!(NVRTC_VERSION.starts_with("12.0."));
}
