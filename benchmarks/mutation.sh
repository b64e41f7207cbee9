#!/usr/bin/env bash
# Mutation testing of the privacy-critical modules with mutmut 3 (pip install -e ".[mutation]").
#
#     benchmarks/mutation.sh [MODULE ...]      (no MODULE: all of them; see docs/mutation-testing.md)
#
# MODULE: accounting, laplace, dp_audit, clustering, privrecourse_ledger, dpc_core, dpc_functional.
# Each module is mutated in its own scratch copy of src/, tests/ and pyproject.toml under
# $MUTATION_DIR (default: a new temporary directory), with a [tool.mutmut] section that mutates that
# one file and runs only the fast test files that exercise it; mutmut then runs, per mutant, only
# the selected tests that reach the mutated function. Prints each module's `mutmut results` and
# killed/total. $MUTATION_JOBS: parallel mutants (default 2). Not part of `pytest`: minutes to hours.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${MUTATION_DIR:-$(mktemp -d -t rp-mutation.XXXXXX)}
jobs=${MUTATION_JOBS:-2}
modules=("$@")
[ ${#modules[@]} -eq 0 ] && modules=(accounting laplace dp_audit clustering privrecourse_ledger dpc_core dpc_functional)

for module in "${modules[@]}"; do
    case $module in
    accounting)
        file=src/recourse_privacy/defenses/accounting.py
        tests='"tests/test_defenses.py", "-k", "budget or ledger or session or query or batch or accountant or ba_bound",
               "tests/test_robustness.py::test_ledger_never_overspent_by_processes_and_threads",
               "tests/test_robustness.py::test_session_with_threads_never_over_budget"' ;;
    laplace)
        file=src/recourse_privacy/defenses/laplace.py
        tests='"tests/test_defenses.py", "-k", "not audit and not tradeoff and not dpm and not cli and not dp_"' ;;
    dp_audit)
        file='src/recourse_privacy/dp_audit/*.py'
        tests='"tests/test_dp_audit.py", "-k", "not command"' ;;
    clustering)
        file=src/recourse_privacy/privrecourse/clustering.py
        tests='"tests/test_privrecourse.py", "-k", "ledger or kmeans or em_ or round or zone or clustering or bounds"' ;;
    privrecourse_ledger)
        file=src/recourse_privacy/privrecourse/ledger.py
        tests='"tests/test_privrecourse.py", "-k", "ledger or overspend"' ;;
    dpc_core)
        file=src/recourse_privacy/dpc/core.py
        tests='"tests/test_dpc.py"' ;;
    dpc_functional)
        file=src/recourse_privacy/dpc/functional.py
        tests='"tests/test_dpc.py", "-k", "sensitivity or noise or seed or solution or regularisation or fm_"' ;;
    *)
        echo "unknown module $module" >&2
        exit 2 ;;
    esac
    dir=$work/$module
    rm -rf "$dir" && mkdir -p "$dir"
    cp -r "$repo/src" "$repo/tests" "$repo/pyproject.toml" "$dir/"
    find "$dir" -name __pycache__ -prune -exec rm -rf {} +
    cat >>"$dir/pyproject.toml" <<TOML

[tool.mutmut]
source_paths = ["src"]
only_mutate = ["$file"]
pytest_add_cli_args = ["-p", "no:cacheprovider"]
pytest_add_cli_args_test_selection = [$tests]
TOML
    echo "== $module: $file (in $dir)"
    # the mutants, not an installed or PYTHONPATH copy, must be what the tests import
    (cd "$dir" && env -u PYTHONPATH mutmut run --max-children "$jobs" >mutmut-run.log 2>&1) || true
    (cd "$dir" && env -u PYTHONPATH mutmut results --all true >results.txt 2>&1) || true
    total=$(grep -c ': ' "$dir/results.txt" || true)
    killed=$(grep -c ': killed' "$dir/results.txt" || true)
    echo "$module: killed $killed of $total mutants"
    grep -v ': killed' "$dir/results.txt" || true
done
