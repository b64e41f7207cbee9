"""A published bundle on data with gaps: a request may give null where the data have gaps, and every method's
answer holds the gap (as the audit does, README "Missing values")."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from _service_util import BOUNDS, applicant, gappy_dataset, publish_each, tiny_dataset
from recourse_privacy.service.bundle import METHODS, load_bundle, publish
from recourse_privacy.service.page import render_page
from recourse_privacy.service.schema import ApplicantError, schema_from_dataset

pytest.importorskip("fastapi")


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    ds = gappy_dataset()
    # a large epsilon: these tests are of the gaps, not of the noise (at 1, seed 0's DP model gives income the wrong
    # sign, and no move along it reaches the target)
    return ds, publish_each(ds, tmp_path_factory, "gaps-", epsilon=8.0)


def _docs() -> list[dict]:
    """Applicants with and without gaps, accepted and rejected."""
    jobs = ("clerk", "manager", "worker", None)
    return [
        applicant(hours=None if h % 2 else h, income=1.5 * h + 0.25, age=25 + h % 40, job=jobs[h % 4])
        for h in range(0, 100, 3)
    ]


def test_the_schema_says_which_features_may_be_missing() -> None:
    ds = gappy_dataset()
    schema = schema_from_dataset(ds, BOUNDS)
    feats = {f["name"]: f for f in schema.to_list()}
    assert feats["hours"]["missing"] and feats["job"]["missing"]
    assert "missing" not in feats["age"] and "missing" not in feats["sex"]  # written as before
    assert feats["job"]["categories"] == ["clerk", "manager", "worker"]  # the gap is no category
    assert feats["hours"]["lower"] == 0.0 and feats["hours"]["upper"] == 100.0
    assert {"hours", "job"} <= set(schema.notes["read_from_data"])  # that they have gaps is read from the data
    assert schema.model_feature_names() == [
        "age", "hours", "hours missing", "income", "job=clerk", "job=manager", "job=worker", "job=(missing)",
        "sex=F", "sex=M",
    ]  # fmt: skip
    imm = schema.model_mask("immutable")
    assert imm.tolist() == [False, False, True, False, False, False, False, True, True, True]
    assert schema.model_mask("increase").tolist() == [True] + [False] * 9


def test_a_gap_is_parsed_encoded_and_decoded_back() -> None:
    schema = schema_from_dataset(gappy_dataset(), BOUNDS)
    docs = _docs()
    fast = schema.parse_many(docs)
    slow = schema.from_rows([schema.parse(d) for d in docs])
    np.testing.assert_array_equal(fast.num, slow.num)  # NaN where NaN
    np.testing.assert_array_equal(fast.cat, slow.cat)
    Z = schema.encode(fast)
    gaps = np.array([d["hours"] is None for d in docs])
    h, flag = schema.model_feature_names().index("hours"), schema.model_feature_names().index("hours missing")
    assert (Z[gaps, h] == 0).all() and (Z[:, flag] == gaps).all()
    assert (Z[:, 7] == [d["job"] is None for d in docs]).all()
    assert schema.as_dicts(schema.decode(Z)) == [{**d, "income": pytest.approx(d["income"])} for d in docs]
    # a request gives null only where the feature may be missing
    with pytest.raises(ApplicantError, match="is null; only a feature the schema marks") as err:
        schema.parse_many([applicant(income=None)])
    assert err.value.field == "applicants[0].income"
    with pytest.raises(ApplicantError) as err:
        schema.parse_many([applicant(), applicant(sex=None)])
    assert err.value.field == "applicants[1].sex"


def test_decoding_from_a_factual_holds_its_gaps_and_opens_none() -> None:
    schema = schema_from_dataset(gappy_dataset(), BOUNDS)
    fact = schema.parse_many(_docs())
    Z = schema.encode(fact)
    rng = np.random.default_rng(3)
    moved = Z + rng.normal(0, 2, Z.shape)  # every column, the indicators and the gap's own too
    cf = schema.decode(moved, fact)
    num_gap, cat_gap = np.isnan(fact.num), fact.cat == schema._cols.cat_size
    assert (np.isnan(cf.num) == num_gap).all()  # a gap stays a gap; no value becomes one
    assert ((cf.cat == schema._cols.cat_size) == cat_gap).all()
    changed = schema.changed(fact, cf)
    assert not changed[:, [1, 3]][np.column_stack([num_gap[:, 1], cat_gap[:, 0]])].any()
    assert np.isfinite(schema.costs(fact, cf)).all()


@pytest.mark.parametrize("method", METHODS)
def test_every_method_answers_a_request_with_gaps_and_holds_them(bundles, method):
    _, paths = bundles
    b = load_bundle(paths[method], random_state=0)
    docs = _docs()
    answers = b.answer(b.schema.parse_many(docs))
    rejected = [(d, a) for d, a in zip(docs, answers) if a["decision"] == "rejected"]
    assert any(d["hours"] is None for d, _ in rejected) and any(d["job"] is None for d, _ in rejected)
    found = [(d, a) for d, a in rejected if a["counterfactual"] is not None]
    assert found
    for d, a in found:
        cf = a["counterfactual"]
        for name in ("hours", "job"):
            assert (cf[name] is None) == (d[name] is None), (name, d, cf)
            if d[name] is None:
                assert name not in a["reasons"]
        assert cf["sex"] == d["sex"] and cf["age"] >= d["age"] and np.isfinite(a["cost"])
    if method == "dpm":  # the exact move leaves a row's gap alone and still reaches the target
        assert all(a["valid"] for _, a in found)
    # the server's text is exactly the JSON of the answers, gaps as null
    texts = load_bundle(paths[method], random_state=0).answer_json(b.schema.parse_many(docs)).texts
    objects = load_bundle(paths[method], random_state=0).answer(b.schema.parse_many(docs))
    assert texts == [json.dumps(a, separators=(",", ":"), allow_nan=False) for a in objects]


def test_a_users_pipeline_with_an_imputer_is_served_exactly(tmp_path) -> None:
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    ds = gappy_dataset(400)
    num = make_pipeline(SimpleImputer(strategy="median", add_indicator=True), StandardScaler())
    cols = ColumnTransformer([("num", num, ["age", "hours", "income"]),
                              ("cat", OneHotEncoder(handle_unknown="ignore"), ["job", "sex"])])  # fmt: skip
    pipe = make_pipeline(cols, LogisticRegression(max_iter=1000)).fit(ds.X, ds.y)
    publish(ds, method="laplace", epsilon=1.0, out=tmp_path, bounds=BOUNDS, model=pipe, positive_label=1)
    b = load_bundle(tmp_path, random_state=0)
    docs = _docs()
    frame = pd.DataFrame(docs).astype({"hours": float}).replace({"job": {None: np.nan}})
    p = pipe.predict_proba(frame)[:, 1]
    served = b.model.logit(b.schema.encode(b.schema.parse_many(docs)))
    assert served == pytest.approx(np.log(p / (1 - p)), abs=1e-6)


def test_the_page_lets_a_feature_that_may_be_missing_be_left_empty(bundles) -> None:
    _, paths = bundles
    page = render_page(json.loads((paths["laplace"] / "manifest.json").read_text()))
    hours = page[page.index("<input id='f-hours'") :].split(">", 1)[0]
    income = page[page.index("<input id='f-income'") :].split(">", 1)[0]
    assert "data-missing" in hours and "required" not in hours
    assert "required" in income and "data-missing" not in income
    job = page[page.index("<select id='f-job'") :].split("</select>", 1)[0]
    assert "data-missing" in job and "<option value=''>(missing)</option>" in job
    assert "<option value=''>" not in page[page.index("<select id='f-sex'") :].split("</select>", 1)[0]


@pytest.fixture(scope="module")
def gap_site(tmp_path_factory):
    """``recourse-privacy serve`` of a Laplace bundle on data with gaps, on a free loopback port."""
    pytest.importorskip("httpx")
    pytest.importorskip("uvicorn")
    from _service_util import Server
    from recourse_privacy.service.keys import KeyStore

    d = tmp_path_factory.mktemp("gap-site")
    publish(gappy_dataset(), method="laplace", epsilon=1.0, out=d / "bundle", bounds=BOUNDS)
    key = KeyStore(d / "keys.json").add("main", budget=1000.0)
    server = Server(d / "bundle", d / "keys.json", d / "ledger.db")
    yield server.url, key, d
    server.kill()


def test_a_server_answers_requests_with_gaps_over_http(gap_site) -> None:
    """8 concurrent clients send requests with and without gaps (one and in batches); every answer holds the gaps; a
    null where the feature is never missing is a 422 naming it."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    url, key, _ = gap_site
    docs = _docs()

    def ask(i: int):
        with httpx.Client(timeout=60, headers={"X-API-Key": key}) as c:
            if i % 2:
                return c.post(url + "/v1/recourse/batch", json={"applicants": docs})
            return c.post(url + "/v1/recourse", json={"applicant": docs[i % len(docs)]})

    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(ask, range(16)))
    assert [r.status_code for r in replies] == [200] * 16
    held = 0
    for i, r in enumerate(replies):
        sent = docs if i % 2 else [docs[i % len(docs)]]
        answers = r.json()["answers"] if i % 2 else [r.json()]
        for d, a in zip(sent, answers):
            if a["counterfactual"] is not None:
                gaps = [d[k] is None for k in ("hours", "job")]
                assert [a["counterfactual"][k] is None for k in ("hours", "job")] == gaps
                held += any(gaps)
    assert held > 0
    bad = httpx.post(url + "/v1/recourse", json={"applicant": applicant(income=None)}, headers={"X-API-Key": key},
                     timeout=30)  # fmt: skip
    assert bad.status_code == 422 and bad.json()["field"] == "applicant.income"


def test_the_page_sends_an_empty_field_as_a_gap_in_headless_chromium(gap_site) -> None:
    """The applicant page: hours left empty and job "(missing)", answered with the gaps held."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from _service_util import headless_chromium

    url, key, tmp_path = gap_site
    drv = headless_chromium()
    try:
        drv.get(url + "/")
        assert [o.text for o in Select(drv.find_element(By.ID, "f-job")).options][-1] == "(missing)"
        for name, value in applicant(income=20.0).items():
            el = drv.find_element(By.ID, f"f-{name}")
            if name == "job":
                Select(el).select_by_visible_text("(missing)")
            elif el.tag_name == "select":
                Select(el).select_by_value(value)
            else:
                el.clear()
                if name != "hours":  # left empty: sent as null
                    el.send_keys(str(value))
        drv.find_element(By.ID, "api-key").send_keys(key)
        drv.find_element(By.ID, "submit").click()
        WebDriverWait(drv, 20).until(ec.presence_of_element_located((By.ID, "decision")))
        assert drv.find_element(By.ID, "decision").text == "Decision: rejected"
        items = [li.text for li in drv.find_elements(By.CSS_SELECTOR, "#recourse li")]
        assert items and not any("hours" in t or "job" in t for t in items)  # the gaps are held
        drv.save_screenshot(str(tmp_path / "page.png"))
    finally:
        drv.quit()


def test_a_feature_declared_missable_takes_null_though_the_data_have_no_gap(tmp_path) -> None:
    """``publish --may-be-missing hours,job`` on data without a gap: the schema lets those two be null (public, not
    read from the data), every method's answer holds such a gap, the publisher is warned that no row taught the
    model a gap there, and other features still refuse null."""
    from typer.testing import CliRunner

    from recourse_privacy.cli import app

    ds = tiny_dataset(400)
    csv = tmp_path / "loans.csv"
    ds.X.assign(decision=ds.y).to_csv(csv, index=False)
    base = ["publish", "--epsilon", "8", "--data", str(csv), "--target", "decision", "--positive-label", "1",
            "--immutable", "sex", "--increasing", "age", "--categorical", "job,sex", "--bounds", "age=18:90",
            "--bounds", "hours=0:100", "--bounds", "income=0:250", "--check-rows", "0"]  # fmt: skip
    refused = CliRunner().invoke(
        app, [*base, "--method", "dpm", "--may-be-missing", "hourz", "--out", str(tmp_path / "x")]
    )
    assert refused.exit_code == 2 and "--may-be-missing" in refused.output and "hourz" in refused.output
    for method in METHODS:
        out = tmp_path / method
        res = CliRunner().invoke(app, [*base, "--method", method, "--may-be-missing", "hours,job", "--out", str(out)])
        assert res.exit_code == 0, res.output
        assert "--may-be-missing hours, job: no row of the data misses a value there" in " ".join(res.output.split())
        man = json.loads((out / "manifest.json").read_text())
        feats = {f["name"]: f for f in man["features"]}
        assert feats["hours"]["missing"] and feats["job"]["missing"] and "missing" not in feats["income"]
        assert man["schema_notes"]["declared_missing"] == ["hours", "job"]
        assert "hours" not in man["schema_notes"]["read_from_data"]  # declared, with public bounds: nothing read
        b = load_bundle(out, random_state=0)
        docs = _docs()
        answers = b.answer(b.schema.parse_many(docs))
        found = [(d, a) for d, a in zip(docs, answers) if a["counterfactual"] is not None]
        # (privrecourse may find no node its model accepts with a job gap: the gap's weight is noise, -6.8 here)
        assert any(d["hours"] is None for d, _ in found), method
        if method == "dpm":  # the exact move answers every rejected applicant (validly where it has no gap: a gap's
            # weight may need a move past the bounds, which the answer then flags as not valid)
            assert len(found) == sum(a["decision"] == "rejected" for a in answers)
            assert all(a["valid"] for d, a in found if d["hours"] is not None and d["job"] is not None)
            assert any(d["job"] is None for d, _ in found)
        for d, a in found:
            for name in ("hours", "job"):
                assert (a["counterfactual"][name] is None) == (d[name] is None), (method, name, d, a)
        with pytest.raises(ApplicantError, match="is null; only a feature the schema marks"):
            b.schema.parse_many([applicant(income=None)])
    # without the option the same data publish a schema where null is refused, and no warning
    res = CliRunner().invoke(app, [*base, "--method", "dpm", "--out", str(tmp_path / "plain")])
    assert res.exit_code == 0 and "--may-be-missing" not in res.output
    with pytest.raises(ApplicantError, match="is null"):
        load_bundle(tmp_path / "plain", random_state=0).schema.parse_many([applicant(hours=None)])
