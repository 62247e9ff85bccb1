//! What the runtime checks of PTX text before any backend loads it (DESIGN "Users' kernels and chunk iterators"),
//! so that the host backend refuses what CUDA would: the header directives
//! a module needs, and each kernel entry with its parameter list, which a
//! typed kernel's signature is checked against. Not a PTX parser: the
//! instructions are the driver's JIT's business.

use crate::kernel::{CDecl, CKind, CParam, Param};

/// One `.param` of an entry, as far as a launch cares: its size and
/// its kind.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct PtxParam {
    /// Bytes (a `.b8 name[N]` array is N).
    pub(crate) bytes: usize,
    /// What its type says of its bits.
    pub(crate) kind: ParamKind,
}

/// The kind of a PTX parameter's type.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum ParamKind {
    /// `.uN`, `.sN`: an integer (a pointer is a 64-bit one).
    Int,
    /// `.f32`, `.f64`.
    Float,
    /// `.bN` (scalars and arrays): untyped bits, passed as they are, so
    /// any parameter of the same size fits. NVRTC passes structs by value
    /// and `__grid_constant__` parameters so (`.param .align 8 .b8
    /// p[8]` for a `double`).
    Bits,
}

impl PtxParam {
    /// An integer of `bytes`.
    pub(crate) const fn int(bytes: usize) -> PtxParam {
        PtxParam {
            bytes,
            kind: ParamKind::Int,
        }
    }

    /// A float of `bytes`.
    pub(crate) const fn float(bytes: usize) -> PtxParam {
        PtxParam {
            bytes,
            kind: ParamKind::Float,
        }
    }

    /// `bytes` untyped bytes.
    pub(crate) const fn bits(bytes: usize) -> PtxParam {
        PtxParam {
            bytes,
            kind: ParamKind::Bits,
        }
    }

    /// Whether a typed parameter `w` may stand for this one: the same
    /// size, and the same kind unless this one is untyped bits (`__half`
    /// and structs are, as NVRTC passes them) or `w` a value passed by
    /// value (whose type the signature does not say).
    pub(crate) fn fits(self, w: Param) -> bool {
        let float = match w {
            Param::F32 | Param::F64 | Param::F16 | Param::Bf16 => Some(true),
            Param::Value { .. } => None,
            _ => Some(false),
        };
        self.bytes == w.size()
            && match (self.kind, float) {
                (ParamKind::Bits, _) | (_, None) => true,
                (ParamKind::Int, Some(f)) => !f,
                (ParamKind::Float, Some(f)) => f,
            }
    }
}

/// A kernel entry (`.entry name(...)`) and its parameters; `None` where
/// they are not known (CUDA C the host backend could not compile).
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) params: Option<Vec<PtxParam>>,
    /// The parameters as the CUDA C source declares them, where the entry
    /// came from one and every parameter could be read.
    pub(crate) c: Option<Vec<CDecl>>,
}

/// A module a driver loaded, and what the runtime knows of its entries.
#[derive(Debug)]
pub(crate) struct LoadedPtx {
    /// The driver's module handle.
    pub(crate) handle: u64,
    pub(crate) entries: Vec<Entry>,
    /// NVRTC compiled it from CUDA C.
    pub(crate) nvrtc: bool,
}

impl LoadedPtx {
    /// The entry `name`, with its parameters checked against `want`; the
    /// error says what differs.
    pub(crate) fn entry(&self, name: &str, want: &[Param]) -> Result<&Entry, String> {
        let e = self
            .entries
            .iter()
            .find(|e| e.name == name)
            .ok_or_else(|| format!("no kernel `{name}` in the module"))?;
        let Some(got) = &e.params else {
            return Ok(e);
        };
        if got.len() != want.len() {
            return Err(format!(
                "the PTX entry takes {} parameters; the signature declares {}",
                got.len(),
                want.len()
            ));
        }
        for (i, (g, &w)) in got.iter().zip(want).enumerate() {
            if !g.fits(w) {
                let kind = match g.kind {
                    ParamKind::Int => "integer",
                    ParamKind::Float => "float",
                    ParamKind::Bits => "untyped value (only its size is checked)",
                };
                return Err(format!(
                    "parameter {i} is a {}-byte {kind} in the PTX; the signature declares {w:?}",
                    g.bytes
                ));
            }
        }
        Ok(e)
    }
}

impl Entry {
    /// `want` (a signature's parameters as C should declare them) checked
    /// against the CUDA C source's declarations, where they are known: a
    /// buffer is a pointer and a scalar is not; a buffer the kernel only
    /// reads ([`crate::In`]) points to `const`, and one it writes
    /// ([`crate::Out`]) does not; a buffer's elements have the size and
    /// kind of the pointee's type where both are known numbers (a
    /// [`crate::DeviceRepr`] of [`CKind::Unknown`], or a struct pointee,
    /// fits any). The error says what differs.
    pub(crate) fn check_c(&self, want: &[CParam]) -> Result<(), String> {
        let Some(c) = &self.c else {
            return Ok(());
        };
        if c.len() != want.len() {
            return Err(format!(
                "the source declares {} parameters; the signature {}",
                c.len(),
                want.len()
            ));
        }
        let kind = |k: CKind| match k {
            CKind::Float => "float",
            CKind::Int => "integer",
            CKind::Unknown => "value",
        };
        for (i, (c, w)) in c.iter().zip(want).enumerate() {
            if !c.pointer && c.ty.is_none() {
                // A type the reader does not know: maybe a pointer behind
                // a typedef or a macro. The PTX check alone judges it.
                continue;
            }
            match (c.pointer, w.buffer) {
                (true, false) => {
                    return Err(format!(
                        "parameter {i} is a pointer in the source; the signature declares a scalar (use In or Out)"
                    ))
                }
                (false, true) => {
                    return Err(format!(
                        "parameter {i} is not a pointer in the source; the signature declares a buffer"
                    ))
                }
                (false, false) => continue,
                (true, true) => {}
            }
            if w.write && c.to_const {
                return Err(format!(
                    "parameter {i} points to const in the source, so the kernel cannot write it; the signature declares Out (declare In)"
                ));
            }
            if !w.write && !c.to_const {
                return Err(format!(
                    "parameter {i} points to non-const in the source, so the kernel may write it; the signature declares In, which other tasks may read meanwhile (declare Out, or `const` in the source)"
                ));
            }
            if let Some((bytes, k)) = c.ty {
                if w.kind != CKind::Unknown && (bytes != w.bytes || k != w.kind) {
                    return Err(format!(
                        "parameter {i} points to {bytes}-byte {}s in the source; the signature declares a buffer of {}-byte {}s",
                        kind(k),
                        w.bytes,
                        kind(w.kind)
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The entries of `ptx`, after checking the header (`.version`, `.target`)
/// and that every entry's parameter list is well formed; the error says
/// what is wrong and where. An entry is `.entry name ( params ) ...{` or,
/// without parameters, `.entry name ...{` (both PTX's forms).
pub(crate) fn entries(ptx: &str) -> Result<Vec<Entry>, String> {
    let code = strip_comments(ptx);
    for directive in [".version", ".target"] {
        if !code.split_whitespace().any(|w| w == directive) {
            return Err(format!("no `{directive}` directive: this is not PTX"));
        }
    }
    let mut out = Vec::new();
    let mut rest = code.as_str();
    while let Some(i) = find_word(rest, ".entry") {
        rest = rest[i + ".entry".len()..].trim_start();
        let name_len = rest
            .find(|c: char| c.is_whitespace() || c == '(' || c == '{')
            .unwrap_or(rest.len());
        let name = &rest[..name_len];
        if !is_identifier(name) {
            let shown: String = name.chars().take(40).collect();
            return Err(format!("a malformed entry name `{shown}`"));
        }
        rest = rest[name_len..].trim_start();
        let params = if let Some(after) = rest.strip_prefix('(') {
            let close = after
                .find(')')
                .ok_or_else(|| format!("entry `{name}`: its parameter list is not closed"))?;
            let list = &after[..close];
            rest = &after[close + 1..];
            let mut params = Vec::new();
            for (k, p) in list.split(',').map(str::trim).enumerate() {
                if p.is_empty() {
                    if list.trim().is_empty() {
                        break;
                    }
                    return Err(format!("entry `{name}`: parameter {k} is empty"));
                }
                params.push(
                    param(p)
                        .ok_or_else(|| format!("entry `{name}`: cannot read parameter `{p}`"))?,
                );
            }
            params
        } else {
            Vec::new()
        };
        if !rest.contains('{') {
            return Err(format!("entry `{name}` has no body"));
        }
        out.push(Entry {
            name: name.to_owned(),
            params: Some(params),
            c: None,
        });
    }
    Ok(out)
}

/// Whether `s` is a PTX identifier: a letter, `_`, `$` or `%` and then
/// letters, digits, `_` and `$` (a `%` alone or `_`-`$` alone is not one).
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    let follows = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
    match first {
        c if c.is_ascii_alphabetic() => chars.all(follows),
        '_' | '$' | '%' => {
            let rest = chars.as_str();
            !rest.is_empty() && rest.chars().all(follows)
        }
        _ => false,
    }
}

/// `.param .u64 name`, `.param .align 8 .b8 name[16]`, `.param .u64 .ptr
/// .global .align 8 name`, ...: the state space, then the type with an
/// optional alignment on either side, the pointer attribute (`.ptr`, its
/// space and alignment), the name, an optional element count; nothing else.
/// The JIT takes `.ptr` after any type (`.param .f32 .ptr a`), which keeps
/// its type and size.
fn param(p: &str) -> Option<PtxParam> {
    let mut words = p.split_whitespace().peekable();
    if words.next()? != ".param" {
        return None;
    }
    let align = |words: &mut std::iter::Peekable<std::str::SplitWhitespace<'_>>| -> Option<()> {
        if words.next_if_eq(&".align").is_some() {
            let n: u32 = words.next()?.parse().ok()?;
            if !n.is_power_of_two() {
                return None;
            }
        }
        Some(())
    };
    align(&mut words)?;
    let ty = words.next()?;
    align(&mut words)?;
    let (bits, kind) = match ty {
        ".u8" | ".s8" => (8, ParamKind::Int),
        ".u16" | ".s16" => (16, ParamKind::Int),
        ".u32" | ".s32" => (32, ParamKind::Int),
        ".u64" | ".s64" => (64, ParamKind::Int),
        ".b8" => (8, ParamKind::Bits),
        ".b16" => (16, ParamKind::Bits),
        ".b32" => (32, ParamKind::Bits),
        ".b64" => (64, ParamKind::Bits),
        ".f32" => (32, ParamKind::Float),
        ".f64" => (64, ParamKind::Float),
        _ => return None,
    };
    if words.next_if_eq(&".ptr").is_some() {
        let _ = words.next_if(|w| matches!(*w, ".global" | ".const" | ".shared" | ".local"));
        align(&mut words)?;
    }
    let name = words.next()?;
    if words.next().is_some() {
        return None;
    }
    let (ident, count) = match name.find('[') {
        Some(i) => {
            let n = name[i + 1..].strip_suffix(']')?;
            if !n.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            (&name[..i], n.parse::<usize>().ok()?)
        }
        None => (name, 1),
    };
    if !is_identifier(ident) {
        return None;
    }
    Some(PtxParam {
        bytes: (bits / 8usize).checked_mul(count)?,
        kind,
    })
}

/// `ptx` (or C) without `//` and `/* */` comments, each left as a space
/// (a comment separates words, as in C and PTX); string and character
/// literals are kept whole, comment markers in them included.
pub(crate) fn strip_comments(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len());
    let mut rest = ptx;
    loop {
        let Some(i) = rest.find(['/', '"', '\'']) else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("//") {
            out.push(' ');
            rest = after.find('\n').map_or("", |e| &after[e..]);
        } else if let Some(after) = tail.strip_prefix("/*") {
            out.push(' ');
            rest = after.find("*/").map_or("", |e| &after[e + 2..]);
        } else if let Some(after) = tail.strip_prefix('/') {
            out.push('/');
            rest = after;
        } else {
            // A literal, to its closing quote (past `\` escapes) or the end
            // of its line.
            let quote = tail.as_bytes()[0];
            let bytes = tail.as_bytes();
            let mut k = 1;
            while k < bytes.len() && bytes[k] != quote && bytes[k] != b'\n' {
                k += if bytes[k] == b'\\' { 2 } else { 1 };
            }
            let end = (k + 1).min(bytes.len());
            // `end` is at a char boundary: after an ASCII quote, a newline,
            // or at the end; an escape skips one byte, and the byte skipped
            // starts a char or the loop stops at a boundary below.
            let end = (end..=bytes.len())
                .find(|&e| tail.is_char_boundary(e))
                .unwrap_or(bytes.len());
            out.push_str(&tail[..end]);
            rest = &tail[end..];
        }
    }
}

/// The index of `word` in `s` as a whole word.
fn find_word(s: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = s[from..].find(word) {
        let at = from + i;
        let end = at + word.len();
        let before = at == 0 || s.as_bytes()[at - 1].is_ascii_whitespace();
        let after = s
            .as_bytes()
            .get(end)
            .is_none_or(|c| c.is_ascii_whitespace());
        if before && after {
            return Some(at);
        }
        from = end;
    }
    None
}

#[cfg(test)]
mod test;
