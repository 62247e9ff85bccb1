//! Unit tests of the CUDA C signature reader and module names.

use super::*;

#[test]
fn global_functions_are_found_by_name() {
    let src = r#"extern "C" __global__ void stencil(float* out, const float* in) {}
        extern "C" __global__ void __launch_bounds__(256) other(int n) {}"#;
    let names = |src| -> Vec<String> {
        global_functions(src)
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect()
    };
    assert_eq!(names(src), ["stencil", "other"]);
    assert!(names("int main() {}").is_empty());
    // Commented out, or C++ linkage (a mangled name): CUDA finds neither.
    let src = "// extern \"C\" __global__ void old(float*) {}\n__global__ void m(float*) {}";
    assert!(names(src).is_empty());
    let src = "extern \"C\" {\n__global__ void a(int n) { if (n) {} }\n}\n__global__ void b() {}";
    assert_eq!(names(src), ["a"]);
    let e = global_functions(
        "extern \"C\" __global__ void k(float* __restrict__ y, const float* x, float a, unsigned long long n, int m) {}",
    )
    .unwrap();
    let want = vec![
        PtxParam::int(8),
        PtxParam::int(8),
        PtxParam::float(4),
        PtxParam::int(8),
        PtxParam::int(4),
    ];
    assert_eq!(e[0].params, Some(want));
    let e = global_functions("extern \"C\" __global__ void k(MyStruct s) {}").unwrap();
    assert_eq!(e[0].params, None, "an unknown type: not checked");
}

/// The parameters `global_functions` reads of the one kernel of `src`.
fn params_of(src: &str) -> Option<Vec<PtxParam>> {
    let e = global_functions(src).unwrap();
    assert_eq!(e.len(), 1, "one kernel in {src:?}: {e:?}");
    e[0].params.clone()
}

const PTR: PtxParam = PtxParam::int(8);
const F32: PtxParam = PtxParam::float(4);
const I32: PtxParam = PtxParam::int(4);
const U64: PtxParam = PtxParam::int(8);

#[test]
fn array_declarators_are_pointers() {
    let k = |list: &str| params_of(&format!("extern \"C\" __global__ void k({list}) {{}}"));
    assert_eq!(k("float y[], float a"), Some(vec![PTR, F32]));
    assert_eq!(k("const float x[16], int n"), Some(vec![PTR, I32]));
    assert_eq!(k("float y[restrict 4][4]"), Some(vec![PTR]));
    assert_eq!(k("int y [ N ]"), Some(vec![PTR]));
    assert_eq!(
        k("float (*rows)[4], double* __restrict__ d"),
        Some(vec![PTR, PTR])
    );
}

#[test]
fn qualifiers_attributes_and_spellings() {
    let k = |list: &str| params_of(&format!("extern \"C\" __global__ void k({list}) {{}}"));
    assert_eq!(
        k("const float* const __restrict__ x, volatile unsigned n"),
        Some(vec![PTR, I32])
    );
    assert_eq!(
        k("float*, int, unsigned long long"),
        Some(vec![PTR, I32, U64])
    );
    assert_eq!(
        k("long unsigned long n, std::size_t m"),
        Some(vec![U64, U64])
    );
    assert_eq!(
        k("__grid_constant__ const int n = 4"),
        Some(vec![PtxParam::bits(4)])
    );
    assert_eq!(
        k("__attribute__((unused)) float a, [[maybe_unused]] int b"),
        Some(vec![F32, I32])
    );
    assert_eq!(k("/* y */ float /* (, */ a"), Some(vec![F32]));
    assert_eq!(k("void"), Some(vec![]));
    // Not plain: unchecked, never a wrong verdict.
    assert_eq!(k("Pair<int, float> p"), None);
    assert_eq!(k("int& r"), None);
    assert_eq!(k("short long x"), None);
    assert_eq!(k("long double x"), None);
    assert_eq!(k("int 5x"), None);
    assert_eq!(k("__half h"), None);
}

#[test]
fn kernels_declarations_templates_and_attributes() {
    let src = r#"
        #define K extern "C" __global__ void fake(int n) {}
        extern "C" __global__ void a(float* y);
        extern  "C"  {
            __global__ void __launch_bounds__((256), 2) a(float* y) { const char* s = "}{ __global__ void x(int) {}"; }
            template <typename T> __global__ void t(T* y) {}
            __global__ __attribute__((noinline)) void b(int n, float x[]) { if (n) { } }
        }
        extern "C" __global__ void c(double d) {}
    "#;
    let e = global_functions(src).unwrap();
    let names: Vec<_> = e.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(e[0].params, Some(vec![PTR]));
    assert_eq!(e[1].params, Some(vec![I32, PTR]));
    assert_eq!(e[2].params, Some(vec![PtxParam::float(8)]));
}

/// `__grid_constant__` parameters are untyped bytes of their size, as
/// NVRTC's PTX for them (`.param .align 8 .b8 grid_param_1[8]`): on an
/// H200 a `Kernel<(u32, f64)>` of the corpus's `grid` kernel was
/// refused under NVRTC, while this reader said `4i,8f`. Both now take
/// any type of the size, `f64` included.
#[test]
fn grid_constant_parameters_are_untyped_bytes() {
    let src = "extern \"C\" __global__ void grid(__grid_constant__ const int n, \
               __grid_constant__ const double d, const double e, \
               float* const __grid_constant__ p) {}";
    let e = global_functions(src).unwrap();
    let b = PtxParam::bits;
    assert_eq!(
        e[0].params,
        Some(vec![b(4), b(8), PtxParam::float(8), b(8)])
    );
    let m = LoadedPtx {
        handle: 0,
        entries: e,
        nvrtc: false,
    };
    use crate::kernel::Param::*;
    for (n, d, p) in [(U32, F64, PtrRead), (I32, U64, F64), (F32, PtrWrite, U64)] {
        assert!(m.entry("grid", &[n, d, F64, p]).is_ok());
        // The parameter without `__grid_constant__` stays a float.
        let err = m.entry("grid", &[n, d, U64, p]).unwrap_err();
        assert!(err.contains("parameter 2 is a 8-byte float"), "{err}");
    }
    let e = global_functions("extern \"C\" __global__ void c(__grid_constant__ const char c) {}")
        .unwrap();
    assert_eq!(e[0].params, Some(vec![b(1)]));
    // The corpus's kernel, as the H200 compiled it: `(u32, f64)` and,
    // size only, `(u32, *const f32)` both fit.
    let e = global_functions(
        "extern \"C\" __global__ void grid(__grid_constant__ const int n, __grid_constant__ const double d) {}",
    )
    .unwrap();
    let m = LoadedPtx {
        handle: 0,
        entries: e,
        nvrtc: false,
    };
    assert!(m.entry("grid", &[U32, F64]).is_ok());
    assert!(m.entry("grid", &[F32, PtrRead]).is_ok());
    let err = m.entry("grid", &[U32, F32]).unwrap_err();
    assert!(
        err.contains("parameter 1 is a 8-byte untyped value"),
        "{err}"
    );
    // Without `__grid_constant__`: typed, as before.
    let e =
        global_functions("extern \"C\" __global__ void t(const int n, const double d) {}").unwrap();
    assert_eq!(
        e[0].params,
        Some(vec![PtxParam::int(4), PtxParam::float(8)])
    );
}

#[test]
fn names_are_interned_once() {
    let a = intern(&String::from("k_interned"));
    let b = intern("k_interned");
    assert!(std::ptr::eq(a, b));
}
