"""The applicant page served at ``/``: a form built from the bundle's public schema.

Categorical features are ``<select>`` lists of their categories, numeric ones ``<input
type=number>`` with the public bounds as ``min`` / ``max`` (and ``step=1`` for whole-number
features); a feature that may be missing has a "(missing)" option or may be left empty, sent as
``null``. The page posts to ``/v1/recourse`` with the key typed into its API-key field and
shows the decision and the recourse as sentences ("raise hours-per-week from 35 to 42"), which
the API returns in ``sentences``. Every text is escaped; the page loads nothing from elsewhere.
"""

from __future__ import annotations

import html
import json

__all__ = ["render_page", "sentence", "sentences"]


def sentence(feature: str, a, b, numeric: bool) -> str:
    """The sentence of one change: raise / lower a numeric feature, change a categorical one."""
    if numeric:
        return f"{'raise' if b > a else 'lower'} {feature} from {a:g} to {b:g}"
    return f"change {feature} from {a} to {b}"


def sentences(changes: list[dict], numeric: set[str]) -> list[str]:
    """One sentence per change (:func:`sentence`)."""
    return [sentence(c["feature"], c["from"], c["to"], c["feature"] in numeric) for c in changes]


_SCRIPT = """
const form = document.getElementById('applicant');
form.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const out = document.getElementById('result');
  const applicant = {};
  for (const el of form.querySelectorAll('[data-feature]')) {
    // a feature that may be missing: left empty, it is sent as null (held in the answer)
    applicant[el.name] = (el.value === '' && 'missing' in el.dataset) ? null
      : (el.dataset.type === 'numeric' ? Number(el.value) : el.value);
  }
  out.textContent = 'Asking...';
  let res, body;
  try {
    res = await fetch('/v1/recourse', {method: 'POST', headers: {'Content-Type': 'application/json',
      'X-API-Key': document.getElementById('api-key').value}, body: JSON.stringify({applicant})});
    body = await res.json();
  } catch (err) { out.textContent = 'The service did not answer: ' + err; return; }
  out.replaceChildren();
  const p = (text, id) => { const e = document.createElement('p'); e.textContent = text; if (id) e.id = id; out.appendChild(e); return e; };
  if (!res.ok) { p('Refused (' + res.status + '): ' + (body.error || JSON.stringify(body)), 'error'); return; }
  p('Decision: ' + body.decision, 'decision');
  if (body.decision === 'rejected') {
    if (body.sentences && body.sentences.length) {
      p('To be accepted:');
      const ul = document.createElement('ul'); ul.id = 'recourse';
      for (const s of body.sentences) { const li = document.createElement('li'); li.textContent = s; ul.appendChild(li); }
      out.appendChild(ul);
      if (!body.valid) p('(the model does not accept this counterfactual exactly: it is a noisy or approximate answer)');
    } else { p('No recourse was found for this application.'); }
  }
  p('Privacy spent by this answer: epsilon ' + body.epsilon_spent + '; remaining: ' + body.budget.remaining, 'spent');
});
"""


def render_page(manifest: dict) -> str:
    """The whole HTML page for ``manifest``."""
    e = html.escape
    rows = []
    for f in manifest["features"]:
        name = e(f["name"])
        note = (
            " (cannot change)"
            if f.get("immutable")
            else (" (can only increase)" if f["direction"] == "increase" else "")
        ) + (" (may be missing)" if f.get("missing") else "")
        gap = f.get("missing", False)  # may be left missing: an empty field is sent as null
        if f["type"] == "categorical":
            opts = "".join(f"<option value='{e(c)}'>{e(c)}</option>" for c in f["categories"])
            opts += "<option value=''>(missing)</option>" if gap else ""
            missing = " data-missing" if gap else ""
            ctl = f"<select id='f-{name}' name='{name}' data-feature data-type='categorical'{missing}>{opts}</select>"
        else:
            lo, hi = f["lower"], f["upper"]
            step = "1" if f.get("integer") else "any"
            need = " placeholder='(missing)' data-missing" if gap else " required"
            ctl = (
                f"<input id='f-{name}' name='{name}' type='number' min='{lo:g}' max='{hi:g}' step='{step}' "
                f"value='{lo:g}'{need} data-feature data-type='numeric'>"
            )
        rows.append(f"<label for='f-{name}'>{name}{e(note)}</label>{ctl}")
    g = manifest.get("guarantee", {})
    covers = "".join(f"<li>{e(c)}</li>" for c in g.get("covers", []))
    nots = "".join(f"<li>{e(c)}</li>" for c in g.get("does_not_cover", []))
    title = f"Recourse ({e(manifest['method'])}, epsilon {manifest['epsilon']:g})"
    schema_json = e(json.dumps([f["name"] for f in manifest["features"]]))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font-family:sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem}}
form{{display:grid;grid-template-columns:max-content 1fr;gap:.4rem 1rem;align-items:center}}
#result{{margin-top:1.5rem;padding:1rem;background:#f4f4f4}}#result:empty{{display:none}}details{{margin-top:1.5rem}}button{{grid-column:2;justify-self:start}}</style>
</head><body data-features="{schema_json}">
<h1>What would change the decision?</h1>
<p>Enter your application; the service answers with the decision and, if it is a rejection, what to change.</p>
<form id="applicant">
<label for="api-key">API key</label><input id="api-key" type="password" autocomplete="off" required>
{"".join(rows)}
<button id="submit" type="submit">Ask</button>
</form>
<div id="result" aria-live="polite"></div>
<details><summary>Privacy: {title}</summary><p>Covered:</p><ul>{covers}</ul><p>Not covered:</p><ul>{nots}</ul></details>
<script>{_SCRIPT}</script>
</body></html>"""
