"""`reward-server serve ...`: run the HTTP server (uvicorn) on a sandbox pool;
`reward-server integrations verl-path`: the file verl's `custom_reward_function.path` takes."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from pydantic import ValidationError

from reward_server.settings import Settings

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Code-verifier reward server for GRPO training.")


@app.callback()
def _main() -> None:
    """Code-verifier reward server for GRPO training."""


@app.command()
def serve(
    host: str | None = typer.Option(None, help="bind address [env REWARD_SERVER_HOST, default 127.0.0.1]"),
    port: int | None = typer.Option(None, help="port [env REWARD_SERVER_PORT, default 8000]"),
    sandbox: str | None = typer.Option(None, help="sandbox host: auto|docker|bwrap|socketdir [default auto]"),
    pool: int | None = typer.Option(None, "--pool", help="runners in the pool [default: the host's choice]"),
    runtime: str | None = typer.Option(None, help="runtime of code tasks that name none: python|sci [env REWARD_SERVER_RUNTIME, default python]"),
    runtimes: str | None = typer.Option(None, help="runtimes requests may name, e.g. python,sci [env REWARD_SERVER_RUNTIMES, default: every one built here]"),
    sandbox_option: list[str] = typer.Option([], "--sandbox-option", help="extra host option KEY=VALUE (JSON value), repeatable"),
    socket_dir: str | None = typer.Option(None, help="socketdir host: directory of runner sockets [env REWARD_SERVER_SOCKET_DIR, default /run/sandbox]"),
    lazy_runtimes: bool | None = typer.Option(None, "--lazy-runtimes/--eager-runtimes", help="start a non-default runtime's pool on its first job (default), or every offered pool at start-up [env REWARD_SERVER_LAZY_RUNTIMES]"),
    eager_toolchains: bool | None = typer.Option(None, "--eager-toolchains/--lazy-toolchains", help="bwrap: start the toolchain pool (C++, Java, Go, Rust, JS, TS jobs) at start-up, or on the first such job (default) [env REWARD_SERVER_EAGER_TOOLCHAINS]"),
    max_items: int | None = typer.Option(None, help="items per request"),
    max_body_bytes: int | None = typer.Option(None, help="request body cap (413 beyond)"),
    max_inflight: int | None = typer.Option(None, help="jobs running at once [default: pool capacity]"),
    max_queued: int | None = typer.Option(None, help="accepted jobs waiting (429 beyond)"),
    max_timeout_s: float | None = typer.Option(None, help="ceiling for a task's timeout_s"),
    max_memory_mb: int | None = typer.Option(None, help="ceiling for a task's memory_mb"),
    auth_token: str | None = typer.Option(None, help="require this bearer token [env REWARD_SERVER_AUTH_TOKEN]"),
    math_workers: int | None = typer.Option(None, help="math grader worker processes"),
    time_scale: float | None = typer.Option(None, help="multiplies the time limit a task (or a data set's row) gives, for a slower or faster host than the data set's judge [env REWARD_SERVER_TIME_SCALE, default 1]"),
    testlib_header: str | None = typer.Option(None, help="path of testlib.h for checkers and interactors that include it [env REWARD_SERVER_TESTLIB_HEADER]"),
    max_sessions: int | None = typer.Option(None, help="/v1/sessions held at once (429 beyond) [default: what the sandbox holds]"),
    log_level: str | None = typer.Option(None, help="debug|info|warning|error"),
    text_logs: bool = typer.Option(False, "--text-logs", help="plain text logs instead of JSON"),
) -> None:
    """Serve /v1/score, /run_code, /get_reward, /healthz, /readyz and /metrics."""
    import uvicorn  # noqa: PLC0415

    from reward_server.app import create_app  # noqa: PLC0415
    from reward_server.logs import configure_logging  # noqa: PLC0415

    overrides = {
        "host": host, "port": port, "sandbox": sandbox, "pool_size": pool, "runtime": runtime, "runtimes": runtimes,
        "max_items_per_request": max_items,
        "max_body_bytes": max_body_bytes, "max_inflight_jobs": max_inflight, "max_queued_jobs": max_queued,
        "max_timeout_s": max_timeout_s, "max_memory_mb": max_memory_mb, "auth_token": auth_token,
        "math_workers": math_workers, "log_level": log_level, "time_scale": time_scale,
        "testlib_header": testlib_header, "max_sessions": max_sessions,
    }
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if lazy_runtimes is not None:
        overrides["lazy_runtimes"] = lazy_runtimes
    if eager_toolchains is not None:
        overrides["eager_toolchains"] = eager_toolchains
    if text_logs:
        overrides["log_json"] = False
    if sandbox_option:
        opts = {}
        for kv in sandbox_option:
            k, _, v = kv.partition("=")
            try:
                opts[k] = json.loads(v)
            except json.JSONDecodeError:
                opts[k] = v
        overrides["sandbox_options"] = opts
    try:
        settings = Settings(**overrides)
    except ValidationError as e:  # e.g. an empty --auth-token: refuse to start, say why
        raise typer.BadParameter(str(e)) from None
    if socket_dir:  # merged into options from flags or REWARD_SERVER_SANDBOX_OPTIONS
        settings.sandbox_options["socket_dir"] = socket_dir
    configure_logging(settings.log_level, settings.log_json)
    application = create_app(settings)

    class _Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:  # SIGTERM/SIGINT: refuse new work at once (503)
            adm = application.state.server.admission
            if adm is not None:
                adm.begin_drain()
            super().handle_exit(sig, frame)

    config = uvicorn.Config(application, host=settings.host, port=settings.port, log_config=None,
                            access_log=False, timeout_graceful_shutdown=settings.shutdown_grace_s or None)
    _Server(config).run()


integrations = typer.Typer(add_completion=False, no_args_is_help=True,
                           help="Where the trainer-side integrations live (for peers' config files).")
app.add_typer(integrations, name="integrations")


@integrations.command("verl-path")
def verl_path(pkg: bool = typer.Option(False, "--pkg", help="print verl's package form (newer verl) instead")) -> None:
    """The file for verl's custom_reward_function.path (any verl version), wherever pip put it."""
    if pkg:
        typer.echo("pkg://reward_server.compat.verl")
        return
    from reward_server.compat import verl as verl_compat  # noqa: PLC0415

    typer.echo(str(Path(verl_compat.__file__).resolve()))


@app.command()
def settings() -> None:
    """Print the effective settings (flags aside) as JSON."""
    s = Settings()
    d = s.model_dump(mode="json")
    if s.auth_token is not None:
        d["auth_token"] = "***"
    typer.echo(json.dumps(d, indent=2))


ray_cli = typer.Typer(add_completion=False, no_args_is_help=True,
                      help="A scoring fleet on a Ray cluster with Ray Serve (the `ray` extra; docs/DEPLOY.md).")
app.add_typer(ray_cli, name="ray")


def _json_pairs(pairs: list[str]) -> dict[str, object]:
    """KEY=VALUE flags as a dict, each value JSON where it parses, else the string."""
    out: dict[str, object] = {}
    for kv in pairs:
        k, _, v = kv.partition("=")
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out


def _fleet():
    try:
        from reward_server.deploy import ray as fleet  # noqa: PLC0415
    except ImportError as e:
        raise typer.BadParameter(f"needs the ray extra (pip install 'verireward[ray]'): {e}") from None
    return fleet


@ray_cli.command("up")
def ray_up(
    address: str = typer.Option("auto", help="the Ray cluster: auto (the one this node is in), HOST:6379 or ray://HOST:10001"),
    replicas: str = typer.Option("auto", help="a number, or auto: one per alive node with --cpus-per-replica CPUs"),
    autoscale: bool = typer.Option(False, "--autoscale", help="let Serve scale between --min-replicas and --replicas on in-flight jobs"),
    min_replicas: int = typer.Option(1, help="--autoscale: the fewest replicas kept"),
    cpus_per_replica: float = typer.Option(1.0, help="Ray CPUs a replica reserves on its node"),
    host: str = typer.Option("0.0.0.0", help="bind address of Serve's HTTP proxies"),
    port: int = typer.Option(8000, help="port of Serve's HTTP proxies"),
    proxy_location: str = typer.Option("EveryNode", help="EveryNode (a proxy on each node) or HeadOnly"),
    sandbox: str | None = typer.Option(None, help="sandbox host on every node: auto (docker where an engine and the image answer, else bwrap) | bwrap | docker"),
    setting: list[str] = typer.Option([], "--setting", help="a reward-server setting for every replica, KEY=VALUE (JSON value), repeatable"),
    option: list[str] = typer.Option([], "--option", help="another build_app argument, KEY=VALUE (JSON value), e.g. health_check_period_s=1, repeatable"),
) -> None:
    """Deploy (or update) the fleet; prints Serve's URL, the one URL clients need."""
    fleet = _fleet()
    settings_ = _json_pairs(setting)
    if sandbox is not None:
        settings_["sandbox"] = sandbox
    args = {"replicas": replicas, "autoscale": autoscale,
            "min_replicas": min_replicas, "cpus_per_replica": cpus_per_replica, "settings": settings_,
            **_json_pairs(option)}
    try:
        fleet_args = fleet.FleetArgs.model_validate(args)
    except ValidationError as e:
        raise typer.BadParameter(str(e)) from None
    typer.echo(fleet.up(fleet_args, address=address, host=host, port=port, proxy_location=proxy_location))


@ray_cli.command("down")
def ray_down(address: str = typer.Option("auto", help="the Ray cluster, as for `ray up`")) -> None:
    """Delete the fleet's application (Serve and other applications stay)."""
    _fleet().down(address)


if __name__ == "__main__":  # pragma: no cover
    app()
