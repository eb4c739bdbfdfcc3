"""Submit a medagent pipeline to a running Ray cluster as a Ray job (a thin ``ray job submit`` wrapper).

    python -m pipelines.submit run_suite experiment=table1_mc llm=qwen2.5-72b-instruct cluster=multi_gpu \\
        scale=paper scoring=gpu reranker=gte-qwen2-7b-4bit outputs_root=/mnt/shared/outputs \\
        data_root=/mnt/shared/data index_dir=/mnt/shared/index/cpu_default-medcpt \\
        --address http://localhost:8265 --follow

The job runs ``python -m pipelines.<name> <overrides>`` on the cluster with ``cluster/runtime_env.yaml``
(this checkout as the working_dir, the pinned dependencies). Before anything is sent, the overrides are
composed here against conf/ (a typo fails in a second, not after the GPUs started), the cluster config must
join a cluster (``cluster=local`` would start a private Ray inside the job) and every path must be
absolute, because a job's working directory is a temporary copy on one node. Nothing here starts Ray.

One pipeline job at a time per cluster: every job deploys the same Serve application names and ends its
Ray session with ``serve.shutdown()``, so two jobs on one long-lived RayCluster would tear down each other's
deployments. ``submit`` refuses while another job there is PENDING or RUNNING (``--allow-concurrent``
overrides); RayJobs get a cluster each, so several tables run side by side as RayJobs.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import re
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import yaml

REPO = Path(__file__).resolve().parents[1]
PIPELINES_DIR = REPO / "pipelines"
RUNTIME_ENV = REPO / "cluster" / "runtime_env.yaml"
DEFAULT_ADDRESS = "http://127.0.0.1:8265"
# Overrides that name files or folders; on a cluster they must be absolute paths on shared storage.
# suite.dir (run_suite's suite.json + report) and hydra.run.dir / hydra.sweep.dir (hydra's own output
# folders, when a user moves them) would otherwise land in that temporary copy and be lost with it.
PATH_KEYS = frozenset(
    {
        "outputs_root", "run_dir", "out_dir", "index_dir", "data_root", "annotations", "out", "runs",
        "suite.dir", "hydra.run.dir", "hydra.sweep.dir",
    }
)  # fmt: skip
# Job states in which a job still holds (or is about to deploy) the cluster's Serve applications.
ACTIVE_STATES = frozenset({"PENDING", "RUNNING"})
# Each pipeline must be told where to write (any one of these); the default suits run_* and analyze_*.
WRITE_KEYS: dict[str, tuple[str, ...]] = {
    "index_corpus": ("out_dir",),
    "report": ("out", "outputs_root"),
    "serve": (),
}
DEFAULT_WRITE_KEYS = ("outputs_root", "run_dir")
_HYDRA_MAIN = re.compile(r"@hydra\.main\([^)]*config_name=[\"']([\w.-]+)[\"']")
_NOT_JOBS = frozenset({"submit", "common", "serve_app", "__init__"})


class SubmitError(ValueError):
    """A submission refused before it is sent (unknown pipeline, bad override, local path, a busy cluster)."""


def known_pipelines() -> dict[str, str | None]:
    """Entry points under pipelines/ -> their hydra config name (None when not a hydra app).

    Read from the files, so a new pipeline (e.g. run_suite) is submittable the moment it lands.
    """
    found: dict[str, str | None] = {}
    for path in sorted(PIPELINES_DIR.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if path.stem in _NOT_JOBS or "__main__" not in text:
            continue
        match = _HYDRA_MAIN.search(text)
        found[path.stem] = match.group(1) if match else None
    return found


def override_key(override: str) -> str:
    """``+a.b=1`` -> ``a.b``; ``~a`` -> ``a``."""
    return override.lstrip("+~").split("=", 1)[0]


def _values(raw: str) -> list[str]:
    """The path values of one override: a hydra list ``[a,b]`` gives each element."""
    raw = raw.strip().strip("'\"")
    if raw.startswith("[") and raw.endswith("]"):
        return [v.strip().strip("'\"") for v in raw[1:-1].split(",") if v.strip()]
    return [raw]


def _is_shared_path(value: str) -> bool:
    # ${...} interpolates another (checked) override, e.g. index_dir=${outputs_root}/index/x.
    return value.startswith(("/", "${")) or value in ("null", "None", "")


def check_overrides(pipeline: str, overrides: Sequence[str], *, allow_local_paths: bool = False) -> None:
    """Refuses a pipeline name that does not exist and paths a cluster job cannot use.

    Raises:
        SubmitError: Unknown pipeline; a relative path; no place to write given.
    """
    pipelines = known_pipelines()
    if pipeline not in pipelines:
        raise SubmitError(f"unknown pipeline {pipeline!r}; one of: {', '.join(pipelines)}")
    if allow_local_paths:
        return
    keys = {override_key(o) for o in overrides if "=" in o}
    for override in overrides:
        key = override_key(override)
        if key not in PATH_KEYS or "=" not in override:
            continue
        bad = [v for v in _values(override.split("=", 1)[1]) if not _is_shared_path(v)]
        if bad:
            raise SubmitError(
                f"{key}={bad[0]} is not an absolute path: a job's working directory is a temporary copy on "
                "one node, so runs and indexes must live on shared storage (e.g. /mnt/shared/...); object-store "
                "URIs are not supported. --allow-local-paths skips this check (single-node clusters)."
            )
    needed = WRITE_KEYS.get(pipeline, DEFAULT_WRITE_KEYS)
    if needed and not keys & set(needed):
        raise SubmitError(
            f"{pipeline} needs {' or '.join(f'{k}=/abs/path' for k in needed)} on shared storage (the default "
            "is relative to the job's temporary working directory). --allow-local-paths skips this check."
        )


def compose_pipeline_config(pipeline: str, overrides: Sequence[str]) -> Any:
    """The pipeline's hydra config with ``overrides`` (composition only: no Ray, no hydra.main)."""
    from hydra import compose, initialize_config_module

    config_name = known_pipelines().get(pipeline)
    if config_name is None:
        raise SubmitError(f"{pipeline!r} is not a hydra pipeline; nothing to compose")
    importlib.import_module(f"pipelines.{pipeline}")  # registers the typed schema its config names
    with initialize_config_module(config_module="conf", version_base="1.3"):
        return compose(config_name=config_name, overrides=list(overrides))


def check_composes(pipeline: str, overrides: Sequence[str]) -> str | None:
    """Composes the config here; the cluster config must join a cluster. Returns its ``cluster.ray.auth_mode``.

    Raises:
        SubmitError: The overrides do not compose, or ``cluster.ray.address`` is null.
    """
    if known_pipelines().get(pipeline) is None:
        return None
    try:
        cfg = compose_pipeline_config(pipeline, overrides)
    except Exception as exc:  # hydra's errors name the bad override; show them as ours
        raise SubmitError(f"the overrides do not compose for {pipeline}: {exc}") from exc
    cluster = cfg.get("cluster")
    ray_init = cluster.get("ray", {}) if cluster is not None else {}
    if cluster is not None and ray_init.get("address") is None:
        raise SubmitError(
            f"cluster={cluster.get('name')} starts a private Ray inside the job instead of joining the cluster; "
            "pass cluster=single_gpu, cluster=multi_gpu or cluster=multi_node (conf/cluster/)"
        )
    return ray_init.get("auth_mode")


def _status(job: Any) -> str:
    status = getattr(job, "status", None)
    return str(getattr(status, "value", status))


def check_no_active_jobs(client: Any, address: str) -> None:
    """Refuses to submit while another job on the cluster is PENDING or RUNNING.

    Raises:
        SubmitError: Names each active job; ``--allow-concurrent`` skips this check.
    """
    active = [j for j in client.list_jobs() if _status(j) in ACTIVE_STATES]
    if not active:
        return
    lines = []
    for j in active:
        job_id = getattr(j, "submission_id", None) or getattr(j, "job_id", None) or "?"
        what = (getattr(j, "metadata", None) or {}).get("overrides") or getattr(j, "entrypoint", "")
        lines.append(f"  {job_id} {_status(j)}: {str(what)[:120]}")
    raise SubmitError(
        f"{len(active)} job(s) already active on {address}:\n" + "\n".join(lines) + "\n"
        "Jobs on one Ray cluster share its Serve applications (same names; each job's end shuts Serve "
        "down), so they would break each other: wait (ray job status / ray job stop), run the tables as "
        "RayJobs (a cluster each), or pass --allow-concurrent if the other job uses no Serve application."
    )


def build_entrypoint(pipeline: str, overrides: Sequence[str]) -> str:
    """The job's shell command; each override is quoted, so brackets and spaces survive the shell."""
    return " ".join(["python", "-m", f"pipelines.{pipeline}", *(shlex.quote(o) for o in overrides)])


def load_runtime_env(
    path: Path = RUNTIME_ENV,
    *,
    working_dir: Path = REPO,
    pip: bool = True,
    env_vars: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``cluster/runtime_env.yaml`` ready to send: ``working_dir: .`` becomes this checkout's absolute path."""
    runtime_env: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if runtime_env.get("working_dir") in (".", "./"):
        runtime_env["working_dir"] = str(working_dir.resolve())
    if not pip:
        runtime_env.pop("pip", None)
    if env_vars:
        runtime_env["env_vars"] = {**runtime_env.get("env_vars", {}), **env_vars}
    return runtime_env


def dashboard_url(address: str, job_id: str) -> str:
    return f"{address.rstrip('/')}/#/jobs/{job_id}"


def _parse_env(pairs: Sequence[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SubmitError(f"--env expects KEY=VALUE, got {pair!r}")
        env[key] = value
    return env


def _parser() -> argparse.ArgumentParser:
    names = ", ".join(known_pipelines())
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.submit",
        description="Submit a medagent pipeline to a running Ray cluster as a Ray job (docs/CLUSTER.md).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"""pipelines: {names}

Everything that is not an option below is passed to the pipeline as a hydra override. Paths must be
absolute on storage every node mounts; pick a cluster config that joins the cluster (cluster=multi_gpu, ...).

examples:
  python -m pipelines.submit run_suite experiment=table1_mc llm=qwen2.5-72b-instruct cluster=multi_gpu \\
      scale=paper scoring=gpu reranker=gte-qwen2-7b-4bit outputs_root=/mnt/shared/outputs \\
      data_root=/mnt/shared/data index_dir=/mnt/shared/index/cpu_default-medcpt \\
      --address http://localhost:8265 --follow
  python -m pipelines.submit index_corpus corpus=cpu_default embedder=medcpt cluster=multi_gpu \\
      data_root=/mnt/shared/data out_dir=/mnt/shared/index/cpu_default-medcpt --dry-run

Token authentication: export RAY_AUTH_MODE=token and RAY_AUTH_TOKEN=<the cluster's token>.""",
    )
    parser.add_argument("pipeline", help="pipeline module under pipelines/ (see the list below)")
    parser.add_argument("overrides", nargs="*", help="hydra overrides, e.g. experiment=table1_mc")
    parser.add_argument(
        "--address",
        default=os.environ.get("RAY_ADDRESS") or DEFAULT_ADDRESS,
        help=f"the Ray dashboard / job server (default: $RAY_ADDRESS, else {DEFAULT_ADDRESS})",
    )
    parser.add_argument("--runtime-env", type=Path, default=RUNTIME_ENV, help="runtime_env YAML")
    parser.add_argument(
        "--no-pip", action="store_true", help="drop the pip section (the image already has the pins)"
    )
    parser.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="extra env var (repeatable)"
    )
    parser.add_argument("--submission-id", default=None, help="job id to use (default: Ray picks one)")
    parser.add_argument("--follow", action="store_true", help="stream the job's logs until it ends")
    parser.add_argument(
        "--dry-run", action="store_true", help="print entrypoint and runtime_env; contact nothing"
    )
    parser.add_argument(
        "--no-check", action="store_true", help="skip composing the overrides against conf/ here"
    )
    parser.add_argument(
        "--allow-local-paths", action="store_true", help="accept relative paths (single-node clusters)"
    )
    parser.add_argument(
        "--allow-concurrent",
        action="store_true",
        help="submit even while another job on the cluster is PENDING or RUNNING (they share Serve apps)",
    )
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Options may come before or after the overrides; unknown dashed words (hydra's -m) are overrides."""
    args, extra = _parser().parse_known_args(argv)
    args.overrides = [*args.overrides, *extra]
    return args


async def _tail(client: Any, job_id: str, out: TextIO) -> None:
    async for lines in client.tail_job_logs(job_id):
        out.write(lines)
        out.flush()


# The job server answers this while the head's dashboard agent serves no HTTP, e.g. while it restarts. An
# agent that never could (its port taken: pipelines/sim_cluster.py gives each node its own) keeps answering
# it, and the last attempt's error is raised.
_NO_AGENT = "No available agent to submit job"


def _submit_job(client: Any, attempts: int = 12, wait_s: float = 10.0, **kwargs: Any) -> str:
    """``client.submit_job``, retried while the job server has no agent to run it on."""
    import time

    for attempt in range(1, attempts + 1):
        try:
            return str(client.submit_job(**kwargs))
        except RuntimeError as exc:
            if _NO_AGENT not in str(exc) or attempt == attempts:
                raise
            print(f"pipelines.submit: {_NO_AGENT.lower()} yet; retrying in {wait_s:g}s", file=sys.stderr)
            time.sleep(wait_s)
    raise AssertionError("unreachable")


def submit(
    args: argparse.Namespace,
    client_factory: Callable[[str], Any] | None = None,
    out: TextIO = sys.stdout,
) -> int:
    """Checks, then submits (or prints, with ``--dry-run``); returns the process exit code."""
    check_overrides(args.pipeline, args.overrides, allow_local_paths=args.allow_local_paths)
    if not args.no_check and "-m" not in args.overrides and "--multirun" not in args.overrides:
        auth_mode = check_composes(args.pipeline, args.overrides)
        if auth_mode:
            # The job server of a token cluster (cluster=sim_multi_node) refuses a client without it; the
            # token itself comes from ~/.ray/auth_token or RAY_AUTH_TOKEN.
            os.environ.setdefault("RAY_AUTH_MODE", auth_mode)
    entrypoint = build_entrypoint(args.pipeline, args.overrides)
    runtime_env = load_runtime_env(args.runtime_env, pip=not args.no_pip, env_vars=_parse_env(args.env))
    metadata = {"pipeline": args.pipeline, "overrides": " ".join(args.overrides), "via": "pipelines.submit"}
    if args.dry_run:
        plan = {"address": args.address, "entrypoint": entrypoint, "runtime_env": runtime_env}
        out.write(json.dumps({**plan, "metadata": metadata}, indent=2) + "\n")
        return 0
    if client_factory is None:
        from ray.job_submission import JobSubmissionClient

        client_factory = JobSubmissionClient
    client = client_factory(args.address)
    if not args.allow_concurrent:
        check_no_active_jobs(client, args.address)
    job_id = _submit_job(
        client,
        entrypoint=entrypoint,
        runtime_env=runtime_env,
        submission_id=args.submission_id,
        metadata=metadata,
    )
    out.write(f"submitted job {job_id}\n  dashboard: {dashboard_url(args.address, job_id)}\n")
    out.write(f"  logs:      ray job logs --address {args.address} --follow {job_id}\n")
    out.flush()
    if not args.follow:
        return 0
    try:
        asyncio.run(_tail(client, job_id, out))
    except KeyboardInterrupt:
        # Stops following only: the job keeps running on the cluster.
        out.write(f"\nstopped following; the job keeps running (ray job stop {job_id} ends it)\n")
        return 130
    status = client.get_job_status(job_id)
    status = getattr(status, "value", status)
    out.write(f"job {job_id}: {status}\n")
    return 0 if status == "SUCCEEDED" else 1


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return submit(args)
    except SubmitError as exc:
        print(f"pipelines.submit: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
