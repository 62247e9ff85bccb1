//! Tests: the report's medians, ranges, goals and index, and its check.

use super::*;

fn run(path: &str, commit: &str, date: &str, rows: &[(&str, f64)]) -> Run {
    Run {
        path: path.into(),
        commit: commit.into(),
        date: date.into(),
        device: "NVIDIA H200".into(),
        rows: rows.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        copies: Vec::new(),
    }
}

#[test]
fn the_newest_commits_runs_give_medians_ranges_and_goals() {
    let runs = [
        run("old.json", "aaa", "2026-11-30", &[("ratio/B1", 9.0)]),
        run(
            "a.json",
            "bbb",
            "2026-12-01T01",
            &[("ratio/B1", 1.2), ("B1/raw", 240.0)],
        ),
        run(
            "b.json",
            "bbb",
            "2026-12-01T02",
            &[("ratio/B1", 1.0), ("B1/raw", 250.0)],
        ),
        run("c.json", "bbb", "2026-12-01T03", &[("ratio/B1", 1.05)]),
    ];
    let page = render(&runs, &[]);
    // The median of 1.2, 1.0, 1.05 (the old commit's 9.0 left out),
    // against B1's goal.
    assert!(
        page.contains("| ratio/B1 | 1.050 | 1.000 - 1.200 | <= 1.1 | yes |"),
        "{page}"
    );
    assert!(
        page.contains("| B1/raw | 245.0 ns | 240.0 ns - 250.0 ns | - | - |"),
        "{page}"
    );
    assert!(page.contains("commit bbb (3 runs)"), "{page}");
    // The old commit's run is not in the summary.
    assert!(!page.contains("old.json"), "{page}");
}

#[test]
fn a_run_committed_twice_counts_once() {
    let dir = std::env::temp_dir().join(format!("xtask-report-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("run")).unwrap();
    let json = "{\n  \"commit\": \"c\",\n  \"date\": \"d\",\n  \"device\": \"X\",\n  \"rows\": [\n    {\"name\": \"ratio/B1\", \"value\": 1.5000, \"unit\": \"x\"}\n  ]\n}\n";
    fs::write(dir.join("x.json"), json).unwrap();
    fs::write(dir.join("run/bench.json"), json).unwrap();
    fs::create_dir_all(dir.join("2026-12-01T0000Z-c-x")).unwrap();
    fs::write(dir.join("2026-12-01T0000Z-c-x/tests.log"), "").unwrap();
    let runs = runs(&dir).unwrap();
    assert_eq!(runs.len(), 1);
    let page = render(&runs, &run_folders(&dir));
    assert!(page.contains("commit c (1 run)"), "{page}");
    assert!(page.contains("`run/bench.json`, `x.json`"), "{page}");
    // Dated folders are the index; others are not runs.
    assert!(
        page.contains("| 2026-12-01T0000Z-c-x | [tests.log](2026-12-01T0000Z-c-x/tests.log) |"),
        "{page}"
    );
    assert!(!page.contains("| run |"), "{page}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn runs_are_filed_by_date_commit_and_device_and_the_newest_is_found() {
    let dir = std::env::temp_dir().join(format!("xtask-runs-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let a = run_dir(&dir, "2026-11-30T23:51:40Z", "aaa", "nvidia-h200");
    let b = run_dir(&dir, "2026-12-01T03:08:35Z", "bbb", "nvidia-h200");
    let x2 = run_dir(&dir, "2026-12-02T00:00:00Z", "ccc", "nvidia-h200-x2");
    assert!(b.ends_with("2026-12-01T0308Z-bbb-nvidia-h200"), "{b:?}");
    for d in [&a, &b, &x2] {
        fs::create_dir_all(d).unwrap();
        fs::write(d.join("bench.json"), "{}").unwrap();
    }
    let newest = newest_run(&dir, "nvidia-h200");
    let newest_x2 = newest_run(&dir, "nvidia-h200-x2");
    let none = newest_run(&dir, "other");
    let _ = fs::remove_dir_all(&dir);
    assert_eq!(newest, Some(b.join("bench.json")));
    assert_eq!(newest_x2, Some(x2.join("bench.json")));
    assert_eq!(none, None);
}

#[test]
fn the_readme_block_is_replaced_and_nothing_else() {
    let runs = [
        run(
            "a.json",
            "c",
            "1",
            &[("ratio/B8", 2.0), ("B8/raw-launch", 1.0)],
        ),
        run("b.json", "c", "2", &[("ratio/B8", 1.0)]),
    ];
    let readme = format!("top\n{BEGIN}\nold table\n{END}\nbottom\n");
    let out = with_summary(&readme, &summary(&runs)).unwrap();
    assert!(
        out.starts_with(&format!("top\n{BEGIN}\n- NVIDIA H200")),
        "{out}"
    );
    assert!(out.ends_with(&format!("{END}\nbottom\n")), "{out}");
    assert!(!out.contains("old table"));
    // B8's median over both runs, 1.5, meets its goal of <= 1.5.
    let row = "- NVIDIA H200, commit c (2 runs): 1 of 1 goals met; missed: none.";
    assert!(out.contains(row), "{out}");
    // Rows without a goal stay on the results page only.
    assert!(!out.contains("raw-launch"));
    assert!(with_summary("no markers", "x").is_err());
}

#[test]
fn a_missed_goal_says_no() {
    let runs = [run("a.json", "c", "d", &[("ratio/B14", 0.82)])];
    assert!(render(&runs, &[]).contains("| ratio/B14 | 0.820 | - | >= 0.9 | no |"));
}

#[test]
fn the_readme_block_leaves_out_a_dirty_tree_s_runs() {
    let mut h100 = run("h/x.json", "ddd-dirty", "2026-12-06", &[("ratio/B8", 9.0)]);
    h100.device = "NVIDIA H100".into();
    let runs = [
        run(
            "clean/bench.json",
            "aaa",
            "2026-12-01",
            &[("ratio/B8", 1.2)],
        ),
        run(
            "2026-12-02T0000Z-bbb-dirty-nvidia-h200/bench.json",
            "bbb-dirty",
            "2026-12-02",
            &[("ratio/B8", 3.0), ("ratio/B1", 2.0)],
        ),
        // A dirty folder is enough, whatever the commit says.
        run(
            "2026-12-03T0000Z-ccc-dirty-nvidia-h200/bench.json",
            "ccc",
            "2026-12-03",
            &[("ratio/B8", 4.0)],
        ),
        h100,
    ];
    let readme = summary(&runs);
    assert!(
        readme.contains("- NVIDIA H200, commit aaa (1 run): 1 of 1 goals met; missed: none."),
        "{readme}"
    );
    assert!(
        !readme.contains("bbb") && !readme.contains("ccc"),
        "{readme}"
    );
    assert!(
        readme.contains("- NVIDIA H100: no run from a clean tree yet (the newest, at ddd-dirty,"),
        "{readme}"
    );
    // The results page still shows the newest runs, marked.
    let page = render(&runs, &[]);
    assert!(
        page.contains("## NVIDIA H200, commit ccc (1 run)"),
        "{page}"
    );
    assert!(
        page.contains(
            "the README's summary leaves these runs out and gives the newest clean run's, at aaa"
        ),
        "{page}"
    );
    let notes = dirty_notes(&runs);
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes
        .iter()
        .any(|n| n.contains("NVIDIA H200") && n.contains("at aaa")));
}

#[test]
fn the_design_block_is_the_table_of_benchmarks() {
    let design = format!("# D\n{DESIGN_BEGIN}\nold block\n{DESIGN_END}\nafter\n");
    let out = with_block(
        &design,
        "DESIGN.md",
        (DESIGN_BEGIN, DESIGN_END),
        &table::design_table(),
    )
    .unwrap();
    assert!(out.contains("| B13 | 10,000-task"), "{out}");
    assert!(out.contains("`B13-vs-torch` = gpu-scope / torch-8-streams (<= 0.25)"));
    assert!(out.ends_with(&format!("{DESIGN_END}\nafter\n")) && !out.contains("old block"));
    assert!(with_block("none", "DESIGN.md", (DESIGN_BEGIN, DESIGN_END), "x").is_err());
}

#[test]
fn a_goal_the_newest_runs_miss_comes_from_the_newest_earlier_run() {
    let runs = [
        run(
            "full-1.json",
            "aaa",
            "2026-12-01",
            &[("ratio/B8", 3.0), ("ratio/B1", 1.5)],
        ),
        run("full-2.json", "bbb", "2026-12-02", &[("ratio/B8", 2.0)]),
        run("partial.json", "ccc", "2026-12-03", &[("ratio/B1", 1.0)]),
    ];
    let page = render(&runs, &[]);
    assert!(
        page.contains("| ratio/B1 | 1.000 | - | <= 1.1 | yes |"),
        "{page}"
    );
    // B8 from bbb's run (not aaa's), marked as earlier.
    assert!(
        page.contains("| ratio/B8 | 2.000 | <= 1.5 | no | `full-2.json` (2026-12-02) |"),
        "{page}"
    );
    assert!(!page.contains("3.000"), "{page}");
    let readme = summary(&runs);
    assert!(
        readme.contains("1 of 2 goals met; missed: B8 2.000 (<= 1.5, at bbb)."),
        "{readme}"
    );
}
