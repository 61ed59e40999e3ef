"""pip install --no-build-isolation .  (offline: Debian's setuptools and
pybind11 drive the project's CMake build of the extension pikv._pikv; the
pure-Python modules come from python/pikv)."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent
os.makedirs(ROOT / "build" / "python-package", exist_ok=True)
VERSION = re.search(r"project\(pikv VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text())[1]


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = pathlib.Path(self.build_temp).resolve() / "cmake"
        subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build), "-G", "Ninja",
                               "-DCMAKE_BUILD_TYPE=Release", "-DPIKV_BUILD_TESTS=OFF",
                               "-DPIKV_BUILD_BENCH=OFF", f"-DPython_EXECUTABLE={sys.executable}"])
        subprocess.check_call(["cmake", "--build", str(build), "--target", "pikv_python"])
        built = next((build / "python" / "pikv").glob("_pikv*.so"))
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, target)


setup(
    name="pikv",
    version=VERSION,
    description="Position-independent KV cache cluster: client, connector core, vLLM connector",
    packages=["pikv"],
    package_dir={"": "python"},
    ext_modules=[CMakeExtension("pikv._pikv")],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": os.path.join("build", "python-package")},
             "egg_info": {"egg_base": os.path.join("build", "python-package")}},
    python_requires=">=3.9",
    # vLLM starts it in each of its processes: the worker's model for the
    # connector's recompute (pikv.vllm_plugin).
    entry_points={"vllm.general_plugins": ["pikv = pikv.vllm_plugin:register"]},
    zip_safe=False,
)
