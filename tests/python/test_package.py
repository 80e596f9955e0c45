"""The package as users get it: the README's import, the venv install, the example."""

import os
import re
import site
import subprocess
import sys

import pytest

import nosync_metrics


def run(args, **kwargs):
    """subprocess.run that fails with the command's output, so that a failed install says why."""
    done = subprocess.run(args, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


def test_imports_from_the_build_with_pythonpath(build_dir):
    env = dict(os.environ, PYTHONPATH=str(build_dir / "python"))
    out = run([sys.executable, "-c", "import nosync_metrics as nm; print(len(nm.__all__))"], env=env)
    assert int(out.stdout) >= 30


def make_venv(venv, *options):
    """A venv that sees this interpreter's packages (torch among them). --system-site-packages gives
    that where this interpreter is the system's; where it is a venv's own (a GPU machine's image), the
    new venv would see the base interpreter's instead, so a .pth file names this one's site-packages."""
    run([sys.executable, "-m", "venv", "--system-site-packages", *options, str(venv)])
    if sys.prefix != sys.base_prefix:
        venv_site = next(venv.glob("lib/python*/site-packages"))
        (venv_site / "outer_venv.pth").write_text("\n".join(site.getsitepackages()) + "\n")


def test_installs_into_a_venv(build_dir, tmp_path):
    venv = tmp_path / "venv"
    make_venv(venv, "--without-pip")
    run(["cmake", "--install", str(build_dir), "--component", "python", "--prefix", str(venv)])
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = run([str(venv / "bin" / "python"), "-c",
               "import nosync_metrics, torch; m = nosync_metrics.MeanMetric(); m.update(2.0); "
               "print(nosync_metrics.__file__, m.compute().item())"], env=env)
    assert str(venv) in out.stdout and out.stdout.strip().endswith("2.0")


def test_pip_install_builds_against_the_interpreters_torch(build_dir, repo_dir, tmp_path):
    """pip install --no-build-isolation . into a venv that sees the system's torch, as the README says;
    the CMake build directory is kept beside the test build, so a rerun compiles only what changed."""
    venv = tmp_path / "venv"
    make_venv(venv)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["NOSYNC_METRICS_BUILD_DIR"] = str(build_dir / "pip-cmake")
    run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-index", "-q", str(repo_dir)],
        env=env, timeout=1800)
    out = run([str(venv / "bin" / "python"), "-c",
               "import nosync_metrics, torch; m = nosync_metrics.MulticlassAccuracy(num_classes=3); "
               "m.update(torch.tensor([0, 2, 1, 1]), torch.tensor([0, 2, 2, 1])); "
               "print(nosync_metrics.__file__, nosync_metrics._C.__version__, m.compute().item())"],
              env=env, cwd=tmp_path)
    file, version, value = out.stdout.split()
    assert file.startswith(str(venv)) and version == nosync_metrics._C.__version__
    assert float(value) == pytest.approx((1 + 1 + 0.5) / 3)  # macro: recalls 1, 1, 1/2


def test_python_training_loop_example(build_dir, repo_dir):
    env = dict(os.environ, PYTHONPATH=str(build_dir / "python"))
    out = run([sys.executable, str(repo_dir / "examples" / "python_training_loop.py"), "--steps", "3",
               "--warmup", "1", "--classes", "10", "--batch-size", "16", "--image-size", "32"],
              env=env, timeout=600).stdout
    print(out)
    assert re.search(r"nosync +median step +[0-9.]+ ms +sync points per step +0\.0", out)
    naive = re.search(r"naive +median step +[0-9.]+ ms +sync points per step +([0-9.]+)", out)
    assert naive and float(naive.group(1)) > 0
    assert "naive and nosync agree: yes" in out


def test_ddp_training_loop_example(build_dir, repo_dir):
    env = dict(os.environ, PYTHONPATH=str(build_dir / "python"))
    out = run([sys.executable, str(repo_dir / "examples" / "ddp_training_loop.py"), "--epochs", "2",
               "--steps", "4", "--all-ranks"], env=env, timeout=60).stdout
    print(out)
    lines = re.findall(r"rank (\d) epoch (\d) \| (loss .*) \| updates seen 4 local \| sync points per step: metrics 0\.00",
                       out)
    assert len(lines) == 4
    by_epoch = {}
    for rank, epoch, values in lines:
        by_epoch.setdefault(epoch, set()).add(values)
    assert all(len(values) == 1 for values in by_epoch.values())  # both ranks print the same global values
