//! Tests: the multi-GPU bench's tables, goals and options.

use super::*;
use crate::bench::table::Goal;

fn rows(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn b11_ratios_are_the_issue_s_definitions() {
    let mut r = rows(&[
        ("B11/1-gpu", 200.0e6),
        ("B11/2-gpu", 104.0e6),
        ("B11/2-gpu-no-halo", 102.0e6),
        ("B11-mpi/2-ranks", 110.0e6),
        ("B11/torch-1-gpu", 388.0e6),
        ("B11/torch-2-gpu", 199.0e6),
        ("peer/library-0to1", 370.0),
        ("peer/raw-0to1", 380.0),
        ("peer/torch-0to1", 384.0),
    ]);
    add_ratios(&mut r);
    let close = |k: &str, v: f64| assert!((r[k] - v).abs() < 1e-9, "{k}: {} != {v}", r[k]);
    close("ratio/B11-efficiency", 200.0 / 208.0);
    close("ratio/B11-vs-torch", 104.0 / 199.0);
    close("ratio/B11-mpi-efficiency", 200.0 / 220.0);
    close("ratio/B11-halo-hidden", 104.0 / 102.0);
    close("ratio/B11-torch-efficiency", 388.0 / 398.0);
    close("ratio/peer-vs-raw", 370.0 / 380.0);
    close("ratio/peer-vs-torch", 370.0 / 384.0);
    assert!(!r.contains_key("ratio/peer-vs-raw-1to0"));
}

#[test]
fn b12_rows_give_a_ratio_a_size_with_its_goal() {
    let mut r = rows(&[
        ("B12/library-1MiB", 21.0),
        ("B12/raw-1MiB", 20.0),
        ("B12/library-1GiB", 5.0),
    ]);
    add_ratios(&mut r);
    assert_eq!(r["ratio/B12-1MiB"], 1.05);
    assert!(!r.contains_key("ratio/B12-1GiB"), "no raw row, no ratio");
    assert_eq!(goal("ratio/B12-1MiB"), Some(Goal::AtMost(1.05)));
    let t = render_table(&r, &BTreeMap::new(), "now", "-");
    assert!(
        t.contains("| ratio/B12-1MiB | 1.050 | - | - | <= 1.05: met |"),
        "{t}"
    );
    assert!(!t.contains("B12 (NCCL all-reduce"), "{t}");
}

#[test]
fn the_table_says_which_goals_are_met_and_which_are_not_measured() {
    let r = rows(&[
        ("ratio/B11-efficiency", 0.96),
        ("ratio/B11-halo-hidden", 1.10),
        ("peer/library-0to1", 371.25),
        ("B11/2-gpu", 104.0e6),
    ]);
    let prev = rows(&[("B11/2-gpu", 208.0e6)]);
    let t = render_table(&r, &prev, "abc", "def");
    assert!(
        t.contains("| ratio/B11-efficiency | 0.960 | - | - | >= 0.95: met |"),
        "{t}"
    );
    assert!(
        t.contains("| ratio/B11-halo-hidden | 1.100 | - | - | <= 1.03: MISSED |"),
        "{t}"
    );
    assert!(t.contains("| peer/library-0to1 | 371.2 GB/s |"), "{t}");
    assert!(
        t.contains("| B11/2-gpu | 104.000 ms | 208.000 ms | 0.50 |"),
        "{t}"
    );
    assert!(
        t.contains("not measured: ratio/B11-vs-torch, ratio/B11-mpi-efficiency, ratio/peer-vs-raw"),
        "{t}"
    );
    assert!(
        t.contains("B12 (NCCL all-reduce, 1 MiB-1 GiB, against raw NCCL): not measured"),
        "{t}"
    );
}

#[test]
fn the_heat_example_s_line_is_read() {
    let out = "09-multi-gpu-heat: backend cuda; 2 device(s)\n  \
        198.000 ms for 100 steps (1.9800 ms a step)\n\
        {\"example\":\"09-multi-gpu-heat\",\"mode\":\"mpi\",\"backend\":\"cuda\",\"devices\":2,\
        \"nx\":16384,\"ny\":16384,\"steps\":100,\"halo\":false,\"ms\":198.0000,\"ms_per_step\":1.98000}\n";
    let h = heat_line(out).unwrap();
    assert_eq!(
        h,
        HeatLine {
            mode: "mpi".into(),
            backend: "cuda".into(),
            devices: 2,
            nx: 16384,
            ny: 16384,
            steps: 100,
            halo: false,
            ms: 198.0,
        }
    );
    assert!(heat_line("no line\n").is_none());
}

#[test]
fn quick_is_tiny_and_flags_are_checked() {
    let p = parse(&[
        "--multi-gpu".into(),
        "--quick".into(),
        "--repeat".into(),
        "2".into(),
    ])
    .unwrap();
    assert!(p.quick && p.repeat == 2 && p.nx * p.ny < 100_000 && p.steps > 1);
    let p = parse(&["--multi-gpu".into()]).unwrap();
    assert_eq!((p.nx, p.ny, p.steps, p.repeat), (16384, 16384, 101, 3));
    for bad in [
        &["--repeat"][..],
        &["--repeat", "0"],
        &["--filter", "B1"],
        &["--out"],
    ] {
        let args: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
        assert!(matches!(parse(&args), Err(Error::Usage(_))), "{bad:?}");
    }
}

#[test]
fn the_multi_gpu_script_is_in_the_repository() {
    assert!(crate::workspace_root()
        .join("benches")
        .join(TORCH.file)
        .is_file());
}
