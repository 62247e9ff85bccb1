//! Project tasks, run as `cargo xtask <command> [args]`.
//!
//! Each command lives in its own module and is one row of [`COMMANDS`]; add a
//! module and a row to add a command. Exit status: 0 on success, 1 when a
//! command fails, 2 for a usage error (unknown command or argument).

use std::fmt;
use std::path::PathBuf;
use std::process::ExitCode;

mod bench;
mod bundle;
mod cases;
mod faults;
mod fuzz;
mod model;
mod oracle;
mod ptx;
mod soak;
mod stress;
mod test;

/// One subcommand: its name, a one-line summary, its arguments for the usage
/// text, and the function that runs it with the arguments after its name.
struct Command {
    name: &'static str,
    args: &'static str,
    about: &'static str,
    run: fn(&[String]) -> Result<(), Error>,
}

const COMMANDS: &[Command] = &[
    Command {
        name: "bench",
        args: "[--filter REGEX] [--out DIR] [--no-torch] | --multi-gpu [--out DIR] [--no-torch] \
               [--repeat N] [--quick] | --report [--check]",
        about: "run the benchmarks B1-B14 and their PyTorch comparisons (from bundle/ on a \
                GPU machine), write benches/results/<device>.json and print the \
                current/previous/ratio table; fails if a PyTorch comparison cannot run \
                (--no-torch: skip them, loudly). --multi-gpu: B11 (the heat equation on \
                1 and 2 GPUs, 2 MPI ranks), peer copies and torch_multi_gpu.py on two GPUs \
                (from bundle-x2/), written to benches/results/<device>-x<n>.json with goals; \
                --quick: tiny sizes on any backend (a harness check, written under --out only); \
                --report: benches/results/README.md from the committed JSONs (medians, ranges, \
                goals; --check: fail if it is not up to date)",
        run: bench::run,
    },
    Command {
        name: "bundle",
        args: "[--multi-gpu]",
        about: "build the GPU tests, examples and xtask (release, stripped) into bundle/, \
                with the PyTorch comparisons (bundle/benches/) and bundle/run.sh to run \
                them on a GPU machine without cargo; --multi-gpu: the lean two-GPU bundle \
                bundle-x2/ (feature mpi: 09 and 10-mpi, the devices test, the multi_gpu \
                bench, torch_multi_gpu.py, bundle-x2/run.sh)",
        run: bundle::run,
    },
    Command {
        name: "faults",
        args: "",
        about: "the driver-fault sweep (release, host backend): count the workload's K driver \
                calls, then fail each call k in turn with every error it can return; print K \
                and the time; fail on any panic, hang, leak or lost work (CI runs a sample)",
        run: faults::run,
    },
    Command {
        name: "fuzz",
        args: "[--cases N]",
        about: "the property-based fuzzing of the parsers of user input (PTX, CUDA C \
                signatures, kernel signatures, launch configurations, NCCL arguments) with N \
                cases per property (default 10 000 000; CI runs 10 000), in release",
        run: fuzz::run,
    },
    Command {
        name: "model",
        args: "[--json FILE]",
        about: "past one node, on paper: weak and strong scaling of the heat equation and \
                of CG up to 1,024 GPUs from the two-GPU machine's measured rows \
                (the newest committed nvidia-h200-x2 run) and stated network assumptions",
        run: model::run,
    },
    Command {
        name: "oracle",
        args: "[--cases N]",
        about: "the ledger's oracle property test with N cases (default 100 000), in release, \
                with its precision table",
        run: oracle::run,
    },
    Command {
        name: "ptx",
        args: "[--check]",
        about: "regenerate crates/gpu-kernels/ptx/*.ptx with the pinned NVRTC \
            (--check: fail if the committed PTX differs)",
        run: ptx::run,
    },
    Command {
        name: "soak",
        args: "--minutes N [--every SECONDS] [--seed S]",
        about: "run random scopes for N minutes (release, the GPU when there is one), print \
                live streams, events, allocations and bytes once a minute; fail if they grew",
        run: soak::run,
    },
    Command {
        name: "stress",
        args: "[--tasks N] [--seed S] [--devices N] [--comms C] [--max-streams M] \
               [--warm-streams W] [--stall SECONDS] [--multi]",
        about: "run the random task-DAG stress (release, 100 000 tasks by default, the GPU \
                when there is one); fail on any wrong value or race",
        run: stress::run,
    },
    Command {
        name: "test",
        args: "",
        about: "the workspace's tests (host backend) and the ledger's loom tests",
        run: test::run,
    },
];

/// Why a command did not succeed.
#[derive(Debug)]
enum Error {
    /// Bad command line: print usage, exit 2.
    Usage(String),
    /// The command ran and failed: exit 1.
    Failed(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(msg) | Error::Failed(msg) => f.write_str(msg),
        }
    }
}

/// Shorthand for a failure with a message.
fn fail(msg: impl Into<String>) -> Error {
    Error::Failed(msg.into())
}

/// The workspace root (the parent of this crate's folder).
fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(PathBuf::from)
        .unwrap_or(manifest_dir)
}

fn usage() -> String {
    let mut text = String::from("usage: cargo xtask <command> [args]\n\ncommands:\n");
    for c in COMMANDS {
        text.push_str(&format!("  {} {}\n      {}\n", c.name, c.args, c.about));
    }
    text.push_str("  help\n      print this text\n");
    text
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(name) = args.first() else {
        eprint!("{}", usage());
        return ExitCode::from(2);
    };
    if matches!(name.as_str(), "help" | "-h" | "--help") {
        print!("{}", usage());
        return ExitCode::SUCCESS;
    }
    let Some(command) = COMMANDS.iter().find(|c| c.name == name) else {
        eprintln!("xtask: unknown command `{name}`\n");
        eprint!("{}", usage());
        return ExitCode::from(2);
    };
    match (command.run)(&args[1..]) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Error::Usage(msg)) => {
            eprintln!("xtask {}: {msg}\n", command.name);
            eprint!("{}", usage());
            ExitCode::from(2)
        }
        Err(Error::Failed(msg)) => {
            eprintln!("xtask {}: {msg}", command.name);
            ExitCode::FAILURE
        }
    }
}
