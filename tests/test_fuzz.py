"""Fuzzing the inputs a user can type (hypothesis): every one gives a clean error or a valid result.

Generated CSV tables, model / recourse parameters, experiment specs, CLI options and whole
audits on tiny generated tables. A clean error is an :class:`InvalidInputError` (the CLI: exit
code 2, one line, no traceback); a valid result satisfies the invariants that make its numbers
meaningful (binary labels, finite features, metrics in [0, 1], the data's SHA-256 recorded).
The default run keeps ``max_examples`` small; ``-m slow`` runs a longer profile.

The CLI grammar (below): every option of every command, read from the typer app, with bad values of its type
and conflicting pairs; the work is replaced by a sentinel, so that each invocation ends at validation (the
case count is printed with ``-s``).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from recourse_privacy.audit import AuditConfig, run_audit
from recourse_privacy.cli import app
from recourse_privacy.data import Dataset, load_tabular
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.experiments.spec import spec_from_dict
from recourse_privacy.provenance import sha256_file

FAST = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
FEW = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
SLOW = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))

cells = st.one_of(
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from(["", " ", "NA", "None", "a", "b", "$5", "1e308", "-inf", "x,y", '"q"', "é"]),
    st.booleans(),
)
names = st.sampled_from(["y", "x", "a", "b", "y.1", "$c", "", "y ", "col,1"])


@st.composite
def tables(draw):
    n_rows = draw(st.integers(0, 30))
    cols = draw(st.lists(names, min_size=1, max_size=5))
    data = {}
    for i, c in enumerate(cols):
        kind = draw(st.sampled_from(["num", "bin", "mixed", "const"]))
        if kind == "num":
            col = draw(st.lists(st.floats(-1e3, 1e3), min_size=n_rows, max_size=n_rows))
        elif kind == "bin":
            col = draw(st.lists(st.integers(0, 1), min_size=n_rows, max_size=n_rows))
        elif kind == "const":
            col = [draw(cells)] * n_rows
        else:
            col = draw(st.lists(cells, min_size=n_rows, max_size=n_rows))
        data[f"{c}__{i}"] = col
    header = ",".join(cols)
    rows = ["\n".join(",".join(str(data[k][r]) for k in data) for r in range(n_rows))]
    return header + "\n" + "".join(rows) + ("\n" if n_rows else "")


def _valid_dataset(ds: Dataset) -> None:
    assert set(np.unique(ds.y)) <= {0, 1} and len(ds.y) == len(ds.X) >= 2
    numeric = ds.X.select_dtypes("number")
    assert np.isfinite(numeric.to_numpy()).all()


@FAST
@given(text=tables(), target=names)
def test_fuzz_csv_tables(tmp_path_factory, text, target):
    path = tmp_path_factory.mktemp("csv") / "t.csv"
    path.write_text(text)
    try:
        ds = load_tabular(path, target)
    except InvalidInputError as err:
        assert str(err)
        return
    _valid_dataset(ds)


values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True, width=64),
    st.text(max_size=5),
    st.lists(st.integers(-5, 2000), max_size=3),
)
model_keys = st.sampled_from(
    ["epochs", "batch_size", "lr", "C", "max_iter", "hidden_layers", "weight_decay", "fit_intercept", "epoch", "bogus"]
)
recourse_keys = st.sampled_from(
    ["lam", "lr", "max_iter", "lam_decay", "max_rounds", "norm", "batch_size", "n_changed", "lamm"]
)


@FAST
@given(
    model=st.sampled_from(["logistic", "mlp", "mlp3-100"]),
    recourse=st.sampled_from(["linear", "scfe", "cadex"]),
    mp=st.dictionaries(model_keys, values, max_size=3),
    rp=st.dictionaries(recourse_keys, values, max_size=3),
    seed=st.one_of(st.integers(-5, 2**64), st.just(0)),
    epsilon=st.one_of(st.none(), st.floats(allow_nan=True, width=64)),
    defense=st.sampled_from(["none", "dpm", "laplace"]),
)
def test_fuzz_audit_parameters(model, recourse, mp, rp, seed, epsilon, defense):
    cfg = AuditConfig(
        model=model,
        recourse=recourse,
        model_params=mp,
        recourse_params=rp,
        seed=seed,
        epsilon=epsilon,
        defense=defense,
        normalize_rows=True,
    )
    try:
        cfg.validate()
    except InvalidInputError as err:
        assert str(err)
        return
    # accepted: every number is in a declared range, so the model builds and means what it says
    from recourse_privacy.models.registry import make_model

    name, params = cfg.effective_model
    model_obj = make_model(name, random_state=0, **params)
    for key in ("epochs", "batch_size", "max_iter"):
        if hasattr(model_obj, key):
            assert getattr(model_obj, key) >= 1
    assert 0 <= cfg.seed < 2**63
    assert cfg.epsilon is None or 0 < cfg.epsilon <= 1e4


spec_values = st.one_of(
    st.integers(-3, 3),
    st.text(max_size=4),
    st.lists(st.integers(-1, 3), max_size=3),
    st.dictionaries(st.sampled_from(["C", "epochs", "lr", "label", "x"]), st.integers(-1, 3), max_size=2),
    st.none(),
)


@FAST
@given(
    spec=st.dictionaries(
        st.sampled_from(["name", "fixed", "grid", "seeds", "metrics", "on_invalid", "typo"]),
        st.one_of(
            spec_values,
            st.dictionaries(
                st.sampled_from(["model", "n_members", "model_params", "seed", "../a$", "shadow_models", "epsilon"]),
                spec_values,
                max_size=3,
            ),
        ),
        max_size=5,
    )
)
def test_fuzz_specs(spec):
    try:
        loaded = spec_from_dict(spec)
    except InvalidInputError as err:
        assert str(err)
        return
    assert loaded.cells and all(c.config.validate() is c.config for c in loaded.cells)


options = st.sampled_from(
    [
        "--seed",
        "--n-members",
        "--shadow-models",
        "--epsilon",
        "--model-param",
        "--recourse-param",
        "--attacks",
        "--distance",
        "--defense",
        "--shadow-fraction",
        "--n-features",
        "--data",
        "--target",
        "--dataset",
        "--model",
        "--recourse",
        "--data-param",
    ]
)
option_values = st.one_of(
    st.sampled_from(
        [
            "-1",
            "0",
            "abc",
            "1e308",
            "nan",
            "inf",
            "epochs=-5",
            "lam=-1",
            "a,b",
            "class_sep=abc",
            "flip_y=2",
            "x=",
            "=",
            "$5",
            "../..",
            "/dev/null",
            "cfd,nope",
            "mlp",
            "scfe",
            "dpm",
        ]
    ),
    st.text(max_size=6),
)


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(opt=options, value=option_values)
def test_fuzz_cli_audit(tmp_path_factory, opt, value):
    out = tmp_path_factory.mktemp("cli")
    args = [
        "audit",
        "--n-members",
        "60",
        "--n-features",
        "4",
        "--shadow-models",
        "2",
        "--attacks",
        "cfd,loss",
        "--out",
        str(out),
        opt,
        value,
    ]
    res = CliRunner().invoke(app, args)
    assert res.exit_code in (0, 2), res.output
    assert (
        "Traceback" not in res.output
        and not isinstance(res.exception, Exception)
        or isinstance(res.exception, SystemExit)
    )
    if res.exit_code == 0:
        assert (out / "metrics.json").is_file()


@st.composite
def small_tables(draw):
    n = draw(st.integers(30, 240))
    k = draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    X = rng.normal(size=(n, k)) * draw(st.sampled_from([1e-8, 1.0, 1e6]))
    if draw(st.booleans()):
        X[:, 0] = 0.0  # a constant column
    flip = draw(st.sampled_from([0.0, 0.1, 0.5]))
    y = ((X[:, 0] + rng.normal(size=n)) > 0).astype(int) ^ (rng.random(n) < flip)
    if draw(st.booleans()):
        y[:] = y[0]  # one class only
    return pd.DataFrame(X, columns=[f"f{i}" for i in range(k)]).assign(y=y.astype(int))


_OUTCOMES: list[str] = []


def _check_audit(tmp_path, df, n_members, shadow):
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    cfg = AuditConfig(
        data=str(path),
        target="y",
        n_members=n_members,
        shadow_models=shadow,
        attacks=("cfd", "loss", "cfd-lrt", "random"),
    )
    try:
        result = run_audit(cfg, tmp_path / "out")
    except InvalidInputError as err:
        assert str(err)
        _OUTCOMES.append("error")
        return
    _OUTCOMES.append("valid")
    for a in result.attacks.values():
        assert 0 <= a.auc <= 1 and 0 <= a.balanced_accuracy <= 1
    assert 0 <= result.model.train_accuracy <= 1 and result.n_members > 0 and result.n_nonmembers > 0
    assert result.provenance.data_sha256 == sha256_file(path)
    assert all(math.isfinite(v) for v in result.timing_seconds.values())


@FEW
@given(df=small_tables(), n_members=st.integers(2, 60), shadow=st.integers(2, 3))
def test_fuzz_run_audit_on_tiny_tables(tmp_path_factory, df, n_members, shadow):
    _check_audit(tmp_path_factory.mktemp("audit"), df, n_members, shadow)


def test_fuzz_run_audit_reached_valid_results():
    """The generator is not all errors: some tiny audits ran to a valid result (tests run in file order)."""
    if not _OUTCOMES:
        pytest.skip("run with test_fuzz_run_audit_on_tiny_tables")
    assert "valid" in _OUTCOMES and "error" in _OUTCOMES


@pytest.mark.slow
@SLOW
@given(df=small_tables(), n_members=st.integers(1, 60), shadow=st.integers(2, 4))
def test_fuzz_run_audit_on_tiny_tables_long(tmp_path_factory, df, n_members, shadow):
    _check_audit(tmp_path_factory.mktemp("audit"), df, n_members, shadow)


# ------------------------------------------------------------------------------------------------ the CLI grammar
# Every command and every option of the CLI (read from the typer app, so a new option is fuzzed the day it is
# added) with bad values of its type: empty, negative, NaN, infinite, huge, the wrong type, bytes of the wrong
# encoding, paths that are not what they must be, and pairs of options that conflict. Each invocation must end
# in one clear error (exit code 2, one "Error", no traceback, no "internal error"), or pass every check and
# reach the work, which is replaced by a sentinel so that no generated invocation computes anything.


class _ReachedWork(BaseException):  # noqa: N818 - not an error: the input passed validation
    """Raised where a command's work would start; a BaseException, so that no ``except Exception`` hides it."""


def _reached(*args, **kwargs):
    raise _ReachedWork


#: where each command's work starts (the audit: after its data is loaded and encoded, at the owner's model)
_WORK = (
    "recourse_privacy.audit.stages.train_owner",
    "recourse_privacy.experiments.engine._local",
    "recourse_privacy.experiments.engine._ray",
    "recourse_privacy.evaluation.quality.run_quality",
    "recourse_privacy.evaluation.tradeoff.run_tradeoff",
    "recourse_privacy.dp_audit.bounds.DistinguishingExperiment.audit",
    "recourse_privacy.dp_audit.one_run_audit",
    "recourse_privacy.cache.ArtifactCache.clear",
    "recourse_privacy.reproductions.registry.REPRODUCTIONS.get",
)

_GRID_SPEC = "name: tiny\nfixed: {n_members: 60, n_features: 4, shadow_models: 2, attacks: [cfd, loss]}\n"
_SMALL = ["--n-features", "4", "--n-members", "60", "--shadow-models", "2"]
#: per command: arguments that make it valid and small, so that only the fuzzed option can be wrong
_BASE = {
    "audit": [*_SMALL, "--attacks", "cfd,loss"],
    "tradeoff": [*_SMALL, "--epsilons", "1", "--attacks", "cfd"],
    "recourse": ["--dataset", "synthetic", "--model", "logistic", "--methods", "linear", "--n-train", "100"],
    "audit-dp": ["--mechanism", "laplace-score", "--trials", "2000"],
    "cache info": ["--cache-dir", "cache"],
    "cache clear": ["--cache-dir", "cache"],
}
_ARGUMENTS = {"run": "tiny.yaml", "reproduce": "pawelczyk2023-table2", "results": "store", "list": "model"}

_INTS = ["-1", "", "0", "-9223372036854775809", "99999999999999999999", "1.5", "nan", "inf", "abc", "1e3", "0x10"]
_FLOATS = ["", "nan", "inf", "-inf", "-1", "0", "1e400", "1e308", "-0", "abc", "1,5", "1e-320"]
_STRINGS = [
    "",
    " ",
    ",",
    ",,a",
    "a,b",
    "nope",
    "-1",
    "nan",
    "x=",
    "=",
    "=1",
    "k=v",
    "lam=-1",
    "epochs=1e9",
    "A.b=1",
    "c=1:0",
    "c=a:b",
    "../..",
    "$HOME",
    "\u00e9",
    "caf\udce9",  # a Latin-1 byte in an argv that is not UTF-8 (os.fsdecode's surrogate escape)
    "a" * 300,
    "--help",
]
_PATHS = ["latin1.csv", "", ".", "missing.csv", "empty.csv", "/dev/null", "file.txt", "dir", "caf\udce9.csv", "a/../b"]


def _kind(param) -> str:
    """int, float, bool, path or str: the type an option's values are drawn for."""
    import typing
    from pathlib import PurePath

    if getattr(param, "is_flag", False):
        return "flag"
    annotation = param.type_descriptor.annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    while args:  # unwrap Optional[...] and list[...]
        annotation, args = args[0], [a for a in typing.get_args(args[0]) if a is not type(None)]
    if isinstance(annotation, type) and issubclass(annotation, PurePath):
        return "path"
    return {int: "int", float: "float", bool: "bool"}.get(annotation, "str")


def _commands():
    """(command words, click command) of every command and sub-command of the CLI."""
    import typer

    def walk(group, prefix):
        for name, sub in sorted(group.commands.items()):
            if hasattr(sub, "commands"):
                yield from walk(sub, [*prefix, name])
            else:
                yield [*prefix, name], sub

    return list(walk(typer.main.get_command(app), []))


_PAIRS = [
    (" ".join(words), p.name, _kind(p), p.param_type_name == "argument", (p.opts or [p.name])[0])
    for words, cmd in _commands()
    for p in cmd.params
]
_CASES: dict[tuple[str, str], list[str]] = {}


@pytest.fixture(scope="module")
def grammar_dir(tmp_path_factory):
    """The working directory of the generated invocations: relative paths land here, with files to point at."""
    d = tmp_path_factory.mktemp("grammar")
    (d / "tiny.yaml").write_text(_GRID_SPEC)
    (d / "latin1.csv").write_bytes("a,b,y\n1,caf\u00e9,0\n2,th\u00e9,1\n".encode("latin-1"))
    (d / "empty.csv").write_bytes(b"")
    (d / "file.txt").write_text("not a directory\n")
    (d / "dir").mkdir()
    return d


def _invoke(grammar_dir, args: list[str]) -> str:
    """Run ``args`` in ``grammar_dir`` with every work function replaced; return the outcome, checked."""
    import importlib

    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(grammar_dir)
        mp.setenv("RECOURSE_PRIVACY_CACHE", "off")
        for target in _WORK:
            parts = target.split(".")
            for i in range(len(parts) - 1, 0, -1):
                try:
                    owner = importlib.import_module(".".join(parts[:i]))
                    break
                except ImportError:
                    continue
            for attr in parts[i:-1]:
                owner = getattr(owner, attr)
            mp.setattr(owner, parts[-1], _reached)
        try:
            res = CliRunner().invoke(app, args)
        except _ReachedWork:  # CliRunner keeps only Exceptions
            return "reached work"
    out = res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), f"{args}: {res.exception!r}\n{out}"
    assert "Traceback" not in out and "internal error" not in out, f"{args}:\n{out}"
    if res.exit_code == 0:
        return "ok"
    assert res.exit_code == 2, f"{args}: exit code {res.exit_code}\n{out}"
    assert out.count("Error") == 1, f"{args}: not one error\n{out}"
    return "refused"


def _args(command: str, name: str, is_argument: bool, opt: str, value: str | None) -> list[str]:
    words = command.split()
    base = list(_BASE.get(command, []))
    positional = _ARGUMENTS.get(command)
    if is_argument:
        positional = value
    args = [*words, *([positional] if positional is not None else []), *base]
    if "out" in {p.name for w, c in _commands() if " ".join(w) == command for p in c.params} and name != "out":
        if command != "results":
            args += ["--out", "audit-dp.json" if command == "audit-dp" else "out"]  # audit-dp writes one file
    if not is_argument:
        args += [opt] if value is None else [opt, value]
    return args


#: KEY=VALUE options (--param, --model-param, ...): unknown keys and values of the wrong type first
_PARAMS = ["foo=1", "n_rows=5", "epochs=-1", "lr=nan", "C=abc", "seed=-3", "delta=0.9", "a.b=1", "=1", "x"]


def _values(kind: str, name: str):
    """Bad values of an option's type; the first example of each option is the first of its pool (hypothesis
    starts from the simplest choice), so the pools start with the value most likely to break a command."""
    texts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=8)
    pool = {"int": _INTS, "float": _FLOATS, "path": _PATHS, "bool": _INTS}.get(kind, _STRINGS)
    if name.endswith("param"):
        pool = _PARAMS
    return st.one_of(st.sampled_from(pool), st.sampled_from(_INTS + _FLOATS), texts)


_PAIR_IDS = [f"{c}:{n}" for c, n, *_ in _PAIRS]


def _fuzz_option(grammar_dir, command, name, kind, is_argument, opt, data) -> None:
    value = None if kind == "flag" else data.draw(_values(kind, name), label=opt)
    outcome = _invoke(grammar_dir, _args(command, name, is_argument, opt, value))
    _CASES.setdefault((command, name), []).append(outcome)


@pytest.mark.parametrize(("command", "name", "kind", "is_argument", "opt"), _PAIRS, ids=_PAIR_IDS)
@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(data=st.data())
def test_fuzz_cli_grammar(grammar_dir, command, name, kind, is_argument, opt, data):
    _fuzz_option(grammar_dir, command, name, kind, is_argument, opt, data)


@pytest.mark.slow
@pytest.mark.parametrize(("command", "name", "kind", "is_argument", "opt"), _PAIRS, ids=_PAIR_IDS)
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzz_cli_grammar_long(grammar_dir, command, name, kind, is_argument, opt, data):
    _fuzz_option(grammar_dir, command, name, kind, is_argument, opt, data)


#: pairs that cannot go together, one option without the other it needs, and values that must be refused
#: before any work (issue 21)
_CONFLICTS = [
    ["audit-dp", "--seed", "-3"],
    ["recourse", "--seed", "-1"],
    ["audit-dp", "--mechanism", "trained-lr", "--one-run", "2"],
    ["audit", "--data", "latin1.csv"],
    ["audit", "--data", "empty.csv", "--target", "y"],
    ["audit", "--data", "latin1.csv", "--target", "y"],
    ["audit", "--model-file", "file.txt", "--model", "mlp"],
    ["audit", "--trust", "x"],
    ["audit", "--trust-pickle"],
    ["audit", "--epsilon", "1"],
    ["audit", "--defense", "dpm"],
    ["audit", "--defense", "laplace", "--epsilon", "1", "--model", "mlp"],
    ["audit", "--model", "mlp", "--recourse", "linear"],
    [
        "audit",
        "--model",
        "mlp",
        "--recourse",
        "scfe",
        "--defense",
        "dpm",
        "--epsilon",
        "1",
        "--model-param",
        "delta=0.9",
    ],
    ["audit", "--immutable", "x"],
    ["audit", "--bounds", "f0=1:0"],
    ["audit", "--n-adversary", "1", "--attacks", "cfd-lrt"],
    ["audit", "--attacks", "cfd-lrt", "--shadow-models", "1"],
    ["audit", "--data-param", "flip_y=2"],
    ["tradeoff", "--model", "mlp", "--recourse", "scfe", "--epsilons", "-1"],
    ["run", "tiny.yaml", "--address", "ray://x:1"],
    ["run", "tiny.yaml", "--backend", "local", "--address", "x:1"],
    ["reproduce", "pawelczyk2023-table2", "--seeds", "a,b"],
    ["reproduce", "nope"],
    ["audit-dp", "--mechanism", "laplace-score", "--one-run", "10"],
    ["audit-dp", "--mechanism", "laplace-score", "--param", "p=0.5", "--param", "sensitivity=1"],
    ["audit-dp", "--out", "dir"],
    ["recourse", "--method-param", "face.n_neighbors=-1", "--methods", "face"],
    ["recourse", "--method-param", "nope=1"],
    ["recourse", "--model-file", "file.txt", "--model", "logistic"],
    ["results", "file.txt"],
    ["list", "nope"],
]


@pytest.mark.parametrize("args", _CONFLICTS, ids=[" ".join(a) for a in _CONFLICTS])
def test_fuzz_cli_conflicts(grammar_dir, args):
    command = " ".join(args[:1])
    full = [*args[:1], *args[1:2]] if command in _ARGUMENTS else args[:1]
    rest = args[len(full) :]
    full += list(_BASE.get(command, []))
    if command not in ("results", "list"):
        full += ["--out", "audit-dp.json" if command == "audit-dp" else "out"]
    outcome = _invoke(grammar_dir, [*full, *rest])
    _CASES.setdefault((command, " ".join(rest) or "conflict"), []).append(outcome)
    assert outcome == "refused", f"{args} was not refused ({outcome})"


def test_fuzz_cli_grammar_covered_every_option():
    """Every (command, option) pair was fuzzed (tests run in file order); prints the number of cases."""
    if not _CASES:
        pytest.skip("run with test_fuzz_cli_grammar")
    missing = {(c, n) for c, n, *_ in _PAIRS} - set(_CASES)
    assert not missing, f"options never fuzzed: {sorted(missing)}"
    outcomes = [o for v in _CASES.values() for o in v]
    counts = {k: outcomes.count(k) for k in sorted(set(outcomes))}
    print(f"\nCLI grammar: {len(outcomes)} invocations over {len(_CASES)} command/option pairs: {counts}")
