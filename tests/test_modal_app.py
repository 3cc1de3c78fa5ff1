"""modal_app.py, offline: what its Modal objects declare, its image check run with both interpreters, and
its `modal run` entrypoint and GPU settings (the launcher's watchdog is in `test_modal_launcher.py`).

The declarations are read from the objects modal builds (the public `Server.info()`, and the private
closures of the loaders where modal 1.6 has no public view: autoscaler, environment, image layers).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

modal = pytest.importorskip("modal")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from modal._partial_function import _find_partial_methods_for_user_cls, _PartialFunctionFlags  # noqa: E402
from modal._utils.async_utils import synchronizer  # noqa: E402

import modal_app  # noqa: E402
from openjev.backends.supervised import free_port  # noqa: E402


def _raw(obj: Any) -> Any:
    """The implementation object behind modal's public wrapper."""
    return synchronizer._translate_in(obj)


def _closure(function: Any) -> dict[str, Any]:
    return dict(
        zip(function.__code__.co_freevars, (cell.cell_contents for cell in function.__closure__ or ()), strict=True)
    )


def _dockerfile_lines(image: Any, version: str = "2025.06") -> list[str]:
    """The image's Dockerfile commands, base layers first, rendered from its loaders."""
    variables = _closure(_raw(image)._load)
    lines: list[str] = []
    for base in (variables.get("base_images") or {}).values():
        lines += _dockerfile_lines(base, version)
    if variables.get("dockerfile_function"):
        lines += variables["dockerfile_function"](version).commands
    return lines


SERVICE = _raw(modal_app.OpenJev._get_service_function())
DECLARED = _closure(SERVICE._load)


def test_imports_offline_without_credentials(tmp_path: Path) -> None:
    environment = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),  # no ~/.modal.toml
        "MODAL_SERVER_URL": f"http://127.0.0.1:{free_port()}",  # nothing listens there
    }
    code = "import modal_app; print(modal_app.app.name, modal_app.OpenJev.info().port)"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["openjev", "8000"]


def test_server_declaration() -> None:
    assert isinstance(modal_app.OpenJev, modal.Server)
    info = modal_app.OpenJev.info()
    assert info.gpus == [("B200", 1)]
    assert info.port == 8000 and info.unauthenticated is True
    assert info.routing_region == "us-west"
    assert info.compute_regions == ["us-west", "us-central", "us"]
    assert info.startup_timeout >= 30 * 60
    assert info.volumes["/cache"].name == "openjev-huggingface"


def test_autoscaling_has_no_cap_and_scales_to_zero_after_five_idle_minutes() -> None:
    autoscaler = DECLARED["autoscaler_settings"]
    assert autoscaler.scaledown_window == 300
    assert autoscaler.min_containers == modal_app.MIN_CONTAINERS  # an operator's choice, not pinned here
    assert not autoscaler.HasField("max_containers") and DECLARED["max_containers"] is None
    # Modal scales out before a container refuses requests with 529.
    assert 0 < autoscaler.target_concurrency_float < modal_app.MAX_CONCURRENT_REQUESTS
    assert modal_app.container_env({})["OPENJEV_MAX_CONCURRENT_REQUESTS"] == str(modal_app.MAX_CONCURRENT_REQUESTS)


def test_environment_puts_every_cache_on_the_volume() -> None:
    environment = _raw(DECLARED["secrets"][-1])._load_env_dict()  # `env=` becomes the last Secret
    assert environment == modal_app.container_env(os.environ)
    (mount,) = modal_app.OpenJev.info().volumes
    caches = (
        "HF_HOME",
        "SGLANG_CACHE_DIR",
        "SGLANG_JIT_CACHE_DIR",
        "FLASHINFER_WORKSPACE_BASE",
        "TRITON_CACHE_DIR",
        "TORCHINDUCTOR_CACHE_DIR",
        "OPENJEV_CACHE_DIR",
    )
    for variable in caches:
        assert environment[variable].startswith(f"{mount}/"), variable
    assert int(environment["OPENJEV_BACKEND_STARTUP_TIMEOUT"]) < modal_app.OpenJev.info().startup_timeout
    # SGLang starts with its vision tower: nothing makes it `--language-model-only` (which refuses images).
    assert not any(
        "language-model-only" in value or "LANGUAGE_MODEL_ONLY" in name for name, value in environment.items()
    )


def test_local_settings_are_forwarded_and_keys_travel_in_secrets() -> None:
    local = {
        "OPENJEV_PROFILE": "b200-prod",
        "OPENJEV_FRONTEND": "python",
        "OPENJEV_SERVED_MODEL_NAME": "acme/model",
        "OPENJEV_API_KEY": "k1",
        "HF_TOKEN": "hf",
        "OPENJEV_MODAL_SECRET": "openjev-secrets",
        "OPENJEV_PORT": "1234",
    }
    environment = modal_app.container_env(local)
    assert {name: environment.get(name) for name in local} == {
        "OPENJEV_PROFILE": "b200-prod",
        "OPENJEV_FRONTEND": "python",
        "OPENJEV_SERVED_MODEL_NAME": "acme/model",
        "OPENJEV_API_KEY": None,  # keys never go in the plain environment
        "HF_TOKEN": None,
        "OPENJEV_MODAL_SECRET": "openjev-secrets",  # so that the container names the same Secrets
        "OPENJEV_PORT": None,  # only the forwarded settings
    }
    values, stored = (_raw(secret) for secret in modal_app.deployment_secrets(local))
    assert values._load_env_dict() == {"OPENJEV_API_KEY": "k1", "HF_TOKEN": "hf"}
    assert "openjev-secrets" in repr(stored)
    assert modal_app.container_env({}).keys().isdisjoint(modal_app.FORWARDED_ENV)
    (empty,) = modal_app.deployment_secrets({})
    assert _raw(empty)._load_env_dict() == {}


@pytest.mark.parametrize(
    "local",
    [
        {},
        {"OPENJEV_API_KEY": "k"},
        {"OPENJEV_MODAL_SECRET": "stored"},
        {"OPENJEV_MODAL_SECRET": "stored", "HF_TOKEN": "hf"},
    ],
)
def test_secret_list_has_the_same_shape_at_deploy_time_and_in_the_container(local: dict[str, str]) -> None:
    # In the container: the forwarded environment, the dict Secret's values, and whatever the stored
    # Secret holds (here a key that was not set locally: the case that used to add a Secret).
    container = {**modal_app.container_env(local), **{k: v for k, v in local.items() if k in modal_app.SECRET_ENV}}
    if "OPENJEV_MODAL_SECRET" in local:
        container["OPENJEV_API_KEY"] = "from-the-stored-secret"
    deployed, loaded = modal_app.deployment_secrets(local), modal_app.deployment_secrets(container)
    assert len(deployed) == len(loaded) == 1 + ("OPENJEV_MODAL_SECRET" in local)
    assert [repr(_raw(s)).split("(")[0] for s in deployed] == [repr(_raw(s)).split("(")[0] for s in loaded]


def test_shutdown_budgets_add_up() -> None:
    environment = modal_app.container_env({})
    drain = int(environment["OPENJEV_REQUEST_TIMEOUT"]) + 5  # openjev serve's graceful shutdown
    grace = int(environment["OPENJEV_SGLANG_SHUTDOWN_GRACE"])
    assert drain + grace <= modal_app.API_STOP_SECONDS
    assert modal_app.API_STOP_SECONDS + modal_app.VOLUME_COMMIT_SECONDS <= modal_app.EXIT_GRACE_SECONDS
    assert modal_app.OpenJev.info().exit_grace_period == modal_app.EXIT_GRACE_SECONDS
    assert modal_app.OpenJev.info().startup_timeout < modal_app.SMOKE_STARTUP_DEADLINE


def test_image_is_sglang_plus_the_api_in_its_own_environment() -> None:
    assert SERVICE._spec.image is _raw(modal_app.image)
    lines = _dockerfile_lines(modal_app.image)
    assert lines[0] == "FROM lmsysorg/sglang:v0.5.19-cu129"
    (sync,) = [line for line in lines if " uv sync " in line]
    assert f"UV_PROJECT_ENVIRONMENT={modal_app.API_VENV}" in sync and "--frozen" in sync and "--no-dev" in sync
    assert not any(line.startswith("ENV PATH") for line in lines), "the API's venv must not shadow SGLang's Python"
    assert modal_app.API_COMMAND[:2] == [f"{modal_app.API_VENV}/bin/openjev", "serve"]
    command = dict(zip(modal_app.API_COMMAND[2::2], modal_app.API_COMMAND[3::2], strict=True))
    assert command == {"--sglang-python": modal_app.SGLANG_PYTHON, "--host": "0.0.0.0", "--port": "8000"}


def test_the_image_checks_itself_as_its_last_build_step() -> None:
    lines = _dockerfile_lines(modal_app.image)
    check = modal_app.image_check(modal_app.SGLANG_PYTHON, modal_app.API_VENV, modal_app.DEFAULT_SGLANG_VERSION)
    assert lines[-1] == f"RUN {check}"


def test_the_sglang_release_is_a_setting_whose_default_is_openjevs() -> None:
    from openjev.config import Settings
    from openjev.settings.backends import DEFAULT_SGLANG_VERSION

    assert modal_app.DEFAULT_SGLANG_VERSION == DEFAULT_SGLANG_VERSION == Settings().sglang_version
    assert modal_app.sglang_image({}) == "lmsysorg/sglang:v0.5.19-cu129"
    assert modal_app.sglang_image({"OPENJEV_SGLANG_VERSION": "0.5.23"}) == "lmsysorg/sglang:v0.5.23-cu129"
    assert modal_app.container_env({"OPENJEV_SGLANG_VERSION": "0.5.23"})["OPENJEV_SGLANG_VERSION"] == "0.5.23"
    with pytest.raises(ValueError, match="OPENJEV_SGLANG_VERSION"):
        modal_app.sglang_image({"OPENJEV_SGLANG_VERSION": "latest"})


def test_the_image_check_passes_with_both_interpreters_and_fails_without_sglang() -> None:
    from tests.sglang_contract.pinned import PinnedEnvironmentError, contract_python
    from tests.sglang_live.environment import install_cpu_stand_ins

    api_venv = str(Path(sys.prefix))
    without_sglang = subprocess.run(
        ["bash", "-c", modal_app.image_check(sys.executable, api_venv, "0.5.19")], check=False
    )
    assert without_sglang.returncode != 0
    try:
        python = contract_python()
    except PinnedEnvironmentError as error:
        pytest.fail(str(error))
    install_cpu_stand_ins(python)  # this CPU machine lacks the image's CUDA torchvision
    checks = [
        subprocess.run(["bash", "-c", modal_app.image_check(str(python), api_venv, version)], check=False, timeout=300)
        for version in ("0.5.19", "0.5.23")
    ]
    assert [check.returncode == 0 for check in checks] == [True, False]  # the 0.5.19 environment is not 0.5.23


def test_lifecycle_and_entrypoint() -> None:
    user_cls = modal_app.OpenJev._get_user_cls()
    assert set(_find_partial_methods_for_user_cls(user_cls, _PartialFunctionFlags.ENTER_POST_SNAPSHOT)) == {"start"}
    assert set(_find_partial_methods_for_user_cls(user_cls, _PartialFunctionFlags.EXIT)) == {"stop"}
    assert set(_raw(modal_app.app)._local_state.local_entrypoints) == {"smoke"}


def test_modal_run_entrypoint_smoke_checks_the_servers_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `modal run modal_app.py`, with Modal's URL lookup and the smoke run stubbed.
    import openjev.smoke

    calls: list[tuple[str, Any]] = []

    class Report:
        ok = True

        def to_json(self) -> str:
            return '{"ok": true}'

        def summary(self) -> str:
            return "all passed"

    def run_smoke(url: str, *, api_key: str | None, startup_deadline: float) -> Report:
        calls.append((url, startup_deadline))
        return Report()

    class Server:
        @staticmethod
        def get_url() -> str:
            return "https://openjev.example.modal.direct"

    monkeypatch.setattr(modal_app, "OpenJev", Server)
    monkeypatch.setattr(openjev.smoke, "run_smoke", run_smoke)
    report = tmp_path / "smoke.json"
    modal_app.smoke.info.raw_f(report=str(report))
    assert calls == [("https://openjev.example.modal.direct", modal_app.SMOKE_STARTUP_DEADLINE)]
    assert report.read_text() == '{"ok": true}'


def test_one_gpu_by_default_sets_no_data_parallel_settings() -> None:
    assert modal_app.gpu_spec({}) == "B200" and modal_app.gpu_count({"OPENJEV_GPUS": "1"}) == 1
    assert modal_app.data_parallel_env({}) == {}
    assert "OPENJEV_DATA_PARALLEL_SIZE" not in modal_app.container_env({"OPENJEV_GPUS": "1"})


@pytest.mark.parametrize("count", [2, 4, 8])
def test_gpus_give_the_container_b200s_and_sglang_as_many_ranks(count: int) -> None:
    from modal._utils.function_utils import parse_gpu_config

    local = {"OPENJEV_GPUS": str(count)}
    spec = modal_app.gpu_spec(local)
    assert spec == f"B200:{count}"
    config = parse_gpu_config(spec)  # what modal 1.6 sends for `gpu=`
    assert (config.gpu_type, config.count) == ("B200", count)
    environment = modal_app.container_env(local)
    assert environment["OPENJEV_GPUS"] == str(count)  # the container's own load declares the same GPUs
    assert environment["OPENJEV_DATA_PARALLEL_SIZE"] == str(count)
    assert environment["OPENJEV_FRONTEND"] == "python"  # the frontend that honours routed_dp_rank
    assert environment["OPENJEV_MAX_CONCURRENT_REQUESTS"] == str(modal_app.MAX_CONCURRENT_REQUESTS * count)
    assert environment["OPENJEV_MAX_CONCURRENT_BRANCHES"] == str(modal_app.BRANCHES_PER_GPU * count)
    # The container's settings are valid: openjev would launch SGLang with --dp-size N.
    from openjev.backends.supervised import sglang_command
    from openjev.config import Settings

    names = ("OPENJEV_DATA_PARALLEL_SIZE", "OPENJEV_FRONTEND")
    settings = Settings(sglang_python=Path("python"), **{name[8:].lower(): environment[name] for name in names})
    command = sglang_command(settings, 1, Path("tokenizer"))
    assert command[command.index("--dp-size") + 1] == str(count)


@pytest.mark.parametrize("value", ["0", "9", "two", "-1"])
def test_a_gpu_count_modal_cannot_place_on_one_machine_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="OPENJEV_GPUS must be a whole number from 1 to 8"):
        modal_app.gpu_spec({"OPENJEV_GPUS": value})


def test_the_declaration_follows_openjev_gpus(tmp_path: Path) -> None:
    """Loaded with OPENJEV_GPUS=2 (locally, and in the container through its environment), the Server
    asks Modal for two B200s on one machine."""
    code = "import modal_app; print(modal_app.OpenJev.info().gpus)"
    environment = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "OPENJEV_GPUS": "2",
        "MODAL_SERVER_URL": f"http://127.0.0.1:{free_port()}",
    }
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[('B200', 2)]"
