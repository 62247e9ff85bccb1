//! The host backend's allocations fail with a typed error, never an abort
//! or a panic (DESIGN "Soundness"), as CUDA's do: a size no layout holds, a block the
//! address space has no room for, an allocator that refuses under an
//! address-space limit. Before the fix the host backend called
//! `handle_alloc_error` (an abort) or `expect` (a panic).

use gpu_sched::{BackendChoice, Error, Runtime, RuntimeOptions, Staging};

fn host(opts: RuntimeOptions) -> Runtime {
    Runtime::new(RuntimeOptions {
        backend: BackendChoice::Host,
        ..opts
    })
    .expect("the host backend starts")
}

fn assert_oom<T: std::fmt::Debug>(r: gpu_sched::Result<T>, bytes: usize) {
    match r {
        Err(Error::OutOfMemory { requested, .. }) => assert_eq!(requested, bytes),
        other => panic!("{bytes} bytes: expected OutOfMemory, got {other:?}"),
    }
}

/// A page-locked block of 1 PiB: more than the address space (128 TiB on
/// x86-64), so the allocator refuses whatever the machine. Aborted before.
#[test]
fn staging_of_a_petabyte_is_out_of_memory() {
    let rt = host(RuntimeOptions::default());
    let before = rt.live();
    assert_oom(Staging::<u8>::new(&rt, 1 << 50), 1 << 50);
    assert_eq!(rt.live(), before, "a failed allocation leaks nothing");
    // The runtime goes on.
    let mut s = Staging::<u8>::new(&rt, 16).unwrap();
    assert_eq!(s.capacity(), 16);
    let t = rt.begin_task().unwrap();
    let b = t.from_host(&[5u8; 16]).unwrap();
    s.receive(&t, &b).unwrap();
    assert_eq!(s.as_slice().unwrap(), &[5u8; 16]);
}

/// No memory limit, and sizes no allocation layout holds (`isize::MAX`
/// rounded up to the backend's 256-byte alignment overflows): panicked
/// before, at the layout's `expect`.
#[test]
fn device_memory_past_any_layout_is_out_of_memory() {
    let rt = host(RuntimeOptions {
        host_memory_limit: usize::MAX,
        ..RuntimeOptions::default()
    });
    let t = rt.begin_task().unwrap();
    let _ = t.stream_id();
    let before = rt.live();
    for bytes in [isize::MAX as usize, usize::MAX, 1 << 50] {
        assert_oom(t.alloc::<u8>(bytes), bytes);
        assert_eq!(rt.live(), before, "a failed allocation leaks nothing");
    }
    // The failed allocations left nothing counted against the limit.
    let b = t.from_host(&[1.0f32; 8]).unwrap();
    assert_eq!(t.to_vec(&b).unwrap(), vec![1.0f32; 8]);
}

/// Set in the child process of [`allocations_under_an_address_space_limit`].
const CHILD: &str = "GPU_SCHED_HOST_ALLOC_CHILD";
/// The child's address-space limit (`ulimit -v`, KiB): 4 GiB.
const LIMIT_KIB: u64 = 4 << 20;
/// What the child allocates: 6 GiB, within the default 8 GiB host memory
/// limit, over the address-space limit.
const TOO_MUCH: usize = 6 << 30;
/// What the child prints once each allocation failed as it should.
const MARK: &str = "every allocation over the address-space limit failed typed";

/// The body, in a child process whose address space is limited to 4 GiB
/// (`RLIMIT_AS` through `ulimit -v`, so that no unsafe code sets it): a
/// 6 GiB allocation the host memory limit admits but the machine cannot
/// back is `OutOfMemory`, device memory and page-locked memory alike.
/// Before the fix the child aborted (`handle_alloc_error`), and the parent
/// saw it die of a signal.
#[test]
fn allocations_under_an_address_space_limit() {
    if std::env::var_os(CHILD).is_some() {
        let rt = host(RuntimeOptions::default());
        let t = rt.begin_task().unwrap();
        let _ = t.stream_id();
        let before = rt.live();
        assert_oom(t.alloc::<u8>(TOO_MUCH), TOO_MUCH);
        assert_oom(Staging::<u8>::new(&rt, TOO_MUCH), TOO_MUCH);
        assert_eq!(rt.live(), before, "a failed allocation leaks nothing");
        let b = t.from_host(&[2u32; 64]).unwrap();
        assert_eq!(t.to_vec(&b).unwrap(), vec![2u32; 64]);
        println!("{MARK}");
        return;
    }
    if !cfg!(target_os = "linux") {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {LIMIT_KIB} && exec \"$0\" \"$@\""))
        .arg(exe)
        .args([
            "--exact",
            "allocations_under_an_address_space_limit",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(MARK),
        "the child ({:?}) did not end normally with every allocation refused:\n\
         stdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
}
