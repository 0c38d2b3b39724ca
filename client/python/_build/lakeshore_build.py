"""A PEP 517 build backend for the lakeshore Python package, with the standard library only.

The package is pure Python with no dependencies, so building it needs no setuptools: `pip install
./client/python` works offline, with nothing fetched from an index. It builds a wheel (and an
editable wheel, and an sdist) from `lakeshore/` and the [project] table of pyproject.toml.
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# `lakeshore`, and `dreamlake.lakeshore`, the contract's import name for the same modules.
_PACKAGES = ("lakeshore", "dreamlake")


def _project():
    with open(os.path.join(_HERE, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    try:
        import tomllib  # Python >= 3.11

        return tomllib.loads(text)["project"]
    except ImportError:  # Python 3.9, 3.10: the few plain string fields this backend reads
        section = text.split("[project]", 1)[1].split("\n[", 1)[0]
        return {k: v for k, v in re.findall(r'^([\w-]+)\s*=\s*"([^"]*)"', section, re.M)}


def _metadata():
    p = _project()
    lines = ["Metadata-Version: 2.1", "Name: %s" % p["name"], "Version: %s" % p["version"]]
    if p.get("description"):
        lines.append("Summary: %s" % p["description"])
    if p.get("requires-python"):
        lines.append("Requires-Python: %s" % p["requires-python"])
    # Extras (Python 3.11+ reads them; the 3.9 fallback parser sees none): `pip install 'lakeshore[cron]'`.
    for extra, reqs in sorted((p.get("optional-dependencies") or {}).items()):
        lines.append("Provides-Extra: %s" % extra)
        lines += ['Requires-Dist: %s; extra == "%s"' % (r, extra) for r in reqs]
    readme = os.path.join(_HERE, "README.md")
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = "\n" + f.read()
    return p["name"], p["version"], "\n".join(lines) + "\n" + body


_WHEEL = "Wheel-Version: 1.0\nGenerator: lakeshore_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _sources():
    for root, dirs, files in (w for p in _PACKAGES for w in os.walk(os.path.join(_HERE, p))):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for f in sorted(files):
            if f.endswith((".py", ".json")):  # sql.json: the local plane's SQL
                full = os.path.join(root, f)
                yield full, os.path.relpath(full, _HERE).replace(os.sep, "/")


def _write_wheel(directory, files):
    """files: [(archive name, bytes)]; adds the dist-info and its RECORD."""
    name, version, metadata = _metadata()
    dist_info = "%s-%s.dist-info" % (name, version)
    files = list(files) + [(dist_info + "/METADATA", metadata.encode()), (dist_info + "/WHEEL", _WHEEL.encode())]
    record = []
    filename = "%s-%s-py3-none-any.whl" % (name, version)
    with zipfile.ZipFile(os.path.join(directory, filename), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files:
            z.writestr(arc, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append("%s,sha256=%s,%d" % (arc, digest, len(data)))
        record.append("%s/RECORD,," % dist_info)
        z.writestr(dist_info + "/RECORD", "\n".join(record) + "\n")
    return filename


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = []
    for full, arc in _sources():
        with open(full, "rb") as f:
            files.append((arc, f.read()))
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # A .pth file that puts this directory on sys.path: edits take effect without reinstalling.
    return _write_wheel(wheel_directory, [("_lakeshore_editable.pth", (_HERE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    name, version, metadata = _metadata()
    base = "%s-%s" % (name, version)
    filename = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz") as t:
        members = [(full, arc) for full, arc in _sources()]
        for rel in ("pyproject.toml", "README.md", "_build/lakeshore_build.py"):
            if os.path.exists(os.path.join(_HERE, rel)):
                members.append((os.path.join(_HERE, rel), rel))
        for full, arc in members:
            t.add(full, arcname=base + "/" + arc)
        info = tarfile.TarInfo(base + "/PKG-INFO")
        data = metadata.encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return filename
