"""Compile one CUDA C file to PTX with NVRTC, loaded from a pip wheel.

Run by `cargo xtask ptx` with the virtual environment's python:

    python nvrtc_ptx.py LIBDIR SOURCE OUTPUT OPTION...

LIBDIR holds libnvrtc.so.12 and libnvrtc-builtins.so.12.* (the wheel
`nvidia-cuda-nvrtc-cu12`). Every `.cuh` beside SOURCE is handed to NVRTC in
memory under its bare file name, so no path of this machine reaches the
compiler or the PTX. Exits non-zero with NVRTC's log on failure.
"""

import ctypes
import glob
import os
import sys


def main():
    libdir, source, output = sys.argv[1:4]
    options = sys.argv[4:]

    # Load the builtins first so that libnvrtc finds them by soname without
    # LD_LIBRARY_PATH.
    for builtins in sorted(glob.glob(os.path.join(libdir, "libnvrtc-builtins.so*"))):
        ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
    nvrtc = ctypes.CDLL(os.path.join(libdir, "libnvrtc.so.12"))
    nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p

    def check(code, what):
        if code != 0:
            sys.exit("nvrtc: %s failed: %s" % (what, nvrtc.nvrtcGetErrorString(code).decode()))

    def cstrings(items):
        array = (ctypes.c_char_p * max(len(items), 1))()
        for i, item in enumerate(items):
            array[i] = item.encode()
        return array

    with open(source, "r", encoding="utf-8") as f:
        src = f.read()
    header_paths = sorted(glob.glob(os.path.join(os.path.dirname(source) or ".", "*.cuh")))
    header_names = [os.path.basename(p) for p in header_paths]
    header_texts = []
    for path in header_paths:
        with open(path, "r", encoding="utf-8") as f:
            header_texts.append(f.read())

    prog = ctypes.c_void_p()
    check(
        nvrtc.nvrtcCreateProgram(
            ctypes.byref(prog),
            src.encode(),
            os.path.basename(source).encode(),
            len(header_paths),
            cstrings(header_texts),
            cstrings(header_names),
        ),
        "nvrtcCreateProgram",
    )
    code = nvrtc.nvrtcCompileProgram(prog, len(options), cstrings(options))
    log_size = ctypes.c_size_t()
    check(nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(log_size)), "nvrtcGetProgramLogSize")
    log = ctypes.create_string_buffer(log_size.value)
    check(nvrtc.nvrtcGetProgramLog(prog, log), "nvrtcGetProgramLog")
    text = log.value.decode(errors="replace").strip()
    if code != 0:
        sys.exit("nvrtc: compiling %s failed:\n%s" % (source, text))
    if text:
        # Warnings are errors: the committed PTX must come from a clean build.
        sys.exit("nvrtc: compiling %s printed:\n%s" % (source, text))

    ptx_size = ctypes.c_size_t()
    check(nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(ptx_size)), "nvrtcGetPTXSize")
    ptx = ctypes.create_string_buffer(ptx_size.value)
    check(nvrtc.nvrtcGetPTX(prog, ptx), "nvrtcGetPTX")
    check(nvrtc.nvrtcDestroyProgram(ctypes.byref(prog)), "nvrtcDestroyProgram")

    text = ptx.value.decode()
    if not text.endswith("\n"):
        text += "\n"
    with open(output, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


if __name__ == "__main__":
    main()
