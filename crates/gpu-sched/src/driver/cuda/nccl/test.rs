//! Tests: every NCCL function the CUDA collectives call is one the probe checks.

use super::*;

/// Every NCCL function this file calls is in the list the probe checks
/// (cudarc panics on a missing one).
#[test]
fn every_function_called_is_checked() {
    let src = include_str!("../nccl.rs");
    let mut seen = 0;
    for (i, _) in src.match_indices("sys::nccl") {
        let rest = &src[i + "sys::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if rest[name.len()..].starts_with('(') {
            assert!(REQUIRED_SYMBOLS.contains(&name.as_str()), "{name}");
            seen += 1;
        }
    }
    assert!(seen >= REQUIRED_SYMBOLS.len(), "{seen} calls found");
}

/// The check never panics: NCCL is there (a version, 2.x) or it is
/// `NcclUnavailable`, and the library search says so; multicast is
/// off either way.
#[test]
fn library_is_checked_before_any_call() {
    // SAFETY: loads and closes the library, as the probe does.
    let present = unsafe { sys::is_culib_present() };
    match library() {
        Ok(v) => {
            assert!(present);
            assert!(v >= 21400, "NCCL version code {v}");
        }
        Err(Error::NcclUnavailable(msg)) => {
            assert!(!present, "libnccl loads, yet: {msg}");
            assert!(msg.contains("libnccl.so"), "{msg}");
        }
        Err(e) => panic!("{e:?}"),
    }
    assert_eq!(std::env::var(NVLS_ENABLE).as_deref(), Ok("0"));
    // Every entry point checks first: no panic without the library.
    match unique_id() {
        Ok(id) => assert!(present && id.iter().any(|&b| b != 0)),
        Err(e) => assert!(matches!(e, Error::NcclUnavailable(_)), "{e:?}"),
    }
    if !present {
        assert!(matches!(init_all(&[0, 1]), Err(Error::NcclUnavailable(_))));
        // SAFETY: no call is made: the library is absent.
        let r = unsafe { launch(&[], &[]) };
        assert!(matches!(r, Err(Error::NcclUnavailable(_))));
    }
}
