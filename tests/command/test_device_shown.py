"""The device in plain sight (issue 37): a run's first lines and its ``summary.json`` say which
backend and device it trains on, ``backend=auto`` included, fresh and resumed;
``trainer-run --info`` lists NumPy's, CuPy's and CUDA's versions and the GPUs it sees; a GPU
that is not there is one line saying how many are visible, not CUDA's traceback.

There is no GPU here: a stand-in CuPy (:data:`FAKE_CUPY`, NumPy under CuPy's names, with
``cupy.cuda.runtime`` answering as CuPy 14 documents it) is put on ``PYTHONPATH``; the
environment chooses how many GPUs it shows, or that there is no driver.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy
import pytest
from helpers import one_error_line, run_cli

QUIET = "trainer.progress=false"
H200 = {"name": "NVIDIA H200", "memory_bytes": 150754820096}
FAKE_CUPY = {
    "cupy/__init__.py": (
        "import numpy as _np\n"
        "from numpy import *  # noqa\n"
        "from . import cuda\n"
        "__version__ = '14.2.0'\n"
        "def asnumpy(a, *args, **kwargs):\n"
        "    return _np.asarray(a)\n"
        "def get_array_module(*args):\n"
        "    return _np\n"
        "class _Pool:\n"
        "    def total_bytes(self):\n"
        "        return 12345\n"
        "def get_default_memory_pool():\n"
        "    return _Pool()\n"),
    "cupy/cuda/__init__.py": (
        "from . import runtime\n"
        "class Device:\n"
        "    def __init__(self, device=0):\n"
        "        if device >= runtime.getDeviceCount():\n"
        "            raise runtime.CUDARuntimeError('cudaErrorInvalidDevice: invalid device ordinal')\n"
        "        self.id = device\n"
        "    def __enter__(self):\n"
        "        return self\n"
        "    def __exit__(self, *exc):\n"
        "        return False\n"
        "    def synchronize(self):\n"
        "        pass\n"),
    "cupy/cuda/runtime.py": (
        "import os\n"
        "class CUDARuntimeError(RuntimeError):\n"
        "    pass\n"
        "def getDeviceCount():\n"
        "    if os.environ.get('FAKE_CUPY_NO_DRIVER'):\n"
        "        raise CUDARuntimeError('cudaErrorInsufficientDriver: CUDA driver version is "
        "insufficient for CUDA runtime version')\n"
        "    return int(os.environ.get('FAKE_CUPY_GPUS', '1'))\n"
        "def getDeviceProperties(device):\n"
        "    if device >= getDeviceCount():\n"
        "        raise CUDARuntimeError('cudaErrorInvalidDevice: invalid device ordinal')\n"
        f"    return {{'name': b'{H200['name']}', 'totalGlobalMem': {H200['memory_bytes']}}}\n"
        "def runtimeGetVersion():\n"
        "    return 13000\n"
        "def driverGetVersion():\n"
        "    return 0 if os.environ.get('FAKE_CUPY_NO_DRIVER') else 12080\n"),
}


@pytest.fixture(scope="module")
def fake_cupy(tmp_path_factory) -> Path:
    """A folder holding the stand-in ``cupy`` package."""
    folder = tmp_path_factory.mktemp("fake_cupy")
    for name, text in FAKE_CUPY.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def _run(*args, cupy: Path | None = None, **env) -> subprocess.CompletedProcess:
    """``trainer-run <args>``, with the stand-in CuPy importable when ``cupy`` is its folder;
    ``env`` (FAKE_CUPY_GPUS, FAKE_CUPY_NO_DRIVER) added to the environment."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_CUPY")}
    if cupy is not None:
        environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(cupy),
                                                              environ.get("PYTHONPATH")]))
    environ.update(env)
    return subprocess.run([sys.executable, "-m", "trainer_run.cli", *map(str, args)],
                          env=environ, capture_output=True, text=True, timeout=300)


def _device(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())["device"]


def _peak(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())["peak_memory_bytes"]


def _backend_lines(result) -> list[str]:
    """The ``backend:`` lines of a run's output; the first comes right after the run
    directory's."""
    lines = result.stdout.splitlines()
    shown = [line for line in lines if line.startswith("backend:")]
    directory = next(i for i, line in enumerate(lines) if line.startswith("run directory: "))
    assert lines[directory + 1] == shown[0], result.stdout
    return shown




# -- Backend.describe and device_record ---------------------------------------------------------



def test_the_numpy_path_never_imports_cupy(fake_cupy):
    code = ("import sys; from trainer_run.backend import get_backend; b = get_backend('numpy'); "
            "b.describe(); b.device_record(); print('cupy' in sys.modules)")
    environ = dict(os.environ, PYTHONPATH=str(fake_cupy))
    result = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True,
                            text=True, timeout=120)
    assert result.stdout.strip() == "False", result.stderr


# -- a run's first lines and summary.json -------------------------------------------------------

def test_a_run_and_its_resume_say_backend_numpy_with_the_threads_first(tmp_path):
    """``backend: numpy (cpu, 1 thread)`` right after the run directory, and the fp16 warning
    once, on the fresh run and on the resume; summary.json records the same."""
    run = tmp_path / "run"
    fp16 = ("backend=numpy", "backend.threads=1", "precision=fp16", QUIET,
            "trainer.checkpoint_interval=2")
    fresh = _run(f"hydra.run.dir={run}", *fp16, "trainer.max_iterations=2")
    resumed = _run(f"resume={run}", "trainer.max_iterations=4", QUIET)
    for result in (fresh, resumed):
        assert result.returncode == 0, result.stderr
        assert f"run directory: {run}" in result.stdout.splitlines()
        assert _backend_lines(result) == ["backend: numpy (cpu, 1 thread)"]
        assert [line for line in result.stderr.splitlines() if "fp16" in line] == [
            "warning: precision=fp16 on the NumPy backend trains many times slower than fp32 "
            "(NumPy has no fast float16 arithmetic): choose precision=fp32 on the CPU, or "
            "backend=cupy to train in fp16 on a GPU"]
        assert _device(run) == {"backend": "numpy", "device": "cpu", "threads": 1,
                                "dtype": "float16"}
        assert set(_peak(run)) == {"host"} and _peak(run)["host"] > 10 * 2**20
    assert json.loads((run / "summary.json").read_text())["iteration"] == 4


def test_backend_auto_without_a_gpu_says_numpy(tmp_path):
    result = run_cli(f"hydra.run.dir={tmp_path / 'run'}", "backend=auto", "trainer.max_iterations=2",
                     QUIET)
    assert result.returncode == 0, result.stderr
    threads = _device(tmp_path / "run")["threads"]
    words = "numpy (cpu)" if threads is None else \
        f"numpy (cpu, {threads} thread{'s' if threads != 1 else ''})"
    assert _backend_lines(result) == [f"backend: {words}"]
    assert _device(tmp_path / "run")["backend"] == "numpy"


@pytest.mark.parametrize("args, gpus, device", [
    (("backend=cupy",), "1", 0),
    (("backend=auto",), "1", 0),                  # what auto chose
    (("backend=cupy", "backend.device=1"), "2", 1),
], ids=["cupy", "auto", "device-1"])
def test_a_gpu_run_and_its_resume_name_the_gpu(tmp_path, fake_cupy, args, gpus, device):
    run = tmp_path / "run"
    fresh = _run(f"hydra.run.dir={run}", *args, "trainer.max_iterations=2",
                 "trainer.checkpoint_interval=2", QUIET, cupy=fake_cupy, FAKE_CUPY_GPUS=gpus)
    resumed = _run(f"resume={run}", "trainer.max_iterations=4", QUIET, cupy=fake_cupy,
                   FAKE_CUPY_GPUS=gpus)
    for result in (fresh, resumed):
        assert result.returncode == 0, result.stderr
        assert _backend_lines(result) == [f"backend: cupy, gpu:{device} (NVIDIA H200, 140 GiB)"]
        assert _device(run) == {"backend": "cupy", "device": f"gpu:{device}", **H200,
                                "dtype": "float32"}
        assert _peak(run)["gpu_pool"] == 12345  # the stand-in pool's


# -- a GPU that is not there: one line ----------------------------------------------------------

@pytest.mark.parametrize("args, env, words", [
    (("updater=parallel", "updater.devices=2", "kvstore=device"), {},
     "error: updater.devices=2 asks for GPUs 0, 1, but 1 GPU is visible (id 0): set "
     "updater.devices=1 or fewer"),
    (("updater=parallel", "updater.devices=[0,3]", "kvstore=device"), {"FAKE_CUPY_GPUS": "2"},
     "error: updater.devices=[0, 3] asks for GPUs 0, 3, but 2 GPUs are visible (ids 0, 1): list "
     "only visible ids"),
    (("updater=parallel", "updater.devices=2", "backend.device=1", "kvstore=device"),
     {"FAKE_CUPY_GPUS": "2"},
     "error: updater.devices=2 asks for GPUs 1, 2, but 2 GPUs are visible (ids 0, 1): set "
     "updater.devices=1 or fewer"),
    (("backend.device=1",), {}, "error: backend.device=1 asks for GPU 1, but 1 GPU is visible "
     "(id 0): set backend.device to a visible id, or backend=numpy"),
    (("backend.device=0",), {"FAKE_CUPY_NO_DRIVER": "1"},
     "error: backend.device=0 asks for GPU 0, but no GPU is visible"),
    (("backend.device=0",), {"FAKE_CUPY_GPUS": "0"},
     "error: backend.device=0 asks for GPU 0, but no GPU is visible"),
], ids=["devices-2-of-1", "id-3-of-2", "from-device-1", "backend-device", "no-driver", "no-gpu"])
def test_a_gpu_that_is_not_there_is_one_line(tmp_path, fake_cupy, args, env, words):
    result = _run(f"hydra.run.dir={tmp_path / 'run'}", "backend=cupy", *args, QUIET,
                  "trainer.max_iterations=2", cupy=fake_cupy, **env)
    assert one_error_line(result).startswith(words)
    assert not (tmp_path / "run").exists()


# -- trainer-run --info -----------------------------------------------------------------------

def _devices_section(result) -> list[str]:
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines.count("Devices") == 1, result.stdout
    start = lines.index("Devices")
    assert lines[start + 1] == "*******"
    return lines[start + 2:]


def test_info_adds_the_devices_to_hydras_sections_without_cupy(tmp_path):
    result = _run("--info", f"hydra.run.dir={tmp_path / 'run'}")
    for hydras in ("Installed Hydra Plugins", "Config search path", "Defaults List", "Config"):
        assert hydras in result.stdout.splitlines()
    section = _devices_section(result)
    assert section[0] == f"numpy: {numpy.__version__}"
    assert section[1].startswith("cupy: not installed (pip install 'trainer-run[cuda12]'")
    assert section[2:] == ["GPUs: none"]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("flag", [("--info",), ("--info", "all"), ("-i",), ("--info", "devices")])
@pytest.mark.parametrize("env, expected", [
    ({"FAKE_CUPY_GPUS": "2"}, ["cupy: 14.2.0 (CUDA runtime 13.0, driver 12.8)",
                               "gpu:0: NVIDIA H200, 140 GiB", "gpu:1: NVIDIA H200, 140 GiB"]),
    ({"FAKE_CUPY_NO_DRIVER": "1"}, ["cupy: 14.2.0 (CUDA runtime 13.0, driver none)",
                                    "GPUs: none"]),
], ids=["two-gpus", "no-driver"])
def test_info_lists_cupy_cuda_and_the_gpus(fake_cupy, flag, env, expected):
    result = _run(*flag, cupy=fake_cupy, **env)
    assert _devices_section(result) == [f"numpy: {numpy.__version__}", *expected]
    hydras = "Installed Hydra Plugins" in result.stdout
    assert hydras == (flag[-1] != "devices")       # --info devices: the devices alone


def test_info_says_why_an_installed_cupy_does_not_import(tmp_path):
    (tmp_path / "cupy").mkdir()
    (tmp_path / "cupy" / "__init__.py").write_text(
        "raise ImportError('libcudart.so.13: cannot open shared object file')\n")
    section = _devices_section(_run("--info", "devices", cupy=tmp_path))
    assert section[1:] == ["cupy: installed, but importing it fails: ImportError: libcudart.so.13: "
                           "cannot open shared object file", "GPUs: none"]


@pytest.mark.parametrize("value", ["plugins", "config", "searchpath"])
def test_info_of_one_hydra_section_leaves_the_devices_out(value):
    result = _run("--info", value)
    assert result.returncode == 0, result.stderr
    assert "Devices" not in result.stdout.splitlines()


# -- packaging: which CuPy for which CUDA ---------------------------------------------------------

def test_the_cuda_extras_name_the_cupy_wheel_of_each_cuda_major():
    tomllib = pytest.importorskip("tomllib")
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    assert extras["cuda12"] == ["cupy-cuda12x>=13"]
    assert extras["cuda13"] == ["cupy-cuda13x>=14"]
    assert extras["cuda"] == ["trainer-run[cuda12]"]      # the older name, an alias


def test_backend_cupy_without_cupy_names_both_extras_and_nvidia_smi(tmp_path):
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed")
    result = run_cli(f"hydra.run.dir={tmp_path / 'run'}", "backend=cupy", QUIET)
    line = one_error_line(result)
    for words in ("pip install 'trainer-run[cuda12]'", "'trainer-run[cuda13]'", "nvidia-smi",
                  "backend=numpy"):
        assert words in line
    assert not (tmp_path / "run").exists()
