//! The 5-point Poisson matrix of an `n x n` grid (Dirichlet boundary) as
//! host CSR arrays: what `12-cg-sparse` and B16 solve.

/// The 5-point Poisson matrix of an `n x n` grid, as host CSR arrays
/// (columns sorted in each row).
pub fn poisson(n: usize) -> (Vec<i32>, Vec<i32>, Vec<f64>) {
    let (mut rp, mut ci, mut v) = (vec![0i32], vec![], vec![]);
    for row in 0..n {
        for col in 0..n {
            let i = row * n + col;
            let mut push = |j: usize, a: f64| {
                ci.push(j as i32);
                v.push(a);
            };
            if row > 0 {
                push(i - n, -1.0);
            }
            if col > 0 {
                push(i - 1, -1.0);
            }
            push(i, 4.0);
            if col + 1 < n {
                push(i + 1, -1.0);
            }
            if row + 1 < n {
                push(i + n, -1.0);
            }
            rp.push(ci.len() as i32);
        }
    }
    (rp, ci, v)
}
