//! Unit tests of the PTX checker.

use super::*;

const PTX: &str = "// header\n.version 8.0\n.target sm_70\n.address_size 64\n\
    /* a comment with .entry fake( */\n\
    .visible .entry scale(\n\t.param .u64 scale_param_0,\n\t.param .f32 scale_param_1,\n\
    \t.param .align 8 .b8 scale_param_2[16]\n)\n{\n\tret;\n}\n\
    .visible .entry empty()\n{\n\tret;\n}\n";

#[test]
fn entries_and_their_parameters() {
    let e = entries(PTX).unwrap();
    assert_eq!(e.len(), 2);
    assert_eq!(e[0].name, "scale");
    assert_eq!(
        e[0].params,
        Some(vec![
            PtxParam::int(8),
            PtxParam::float(4),
            PtxParam::bits(16)
        ])
    );
    assert_eq!(e[1].name, "empty");
    assert_eq!(e[1].params, Some(vec![]));
}

#[test]
fn garbage_is_refused_with_a_reason() {
    let e = entries("this is not ptx").unwrap_err();
    assert!(e.contains(".version"), "{e}");
    let e = entries(".version 8.0\n.target sm_70\n.entry k(.param .u64 a").unwrap_err();
    assert!(e.contains("not closed"), "{e}");
    let e = entries(".version 8.0\n.target sm_70\n.entry k(.param .q99 a)\n{}").unwrap_err();
    assert!(e.contains("cannot read parameter"), "{e}");
}

#[test]
fn entries_without_a_list_pointers_and_huge_arrays() {
    let h = ".version 8.0\n.target sm_70\n";
    let e = entries(&format!("{h}.entry k\n.maxntid 256, 1, 1\n{{ ret; }}")).unwrap();
    assert_eq!(
        e[0].params,
        Some(vec![]),
        "no parameter list: no parameters"
    );
    let e = entries(&format!(
        "{h}.visible/* */.entry k(.param .u64 .ptr .global .align 8 k_0, .param .b8 .align 4 k_1[12])\n{{}}"
    ))
    .unwrap();
    assert_eq!(
        e[0].params,
        Some(vec![PtxParam::int(8), PtxParam::bits(12)])
    );
    // 8 * (2^64 - 1) bytes: refused, not an overflow.
    let huge = format!("{h}.entry k(.param .u64 k_0[{}])\n{{}}", usize::MAX);
    assert!(entries(&huge).unwrap_err().contains("cannot read"));
    for bad in [
        ".entry k(.param .u64 a b)\n{}",
        ".entry k(.param .u64 a,)\n{}",
        ".entry k(.param .ptr .u64 a)\n{}",
        ".entry k(.param .f32 .ptr .align 3 a)\n{}",
        ".entry k(.param .f32 .ptr .param a)\n{}",
        ".entry k(.param .u64 9a)\n{}",
        ".entry k(.param .u64 a[-1])\n{}",
        ".entry k(.u64 a)\n{}",
    ] {
        assert!(entries(&format!("{h}{bad}")).is_err(), "{bad}");
    }
}

#[test]
fn entries_are_checked_against_signatures() {
    let m = LoadedPtx {
        handle: 0,
        entries: entries(PTX).unwrap(),
        nvrtc: false,
    };
    let (ptr, f32) = (Param::PtrWrite, Param::F32);
    assert!(m.entry("scale", &[ptr, f32, Param::U64]).is_err());
    assert!(m.entry("empty", &[]).is_ok());
    let e = m.entry("missing", &[]).unwrap_err();
    assert!(e.contains("no kernel `missing`"), "{e}");
    let e = m.entry("empty", &[ptr]).unwrap_err();
    assert!(e.contains("takes 0 parameters"), "{e}");
}

/// The JIT takes `.ptr` after any type (the corpus record `a pointer
/// attribute on a float`, on an H200): so does the checker, and the
/// parameter keeps its type and size.
#[test]
fn a_pointer_attribute_after_any_type_keeps_the_type() {
    let e = entries(
        ".version 8.0\n.target sm_70\n.entry k(.param .f32 .ptr a, \
         .param .f64 .ptr .global .align 8 b, .param .u32 .ptr .shared c, \
         .param .b32 .ptr .align 4 d, .param .u64 .ptr .const e)\n{}",
    )
    .unwrap();
    assert_eq!(
        e[0].params,
        Some(vec![
            PtxParam::float(4),
            PtxParam::float(8),
            PtxParam::int(4),
            PtxParam::bits(4),
            PtxParam::int(8),
        ])
    );
    let m = LoadedPtx {
        handle: 0,
        entries: e,
        nvrtc: false,
    };
    use Param::*;
    assert!(m.entry("k", &[F32, F64, U32, I32, PtrRead]).is_ok());
    let err = m.entry("k", &[U32, F64, U32, I32, PtrRead]).unwrap_err();
    assert!(err.contains("parameter 0 is a 4-byte float"), "{err}");
}

/// `.bN` parameters are untyped bits (how NVRTC passes a
/// `__grid_constant__ double`: a `Kernel<(u32, f64)>` of it was
/// refused): any parameter type of their size fits, a wrong size does
/// not; `.uN`/`.sN` stay integers and `.fN` floats.
#[test]
fn untyped_bits_fit_any_type_of_their_size() {
    let e = entries(
        ".version 8.0\n.target sm_70\n.entry k(.param .align 8 .b8 a[8], .param .b64 b, \
         .param .b32 c, .param .align 4 .b8 d[4], .param .b16 e[4])\n{}\n\
         .entry wide(.param .b8 f[12])\n{}\n\
         .entry typed(.param .u64 a, .param .f64 b, .param .s32 c, .param .f32 d)\n{}",
    )
    .unwrap();
    let b = PtxParam::bits;
    assert_eq!(e[0].params, Some(vec![b(8), b(8), b(4), b(4), b(8)]));
    assert_eq!(e[1].params, Some(vec![b(12)]));
    let m = LoadedPtx {
        handle: 0,
        entries: e,
        nvrtc: false,
    };
    use Param::*;
    for eight in [PtrRead, PtrWrite, U64, F64] {
        for four in [U32, I32, F32] {
            let sig = [eight, eight, four, four, eight];
            assert!(m.entry("k", &sig).is_ok(), "{sig:?}");
            // A wrong size is refused, whatever the kind.
            let err = m.entry("k", &[eight, four, four, four, eight]).unwrap_err();
            assert!(
                err.contains("parameter 1 is a 8-byte untyped value")
                    && err.contains(&format!("declares {four:?}")),
                "{err}"
            );
            let err = m.entry("wide", &[eight]).unwrap_err();
            assert!(
                err.contains("parameter 0 is a 12-byte untyped value"),
                "{err}"
            );
        }
    }
    // Typed parameters keep their kinds.
    assert!(m.entry("typed", &[U64, F64, I32, F32]).is_ok());
    let err = m.entry("typed", &[F64, F64, I32, F32]).unwrap_err();
    assert!(err.contains("parameter 0 is a 8-byte integer"), "{err}");
    let err = m.entry("typed", &[U64, U64, I32, F32]).unwrap_err();
    assert!(err.contains("parameter 1 is a 8-byte float"), "{err}");
    let err = m.entry("typed", &[U64, F64, F32, F32]).unwrap_err();
    assert!(err.contains("parameter 2 is a 4-byte integer"), "{err}");
}

#[test]
fn the_built_in_kernels_parse() {
    let ptx = include_str!("../../driver/cuda/test_kernels.ptx");
    let e = entries(ptx).unwrap();
    assert!(!e.is_empty());
}
