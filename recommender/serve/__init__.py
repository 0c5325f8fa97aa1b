"""`papers serve`: the index as a local web app and an HTTP API (FastAPI on uvicorn, Jinja2 pages).

Each endpoint parses its parameters, calls one library function and renders what it returns:
the API's JSON objects are those `--format json` prints (render.tables, render.related).
"""
