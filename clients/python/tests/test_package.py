"""The package builds with its in-tree backend and installs offline:
`pip install --no-index ./clients/python` into a fresh venv."""

import hashlib
import base64
import csv
import importlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import unittest
import zipfile

import support

sys.path.insert(0, os.path.join(support.ROOT, "_backend"))
backend = importlib.import_module("readpast_backend")

MODULES = ["__init__.py", "_http.py", "_version.py", "client.py", "errors.py", "handler.py", "models.py", "py.typed",
           "worker.py", "batches.py", "flows.py"]


class BackendTest(unittest.TestCase):
    def test_toml_reader(self) -> None:
        with open(os.path.join(support.ROOT, "pyproject.toml"), "rb") as f:
            raw = f.read().decode("utf-8")
        doc = backend.read_toml(raw)
        self.assertEqual(doc["build-system"], {"requires": [], "build-backend": "readpast_backend",
                                               "backend-path": ["_backend"]})
        p = doc["project"]
        self.assertEqual((p["name"], p["requires-python"], p["license"], p["dependencies"]),
                         ("readpast", ">=3.9", {"text": "MIT"}, []))
        self.assertIn("Typing :: Typed", p["classifiers"])
        self.assertEqual(sorted(p["urls"]), ["Documentation", "Homepage"])
        try:
            import tomllib
        except ImportError:  # Python 3.9 and 3.10: the reader alone
            return
        self.assertEqual(doc, tomllib.loads(raw))

    def test_version_matches(self) -> None:
        from readpast import __version__

        self.assertEqual(backend._project()["version"], __version__)

    def test_wheel(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(backend.get_requires_for_build_wheel(), [])
            name = backend.build_wheel(d)
            self.assertEqual(name, "readpast-0.1.0-py3-none-any.whl")
            with zipfile.ZipFile(os.path.join(d, name)) as z:
                names = z.namelist()
                for m in MODULES:
                    self.assertIn("readpast/" + m, names)
                self.assertFalse([n for n in names if "__pycache__" in n or n.endswith(".pyc")])
                meta = z.read("readpast-0.1.0.dist-info/METADATA").decode()
                self.assertIn("Name: readpast\n", meta)
                self.assertIn("Requires-Python: >=3.9\n", meta)
                self.assertIn("Classifier: Typing :: Typed\n", meta)
                self.assertNotIn("Requires-Dist", meta)
                rows = list(csv.reader(io.StringIO(z.read("readpast-0.1.0.dist-info/RECORD").decode())))
                self.assertEqual(sorted(r[0] for r in rows), sorted(names))
                for path, digest, size in rows:
                    if not digest:
                        continue
                    data = z.read(path)
                    want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                    self.assertEqual((digest, int(size)), ("sha256=" + want, len(data)), path)
            again = os.path.join(d, "again")
            os.mkdir(again)
            backend.build_wheel(again)
            with open(os.path.join(d, name), "rb") as a, open(os.path.join(again, name), "rb") as b:
                self.assertEqual(a.read(), b.read(), "the build is not reproducible")

    def test_sdist(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            name = backend.build_sdist(d)
            self.assertEqual(name, "readpast-0.1.0.tar.gz")
            with tarfile.open(os.path.join(d, name)) as t:
                names = t.getnames()
            for want in ["PKG-INFO", "pyproject.toml", "README.md", "_backend/readpast_backend.py"] + [
                    "src/readpast/" + m for m in MODULES]:
                self.assertIn("readpast-0.1.0/" + want, names)


class InstallTest(unittest.TestCase):
    """pip installs the package with no index at all: the build needs
    nothing from one."""

    def test_pip_install_offline_into_a_venv(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            venv = os.path.join(d, "venv")
            made = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True)
            if made.returncode != 0:
                msg = "python3 -m venv does not work here (on Debian: apt-get install python3-venv): " + made.stderr
                if support.in_ci():
                    self.fail(msg)
                self.skipTest(msg)
            py = os.path.join(venv, "bin", "python")
            env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1")
            env.pop("PYTHONPATH", None)
            env.pop("PIP_FIND_LINKS", None)
            sdist_dir = os.path.join(d, "dist")
            os.mkdir(sdist_dir)
            sdist = os.path.join(sdist_dir, backend.build_sdist(sdist_dir))
            for source in (support.ROOT, sdist):
                inst = subprocess.run(
                    [py, "-m", "pip", "install", "--no-index", "--no-cache-dir", "--force-reinstall", source],
                    capture_output=True, text=True, env=env, cwd=d,
                )
                self.assertEqual(inst.returncode, 0, "pip install %s:\n%s\n%s" % (source, inst.stdout, inst.stderr))
                check = subprocess.run(
                    [py, "-c", "import importlib.metadata as m, os, readpast; "
                               "print(readpast.__file__); print(m.version('readpast')); "
                               "print(os.path.exists(os.path.join(os.path.dirname(readpast.__file__), 'py.typed'))); "
                               "print(readpast.Client('http://127.0.0.1:1'))"],
                    capture_output=True, text=True, env=env, cwd=d,
                )
                self.assertEqual(check.returncode, 0, check.stderr)
                where, version, typed, client = check.stdout.split("\n")[:4]
                self.assertTrue(where.startswith(venv), where)
                self.assertIn("site-packages", where)
                self.assertEqual((version, typed), ("0.1.0", "True"))
                self.assertEqual(client, "Client('http://127.0.0.1:1', token=None)")
            # The source tree is left as it was: no build/, dist/ or egg-info.
            leftovers = [x for folder in (support.ROOT, support.SRC) for x in os.listdir(folder)
                         if x in ("build", "dist") or x.endswith(".egg-info")]
            self.assertEqual(leftovers, [])
