"""Static assets: hashed names, gzip and a far-future cache once collected; plain names in
development for anything not collected or edited since (dashboard.staticstorage)."""

from __future__ import annotations

import gzip
import os
import re
import time

import pytest
from django.contrib.staticfiles.storage import staticfiles_storage
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from tests.dashboard.factories import http_server, record, tool

pytestmark = pytest.mark.django_db


def _storage(settings, root, development: bool, extra_dir=None):
    settings.STATIC_ROOT = str(root)
    if extra_dir is not None:
        settings.STATICFILES_DIRS = [*settings.STATICFILES_DIRS, str(extra_dir)]
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {
            "BACKEND": "dashboard.staticstorage.StaticStorage",
            "OPTIONS": {"development": development},
        },
    }


def test_plotly_is_served_hashed_gzipped_and_immutable(settings, tmp_path, alice, team):
    _storage(settings, tmp_path / "static", development=False)
    call_command("collectstatic", interactive=False, verbosity=0)
    server = http_server(team, "files")
    record(server, [tool("read", "Read a file.")], "1.0")
    client = Client()  # a new handler: WhiteNoise reads STATIC_ROOT when it starts
    client.force_login(alice)
    html = client.get(reverse("server_detail", args=[team.slug, server.code])).content.decode()
    src = re.search(r'data-bundle="(/static/vendor/plotly\.min\.[0-9a-f]{12}\.js)"', html)
    assert src, "the page loads plotly under its hashed name"
    response = client.get(src.group(1), HTTP_ACCEPT_ENCODING="gzip, deflate")
    assert response.status_code == 200
    assert response["Content-Encoding"] == "gzip"
    assert response["Cache-Control"] == "max-age=315360000, public, immutable"
    body = gzip.decompress(b"".join(response.streaming_content))
    with open(os.path.join(settings.STATIC_ROOT, "vendor", "plotly.min.js"), "rb") as original:
        assert body == original.read()
    assert int(response["Content-Length"]) < len(body) / 2.5, "gzip shrinks the 1.2 MB bundle"


def test_development_serves_uncollected_or_edited_files_under_their_plain_names(settings, tmp_path):
    source = tmp_path / "src"
    (source / "css").mkdir(parents=True)
    sheet = source / "css" / "dev-only.css"
    sheet.write_text("body { color: red; }")
    _storage(settings, tmp_path / "static", development=True, extra_dir=source)
    assert staticfiles_storage.url("css/dev-only.css") == "/static/css/dev-only.css", "nothing collected yet"
    call_command("collectstatic", interactive=False, verbosity=0)
    settings.STATIC_ROOT = str(tmp_path / "static")  # a fresh storage reads the new manifest
    assert re.fullmatch(
        r"/static/css/dev-only\.[0-9a-f]{12}\.css", staticfiles_storage.url("css/dev-only.css")
    )
    later = time.time() + 5
    os.utime(sheet, (later, later))  # edited after the collect
    settings.STATIC_ROOT = str(tmp_path / "static")
    assert staticfiles_storage.url("css/dev-only.css") == "/static/css/dev-only.css"


def test_the_embedded_run_with_debug_on_serves_collected_files_hashed_and_gzipped(settings, tmp_path):
    # `make run` runs with DEBUG on, where Django's own url() always answers plain names; a
    # collected, current file must still go out under its hashed, compressed, immutable name.
    settings.DEBUG = True
    _storage(settings, tmp_path / "static", development=True)
    call_command("collectstatic", interactive=False, verbosity=0)
    settings.STATIC_ROOT = str(tmp_path / "static")  # a fresh storage reads the new manifest
    url = staticfiles_storage.url("vendor/plotly.min.js")
    assert re.fullmatch(r"/static/vendor/plotly\.min\.[0-9a-f]{12}\.js", url)
    response = Client().get(url, HTTP_ACCEPT_ENCODING="gzip")
    assert response.status_code == 200
    assert response["Content-Encoding"] == "gzip"
    assert response["Cache-Control"] == "max-age=315360000, public, immutable"
