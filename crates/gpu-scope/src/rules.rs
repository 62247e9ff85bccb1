//! The ledger's rules, R1-R14 (from the seed) and X1-X5 (beyond it), which
//! the rest of these docs cite by code: what each says, where it lives in
//! the code and which tests check it. (This page is
//! `crates/gpu-epoch/README.md`, included through the link
//! `crates/gpu-scope/RULES.md`, so that the published crate holds it; the
//! reasons behind the rules are in the design note, `docs/DESIGN.md`.)
//!
#![doc = include_str!("../RULES.md")]
