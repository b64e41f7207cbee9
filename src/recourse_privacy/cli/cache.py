"""``recourse-privacy cache info|clear``: the shared cache of trained models and recourse."""

from __future__ import annotations

import typer

from recourse_privacy.cli._common import (
    _command,
)
from recourse_privacy.errors import InvalidInputError

cache_app = typer.Typer(
    no_args_is_help=True,
    help="The shared cache of trained models and recourse (reused by audits and grid cells).",
)

_CACHE_ARG = typer.Option(None, help="the cache directory (default $RECOURSE_PRIVACY_CACHE, else the user cache)")


def _cache_or_fail(cache_dir: str | None):
    from recourse_privacy.cache import ArtifactCache, resolve_cache_dir

    path = resolve_cache_dir(cache_dir)
    if path is None:
        raise InvalidInputError("the artifact cache is off (--cache-dir / $RECOURSE_PRIVACY_CACHE); name a directory")
    return ArtifactCache(path)


@_command("info", on=cache_app)
def cache_info_command(cache_dir: str | None = _CACHE_ARG) -> None:
    """Where the cache is, its entries and size, and the hit rates of the last run that used it."""
    from rich.console import Console

    console = Console()
    info = _cache_or_fail(cache_dir).info()
    entries = ", ".join(f"{n} {kind}" for kind, n in info.entries.items()) or "no entries"
    console.print(f"{info.root}: {entries}; {info.bytes / 2**20:,.1f} MiB", highlight=False)
    last = info.last_run
    if last is None:
        console.print("no run recorded yet", style="dim")
        return
    console.print(f"last run: {last.get('what')} at {last.get('finished_at')}", highlight=False)
    for role, s in (last.get("stats") or {}).items():
        rate = "-" if s.get("hit_rate") is None else f"{s['hit_rate']:.0%}"
        console.print(
            f"  {role}: {s['hits']} hits, {s['misses']} misses ({rate}), {s.get('corrupt', 0)} corrupt, "
            f"{s.get('compute_seconds', 0):.1f} s computing, {s.get('load_seconds', 0):.1f} s loading",
            highlight=False,
        )


@_command("clear", on=cache_app)
def cache_clear_command(cache_dir: str | None = _CACHE_ARG) -> None:
    """Remove every entry of the cache (trained models, recourse); downloaded datasets are kept."""
    cache = _cache_or_fail(cache_dir)
    n, size = cache.clear()
    typer.echo(f"removed {n} files ({size / 2**20:,.1f} MiB) from {cache.root}")
