//! Shared by the integration tests: the test kit's runtimes, checks, flags
//! and gates (`gpu_testkit::common`), the macro of two-device cases, and
//! [`rayon_port`], what the ports of rayon-core's tests share. (The random
//! task DAGs of `tests/stress.rs` are the test kit's `dag`.)

#![allow(dead_code)] // each test binary uses a part of this module

pub(crate) mod rayon_port;

#[allow(unused_imports)] // each test binary uses a part of it
pub(crate) use gpu_testkit::common::*;

/// A module per case, `case::host` (two simulated devices, then no race
/// reported) and `case::cuda` (ignored unless asked for; `$why` says what
/// it needs), each calling `case(&device_0)`.
#[allow(unused_macros)] // each test binary uses a part of this module
macro_rules! two_device_tests {
    ($why:literal: $($body:ident),+ $(,)?) => {$(
        mod $body {
            #[test]
            fn host() {
                let rt = $crate::common::two_devices(gpu::BackendChoice::Host);
                super::$body(&rt);
                $crate::common::assert_no_races(&rt);
            }

            #[test]
            #[ignore = $why]
            fn cuda() {
                super::$body(&$crate::common::two_devices(gpu::BackendChoice::Cuda));
            }
        }
    )+};
}
#[allow(unused_imports)]
pub(crate) use two_device_tests;
