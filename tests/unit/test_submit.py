"""pipelines.submit with a fake JobSubmissionClient: what it sends, what it refuses, no cluster."""

from __future__ import annotations

import io
import json
import shlex
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from pipelines import submit

SHARED = ["outputs_root=/mnt/shared/outputs", "data_root=/mnt/shared/data"]
TABLE1 = ["experiment=table1_mc", "llm=qwen2.5-72b-instruct", "cluster=multi_gpu", *SHARED]


class FakeClient:
    """Records calls like ray.job_submission.JobSubmissionClient; never contacts anything."""

    instances: list[FakeClient] = []

    def __init__(self, address: str, status: str = "SUCCEEDED", jobs: list[Any] | None = None) -> None:
        self.address = address
        self.status = status
        self.jobs = jobs or []  # what list_jobs returns: JobDetails-like objects
        self.submitted: list[dict[str, Any]] = []
        FakeClient.instances.append(self)

    def list_jobs(self) -> list[Any]:
        return self.jobs

    def submit_job(self, **kwargs: Any) -> str:
        self.submitted.append(kwargs)
        return kwargs.get("submission_id") or "raysubmit_fake123"

    async def tail_job_logs(self, job_id: str) -> AsyncIterator[str]:
        for line in ("cell 1/10 done\n", "cell 2/10 done\n"):
            yield line

    def get_job_status(self, job_id: str) -> str:
        return self.status


def _run(argv: list[str], factory: Any = FakeClient) -> tuple[int, str, list[FakeClient]]:
    FakeClient.instances = []
    out = io.StringIO()
    code = submit.submit(submit.parse_args(argv), client_factory=factory, out=out)
    return code, out.getvalue(), FakeClient.instances


def test_submits_the_pipeline_with_the_runtime_env() -> None:
    code, out, clients = _run(["run_benchmark", *TABLE1[1:], "--address", "http://head:8265"])
    assert code == 0
    (client,) = clients
    assert client.address == "http://head:8265"
    (job,) = client.submitted
    assert shlex.split(job["entrypoint"]) == ["python", "-m", "pipelines.run_benchmark", *TABLE1[1:]]
    env = job["runtime_env"]
    assert env["working_dir"] == str(submit.REPO) and Path(env["working_dir"], "pipelines").is_dir()
    assert ".venv/" in env["excludes"] and "outputs/" in env["excludes"]
    assert "torch==2.13.0" in env["pip"]["packages"]
    assert job["metadata"]["pipeline"] == "run_benchmark"
    assert "raysubmit_fake123" in out and "http://head:8265/#/jobs/raysubmit_fake123" in out


def test_options_may_follow_the_overrides_and_hydra_flags_pass_through() -> None:
    args = submit.parse_args(
        ["run_suite", "experiment=table1_mc", "--address", "http://h:8265", "limit=5", "-m"]
    )
    assert args.address == "http://h:8265"
    assert args.overrides == ["experiment=table1_mc", "limit=5", "-m"]


def test_entrypoint_quotes_overrides_for_the_shell() -> None:
    override = "+corpus.sources.0.options.subsets=[Health_Topics,NHLBI]"
    entry = submit.build_entrypoint("index_corpus", [override, "out_dir=/mnt/shared/i"])
    assert shlex.split(entry)[3] == override


def test_dry_run_prints_and_contacts_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_client(address: str) -> Any:
        raise AssertionError("--dry-run must not create a client")

    code, out, _ = _run(["run_suite", *TABLE1, "--dry-run", "--no-pip"], factory=no_client)
    assert code == 0
    plan = json.loads(out)
    assert plan["entrypoint"].startswith("python -m pipelines.run_suite experiment=table1_mc")
    assert "pip" not in plan["runtime_env"] and plan["runtime_env"]["env_vars"]["HF_HOME"] == "/mnt/shared/hf"


def test_follow_tails_logs_and_returns_the_job_status() -> None:
    code, out, _ = _run(["run_benchmark", *TABLE1[1:], "--follow"])
    assert code == 0 and "cell 2/10 done" in out and "SUCCEEDED" in out

    def failing(address: str) -> FakeClient:
        return FakeClient(address, status="FAILED")

    code, out, _ = _run(["run_benchmark", *TABLE1[1:], "--follow"], factory=failing)
    assert code == 1 and "FAILED" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["no_such_pipeline", *SHARED], "unknown pipeline"),
        (["run_benchmark", "cluster=multi_gpu", "outputs_root=outputs"], "not an absolute path"),
        (["run_benchmark", "cluster=multi_gpu", "data_root=/d"], "outputs_root=/abs/path or run_dir"),
        (["index_corpus", "cluster=multi_gpu"], "out_dir=/abs/path"),
        (["report", "runs=[outputs/x,/mnt/shared/y]", "out=/mnt/shared/r"], "runs=outputs/x"),
        (["run_benchmark", *SHARED], "cluster=local starts a private Ray"),  # the default cluster config
        (["run_benchmark", "cluster=multi_gpu", "limit=many", *SHARED], "do not compose"),
        (["run_benchmark", "cluster=multi_gpu", "llm=gpt-17", *SHARED], "do not compose"),
    ],
)
def test_refuses_before_contacting_the_cluster(argv: list[str], message: str) -> None:
    def no_client(address: str) -> Any:
        raise AssertionError("a refused submission must not create a client")

    with pytest.raises(submit.SubmitError, match=message.replace("[", r"\[")):
        _run(argv, factory=no_client)


def test_escape_hatches() -> None:
    # A single-node cluster may use relative paths; --no-check skips composing locally.
    code, _, _ = _run(["run_benchmark", "cluster=multi_gpu", "outputs_root=outs", "--allow-local-paths"])
    assert code == 0
    code, _, _ = _run(["run_benchmark", "llm=not-here-yet", *SHARED, "--no-check"])
    assert code == 0


def test_main_reports_refusals_as_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert submit.main(["run_benchmark", "outputs_root=rel"]) == 2
    assert "not an absolute path" in capsys.readouterr().err


def test_known_pipelines_are_the_hydra_entry_points() -> None:
    known = submit.known_pipelines()
    assert {
        "index_corpus",
        "run_benchmark",
        "run_suite",
        "run_interviews",
        "analyze_network",
        "serve",
    } <= set(known)
    assert known["run_benchmark"] == "config" and known["index_corpus"] == "index_corpus"
    assert "submit" not in known and "serve_app" not in known and "common" not in known


def test_help_lists_pipelines(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        submit.parse_args(["--help"])
    text = capsys.readouterr().out
    assert "run_suite" in text and "--dry-run" in text and "--follow" in text


def test_extra_env_vars_and_runtime_env_file(tmp_path: Path) -> None:
    path = tmp_path / "env.yaml"
    path.write_text(yaml.safe_dump({"working_dir": ".", "env_vars": {"A": "1"}}))
    env = submit.load_runtime_env(path, working_dir=tmp_path, env_vars={"B": "2"})
    assert env == {"working_dir": str(tmp_path.resolve()), "env_vars": {"A": "1", "B": "2"}}
    with pytest.raises(submit.SubmitError, match="KEY=VALUE"):
        _run(["run_benchmark", *TABLE1[1:], "--env", "novalue"])


def _job(status: str, submission_id: str = "raysubmit_other", **kw: Any) -> SimpleNamespace:
    """A JobDetails stand-in; ``status`` is a str like JobStatus (a str enum)."""
    return SimpleNamespace(status=status, submission_id=submission_id, job_id="02000000", **kw)


@pytest.mark.parametrize("state", ["RUNNING", "PENDING"])
def test_refuses_while_another_job_is_active(state: str) -> None:
    other = _job(state, metadata={"overrides": "experiment=table3_ablation cluster=multi_gpu"})

    def busy(address: str) -> FakeClient:
        return FakeClient(address, jobs=[_job("SUCCEEDED", "raysubmit_old"), other])

    with pytest.raises(submit.SubmitError, match="already active") as err:
        _run(["run_suite", *TABLE1], factory=busy)
    assert f"raysubmit_other {state}: experiment=table3_ablation" in str(err.value)
    assert "raysubmit_old" not in str(err.value) and "--allow-concurrent" in str(err.value)
    assert FakeClient.instances[0].submitted == []  # nothing was sent

    code, _, clients = _run(["run_suite", *TABLE1, "--allow-concurrent"], factory=busy)
    assert code == 0 and len(clients[0].submitted) == 1


def test_job_states_are_read_from_rays_enum() -> None:
    job_submission = pytest.importorskip("ray.job_submission")
    assert submit._status(_job(job_submission.JobStatus.PENDING)) == "PENDING"


def test_finished_jobs_do_not_block() -> None:
    def idle(address: str) -> FakeClient:
        jobs = [
            _job(s, f"raysubmit_{s.lower()}", entrypoint="python -m x")
            for s in ("SUCCEEDED", "FAILED", "STOPPED")
        ]
        return FakeClient(address, jobs=jobs)

    code, _, clients = _run(["run_suite", *TABLE1], factory=idle)
    assert code == 0 and len(clients[0].submitted) == 1


@pytest.mark.parametrize(
    "override", ["suite.dir=report", "hydra.run.dir=hydra-out", "hydra.sweep.dir=sweeps"]
)
def test_suite_and_hydra_output_dirs_must_be_absolute(override: str) -> None:
    with pytest.raises(submit.SubmitError, match="not an absolute path"):
        _run(["run_suite", *TABLE1, override])
    code, _, _ = _run(["run_suite", *TABLE1, override.split("=")[0] + "=/mnt/shared/outputs/x"])
    assert code == 0


def test_submission_waits_for_a_job_agent_and_raises_other_errors() -> None:
    from pipelines.submit import _submit_job

    class Client:
        def __init__(self, errors: list[str]) -> None:
            self.errors = errors

        def submit_job(self, **_: object) -> str:
            if self.errors:
                raise RuntimeError(self.errors.pop(0))
            return "raysubmit_1"

    busy = "Request failed with status code 500: No available agent to submit job, please try again later.."
    assert _submit_job(Client([busy, busy]), wait_s=0, entrypoint="x") == "raysubmit_1"
    with pytest.raises(RuntimeError, match="bad entrypoint"):
        _submit_job(Client(["bad entrypoint"]), wait_s=0, entrypoint="x")
    with pytest.raises(RuntimeError, match="No available agent"):
        _submit_job(Client([busy] * 3), attempts=2, wait_s=0, entrypoint="x")
