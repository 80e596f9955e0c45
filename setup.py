"""pip's build of nosync_metrics: CMake builds the extension `_C` against the torch that this
interpreter imports, and the package as CMake assembles it (<build>/python/nosync_metrics) becomes
the wheel. NOSYNC_METRICS_BUILD_DIR names a CMake build directory to use (kept between installs,
so a reinstall compiles only what changed); by default a fresh one under build-pip/."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


def project_version():
    """The version CMake's project() declares (one place for it)."""
    return re.search(r"project\(metrics VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text()).group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = pathlib.Path(os.environ.get("NOSYNC_METRICS_BUILD_DIR") or self.build_temp).resolve()
        options = ["-DCMAKE_BUILD_TYPE=Release", f"-DPython3_EXECUTABLE={sys.executable}",
                   "-DMETRICS_BUILD_TESTS=OFF", "-DMETRICS_BUILD_BENCH=OFF", "-DMETRICS_BUILD_EXAMPLES=OFF",
                   "-DMETRICS_INSTALL=OFF"]
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build_dir), *options], check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "_C", "--parallel", jobs], check=True)
        package = pathlib.Path(self.get_ext_fullpath(ext.name)).parent
        package.mkdir(parents=True, exist_ok=True)
        for built in (build_dir / "python" / "nosync_metrics").iterdir():
            if built.is_file():
                shutil.copy2(built, package / built.name)


(ROOT / "build-pip").mkdir(exist_ok=True)  # setuptools' egg_info wants its directory to exist
setup(
    version=project_version(),
    packages=[],
    ext_modules=[Extension("nosync_metrics._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": "build-pip"}, "egg_info": {"egg_base": "build-pip"}},
)
