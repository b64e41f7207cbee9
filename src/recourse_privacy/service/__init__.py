"""Private recourse as a service: publish a bundle, manage API keys, serve it over HTTP with budgets.

- :mod:`.schema`: the public feature schema (original units) and the model space;
- :mod:`.bundle`: ``publish`` a private artefact + ``manifest.json``, ``load_bundle``, answers;
- :mod:`.keys`: API keys stored as hashes with a budget and a query cap;
- :mod:`.ledger`: per-key spends, one transaction per answer (SQLite or PostgreSQL);
- :mod:`.app`: the FastAPI application; :mod:`.page`: the applicant page;
- :mod:`.cli`: the ``publish``, ``keys`` and ``serve`` commands.

FastAPI, uvicorn and prometheus-client are imported only by :mod:`.app` (the ``serve`` extra).
"""
