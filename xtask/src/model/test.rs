//! Tests: the model reads rows in microseconds and fits its table.

use super::*;

#[test]
fn rows_are_read_in_microseconds() {
    let text = "{\n  \"rows\": [\n    {\"name\": \"B11/1-gpu\", \"value\": 54.5, \"unit\": \"ms\"},\n    {\"name\": \"x\", \"value\": 3, \"unit\": \"ns\"}\n  ]\n}";
    let rows = parse_rows(text);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].0, "B11/1-gpu");
    assert!((rows[0].1 - 54_500.0).abs() < 1e-6);
    assert!((rows[1].1 - 0.003).abs() < 1e-12);
}

#[test]
fn efficiencies_fall_where_the_overheads_grow() {
    let m = Measured {
        t1: 540.0,
        t2: 280.0,
        tc: 270.0,
        a_nvl: 20.0,
    };
    let t = table(&m);
    let eff = |row: usize, col: usize| -> f64 {
        let line = t
            .lines()
            .filter(|l| l.starts_with("| "))
            .nth(row + 1)
            .unwrap();
        line.split('|')
            .nth(col + 1)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    // Heat, weak: the same at every scale (halos hidden).
    assert!((eff(0, 1) - 270.0 / 280.0).abs() < 1e-3);
    assert!((eff(6, 1) - eff(0, 1)).abs() < 1e-3);
    // CG, weak: falls with the global sums' stages.
    assert!(eff(6, 2) < eff(0, 2));
    // Strong: falls as the block shrinks.
    assert!(eff(6, 3) < 0.2 && eff(0, 3) > 0.9);
}
