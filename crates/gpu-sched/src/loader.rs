//! Users' modules (§10): PTX from a string, or CUDA C compiled at run time
//! by NVRTC for the runtime's device, loaded once per runtime and source
//! (the built-in modules take the same path), and their kernels looked up
//! by name as typed [`Kernel`]s checked against the PTX.

use crate::error::{Error, Result};
use crate::ptx::{Entry, LoadedPtx, PtxParam};
use crate::runtime::Runtime;
use crate::typed::{Kernel, Signature};
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
    /// are 8-byte integers, `f32` a 4-byte float, ...).
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
        let loaded = self.load_text(&key, || self.load_checked_ptx(ptx))?;
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
    /// without it only the names of its `extern "C" __global__` functions
    /// are read, and a signature is not checked against the source.
    ///
    /// # Errors
    ///
    /// [`Error::NvrtcUnavailable`] on CUDA without NVRTC;
    /// [`Error::Compile`] with NVRTC's log; [`Error::BadPtx`]; driver
    /// errors.
    pub fn compile_cuda(&self, src: &str, options: &[&str]) -> Result<LoadedModule> {
        let key = format!("cuda\0{}\0{src}", options.join("\0"));
        let loaded = self.load_text(&key, || {
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
                    let loaded = self.load_checked_ptx(ptx)?;
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

/// Whether NVRTC can be loaded (`Err` says why not).
fn nvrtc_available() -> std::result::Result<(), String> {
    // SAFETY: loading the library runs its initialisers, as cudarc's own
    // loader would; nothing is called through it here.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
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

/// The `extern "C" __global__` functions of a CUDA C source, by name (their
/// parameters unknown): what the host backend knows of a source it cannot
/// compile. Comments are skipped; a `__global__` function counts when
/// `extern "C"` stands in its declaration or around it in an `extern "C"
/// { ... }` block (other names are mangled, and CUDA would not find them).
fn global_functions(src: &str) -> Result<Vec<Entry>> {
    let code = crate::ptx::strip_comments(src);
    let blocks = extern_c_blocks(&code);
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = code[from..].find("__global__") {
        let at = from + i;
        from = at + "__global__".len();
        let decl_start = code[..at].rfind([';', '}', '{']).map_or(0, |b| b + 1);
        let extern_c =
            code[decl_start..at].contains("extern \"C\"") || blocks.iter().any(|r| r.contains(&at));
        let rest = &code[from..];
        let Some(mut open) = rest.find('(') else {
            break;
        };
        let mut rest = rest;
        let mut name = last_word(&rest[..open]);
        if name == "__launch_bounds__" {
            // `__global__ void __launch_bounds__(256) name(...)`
            let Some(close) = rest[open..].find(')') else {
                break;
            };
            rest = &rest[open + close + 1..];
            let Some(o) = rest.find('(') else { break };
            open = o;
            name = last_word(&rest[..open]);
        }
        if extern_c && !name.is_empty() {
            let list = rest[open + 1..].split(')').next().unwrap_or_default();
            out.push(Entry {
                name: name.to_owned(),
                params: c_params(list),
            });
        }
    }
    Ok(out)
}

/// The parameters of a C parameter list, as PTX would pass them, when every
/// type is a pointer or a plain number (`None` when one is not: a struct, a
/// template, a typedef this does not know).
fn c_params(list: &str) -> Option<Vec<PtxParam>> {
    let list = list.trim();
    if list.is_empty() || list == "void" {
        return Some(Vec::new());
    }
    list.split(',')
        .map(|p| {
            if p.contains('*') {
                return Some(PtxParam {
                    bytes: 8,
                    float: false,
                });
            }
            // The type: every word but the last (the parameter's name).
            let words: Vec<&str> = p
                .split_whitespace()
                .filter(|w| !matches!(*w, "const" | "volatile" | "__restrict__" | "signed"))
                .collect();
            let ty = words[..words.len().saturating_sub(1)].join(" ");
            let (bytes, float) = match ty.as_str() {
                "float" => (4, true),
                "double" => (8, true),
                "int" | "unsigned" | "unsigned int" | "int32_t" | "uint32_t" => (4, false),
                "long long" | "unsigned long long" | "long long int" | "size_t" | "int64_t"
                | "uint64_t" | "long" | "unsigned long" => (8, false),
                "short" | "unsigned short" | "int16_t" | "uint16_t" => (2, false),
                "char" | "unsigned char" | "bool" | "int8_t" | "uint8_t" => (1, false),
                _ => return None,
            };
            Some(PtxParam { bytes, float })
        })
        .collect()
}

/// The byte ranges of `extern "C" { ... }` blocks in `code`.
fn extern_c_blocks(code: &str) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = code[from..].find("extern \"C\"") {
        let after = from + i + "extern \"C\"".len();
        from = after;
        if !code[after..].trim_start().starts_with('{') {
            continue;
        }
        let open = after + code[after..].find('{').unwrap_or(0);
        let mut depth = 0usize;
        for (k, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        out.push(open..open + k);
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// The last identifier in `s`.
fn last_word(s: &str) -> &str {
    s.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .rfind(|w| !w.is_empty())
        .unwrap_or_default()
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
mod test {
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
        let src =
            "extern \"C\" {\n__global__ void a(int n) { if (n) {} }\n}\n__global__ void b() {}";
        assert_eq!(names(src), ["a"]);
        let e = global_functions(
            "extern \"C\" __global__ void k(float* __restrict__ y, const float* x, float a, unsigned long long n, int m) {}",
        )
        .unwrap();
        let p = |bytes, float| PtxParam { bytes, float };
        let want = vec![
            p(8, false),
            p(8, false),
            p(4, true),
            p(8, false),
            p(4, false),
        ];
        assert_eq!(e[0].params, Some(want));
        let e = global_functions("extern \"C\" __global__ void k(MyStruct s) {}").unwrap();
        assert_eq!(e[0].params, None, "an unknown type: not checked");
    }

    #[test]
    fn names_are_interned_once() {
        let a = intern(&String::from("k_interned"));
        let b = intern("k_interned");
        assert!(std::ptr::eq(a, b));
    }
}
