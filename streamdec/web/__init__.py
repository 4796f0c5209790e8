"""The browser captioning page, served by ``streamdec serve`` at ``/`` (``index.html``) and
``/static/`` (this folder's ``static/``)."""
