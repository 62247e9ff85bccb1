//! Tests: the bundles build what their runs need; the run scripts are valid bash.

use super::*;

/// Every target the two-GPU bundle builds is declared where it builds it
/// (the examples' and the benches' manifests, gpu-scope's test files), so
/// a renamed target fails here and not on the two-GPU machine.
#[test]
fn the_two_gpu_bundle_builds_what_its_run_needs() {
    let root = workspace_root();
    let read = |p: &str| fs::read_to_string(root.join(p)).unwrap();
    let (examples, benches) = (read("examples/Cargo.toml"), read("benches/Cargo.toml"));
    let builds = multi_gpu_builds();
    let all: Vec<String> = builds.iter().map(|b| b.join(" ")).collect();
    for (want, declared) in [
        (
            "--test devices",
            root.join("crates/gpu-scope/tests/devices.rs").is_file(),
        ),
        (
            "--test nccl",
            root.join("crates/gpu-scope/tests/nccl.rs").is_file(),
        ),
        (
            "--example 09-multi-gpu-heat",
            examples.contains("name = \"09-multi-gpu-heat\""),
        ),
        ("--example 10-mpi", examples.contains("name = \"10-mpi\"")),
        ("--features mpi", examples.contains("mpi = [\"gpu/mpi\"]")),
        (
            "--bench multi_gpu",
            benches.contains("name = \"multi_gpu\""),
        ),
        ("--bench nccl", benches.contains("name = \"nccl\"")),
    ] {
        assert!(all.iter().any(|b| b.contains(want)), "{want}: {all:?}");
        assert!(declared, "{want} is built but not declared");
    }
    // Never criterion's bench: the two-GPU run prints rows only.
    assert!(!all.iter().any(|b| b.contains("--bench gpu")), "{all:?}");
}

#[test]
fn the_run_scripts_are_valid_bash() {
    for (name, text) in [("run.sh", RUN_SH), ("run-x2.sh", RUN_X2_SH)] {
        let path = std::env::temp_dir().join(format!("xtask-{}-{name}", std::process::id()));
        fs::write(&path, text).unwrap();
        let status = Command::new("bash").arg("-n").arg(&path).status().unwrap();
        let _ = fs::remove_file(&path);
        assert!(status.success(), "{name}: bash -n failed");
    }
}
