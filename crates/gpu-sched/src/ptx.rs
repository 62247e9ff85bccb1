//! What the runtime checks of PTX text before any backend loads it (§10),
//! so that the host backend refuses what CUDA would: the header directives
//! a module needs, and each kernel entry with its parameter list, which a
//! typed kernel's signature is checked against. Not a PTX parser: the
//! instructions are the driver's JIT's business.

use crate::kernel::Param;

/// One `.param` of an entry, as far as a launch cares: its size and
/// whether it is a floating-point register type.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct PtxParam {
    /// Bytes (a `.b8 name[N]` array is N).
    pub(crate) bytes: usize,
    /// `.f32` or `.f64`.
    pub(crate) float: bool,
}

/// A kernel entry (`.entry name(...)`) and its parameters; `None` where
/// they are not known (CUDA C the host backend could not compile).
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) params: Option<Vec<PtxParam>>,
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
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let fits = match w {
                Param::PtrRead | Param::PtrWrite | Param::U64 => g.bytes == 8 && !g.float,
                Param::U32 | Param::I32 => g.bytes == 4 && !g.float,
                Param::F32 => g.bytes == 4 && g.float,
                Param::F64 => g.bytes == 8 && g.float,
            };
            if !fits {
                let kind = if g.float { "float" } else { "integer" };
                return Err(format!(
                    "parameter {i} is a {}-byte {kind} in the PTX; the signature declares {w:?}",
                    g.bytes
                ));
            }
        }
        Ok(e)
    }
}

/// The entries of `ptx`, after checking the header (`.version`, `.target`)
/// and that every entry's parameter list is well formed; the error says
/// what is wrong and where.
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
        rest = &rest[i + ".entry".len()..];
        let open = rest
            .find('(')
            .ok_or_else(|| "an `.entry` without a parameter list".to_owned())?;
        let name = rest[..open].trim();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_alphanumeric() || "_$.".contains(c))
        {
            return Err(format!("a malformed entry name `{name}`"));
        }
        let close = rest[open..]
            .find(')')
            .ok_or_else(|| format!("entry `{name}`: its parameter list is not closed"))?;
        let list = &rest[open + 1..open + close];
        let params = list
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| param(p).ok_or_else(|| format!("entry `{name}`: cannot read parameter `{p}`")))
            .collect::<Result<Vec<_>, _>>()?;
        rest = &rest[open + close..];
        if !rest.contains('{') {
            return Err(format!("entry `{name}` has no body"));
        }
        out.push(Entry {
            name: name.to_owned(),
            params: Some(params),
        });
    }
    Ok(out)
}

/// `.param .u64 name`, `.param .align 8 .b8 name[16]`, ...
fn param(p: &str) -> Option<PtxParam> {
    let mut words = p.split_whitespace().filter(|w| *w != ".param");
    let mut ty = words.next()?;
    if ty == ".align" {
        words.next()?;
        ty = words.next()?;
    }
    let name = words.next()?;
    let (bits, float) = match ty {
        ".u8" | ".s8" | ".b8" => (8, false),
        ".u16" | ".s16" | ".b16" => (16, false),
        ".u32" | ".s32" | ".b32" => (32, false),
        ".u64" | ".s64" | ".b64" => (64, false),
        ".f32" => (32, true),
        ".f64" => (64, true),
        _ => return None,
    };
    let count = match name.find('[') {
        Some(i) => name[i + 1..].strip_suffix(']')?.parse::<usize>().ok()?,
        None => 1,
    };
    Some(PtxParam {
        bytes: bits / 8 * count,
        float,
    })
}

/// `ptx` (or C) without `//` and `/* */` comments.
pub(crate) fn strip_comments(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len());
    let mut rest = ptx;
    while !rest.is_empty() {
        match (rest.find("//"), rest.find("/*")) {
            (Some(l), b) if b.map_or(true, |b| l < b) => {
                out.push_str(&rest[..l]);
                rest = rest[l..].find('\n').map_or("", |e| &rest[l + e..]);
            }
            (_, Some(b)) => {
                out.push_str(&rest[..b]);
                rest = rest[b..].find("*/").map_or("", |e| &rest[b + e + 2..]);
            }
            _ => {
                out.push_str(rest);
                rest = "";
            }
        }
    }
    out
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
            .map_or(true, |c| c.is_ascii_whitespace());
        if before && after {
            return Some(at);
        }
        from = end;
    }
    None
}

#[cfg(test)]
mod test {
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
        let p = |bytes, float| PtxParam { bytes, float };
        assert_eq!(
            e[0].params,
            Some(vec![p(8, false), p(4, true), p(16, false)])
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

    #[test]
    fn the_built_in_kernels_parse() {
        let ptx = include_str!("driver/cuda/test_kernels.ptx");
        let e = entries(ptx).unwrap();
        assert!(!e.is_empty());
    }
}
