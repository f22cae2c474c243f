import pytest


@pytest.fixture(autouse=True)
def _media(settings, tmp_path, shared_ingest_storage):
    # Each test's bodies land in its own folder (the S3 bucket, when used, starts empty).
    settings.MEDIA_ROOT = tmp_path / "media"
    if shared_ingest_storage is not None:
        shared_ingest_storage.empty()


@pytest.fixture
def otel_url(live_server):
    return live_server.url + "/api/v1/otel/v1/logs"
