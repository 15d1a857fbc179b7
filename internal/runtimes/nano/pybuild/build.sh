#!/usr/bin/env bash
# Build an optimized CPython 3.11 for wasm32-wasi (WASI preview 1) from Debian's own sources.
#
# Usage: build.sh OUTDIR
#
# Result (all in OUTDIR):
#   python.wasm     the interpreter, a WASI command module compiled with prefix /usr/local;
#                   zlib and sqlite3 (":memory:" databases only) are built in
#   python311.zip   the standard library as precompiled .pyc files, plus time zone data
#                   (package tzdata); no test suites, idlelib, tkinter, ensurepip, lib2to3,
#                   distutils, venv, multiprocessing
#   BUILDINFO       source versions, flags and hashes of the two files
#   .stamp          hash of this script; written last, so its presence marks a complete build
#
# The guest must see python311.zip read-only at /usr/local/lib/python311.zip and should get
# the environment variable PYTHONHOME=/usr/local (without it CPython prints two
# "Could not find platform ... libraries" warnings at every start). It needs nothing else on
# disk.
#
# Runs as root on Debian bookworm: installs its tools with apt and fetches the sources with
# `apt-get source` (it adds a deb-src entry for bookworm). A second run with the same script
# prints "cached" and exits 0. Work files live in OUTDIR/.build (removed after success, kept
# after a failure for inspection).
set -euo pipefail

if [[ $# -ne 1 || -z "$1" ]]; then
	echo "usage: $0 OUTDIR" >&2
	exit 2
fi

SELF="$(readlink -f "${BASH_SOURCE[0]}")"
mkdir -p "$1"
OUTDIR="$(readlink -f "$1")"
HASH="$(sha256sum "$SELF" | cut -d' ' -f1)"
STAMP="$OUTDIR/.stamp"
STDLIB_ZIP=python311.zip

if [[ -f "$OUTDIR/python.wasm" && -f "$OUTDIR/$STDLIB_ZIP" && -f "$STAMP" && "$(cat "$STAMP")" == "$HASH" ]]; then
	echo "cached"
	exit 0
fi

# The variant, picked by measurement under wazero v1.12 (compiler engine) over the compute
# benchmark set in internal/bench/compute (docs/RATIONALE.md, "Nano compute"): -O2 with ThinLTO,
# pymalloc (configure turns it off for WASI; wasi-libc's dlmalloc served every small object) and
# the sum() patch below; pymalloc + ThinLTO took ~19% off the CPU time of the snippets.
# -O3, full LTO, binaryen's wasm-opt -O3/-O4 after LTO, -msimd128, -mbulk-memory and -mtail-call
# each moved it by less than the noise or made it worse.
OPT_FLAGS="-O2 -flto=thin"

WORK="$OUTDIR/.build"
LOGS="$WORK/logs"
STEP="start"
LOG=""
START_TIME=$SECONDS

on_error() {
	local rc=$?
	echo >&2
	echo "build.sh: FAILED in step '$STEP' (exit $rc)" >&2
	if [[ -n "$LOG" && -f "$LOG" ]]; then
		echo "build.sh: last lines of $LOG:" >&2
		tail -n 25 "$LOG" >&2 || true
		if grep -qiE 'error:|\*\*\*|not found|failed' "$LOG"; then
			echo "build.sh: error lines in $LOG:" >&2
			grep -iE 'error:|\*\*\*|not found|failed' "$LOG" | tail -n 10 >&2 || true
		fi
	fi
	echo "build.sh: work files kept in $WORK; OUTDIR holds no complete build (no .stamp)" >&2
	exit "$rc"
}
trap on_error ERR

# step NAME: announce a step; its output goes to $LOGS/NAME.log
step() {
	STEP="$1"
	LOG="$LOGS/$1.log"
	echo "==> [$((SECONDS - START_TIME))s] $1"
}

# An old stamp must not vouch for whatever this run leaves behind.
rm -f "$STAMP"
rm -rf "$WORK"
mkdir -p "$LOGS"

export DEBIAN_FRONTEND=noninteractive
export LC_ALL=C.UTF-8

# ---------------------------------------------------------------- tools
step apt-install
if [[ $EUID -ne 0 ]]; then
	echo "build.sh must run as root (it installs packages with apt)" >"$LOG"
	false
fi
SRC_LIST=/etc/apt/sources.list.d/agentbox-pybuild-src.sources
cat >"$SRC_LIST" <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
{
	apt-get update -q
	apt-get install -y -q --no-install-recommends \
		clang-16 lld-16 llvm-16 wasi-libc libclang-rt-16-dev-wasm32 tzdata \
		python3.11 dpkg-dev make patch pkg-config xz-utils bzip2 tcl
} >"$LOG" 2>&1
BUILD_PY=/usr/bin/python3.11

# ---------------------------------------------------------------- sources
step apt-source
mkdir -p "$WORK/src"
(
	cd "$WORK/src"
	for pkg in python3.11 zlib sqlite3; do
		# bookworm first: the security suite's source may be missing on some mirrors
		apt-get source -q "$pkg/bookworm" || apt-get source -q "$pkg"
	done
) >"$LOG" 2>&1
PYSRC="$(find "$WORK/src" -maxdepth 1 -type d -name 'python3.11-3.11*' | head -n1)"
ZSRC="$(find "$WORK/src" -maxdepth 1 -type d -name 'zlib-*' | head -n1)"
SQSRC="$(find "$WORK/src" -maxdepth 1 -type d -name 'sqlite3-*' | head -n1)"
[[ -d "$PYSRC" && -d "$ZSRC" && -d "$SQSRC" ]] || { echo "source trees not found in $WORK/src" >>"$LOG"; false; }
PYSRC_VERSION="$(cd "$PYSRC" && dpkg-parsechangelog -S Version)"
ZSRC_VERSION="$(cd "$ZSRC" && dpkg-parsechangelog -S Version)"
SQSRC_VERSION="$(cd "$SQSRC" && dpkg-parsechangelog -S Version)"

# ---------------------------------------------------------------- patches
# sum() keeps its running total of ints in a C long; long is 32-bit on wasm32, so sums past
# 2**31 fell back to allocating a Python int per item (10x slower than native for
# sum(range(10**6))). Use long long, as on 64-bit Linux.
step patch
patch -d "$PYSRC" -p1 --forward >"$LOG" 2>&1 <<'EOF'
--- a/Python/bltinmodule.c
+++ b/Python/bltinmodule.c
@@ -2489,7 +2489,7 @@
     */
     if (PyLong_CheckExact(result)) {
         int overflow;
-        long i_result = PyLong_AsLongAndOverflow(result, &overflow);
+        long long i_result = PyLong_AsLongLongAndOverflow(result, &overflow);
         /* If this already overflowed, don't even enter the loop. */
         if (overflow == 0) {
             Py_DECREF(result);
@@ -2501,10 +2501,10 @@
                 Py_DECREF(iter);
                 if (PyErr_Occurred())
                     return NULL;
-                return PyLong_FromLong(i_result);
+                return PyLong_FromLongLong(i_result);
             }
             if (PyLong_CheckExact(item) || PyBool_Check(item)) {
-                long b;
+                long long b;
                 overflow = 0;
                 /* Single digits are common, fast, and cannot overflow on unpacking. */
                 switch (Py_SIZE(item)) {
@@ -2512,11 +2512,11 @@
                     // Note: the continue goes to the top of the "while" loop that iterates over the elements
                     case  0: Py_DECREF(item); continue;
                     case  1: b = ((PyLongObject*)item)->ob_digit[0]; break;
-                    default: b = PyLong_AsLongAndOverflow(item, &overflow); break;
+                    default: b = PyLong_AsLongLongAndOverflow(item, &overflow); break;
                 }
                 if (overflow == 0 &&
-                    (i_result >= 0 ? (b <= LONG_MAX - i_result)
-                                   : (b >= LONG_MIN - i_result)))
+                    (i_result >= 0 ? (b <= LLONG_MAX - i_result)
+                                   : (b >= LLONG_MIN - i_result)))
                 {
                     i_result += b;
                     Py_DECREF(item);
@@ -2524,7 +2524,7 @@
                 }
             }
             /* Either overflowed or is not an int. Restore real objects and process normally */
-            result = PyLong_FromLong(i_result);
+            result = PyLong_FromLongLong(i_result);
             if (result == NULL) {
                 Py_DECREF(item);
                 Py_DECREF(iter);
EOF

# A WASI guest gets no signals, and its host cannot call into it while it computes, so the
# host stops running Python code as a SIGINT would: it stores 1 at the four addresses of this
# exported table (in the order trip_signal sets them), and the eval loop raises
# KeyboardInterrupt at its next check (a backward jump or a call). The table is data, exported
# as a global holding its address (--export below): calling a function of a command module
# before _start would run its constructors twice.
cat >>"$PYSRC/Modules/signalmodule.c" <<'EOF'

/* agentbox: where a host trips SIGINT from outside the guest. */
__attribute__((used))
volatile void *const agentbox_sigint_flags[4] = {
    &Handlers[SIGINT].tripped,
    &is_tripped,
    &_PyRuntime.ceval.signals_pending,
    &_PyRuntime._main_interpreter.ceval.eval_breaker,
};
EOF

# ---------------------------------------------------------------- sysroot
# Debian's clang looks in /usr/include for wasm32-wasi too, where configure would find the
# host's headers (zlib.h, ffi.h, ...). A private sysroot holds only wasi-libc and what we build.
step sysroot
SYSROOT="$WORK/sysroot"
mkdir -p "$SYSROOT/include" "$SYSROOT/lib/wasm32-wasi"
ln -s /usr/include/wasm32-wasi "$SYSROOT/include/wasm32-wasi"
for f in /usr/lib/wasm32-wasi/*; do ln -s "$f" "$SYSROOT/lib/wasm32-wasi/"; done
export CC="clang-16 --target=wasm32-wasi --sysroot=$SYSROOT"
export CPP="$CC -E"
export CXX="clang++-16 --target=wasm32-wasi --sysroot=$SYSROOT"
export AR=llvm-ar-16 RANLIB=llvm-ranlib-16 READELF=true
export PKG_CONFIG_PATH="" PKG_CONFIG_LIBDIR="$SYSROOT/lib/wasm32-wasi/pkgconfig" PKG_CONFIG_SYSROOT_DIR=""
echo "sysroot $SYSROOT" >"$LOG"

# ---------------------------------------------------------------- zlib
step zlib
(
	cd "$ZSRC"
	CFLAGS="$OPT_FLAGS" CHOST=wasm32-wasi ./configure --static \
		--prefix="$SYSROOT" --libdir="$SYSROOT/lib/wasm32-wasi" --includedir="$SYSROOT/include"
	make -j"$(nproc)" libz.a
	make install
) >"$LOG" 2>&1

# ---------------------------------------------------------------- sqlite3
# Debian ships SQLite's canonical sources, not the amalgamation: generate sqlite3.c with a
# native build (needs tclsh), then compile it for wasm. SQLite 3.40's unix VFS does not build
# for WASI (no fcntl locks, fchown, ...), so it is built with SQLITE_OS_OTHER and a tiny VFS
# that opens no files: ":memory:" databases work, file databases fail to open.
step sqlite3
(
	mkdir -p "$WORK/sqlite-native" && cd "$WORK/sqlite-native"
	env -u CC -u CPP -u CXX -u AR -u RANLIB -u PKG_CONFIG_LIBDIR \
		CC=clang-16 "$SQSRC/configure" --disable-tcl --disable-readline
	env -u CC -u CPP -u CXX -u AR -u RANLIB make sqlite3.c
	cat >wasi_vfs.c <<'EOF'
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <wasi/api.h>
#include "sqlite3.h"

static int xOpen(sqlite3_vfs *v, const char *n, sqlite3_file *f, int fl, int *o) { return SQLITE_CANTOPEN; }
static int xDelete(sqlite3_vfs *v, const char *n, int sync) { return SQLITE_IOERR_DELETE; }
static int xAccess(sqlite3_vfs *v, const char *n, int fl, int *out) { *out = 0; return SQLITE_OK; }
static int xFullPathname(sqlite3_vfs *v, const char *n, int nOut, char *out) {
	sqlite3_snprintf(nOut, out, "%s", n);
	return SQLITE_OK;
}
static int xRandomness(sqlite3_vfs *v, int n, char *out) {
	return __wasi_random_get((uint8_t *)out, (size_t)n) == 0 ? n : 0;
}
static int xSleep(sqlite3_vfs *v, int us) { usleep((useconds_t)us); return us; }
static int xCurrentTimeInt64(sqlite3_vfs *v, sqlite3_int64 *p) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	*p = (sqlite3_int64)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + 210866760000000LL;
	return SQLITE_OK;
}
static int xCurrentTime(sqlite3_vfs *v, double *p) {
	sqlite3_int64 t;
	xCurrentTimeInt64(v, &t);
	*p = t / 86400000.0;
	return SQLITE_OK;
}
static int xGetLastError(sqlite3_vfs *v, int n, char *s) { return 0; }

static sqlite3_vfs wasi_vfs = {
	2, 0, 512, 0, "wasi-memory", 0,
	xOpen, xDelete, xAccess, xFullPathname, 0, 0, 0, 0,
	xRandomness, xSleep, xCurrentTime, xGetLastError, xCurrentTimeInt64,
};
int sqlite3_os_init(void) { return sqlite3_vfs_register(&wasi_vfs, 1); }
int sqlite3_os_end(void) { return SQLITE_OK; }
EOF
	SQFLAGS="-DSQLITE_OS_OTHER=1 -DSQLITE_THREADSAFE=0 -DSQLITE_OMIT_LOAD_EXTENSION -DSQLITE_OMIT_WAL
		-DSQLITE_MAX_MMAP_SIZE=0 -DSQLITE_TEMP_STORE=3 -DSQLITE_ENABLE_MATH_FUNCTIONS"
	$CC $OPT_FLAGS $SQFLAGS -c sqlite3.c -o sqlite3.o
	$CC $OPT_FLAGS -I. -c wasi_vfs.c -o wasi_vfs.o
	rm -f "$SYSROOT/lib/wasm32-wasi/libsqlite3.a"
	$AR rcs "$SYSROOT/lib/wasm32-wasi/libsqlite3.a" sqlite3.o wasi_vfs.o
	cp sqlite3.h sqlite3ext.h "$SYSROOT/include/"
) >"$LOG" 2>&1

# ---------------------------------------------------------------- cpython
step cpython-configure
BUILD="$WORK/cpython"
# CPython 3.11 links WASI builds with a 512 KiB stack and lowers the recursion limit to 600
# (wasmtime's call stack). Under wazero the linear-memory stack is what runs out: at limit
# 1000, recursion through sorted(key=...) overflowed it at ~250 levels and trapped ("out of
# bounds memory access") instead of raising RecursionError. An 8 MiB stack gives the native
# limit of 1000 a wide margin; untouched stack pages cost no host memory.
RECURSION_LIMIT=1000
WASM_LDFLAGS="$OPT_FLAGS -z stack-size=8388608 -Wl,--stack-first -Wl,--initial-memory=16777216 -Wl,--export=agentbox_sigint_flags"
mkdir -p "$BUILD"
(
	cd "$BUILD"
	# clang 16 makes -Wint-conversion an error; wasi-libc's clockid_t is a pointer, which
	# timemodule.c passes to PyModule_AddIntMacro (fixed upstream in later 3.11 releases).
	# time.sleep() uses clock_nanosleep(TIMER_ABSTIME), i.e. poll_oneoff with an absolute clock
	# subscription, which wazero rejects (ENOTSUP); without clock_nanosleep CPython falls back
	# to nanosleep(), a relative wait that works.
	ac_cv_func_clock_nanosleep=no ac_cv_lib_rt_clock_nanosleep=no \
	CONFIG_SITE="$PYSRC/Tools/wasm/config.site-wasm32-wasi" \
	CFLAGS="-Wno-int-conversion -DPy_DEFAULT_RECURSION_LIMIT=$RECURSION_LIMIT" \
	OPT="-DNDEBUG $OPT_FLAGS" \
	ZLIB_CFLAGS="-I$SYSROOT/include" ZLIB_LIBS="-lz" \
	LIBSQLITE3_CFLAGS="-I$SYSROOT/include" LIBSQLITE3_LIBS="-lsqlite3" \
		"$PYSRC/configure" \
		--host=wasm32-unknown-wasi \
		--build="$("$PYSRC/config.guess")" \
		--with-build-python="$BUILD_PY" \
		--prefix=/usr/local \
		--disable-test-modules \
		--with-pymalloc
) >"$LOG" 2>&1
for mod in zlib _sqlite3; do
	grep -q "^checking for stdlib extension module $mod... yes" "$LOG" || {
		echo "configure did not enable the $mod module" >>"$LOG"
		false
	}
done

step cpython-make
{
	# deepfreeze.c holds the frozen modules' code objects and a _Py_Deepfreeze_Fini that calls
	# ~2,000 tiny finalisers; under LTO they can all be inlined into it (full LTO made it 500 KB
	# of code and wazero's compile peak at 1.7 GB), for a function that runs only at exit.
	# It is compiled without LTO.
	make -C "$BUILD" -j"$(nproc)" CFLAGS_NODIST=-fno-lto Python/deepfreeze/deepfreeze.o
	make -C "$BUILD" -j"$(nproc)" LDFLAGS_NODIST="$WASM_LDFLAGS"
} >"$LOG" 2>&1
[[ -f "$BUILD/python.wasm" ]]

# ---------------------------------------------------------------- stdlib zip
step stdlib-zip
STAGE="$WORK/stage"
mkdir -p "$STAGE"
# Bytecode is compiled by the build python (the same 3.11 from the same Debian source, so
# the same magic number). The sysconfig data of the wasm build goes in too.
PYBUILDDIR="$BUILD/$(cat "$BUILD/pybuilddir.txt")"
# The guest has no /usr/share/zoneinfo: Debian's time zone data goes in as the package
# `tzdata` (the layout of PyPI's tzdata), where zoneinfo looks after its TZPATH.
TZ_VERSION="$(dpkg-query -W -f '${Version}' tzdata)"
"$BUILD_PY" - "$PYSRC/Lib" "$PYBUILDDIR" "$BUILD/Makefile" "$STAGE/$STDLIB_ZIP" \
	/usr/share/zoneinfo "$TZ_VERSION" >"$LOG" 2>&1 <<'EOF'
import io, os, pathlib, re, sys, zipfile, importlib.util

lib, pybuilddir, makefile, out, tzdir = map(pathlib.Path, sys.argv[1:6])
tzversion = sys.argv[6]

# Extension modules that the wasm build has (built in statically).
text = makefile.read_text()
built = set()
for line in text.splitlines():
    m = re.match(r"^MODULE_(\w+)_STATE=(\w+)", line)
    if m and m.group(2) == "yes":
        built.add(m.group(1).lower())

omit = {
    # tests, IDEs, GUIs, packaging, build tools
    "test", "idlelib", "tkinter", "turtledemo", "turtle.py", "ensurepip", "venv",
    "lib2to3", "distutils", "pydoc_data", "msilib", "__phello__", "__hello__.py",
    "site-packages", "_distutils_system_mod.py",
    # other platforms
    "_aix_support.py", "_bootsubprocess.py", "_osx_support.py",
    # pure-Python twins of built-in C modules
    "_pydecimal.py", "_pyio.py",
    # cannot work without processes, a browser or a terminal
    "antigravity.py", "webbrowser.py", "multiprocessing",
    "concurrent/futures/process.py",
}
needs = {  # package or module -> C module it cannot work without
    "ctypes": "_ctypes", "curses": "_curses", "sqlite3": "_sqlite3", "ssl.py": "_ssl",
    "dbm/gnu.py": "_gdbm", "dbm/ndbm.py": "_dbm", "bz2.py": "_bz2", "lzma.py": "_lzma",
    "crypt.py": "_crypt", "readline": "readline",
}
for name, mod in needs.items():
    if mod not in built:
        omit.add(name)

def skipped(rel):
    parts = rel.split("/")
    # test suites inside packages too, e.g. unittest/test, ctypes/test, idlelib/idle_test
    if {"__pycache__", "test", "tests", "idle_test"} & set(parts[:-1]):
        return True
    return any(rel == o or rel.startswith(o + "/") for o in omit)

files = []
for p in sorted(lib.rglob("*.py")):
    rel = p.relative_to(lib).as_posix()
    if not skipped(rel):
        files.append((p, rel))
sysconfigdata = sorted(pybuilddir.glob("_sysconfigdata_*.py"))
assert len(sysconfigdata) == 1, sysconfigdata
# Debian's sysconfig looks for _sysconfigdata_{abiflags}_{multiarch} (its patch
# sysconfigdata-name.diff drops the platform part the build uses); ship both names.
files.append((sysconfigdata[0], sysconfigdata[0].name))
files.append((sysconfigdata[0], "_sysconfigdata__wasm32-wasi.py"))

# tzdata: every TZif file under tzdir. zoneinfo looks for key "Europe/Paris" as resource "Paris"
# of package "tzdata.zoneinfo.Europe" (PyPI tzdata's layout). As ~600 zip entries the files
# would cost every start ~10 ms (zipimport reads the whole directory in Python), so they sit
# in one nested archive that tzdata/__init__.py serves through a finder of its own.
tz = {}
for p in sorted(tzdir.rglob("*")):
    rel = p.relative_to(tzdir).as_posix()
    if rel.split("/")[0] in ("posix", "right", "posixrules", "localtime") or not p.is_file():
        continue
    data = p.read_bytes()
    if data[:4] == b"TZif":
        tz[rel] = data
assert "UTC" in tz and "Europe/Paris" in tz, "time zone data missing"
TZDATA_INIT = """\
\"\"\"IANA time zone data for zoneinfo (Debian tzdata %s), in one nested archive.\"\"\"
IANA_VERSION = %r

import io as _io
import sys as _sys
import zipfile as _zipfile
from importlib.machinery import ModuleSpec as _ModuleSpec

_PREFIX = __name__ + ".zoneinfo"
_archive = None


def _root():
    global _archive
    if _archive is None:
        data = __loader__.get_data(__path__[0] + "/zoneinfo.zip")
        _archive = _zipfile.ZipFile(_io.BytesIO(data))
    return _archive


def _dir_of(name):
    sub = name[len(_PREFIX) + 1:]
    return sub.replace(".", "/") + "/" if sub else ""


class _Reader:
    def __init__(self, at):
        self._at = at

    def files(self):
        return _zipfile.Path(_root(), at=self._at)


class _Finder:
    \"\"\"Finds tzdata.zoneinfo and its subpackages (one per directory of the archive).\"\"\"

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != _PREFIX and not name.startswith(_PREFIX + "."):
            return None
        at = _dir_of(name)
        if at and not _zipfile.Path(_root(), at=at).is_dir():
            return None
        return _ModuleSpec(name, cls, is_package=True)

    @staticmethod
    def create_module(spec):
        return None

    @staticmethod
    def exec_module(module):
        pass

    @staticmethod
    def get_resource_reader(name):
        return _Reader(_dir_of(name))


_sys.meta_path.append(_Finder)
""" % (tzversion, tzversion.split("-")[0])
files.append((TZDATA_INIT.encode(), "tzdata/__init__.py"))
tzbuf = io.BytesIO()
with zipfile.ZipFile(tzbuf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as tzz:
    for rel, data in sorted(tz.items()):
        zi = zipfile.ZipInfo(rel, date_time=(2020, 1, 1, 0, 0, 0))
        zi.compress_type = zipfile.ZIP_DEFLATED
        tzz.writestr(zi, data)

# Fixed timestamps make the archive reproducible; unchecked-hash pycs need no source.
def add(zf, name, data, compress=zipfile.ZIP_DEFLATED):
    zi = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    zi.compress_type = compress
    zi.external_attr = 0o644 << 16
    zf.writestr(zi, data)

tmp = out.with_suffix(".tmp")
with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
    for p, rel in files:
        src = p if isinstance(p, bytes) else p.read_bytes()
        code = compile(src, "/usr/local/lib/python311.zip/" + rel, "exec", dont_inherit=True, optimize=0)
        data = importlib._bootstrap_external._code_to_hash_pyc(
            code, importlib.util.source_hash(src), checked=False)
        add(zf, rel[:-3] + ".pyc", data)
    add(zf, "tzdata/zoneinfo.zip", tzbuf.getvalue(), zipfile.ZIP_STORED)
    add(zf, "tzdata/zones", "".join(k + "\n" for k in sorted(tz)).encode())
os.replace(tmp, out)
print(f"{len(files)} modules, {len(tz)} time zones, {out.stat().st_size} bytes")
EOF

# ---------------------------------------------------------------- install
step install
cp "$BUILD/python.wasm" "$STAGE/python.wasm"
{
	echo "cpython-source: python3.11 $PYSRC_VERSION (Debian, apt-get source)"
	echo "zlib-source: zlib $ZSRC_VERSION (Debian, apt-get source)"
	echo "sqlite3-source: sqlite3 $SQSRC_VERSION (Debian, apt-get source; memory-only VFS)"
	echo "tzdata: $TZ_VERSION (Debian's /usr/share/zoneinfo, as package tzdata in the zip)"
	echo "compiler: $(clang-16 --version | head -n1)"
	echo "flags: $OPT_FLAGS (deepfreeze.o without LTO), pymalloc, no wasm-opt; patch: sum() accumulates in long long; time.sleep via nanosleep"
	echo "prefix: /usr/local (guest path of the stdlib: /usr/local/lib/$STDLIB_ZIP; env PYTHONHOME=/usr/local)"
	echo "python.wasm-sha256: $(sha256sum "$STAGE/python.wasm" | cut -d' ' -f1)"
	echo "$STDLIB_ZIP-sha256: $(sha256sum "$STAGE/$STDLIB_ZIP" | cut -d' ' -f1)"
} >"$STAGE/BUILDINFO"
# Each rename is atomic; the stamp goes last and marks the set complete.
for f in python.wasm "$STDLIB_ZIP" BUILDINFO; do
	mv -f "$STAGE/$f" "$OUTDIR/$f"
done
echo "$HASH" >"$OUTDIR/.stamp.tmp"
mv -f "$OUTDIR/.stamp.tmp" "$STAMP"
trap - ERR
rm -rf "$WORK"
echo "==> [$((SECONDS - START_TIME))s] done: $OUTDIR/python.wasm $OUTDIR/$STDLIB_ZIP"
