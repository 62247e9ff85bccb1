//! Users' modules (DESIGN "Users' kernels and chunk iterators"): PTX from a string, or CUDA C compiled at run time
//! by NVRTC for the runtime's device, loaded once per runtime and source
//! (the built-in modules take the same path), and their kernels looked up
//! by name as typed [`Kernel`]s checked against the PTX.

use crate::error::{Error, Result};
use crate::kernel::modules::Modules;
use crate::kernel::ptx::{Entry, LoadedPtx, ParamKind, PtxParam};
use crate::kernel::typed::{Kernel, Signature};
use crate::kernel::{CDecl, CKind};
use crate::runtime::Runtime;
use std::sync::Arc;

/// A module loaded into a runtime ([`Runtime::load_ptx`],
/// [`Runtime::compile_cuda`]); its kernels are looked up by name with
/// [`LoadedModule::kernel`]. The module stays loaded as long as the runtime.
#[derive(Clone)]
pub struct LoadedModule {
    rt: Runtime,
    ptx: Arc<LoadedPtx>,
}

impl std::fmt::Debug for LoadedModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedModule")
            .field("kernels", &self.kernel_names())
            .finish()
    }
}

impl LoadedModule {
    /// The kernel `name`, with the signature `S` (see [`Kernel`]). The
    /// signature is checked against the PTX entry's parameters: their
    /// count, and each one's size and kind (pointers and 64-bit integers
    /// are 8-byte integers, `f32` a 4-byte float, ...). A parameter of an
    /// untyped PTX type (`.b8`, `.b16`, `.b32`, `.b64`, or an array of one:
    /// how NVRTC passes structs by value and `__grid_constant__`
    /// parameters) is checked by its size only: its bits are passed as
    /// they are, so any parameter type of that size fits (a `f64`, a `u64`
    /// or a pointer for an 8-byte one).
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchKernel`]; [`Error::BadKernelArgs`] when the PTX entry
    /// and `S` disagree; driver errors.
    pub fn kernel<S: Signature>(&self, name: &str) -> Result<Kernel<S>> {
        if !self.ptx.entries.iter().any(|e| e.name == name) {
            return Err(Error::NoSuchKernel(name.to_owned()));
        }
        let name = intern(name);
        self.ptx
            .entry(name, S::PARAMS)
            .and_then(|e| e.check_c(S::C_PARAMS))
            .map_err(|problem| Error::BadKernelArgs {
                kernel: name,
                problem,
            })?;
        Ok(Kernel {
            name,
            rt: self.rt.clone(),
            handle: self.rt.driver().function(self.ptx.handle, name)?,
            host: None,
            _sig: std::marker::PhantomData,
        })
    }

    /// Whether the kernels' parameter lists are known, so that
    /// [`LoadedModule::kernel`] checks signatures: PTX, CUDA C that NVRTC
    /// compiled, or CUDA C whose parameters are all pointers and plain
    /// numbers (what the host backend reads without NVRTC).
    pub fn is_checked(&self) -> bool {
        self.ptx.entries.iter().all(|e| e.params.is_some())
    }

    /// Whether NVRTC compiled this module's source on this machine (false
    /// for PTX and for CUDA C the host backend read without NVRTC).
    pub fn is_compiled(&self) -> bool {
        self.ptx.nvrtc
    }

    /// The names of the module's kernels.
    pub fn kernel_names(&self) -> Vec<&str> {
        self.ptx.entries.iter().map(|e| e.name.as_str()).collect()
    }

    /// Whether `self` and `other` are the same loaded module: one load of
    /// one source (and options) into one runtime, as the cache hands it
    /// out again.
    pub fn same(&self, other: &LoadedModule) -> bool {
        self.rt.same(&other.rt) && Arc::ptr_eq(&self.ptx, &other.ptx)
    }
}

impl Runtime {
    /// Loads PTX text (an owned string: nothing is leaked). The text is
    /// checked first, on every backend, as CUDA would refuse it: a
    /// `.version` and a `.target` directive, and well-formed entries.
    /// Loading the same text again returns the loaded module.
    ///
    /// # Errors
    ///
    /// [`Error::BadPtx`] saying what is wrong; driver errors.
    pub fn load_ptx(&self, ptx: impl Into<String>) -> Result<LoadedModule> {
        let ptx: String = ptx.into();
        let key = format!("ptx\0{ptx}");
        let loaded = self
            .modules()
            .load_text(&key, || Modules::load_checked_ptx(self.driver(), ptx))?;
        Ok(LoadedModule {
            rt: self.clone(),
            ptx: loaded,
        })
    }

    /// Compiles CUDA C with NVRTC for this runtime's device (PTX for its
    /// compute capability, with `options` such as `"--use_fast_math"`
    /// after the runtime's) and loads it. Kernels are found by name, so
    /// declare them `extern "C"`. Compiled once per runtime, source and
    /// options.
    ///
    /// On the host backend the kernels' host implementations run: the
    /// source is compiled (and so checked) when NVRTC is installed;
    /// without it the source is not checked: the names of its `extern "C"
    /// __global__` functions are read, with their parameter lists where
    /// every parameter is a pointer (`T*`, `T name[]`) or a plain number,
    /// which signatures are then checked against
    /// ([`LoadedModule::is_checked`]); macros are not expanded. A
    /// `__grid_constant__` parameter counts as untyped bytes of its size
    /// there, as NVRTC's PTX for it is (see [`LoadedModule::kernel`]): any
    /// parameter type of its size fits it, on both paths.
    ///
    /// # Errors
    ///
    /// [`Error::NvrtcUnavailable`] on CUDA without NVRTC;
    /// [`Error::Compile`] with NVRTC's log; [`Error::BadPtx`]; driver
    /// errors.
    pub fn compile_cuda(&self, src: &str, options: &[&str]) -> Result<LoadedModule> {
        let key = format!("cuda\0{}\0{src}", options.join("\0"));
        let loaded = self.modules().load_text(&key, || {
            let nvrtc = nvrtc_available();
            match (self.backend(), nvrtc) {
                (crate::BackendKind::Host, Err(_)) => Ok(LoadedPtx {
                    handle: 0,
                    entries: global_functions(src)?,
                    nvrtc: false,
                }),
                (_, Err(why)) => Err(Error::NvrtcUnavailable(why)),
                (_, Ok(())) => {
                    let arch = match self.driver().compute_capability() {
                        Some((major, minor)) => format!("compute_{major}{minor}"),
                        // What NVRTC of CUDA 12 and 13 both target.
                        None => "compute_75".to_owned(),
                    };
                    let ptx = compile(src, &arch, options)?;
                    let mut loaded = Modules::load_checked_ptx(self.driver(), ptx)?;
                    // The source's declarations, for the signatures' check
                    // (NVRTC compiled it: read where the reader can).
                    let declared = global_functions(src).unwrap_or_default();
                    for e in &mut loaded.entries {
                        e.c = declared
                            .iter()
                            .find(|d| d.name == e.name)
                            .and_then(|d| d.c.clone());
                    }
                    Ok(LoadedPtx {
                        nvrtc: true,
                        ..loaded
                    })
                }
            }
        })?;
        Ok(LoadedModule {
            rt: self.clone(),
            ptx: loaded,
        })
    }
}

/// Whether NVRTC can be loaded (`Err` says why not). Asked once per
/// process: a search of the library path, costly next to reading a source.
fn nvrtc_available() -> std::result::Result<(), String> {
    static PRESENT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // SAFETY: loading the library runs its initialisers, as cudarc's own
    // loader would; nothing is called through it here.
    if *PRESENT.get_or_init(|| unsafe { cudarc::nvrtc::sys::is_culib_present() }) {
        Ok(())
    } else {
        let names = cudarc::get_lib_name_candidates("nvrtc");
        Err(format!(
            "no NVRTC library found (searched for {})",
            names.join(", ")
        ))
    }
}

/// NVRTC: `src` to PTX for the virtual architecture `arch`.
fn compile(src: &str, arch: &str, options: &[&str]) -> Result<String> {
    if src.contains('\0') {
        return Err(Error::Compile {
            log: "the source holds a NUL byte".to_owned(),
        });
    }
    let mut opts = vec![format!("--gpu-architecture={arch}")];
    opts.extend(options.iter().map(|o| o.to_string()));
    let compiled = cudarc::nvrtc::compile_ptx_with_opts(
        src,
        cudarc::nvrtc::CompileOptions {
            options: opts,
            ..Default::default()
        },
    );
    match compiled {
        Ok(ptx) => Ok(ptx.to_src()),
        Err(cudarc::nvrtc::CompileError::CompileError { log, .. }) => Err(Error::Compile {
            log: log.to_string_lossy().into_owned(),
        }),
        Err(e) => Err(Error::Compile {
            log: format!("{e:?}"),
        }),
    }
}

/// The `extern "C" __global__` functions of a CUDA C source, by name, with
/// their parameters where [`c_params`] can read them: what the host
/// backend knows of a source it cannot compile. Comments, the contents of
/// string and character literals and preprocessor lines are skipped (macros
/// are not expanded); a `__global__` function counts when `extern "C"`
/// stands in its declaration or around it in an `extern "C" { ... }` block
/// (other names are mangled, and CUDA would not find them), and not when it
/// is a template (which cannot have C linkage). A kernel declared and then
/// defined is listed once.
fn global_functions(src: &str) -> Result<Vec<Entry>> {
    let code = c_code(src);
    let blocks = extern_c_blocks(&code);
    let mut out: Vec<Entry> = Vec::new();
    let mut from = 0;
    while let Some(at) = find_ident(&code, from, "__global__") {
        from = at + "__global__".len();
        let decl_start = code[..at].rfind([';', '}', '{']).map_or(0, |b| b + 1);
        let head = &code[decl_start..at];
        let extern_c = has_extern_c(head) || blocks.iter().any(|r| r.contains(&at));
        let template = find_ident(head, 0, "template").is_some();
        let Some((name, list, end)) = declarator(&code[from..]) else {
            break;
        };
        from += end;
        if extern_c && !template && !out.iter().any(|e| e.name == name) {
            out.push(Entry {
                name: name.to_owned(),
                params: c_params(list),
                c: c_decls(list),
            });
        }
    }
    Ok(out)
}

/// `src` as [`global_functions`] reads it: without comments (each a
/// space), with the contents of every literal but `"C"` blanked, and
/// without preprocessor lines (with their `\` continuations).
fn c_code(src: &str) -> String {
    let code = crate::kernel::ptx::strip_comments(src);
    let mut out = String::with_capacity(code.len());
    let mut in_directive = false;
    let mut line_start = true;
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        if in_directive {
            match c {
                '\\' if chars.peek() == Some(&'\n') => {
                    chars.next();
                }
                '\n' => {
                    in_directive = false;
                    line_start = true;
                    out.push('\n');
                }
                _ => {}
            }
            continue;
        }
        match c {
            '#' if line_start => in_directive = true,
            '"' | '\'' => {
                let mut body = String::new();
                let mut closed = false;
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => {
                            body.push(' ');
                            if chars.next_if(|&e| e != '\n').is_some() {
                                body.push(' ');
                            }
                        }
                        '\n' => {
                            out.push(c);
                            out.push_str(&body);
                            out.push('\n');
                            body.clear();
                            line_start = true;
                            break;
                        }
                        d if d == c => {
                            closed = true;
                            break;
                        }
                        _ => body.push(if body.is_empty() && d == 'C' {
                            'C'
                        } else {
                            ' '
                        }),
                    }
                }
                if closed {
                    out.push(c);
                    // `"C"` stays (linkage); every other literal is blank.
                    if c == '"' && body == "C" {
                        out.push('C');
                    } else {
                        out.extend(std::iter::repeat_n(' ', body.chars().count()));
                    }
                    out.push(c);
                    line_start = false;
                }
            }
            '\n' => {
                line_start = true;
                out.push(c);
            }
            c if c.is_whitespace() => out.push(c),
            c => {
                line_start = false;
                out.push(c);
            }
        }
    }
    out
}

/// Whether `c` may stand in a C identifier.
fn ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

/// The index of the identifier `word` in `s` at or after `from`, as a whole
/// word.
fn find_ident(s: &str, from: usize, word: &str) -> Option<usize> {
    let mut from = from;
    while let Some(i) = s.get(from..)?.find(word) {
        let at = from + i;
        let end = at + word.len();
        let before = s[..at].chars().next_back().is_none_or(|c| !ident_char(c));
        let after = s[end..].chars().next().is_none_or(|c| !ident_char(c));
        if before && after {
            return Some(at);
        }
        from = end;
    }
    None
}

/// Whether `s` holds `extern "C"` (any spacing).
fn has_extern_c(s: &str) -> bool {
    extern_c_ends(s).next().is_some()
}

/// The indices just past each `extern "C"` (any spacing) in `s`.
fn extern_c_ends(s: &str) -> impl Iterator<Item = usize> + '_ {
    let mut from = 0;
    std::iter::from_fn(move || {
        while let Some(at) = find_ident(s, from, "extern") {
            from = at + "extern".len();
            let rest = &s[from..];
            let lit = rest.trim_start();
            if lit.starts_with("\"C\"") {
                from += rest.len() - lit.len() + 3;
                return Some(from);
            }
        }
        None
    })
}

/// Attribute-like words that take a parenthesised argument and may stand
/// between `__global__` and a kernel's name.
const ATTRIBUTES: &[&str] = &[
    "__launch_bounds__",
    "__attribute__",
    "__declspec",
    "__align__",
    "alignas",
    "__maxnreg__",
    "__cluster_dims__",
];

/// After `__global__`: the kernel's name, its parameter list (inside the
/// parentheses) and the index past the list's `)`. Attributes with
/// arguments (`__launch_bounds__(256)`, `__attribute__((...))`, `[[...]]`)
/// are skipped; `None` when no parameter list follows or it is not closed.
fn declarator(rest: &str) -> Option<(&str, &str, usize)> {
    let mut i = 0;
    let mut name = "";
    while i < rest.len() {
        let tail = &rest[i..];
        let c = tail.chars().next()?;
        if ident_char(c) {
            let len = tail.find(|c: char| !ident_char(c)).unwrap_or(tail.len());
            name = &tail[..len];
            i += len;
        } else if tail.starts_with("[[") {
            i += balanced(tail, '[', ']')?;
        } else if c == '(' {
            let len = balanced(tail, '(', ')')?;
            if ATTRIBUTES.contains(&name) {
                name = "";
                i += len;
                continue;
            }
            if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
                return None;
            }
            return Some((name, &tail[1..len - 1], i + len));
        } else if matches!(c, ';' | '{' | '}' | '=') {
            return None;
        } else {
            i += c.len_utf8();
        }
    }
    None
}

/// The length of the group `s` opens with `open`, through its matching
/// `close` (nesting counted); `None` if it is not closed.
fn balanced(s: &str, open: char, close: char) -> Option<usize> {
    let mut depth = 0usize;
    for (k, c) in s.char_indices() {
        if c == open {
            depth += 1;
        } else if c == close {
            depth = depth.checked_sub(1)?;
            if depth == 0 {
                return Some(k + c.len_utf8());
            }
        }
    }
    None
}

/// `s` split at its top-level `sep`s (outside `()`, `[]`, `{}` and `<>`).
fn split_top(s: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut angle, mut start) = (0usize, 0usize, 0);
    for (k, c) in s.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            '<' => angle += 1,
            '>' => angle = angle.saturating_sub(1),
            c if c == sep && depth == 0 && angle == 0 => {
                out.push(&s[start..k]);
                start = k + c.len_utf8();
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// Words that qualify a parameter and do not change how it is passed.
const QUALIFIERS: &[&str] = &[
    "const",
    "volatile",
    "__restrict__",
    "__restrict",
    "restrict",
    "__grid_constant__",
    "register",
];

/// The parameters of a C parameter list, as PTX would pass them, when every
/// type is a pointer or a plain number (`None` when one is not: a struct, a
/// template, a typedef this does not know, a reference). A pointer is a
/// declarator with `*` or an array one (`T name[]`, `T name[N]`: a pointer
/// in a parameter list); qualifiers (`const`, `volatile`, `__restrict__`,
/// `restrict`), attributes and default arguments do not count; a parameter
/// may be unnamed. A `__grid_constant__` parameter is untyped bytes of its
/// size ([`PtxParam::bits`]): NVRTC passes one by value in the parameter
/// space, as untyped bytes (an H200's NVRTC gave an 8-byte non-float for a
/// `double`: `.param .align 8 .b8 p[8]` or a `.b64`), which the PTX check
/// takes by size only.
/// Were NVRTC to give a typed `.param .f64` instead, size only is still
/// the lenient verdict: it refuses nothing the compiled module's check
/// takes, so the two paths never disagree on a launch that CUDA takes.
fn c_params(list: &str) -> Option<Vec<PtxParam>> {
    let trimmed = list.trim();
    if trimmed.is_empty() || trimmed == "void" {
        return Some(Vec::new());
    }
    split_top(list, ',').into_iter().map(c_param).collect()
}

/// The parameters of a C parameter list as declared ([`CDecl`]), when
/// every one can be read (as [`c_params`]); a pointee or scalar of a type
/// the reader does not know has no type.
fn c_decls(list: &str) -> Option<Vec<CDecl>> {
    let trimmed = list.trim();
    if trimmed.is_empty() || trimmed == "void" {
        return Some(Vec::new());
    }
    split_top(list, ',')
        .into_iter()
        .map(|p| {
            let t = tokens(p)?;
            let words: Vec<&str> = t.words.iter().map(String::as_str).collect();
            let pointee_is_pointer = t.stars > 1;
            let ty = type_words(&words).and_then(scalar_type).and_then(|p| {
                if pointee_is_pointer {
                    return None;
                }
                let kind = match p.kind {
                    ParamKind::Int => CKind::Int,
                    ParamKind::Float => CKind::Float,
                    ParamKind::Bits => return None,
                };
                Some((p.bytes, kind))
            });
            Some(CDecl {
                pointer: t.pointer,
                to_const: t.to_const,
                ty,
            })
        })
        .collect()
}

/// A parameter's declaration, read: whether it is a pointer (`*`, or an
/// array declarator), whether what it points to is const (`const` between
/// the last `*` but one and the last: `const T*`, `T const*`, `T* const*`;
/// before an array declarator: `const T p[]`), whether it is
/// `__grid_constant__`, and its words but the qualifiers (type words,
/// then maybe its name).
struct Tokens {
    pointer: bool,
    to_const: bool,
    /// The `*`s of the declarator (a pointer to pointers has 2: its
    /// pointee is a pointer, not the type's words).
    stars: usize,
    grid_constant: bool,
    words: Vec<String>,
}

/// [`Tokens`] of one parameter; `None` for one the reader cannot read (a
/// reference, a template argument list that is not closed, ...).
fn tokens(p: &str) -> Option<Tokens> {
    // No default argument; no attributes.
    let p = split_top(p, '=').into_iter().next().unwrap_or_default();
    let p = without_attributes(p)?;
    let (mut pointer, mut to_const, mut words) = (false, false, Vec::new());
    // `const` since the last `*` (or the start): what the next `*` points
    // to is const (`const float*`, `float* const*`; not `float* const`).
    let (mut stars, mut const_here) = (0usize, false);
    let (mut angle, mut square) = (0usize, 0usize);
    let mut i = 0;
    while i < p.len() {
        let tail = &p[i..];
        let c = tail.chars().next()?;
        if ident_char(c) {
            let len = tail.find(|c: char| !ident_char(c)).unwrap_or(tail.len());
            // Template arguments and array bounds name no part of the type.
            if angle == 0 && square == 0 {
                if c.is_ascii_digit() {
                    return None;
                }
                let word = &tail[..len];
                if word == "const" {
                    const_here = true;
                }
                words.push(word);
            }
            i += len;
            continue;
        }
        match c {
            '<' => angle += 1,
            '>' => angle = angle.checked_sub(1)?,
            // A template argument list: a class type.
            _ if angle > 0 => {}
            '[' => {
                if stars == 0 && !pointer {
                    // `const T p[]`: an array declarator is a pointer to
                    // its elements.
                    to_const = const_here;
                }
                pointer = true;
                square += 1;
            }
            ']' => square = square.checked_sub(1)?,
            _ if square > 0 => {}
            '*' => {
                pointer = true;
                stars += 1;
                to_const = const_here;
                const_here = false;
            }
            '&' => return None,
            ':' if tail.starts_with("::") => {
                // `std::size_t`, `::size_t`: the last part names the type.
                if words.last() == Some(&"std") {
                    words.pop();
                }
                i += 2;
                continue;
            }
            c if c.is_whitespace() || matches!(c, '(' | ')') => {}
            _ => return None,
        }
        i += c.len_utf8();
    }
    if angle > 0 || square > 0 {
        return None;
    }
    let grid_constant = words.contains(&"__grid_constant__");
    words.retain(|w| !QUALIFIERS.contains(w));
    Some(Tokens {
        pointer,
        to_const,
        stars,
        grid_constant,
        words: words.into_iter().map(str::to_owned).collect(),
    })
}

/// The type's words of a declaration's `words`: every word, or every word
/// but the last (the parameter's name) when the last is not a type word;
/// `None` for no words.
fn type_words<'w>(words: &'w [&'w str]) -> Option<&'w [&'w str]> {
    match words.split_last() {
        None => None,
        Some((last, init)) if !init.is_empty() && !is_type_word(last) => Some(init),
        Some(_) => Some(words),
    }
}

/// One parameter of [`c_params`].
fn c_param(p: &str) -> Option<PtxParam> {
    let t = tokens(p)?;
    let untyped = |p: PtxParam| {
        if t.grid_constant {
            PtxParam::bits(p.bytes)
        } else {
            p
        }
    };
    if t.pointer {
        // A pointer to anything, even an unknown type.
        return (!t.words.is_empty()).then_some(untyped(PtxParam::int(8)));
    }
    let words: Vec<&str> = t.words.iter().map(String::as_str).collect();
    scalar_type(type_words(&words)?).map(untyped)
}

/// `p` without `__attribute__((...))`, `__align__(...)`, `alignas(...)` and
/// `[[...]]`; `None` if one is not closed.
fn without_attributes(p: &str) -> Option<String> {
    let mut out = String::with_capacity(p.len());
    let mut i = 0;
    while i < p.len() {
        let tail = &p[i..];
        if tail.starts_with("[[") {
            i += balanced(tail, '[', ']')?;
            out.push(' ');
            continue;
        }
        let c = tail.chars().next()?;
        if ident_char(c) {
            let len = tail.find(|c: char| !ident_char(c)).unwrap_or(tail.len());
            let word = &tail[..len];
            let after = &tail[len..];
            let args = after.trim_start();
            if ATTRIBUTES.contains(&word) && args.starts_with('(') {
                i += len + (after.len() - args.len()) + balanced(args, '(', ')')?;
                out.push(' ');
                continue;
            }
            out.push_str(word);
            i += len;
            continue;
        }
        out.push(c);
        i += c.len_utf8();
    }
    Some(out)
}

/// Whether `w` is a word of a scalar type (a keyword or a typedef
/// [`scalar_type`] knows).
fn is_type_word(w: &str) -> bool {
    matches!(
        w,
        "signed" | "unsigned" | "short" | "long" | "int" | "char" | "bool" | "float" | "double"
    ) || typedef(w).is_some()
}

/// The size of a typedef of an integer type this knows.
fn typedef(w: &str) -> Option<usize> {
    Some(match w {
        "int8_t" | "uint8_t" => 1,
        "int16_t" | "uint16_t" => 2,
        "int32_t" | "uint32_t" => 4,
        "int64_t" | "uint64_t" | "size_t" | "ptrdiff_t" | "intptr_t" | "uintptr_t" => 8,
        _ => return None,
    })
}

/// The size and kind of the scalar type `words` spell (in any order, as C
/// allows: `long unsigned long`), or `None` (not a scalar type this knows,
/// or not a type: `short long`, `signed unsigned`, `float int`).
fn scalar_type(words: &[&str]) -> Option<PtxParam> {
    let int = |bytes| Some(PtxParam::int(bytes));
    match words {
        ["float"] => return Some(PtxParam::float(4)),
        ["double"] => return Some(PtxParam::float(8)),
        ["bool"] => return int(1),
        [w] if typedef(w).is_some() => return int(typedef(w)?),
        _ => {}
    }
    let count = |k: &str| words.iter().filter(|w| **w == k).count();
    let (signed, unsigned) = (count("signed"), count("unsigned"));
    let (short, long, int_, char_) = (count("short"), count("long"), count("int"), count("char"));
    if signed + unsigned + short + long + int_ + char_ != words.len()
        || signed + unsigned > 1
        || int_ > 1
        || short > 1
        || long > 2
        || char_ > 1
        || (short > 0 && long > 0)
        || (char_ > 0 && short + long + int_ > 0)
    {
        return None;
    }
    match (char_, short, long) {
        (1, _, _) => int(1),
        (_, 1, _) => int(2),
        (_, _, 2) => int(8),
        (_, _, 1) => int(std::mem::size_of::<std::ffi::c_long>()),
        _ => int(4),
    }
}

/// The byte ranges of `extern "C" { ... }` blocks in `code` (one not closed
/// runs to the end).
fn extern_c_blocks(code: &str) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    for after in extern_c_ends(code) {
        let rest = &code[after..];
        let body = rest.trim_start();
        if !body.starts_with('{') {
            continue;
        }
        let open = after + (rest.len() - body.len());
        let end = balanced(&code[open..], '{', '}').map_or(code.len(), |len| open + len);
        out.push(open..end);
    }
    out
}

/// `name` as a `&'static str`, for errors and timelines: kept once per
/// distinct kernel name for the life of the process.
fn intern(name: &str) -> &'static str {
    static NAMES: std::sync::OnceLock<parking_lot::Mutex<std::collections::HashSet<&'static str>>> =
        std::sync::OnceLock::new();
    let mut names = NAMES.get_or_init(Default::default).lock();
    match names.get(name) {
        Some(n) => n,
        None => {
            let n: &'static str = Box::leak(name.to_owned().into_boxed_str());
            names.insert(n);
            n
        }
    }
}

#[cfg(test)]
mod test;
