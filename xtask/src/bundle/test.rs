use super::*;

#[test]
fn the_two_gpu_bundle_builds_what_its_run_needs() {
    let manifest =
        fs::read_to_string(workspace_root().join("crates/gpu-scope/Cargo.toml")).unwrap();
    let t = multi_gpu_targets(&manifest, |_| false).join(" ");
    assert!(t.starts_with("--features mpi "), "{t}");
    for want in [
        "--example 09-multi-gpu-heat",
        "--example 10-mpi",
        "--test devices",
        "--bench multi_gpu",
        // B12, declared in the manifest.
        "--bench nccl",
    ] {
        assert!(t.contains(want), "{want}: {t}");
    }
    // No test file here (`has_test` says none), and never criterion's.
    assert!(
        !t.contains("--test nccl") && !t.contains("--bench gpu"),
        "{t}"
    );
}

#[test]
fn nccl_joins_the_two_gpu_bundle_where_it_is_declared() {
    let manifest = r#"
[dependencies]
nccl = { version = "1" }

[features]
mpi = ["dep:mpi"]
# a comment = here
nccl = []

[[bench]]
name = "gpu"
path = "../../benches/gpu.rs"

[[bench]]
harness = false
name = "nccl"

[[example]]
name = "multi_gpu"
"#;
    let t = multi_gpu_targets(manifest, |f| f == "nccl.rs").join(" ");
    assert!(t.starts_with("--features mpi,nccl "), "{t}");
    assert!(
        t.ends_with("--test devices --test nccl --bench nccl"),
        "{t}"
    );
    let plain = "[dependencies]\nnccl = \"1\"\n";
    let t = multi_gpu_targets(plain, |_| false).join(" ");
    assert!(
        t.starts_with("--features mpi ") && !t.contains("nccl"),
        "{t}"
    );
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
