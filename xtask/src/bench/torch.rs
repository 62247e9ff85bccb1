//! The Python comparisons of `cargo xtask bench` (PyTorch's, and CuPy's
//! for B15 and B16): the scripts, the rows each must print, finding them,
//! the preflight checks and reading their rows.

use super::{json_field, number_after};
use crate::{fail, Error};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A PyTorch script of `benches/` and the rows it must print.
pub(super) struct TorchScript {
    /// Its file name in `benches/` (and `bundle/benches/`).
    pub(super) file: &'static str,
    /// The benchmark groups it measures: it runs when there is no
    /// `--filter`, or when the filter names one of them (contains it, or is
    /// part of it).
    pub(super) groups: &'static [&'static str],
    /// The rows it prints; each one missing is a failure.
    pub(super) rows: &'static [&'static str],
}

/// The PyTorch comparisons.
pub(super) const TORCH_SCRIPTS: &[TorchScript] = &[
    TorchScript {
        file: "torch_pipeline.py",
        groups: &["B7", "B14"],
        rows: &[
            "B7/torch-4",
            "B7/torch-8",
            "B7/pageable-torch-4",
            "B7/pageable-torch-8",
            "B14/torch-sum",
        ],
    },
    TorchScript {
        file: "torch_linalg.py",
        groups: &["B15"],
        rows: &[
            "B15/torch-32768",
            "B15/cupy-32768",
            "B15/torch-8192",
            "B15/cupy-8192",
        ],
    },
    TorchScript {
        file: "torch_dag.py",
        groups: &["B13"],
        rows: &[
            "B13/torch-serial",
            "B13/torch-8-streams",
            "B13/cuda-graph",
            "B13/cuda-graph-100",
            "B13/torch-spin-alone",
        ],
    },
    // B16's comparison is CuPy's (cupyx.scipy.sparse.linalg.cg), not
    // PyTorch's: [`cupy_preflight`] checks that it imports.
    TorchScript {
        file: "cupy_cg.py",
        groups: &["B16"],
        rows: &["B16/cupy-cg-small", "B16/cupy-cg"],
    },
];

/// Whether `--filter` (a criterion regex, matched here as text) selects
/// `t`: no filter, or one that names one of its groups.
pub(super) fn selected_by(t: &TorchScript, filter: Option<&str>) -> bool {
    match filter {
        None => true,
        Some(f) => t.groups.iter().any(|g| f.contains(g) || g.contains(f)),
    }
}

/// What `--no-torch` leaves out, said loudly.
pub(super) fn torch_skipped_note(no_torch: bool, selected: &[&TorchScript]) -> String {
    if !no_torch || selected.is_empty() {
        return String::new();
    }
    let rows: Vec<&str> = selected
        .iter()
        .flat_map(|t| t.rows.iter().copied())
        .collect();
    format!(
        "WARNING: --no-torch: the PyTorch comparisons were NOT run; missing rows: {} \
         (and the ratios against them)",
        rows.join(", ")
    )
}

/// The script `file`: the bundle's copy beside this binary
/// (`bundle/bin/../benches/`), else the repository's `benches/`, else a
/// bundle's under the repository root.
pub(super) fn find_script(root: &Path, file: &str) -> Result<PathBuf, Error> {
    let mut places = Vec::new();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        places.push(dir.join("../benches").join(file));
    }
    places.push(root.join("benches").join(file));
    places.push(root.join("bundle/benches").join(file));
    places.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        let looked: Vec<String> = places.iter().map(|p| p.display().to_string()).collect();
        fail(format!(
            "the PyTorch comparison {file} is missing (looked in {}); rebuild the bundle \
             (`cargo xtask bundle` copies benches/*.py into it) or pass --no-torch",
            looked.join(", ")
        ))
    })
}

/// Fails unless `python3` runs, imports torch and sees a CUDA device.
pub(super) fn torch_preflight() -> Result<(), Error> {
    let probe = "import sys, torch\n\
                 sys.exit(0 if torch.cuda.is_available() else 3)";
    let out = Command::new("python3")
        .args(["-c", probe])
        .output()
        .map_err(|e| {
            fail(format!(
                "python3 did not start ({e}): the PyTorch comparisons need it; \
                 pass --no-torch to run without them"
            ))
        })?;
    match out.status.code() {
        Some(0) => Ok(()),
        Some(3) => Err(fail(
            "PyTorch sees no CUDA device (torch.cuda.is_available() is False): the PyTorch \
             comparisons need one; pass --no-torch to run without them",
        )),
        _ => Err(fail(format!(
            "python3 could not import torch ({}): the PyTorch comparisons need it; pass \
             --no-torch to run without them",
            last_line(&out.stderr)
        ))),
    }
}

/// Fails unless `python3` imports CuPy and sees a CUDA device (B16's
/// comparison, `benches/cupy_cg.py`).
pub(super) fn cupy_preflight() -> Result<(), Error> {
    let probe = "import sys, cupy\n\
                 sys.exit(0 if cupy.cuda.runtime.getDeviceCount() > 0 else 3)";
    let out = Command::new("python3")
        .args(["-c", probe])
        .output()
        .map_err(|e| fail(format!("python3 did not start ({e}); pass --no-torch")))?;
    match out.status.code() {
        Some(0) => Ok(()),
        _ => Err(fail(format!(
            "python3 could not import CuPy or sees no device ({}): B16's comparison \
             (benches/cupy_cg.py) needs it (`pip install cupy-cuda13x`); pass --no-torch \
             to run without the Python comparisons, or --filter to leave B16 out",
            last_line(&out.stderr)
        ))),
    }
}

pub(super) fn last_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no message")
        .to_string()
}

/// Runs `t`'s script; its rows, or why not all of them came.
pub(super) fn torch_rows(t: &TorchScript, script: &Path) -> Result<BTreeMap<String, f64>, String> {
    let out = Command::new("python3")
        .arg(script)
        .output()
        .map_err(|e| format!("{}: python3 did not start: {e}", t.file))?;
    // What the script said on the way (calibrations, checks) goes to the log.
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            t.file,
            out.status,
            last_line(&out.stderr)
        ));
    }
    script_rows(t, &String::from_utf8_lossy(&out.stdout))
}

/// The rows in a script's output (one JSON object a line), or which of
/// `t`'s rows it left out.
pub(super) fn script_rows(t: &TorchScript, stdout: &str) -> Result<BTreeMap<String, f64>, String> {
    let rows: BTreeMap<String, f64> = stdout
        .lines()
        .filter_map(|l| Some((json_field(l, "name")?, number_after(l, "\"value\":")?)))
        .collect();
    let missing: Vec<&str> = t
        .rows
        .iter()
        .copied()
        .filter(|r| !rows.contains_key(*r))
        .collect();
    if missing.is_empty() {
        Ok(rows)
    } else {
        Err(format!(
            "{} left out its rows {}",
            t.file,
            missing.join(", ")
        ))
    }
}
