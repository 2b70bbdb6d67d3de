"""The PEP 517 build backend of the readpast Python client.

It builds the wheel, the sdist and the editable wheel (PEP 660) of the
pure-Python package in src/readpast with the standard library alone, so
that `pip install ./clients/python` needs nothing from a package index:
pip's isolated build environment installs no requirements for it. The
metadata come from pyproject.toml's [project] table (read with tomllib on
Python 3.11+, and with the small reader below, which handles what this
pyproject.toml uses, on 3.9 and 3.10).
"""

import base64
import csv
import gzip
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "readpast"
SOURCES = os.path.join(ROOT, "src")
# The files of the sdist besides the package: what building a wheel from
# it needs.
SDIST_FILES = ["pyproject.toml", "README.md", os.path.join("_backend", "readpast_backend.py")]

# Zip and tar entries get this time unless SOURCE_DATE_EPOCH says
# otherwise, so that a build is reproducible.
_EPOCH = 315532800  # 1980-01-01, the earliest time a zip can hold


def _build_time():
    return int(os.environ.get("SOURCE_DATE_EPOCH", _EPOCH))


# ---- pyproject.toml -------------------------------------------------------

_KEY = re.compile(r'\s*([A-Za-z0-9_.-]+|"[^"]*")\s*=\s*')


def _parse_value(text, i):
    """Parses the TOML value at text[i:] (strings, booleans, integers,
    arrays, inline tables); returns (value, index after it)."""
    while text[i] in " \t\r\n":
        i += 1
    c = text[i]
    if c == '"':
        out = []
        i += 1
        while text[i] != '"':
            if text[i] == "\\":
                esc = text[i + 1]
                out.append({"n": "\n", "t": "\t", '"': '"', "\\": "\\"}[esc])
                i += 2
            else:
                out.append(text[i])
                i += 1
        return "".join(out), i + 1
    if c == "'":
        j = text.index("'", i + 1)
        return text[i + 1:j], j + 1
    if c == "[":
        items = []
        i += 1
        while True:
            i = _skip(text, i)
            if text[i] == "]":
                return items, i + 1
            v, i = _parse_value(text, i)
            items.append(v)
            i = _skip(text, i)
            if text[i] == ",":
                i += 1
    if c == "{":
        table = {}
        i += 1
        while True:
            i = _skip(text, i)
            if text[i] == "}":
                return table, i + 1
            m = _KEY.match(text, i)
            if m is None:
                raise ValueError("pyproject.toml: cannot read an inline table at %d" % i)
            v, i = _parse_value(text, m.end())
            table[m.group(1).strip('"')] = v
            i = _skip(text, i)
            if text[i] == ",":
                i += 1
    m = re.compile(r"true|false|[+-]?\d+").match(text, i)
    if m is None:
        raise ValueError("pyproject.toml: cannot read the value at %d" % i)
    word = m.group(0)
    return (word == "true") if word in ("true", "false") else int(word), m.end()


def _skip(text, i):
    """Skips white space, newlines and comments."""
    while i < len(text):
        if text[i] in " \t\r\n":
            i += 1
        elif text[i] == "#":
            while i < len(text) and text[i] != "\n":
                i += 1
        else:
            break
    return i


def read_toml(text):
    """Reads the subset of TOML pyproject.toml uses: [tables] of keys whose
    values are strings, booleans, integers, arrays and inline tables."""
    doc = {}
    table = doc
    i = 0
    while True:
        i = _skip(text, i)
        if i >= len(text):
            return doc
        if text[i] == "[":
            j = text.index("]", i)
            table = doc
            for part in text[i + 1:j].strip().split("."):
                table = table.setdefault(part.strip().strip('"'), {})
            i = j + 1
            continue
        m = _KEY.match(text, i)
        if m is None:
            raise ValueError("pyproject.toml: cannot read line at %d" % i)
        value, i = _parse_value(text, m.end())
        table[m.group(1).strip('"')] = value


def _pyproject():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        raw = f.read()
    try:
        import tomllib
    except ImportError:
        return read_toml(raw.decode("utf-8"))
    return tomllib.loads(raw.decode("utf-8"))


def _project():
    project = _pyproject()["project"]
    if project.get("dependencies"):
        raise ValueError("this backend builds packages without dependencies")
    return project


def metadata_text(project=None):
    """The core metadata (METADATA, PKG-INFO) of the package."""
    p = project or _project()
    lines = [
        "Metadata-Version: 2.1",
        "Name: %s" % p["name"],
        "Version: %s" % p["version"],
        "Summary: %s" % p["description"],
    ]
    if "requires-python" in p:
        lines.append("Requires-Python: %s" % p["requires-python"])
    if "license" in p:
        lines.append("License: %s" % p["license"]["text"])
    if p.get("keywords"):
        lines.append("Keywords: %s" % ",".join(p["keywords"]))
    for c in p.get("classifiers", []):
        lines.append("Classifier: %s" % c)
    for label, url in p.get("urls", {}).items():
        lines.append("Project-URL: %s, %s" % (label, url))
    body = ""
    if "readme" in p:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(ROOT, p["readme"]), encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _dist_info(project):
    return "%s-%s.dist-info" % (project["name"].replace("-", "_"), project["version"])


def _wheel_name(project):
    return "%s-%s-py3-none-any.whl" % (project["name"].replace("-", "_"), project["version"])


def _package_files():
    """(path in the wheel, path on disk) of the package's files, sorted."""
    out = []
    base = os.path.join(SOURCES, PACKAGE)
    for folder, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(folder, name)
            out.append((os.path.relpath(path, SOURCES).replace(os.sep, "/"), path))
    return out


class _Wheel:
    """A wheel being written: each file with its hash in RECORD."""

    def __init__(self, path, project):
        self.zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self.records = []
        self.dist_info = _dist_info(project)
        self.date = time.gmtime(_build_time())[:6]

    def add(self, name, data):
        info = zipfile.ZipInfo(name, date_time=self.date)
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
        self.records.append((name, "sha256=" + digest, str(len(data))))

    def close(self, project):
        d = self.dist_info
        self.add(d + "/METADATA", metadata_text(project).encode("utf-8"))
        self.add(d + "/WHEEL", (
            "Wheel-Version: 1.0\nGenerator: readpast_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ).encode("ascii"))
        self.add(d + "/top_level.txt", (PACKAGE + "\n").encode("ascii"))
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        for row in self.records:
            w.writerow(row)
        w.writerow((d + "/RECORD", "", ""))
        info = zipfile.ZipInfo(d + "/RECORD", date_time=self.date)
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, buf.getvalue().encode("utf-8"))
        self.zip.close()


# ---- PEP 517 and PEP 660 hooks ---------------------------------------------


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    project = _project()
    d = _dist_info(project)
    os.makedirs(os.path.join(metadata_directory, d), exist_ok=True)
    with open(os.path.join(metadata_directory, d, "METADATA"), "w", encoding="utf-8") as f:
        f.write(metadata_text(project))
    return d


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = _project()
    name = _wheel_name(project)
    wheel = _Wheel(os.path.join(wheel_directory, name), project)
    for arc, path in _package_files():
        with open(path, "rb") as f:
            wheel.add(arc, f.read())
    wheel.close(project)
    return name


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A wheel whose .pth file puts src/ on sys.path: edits to the sources
    take effect without reinstalling."""
    project = _project()
    name = _wheel_name(project)
    wheel = _Wheel(os.path.join(wheel_directory, name), project)
    wheel.add("__editable__.%s.pth" % PACKAGE, (SOURCES + "\n").encode("utf-8"))
    wheel.close(project)
    return name


def build_sdist(sdist_directory, config_settings=None):
    project = _project()
    base = "%s-%s" % (project["name"].replace("-", "_"), project["version"])
    name = base + ".tar.gz"
    mtime = _build_time()

    def add(tar, arc, data):
        info = tarfile.TarInfo(base + "/" + arc)
        info.size = len(data)
        info.mtime = mtime
        info.mode = 0o644
        info.uname = info.gname = ""
        tar.addfile(info, io.BytesIO(data))

    files = [(p.replace(os.sep, "/"), os.path.join(ROOT, p)) for p in SDIST_FILES]
    files += [("src/" + arc, path) for arc, path in _package_files()]
    with open(os.path.join(sdist_directory, name), "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=mtime, filename="") as gz:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
                add(tar, "PKG-INFO", metadata_text(project).encode("utf-8"))
                for arc, path in sorted(files):
                    with open(path, "rb") as f:
                        add(tar, arc, f.read())
    return name
