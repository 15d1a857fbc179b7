"""A PEP 517 build backend in the standard library only, so that ``pip install ./sdk/python``
works offline.

pip builds a project in an isolated environment into which it first installs the backend named
in pyproject.toml. With setuptools that means fetching setuptools from an index, which a machine
without PyPI cannot do. This backend needs nothing (``requires = []``): it zips the pure-Python
package into a wheel (PEP 427), and supports sdists and editable installs (PEP 660) as well.

The project's metadata is here, in one place; the version comes from agentbox/_version.py.
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

NAME = "agentbox"
SUMMARY = "Python SDK of agentbox: run untrusted AI-agent code in sandboxes"
REQUIRES_PYTHON = ">=3.9"
TAG = "py3-none-any"

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, NAME)


def _version():
    with open(os.path.join(PACKAGE, "_version.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__\s*=\s*"([^"]+)"', f.read(), re.M)
    if not m:
        raise RuntimeError("agentbox/_version.py has no __version__")
    return m.group(1)


def _metadata():
    readme = os.path.join(ROOT, "README.md")
    desc = ""
    if os.path.exists(readme):
        with open(readme, encoding="utf-8") as f:
            desc = f.read()
    head = (
        "Metadata-Version: 2.1\n"
        f"Name: {NAME}\n"
        f"Version: {_version()}\n"
        f"Summary: {SUMMARY}\n"
        f"Requires-Python: {REQUIRES_PYTHON}\n"
        "Classifier: Programming Language :: Python :: 3\n"
        "Classifier: Typing :: Typed\n"
    )
    if desc:
        head += "Description-Content-Type: text/markdown\n\n" + desc
    return head


def _package_files():
    """(archive name, path) of every file of the package, sorted; no caches."""
    out = []
    for dirpath, dirnames, filenames in os.walk(PACKAGE):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if fn.endswith((".pyc", ".pyo")):
                continue
            p = os.path.join(dirpath, fn)
            out.append((os.path.relpath(p, ROOT).replace(os.sep, "/"), p))
    return out


def _dist_info():
    return f"{NAME}-{_version()}.dist-info"


def _record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _write_wheel(wheel_directory, entries):
    """Write a wheel of entries [(archive name, bytes)], adding the dist-info files."""
    di = _dist_info()
    entries = list(entries) + [
        (f"{di}/METADATA", _metadata().encode("utf-8")),
        (f"{di}/WHEEL", f"Wheel-Version: 1.0\nGenerator: agentbox_build\nRoot-Is-Purelib: true\nTag: {TAG}\n".encode()),
    ]
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in entries)
    record += f"{di}/RECORD,,\n"
    name = f"{NAME}-{_version()}-{TAG}.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in entries + [(f"{di}/RECORD", record.encode())]:
            info = zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return name


# --- PEP 517 hooks -------------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    di = os.path.join(metadata_directory, _dist_info())
    os.makedirs(di, exist_ok=True)
    with open(os.path.join(di, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    return _dist_info()


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    entries = []
    for arc, path in _package_files():
        with open(path, "rb") as f:
            entries.append((arc, f.read()))
    return _write_wheel(wheel_directory, entries)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """An editable wheel: a .pth file that puts this source tree on sys.path."""
    return _write_wheel(wheel_directory, [(f"_{NAME}_editable.pth", (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{_version()}"
    name = base + ".tar.gz"
    files = [(arc, p) for arc, p in _package_files()]
    for extra in ("pyproject.toml", "README.md", "_build/agentbox_build.py"):
        p = os.path.join(ROOT, extra)
        if os.path.exists(p):
            files.append((extra, p))
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        pkg_info = _metadata().encode("utf-8")
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size, ti.mode = len(pkg_info), 0o644
        t.addfile(ti, io.BytesIO(pkg_info))
        for arc, p in sorted(files):
            t.add(p, arcname=f"{base}/{arc}", recursive=False)
    return name
