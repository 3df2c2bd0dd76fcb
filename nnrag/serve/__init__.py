"""``nnrag serve``: the library in a browser and over HTTP (see ``app.py``)."""

from .app import create_app

__all__ = ["create_app"]
