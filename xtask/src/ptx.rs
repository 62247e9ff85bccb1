//! `cargo xtask ptx [--check]`: make the committed PTX of `gpu-kernels`.
//!
//! Every `crates/gpu-kernels/src/cuda/*.cu` is compiled to
//! `crates/gpu-kernels/ptx/<stem>.ptx` by NVRTC from the pinned pip wheel
//! [`NVRTC_PACKAGE`]`==`[`NVRTC_VERSION`] with [`NVRTC_OPTIONS`]. The wheel is
//! installed into the ignored virtual environment `.venv` at the workspace
//! root when it is absent or another version. (No CUDA 12 wheel on PyPI ships
//! the `nvcc` program; NVRTC is the same front end and optimiser as a library,
//! and needs no host compiler. `crates/gpu-kernels/README.md` says why 12.0.)
//!
//! `--check` compiles into a temporary folder instead and fails, with a
//! summary of the differences, unless the committed files are byte-identical.
//! The output is deterministic: headers are handed to NVRTC in memory under
//! their bare names, and no path or date reaches the PTX.
//!
//! Needs Linux, `python3` with `venv`, and PyPI the first time.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{fail, workspace_root, Error};

#[cfg(test)]
mod test;

/// The pip package that holds the pinned NVRTC (`libnvrtc.so.12`).
const NVRTC_PACKAGE: &str = "nvidia-cuda-nvrtc-cu12";
/// Its pinned version: CUDA 12.0, PTX ISA 8.0, loaded by drivers >= 525.
const NVRTC_VERSION: &str = "12.0.140";
/// NVRTC options: virtual architecture `compute_70` (Volta and newer).
const NVRTC_OPTIONS: &[&str] = &["--gpu-architecture=compute_70", "--std=c++17"];

/// The crate whose PTX this command makes, relative to the workspace root.
const KERNELS_CRATE: &str = "crates/gpu-kernels";

/// Compiles one `.cu` with NVRTC through `ctypes`; see its docstring.
const NVRTC_SCRIPT: &str = include_str!("nvrtc_ptx.py");

/// Runs `cargo xtask ptx` with the arguments after `ptx`.
pub(crate) fn run(args: &[String]) -> Result<(), Error> {
    let mut check = false;
    for arg in args {
        match arg.as_str() {
            "--check" => check = true,
            other => return Err(Error::Usage(format!("unknown argument `{other}`"))),
        }
    }

    let root = workspace_root();
    let crate_dir = root.join(KERNELS_CRATE);
    let cuda_dir = crate_dir.join("src").join("cuda");
    let ptx_dir = crate_dir.join("ptx");
    let sources = files_with_extension(&cuda_dir, "cu")?;
    if sources.is_empty() {
        return Err(fail(format!("no .cu file in {}", cuda_dir.display())));
    }

    let python = ensure_nvrtc(&root)?;
    let libdir = output(
        Command::new(&python).args([
            "-c",
            "import os, nvidia.cuda_nvrtc as m; print(os.path.join(os.path.dirname(m.__file__), 'lib'))",
        ]),
        "locating NVRTC in .venv",
    )?;
    let libdir = PathBuf::from(libdir.trim());

    let scratch = std::env::temp_dir().join(format!("xtask-ptx-{}", std::process::id()));
    fs::create_dir_all(&scratch)
        .map_err(|e| fail(format!("creating {}: {e}", scratch.display())))?;
    let result = generate_all(&python, &libdir, &root, &sources, &ptx_dir, &scratch, check);
    let _ = fs::remove_dir_all(&scratch);
    result
}

fn generate_all(
    python: &Path,
    libdir: &Path,
    root: &Path,
    sources: &[PathBuf],
    ptx_dir: &Path,
    scratch: &Path,
    check: bool,
) -> Result<(), Error> {
    let mut mismatches = Vec::new();
    for source in sources {
        let stem = source
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let fresh = compile(
            python,
            libdir,
            root,
            source,
            &scratch.join(format!("{stem}.ptx")),
        )?;
        let committed_path = ptx_dir.join(format!("{stem}.ptx"));
        let shown = committed_path
            .strip_prefix(root)
            .unwrap_or(&committed_path)
            .display()
            .to_string();
        let committed = fs::read_to_string(&committed_path).ok();
        if check {
            match committed {
                Some(committed) if committed == fresh => println!("ok: {shown}"),
                Some(committed) => mismatches.push(format!(
                    "{shown} differs:\n{}",
                    diff_summary(&committed, &fresh)
                )),
                None => mismatches.push(format!("{shown} is missing")),
            }
        } else if committed.as_deref() == Some(fresh.as_str()) {
            println!("unchanged: {shown}");
        } else {
            fs::create_dir_all(ptx_dir)
                .map_err(|e| fail(format!("creating {}: {e}", ptx_dir.display())))?;
            fs::write(&committed_path, &fresh)
                .map_err(|e| fail(format!("writing {shown}: {e}")))?;
            println!("wrote: {shown}");
        }
    }

    // A committed PTX without its source would be shipped but never checked.
    for ptx in files_with_extension(ptx_dir, "ptx")? {
        let stem = ptx.file_stem().unwrap_or_default();
        if !sources.iter().any(|s| s.file_stem() == Some(stem)) {
            mismatches.push(format!("{} has no source .cu; delete it", ptx.display()));
        }
    }

    if mismatches.is_empty() {
        Ok(())
    } else {
        Err(fail(format!(
            "the committed PTX is not what {NVRTC_PACKAGE}=={NVRTC_VERSION} makes; run `cargo xtask ptx` \
             and commit the result.\n\n{}",
            mismatches.join("\n\n")
        )))
    }
}

/// Creates `.venv` if needed and installs the pinned NVRTC wheel into it
/// unless that exact version is there. Returns the venv's python.
fn ensure_nvrtc(root: &Path) -> Result<PathBuf, Error> {
    let venv = root.join(".venv");
    let python = venv.join("bin").join("python");
    if !python.is_file() {
        let system_python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
        eprintln!("xtask ptx: creating {}", venv.display());
        output(
            Command::new(&system_python)
                .arg("-m")
                .arg("venv")
                .arg(&venv),
            "creating .venv",
        )?;
    }
    let installed = output(
        Command::new(&python).args([
            "-c",
            &format!(
                "import importlib.metadata as m\n\
                 try: print(m.version('{NVRTC_PACKAGE}'))\n\
                 except m.PackageNotFoundError: pass"
            ),
        ]),
        "asking .venv for the installed NVRTC version",
    )?;
    if installed.trim() != NVRTC_VERSION {
        let pin = format!("{NVRTC_PACKAGE}=={NVRTC_VERSION}");
        eprintln!("xtask ptx: installing {pin} into {}", venv.display());
        output(
            Command::new(&python).args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--quiet",
                &pin,
            ]),
            &format!("pip install {pin}"),
        )?;
    }
    Ok(python)
}

/// Compiles `source` to `out` and returns the PTX with its provenance header.
fn compile(
    python: &Path,
    libdir: &Path,
    root: &Path,
    source: &Path,
    out: &Path,
) -> Result<String, Error> {
    let shown = source.strip_prefix(root).unwrap_or(source);
    output(
        Command::new(python)
            .args(["-c", NVRTC_SCRIPT])
            .arg(libdir)
            .arg(source)
            .arg(out)
            .args(NVRTC_OPTIONS),
        &format!("compiling {}", shown.display()),
    )?;
    let ptx =
        fs::read_to_string(out).map_err(|e| fail(format!("reading {}: {e}", out.display())))?;
    Ok(format!(
        "// Generated by `cargo xtask ptx` from {} with NVRTC from\n\
         // {NVRTC_PACKAGE}=={NVRTC_VERSION}, options: {}.\n\
         // Do not edit: CI checks it with `cargo xtask ptx --check`.\n{ptx}",
        // Forward slashes whatever the OS, so the text is the same everywhere.
        shown.to_string_lossy().replace('\\', "/"),
        NVRTC_OPTIONS.join(" "),
    ))
}

/// Runs `command`; on success returns its stdout, otherwise fails with
/// `what`, the exit status and everything the command printed.
fn output(command: &mut Command, what: &str) -> Result<String, Error> {
    let out = command.output().map_err(|e| {
        fail(format!(
            "{what}: cannot run {:?}: {e}",
            command.get_program()
        ))
    })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(fail(format!(
            "{what}: {}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

/// The files of `dir` ending in `.ext`, sorted; none if `dir` is absent.
fn files_with_extension(dir: &Path, ext: &str) -> Result<Vec<PathBuf>, Error> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(fail(format!("reading {}: {e}", dir.display()))),
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| fail(format!("reading {}: {e}", dir.display())))?
            .path();
        if path.extension().and_then(|e| e.to_str()) == Some(ext) {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Line counts and the one span of lines between the common beginning and
/// the common end of the two texts, with its first few lines from each side.
fn diff_summary(committed: &str, generated: &str) -> String {
    const SHOWN: usize = 5;
    let old: Vec<&str> = committed.lines().collect();
    let new: Vec<&str> = generated.lines().collect();
    let prefix = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let suffix = old[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let old_span = &old[prefix..old.len() - suffix];
    let new_span = &new[prefix..new.len() - suffix];
    let mut text = format!(
        "  committed: {} lines, {} bytes; generated: {} lines, {} bytes",
        old.len(),
        committed.len(),
        new.len(),
        generated.len(),
    );
    if old_span.is_empty() && new_span.is_empty() {
        text.push_str("\n  same lines: line endings or the final newline differ");
        return text;
    }
    text.push_str(&format!(
        "\n  from line {}: {} committed lines replaced by {} generated lines",
        prefix + 1,
        old_span.len(),
        new_span.len()
    ));
    for (sign, span) in [('-', old_span), ('+', new_span)] {
        for line in span.iter().take(SHOWN) {
            text.push_str(&format!("\n    {sign} {line}"));
        }
        if span.len() > SHOWN {
            text.push_str(&format!("\n    {sign} ... {} more", span.len() - SHOWN));
        }
    }
    text
}
