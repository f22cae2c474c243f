import pytest

from ingest.capture.models import WatchedFolder


@pytest.fixture(autouse=True)
def _media(settings, tmp_path, shared_ingest_storage):
    # Every upload of a capture test lands in its own folder. Rate-limit counters need no reset:
    # they are keyed by the token's random key id. Watched folders are an operator feature, off
    # without roots: the test's own folder is the root (tests of the off state empty it).
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.INGEST_WATCH_DIRS = [str(tmp_path)]
    if shared_ingest_storage is not None:  # the S3 bucket is shared by the session: start empty
        shared_ingest_storage.empty()


@pytest.fixture
def watched(team, tmp_path) -> WatchedFolder:
    """An enabled watched folder of `team` on `*.jsonl` files, empty for now."""
    folder_path = tmp_path / "logs"
    folder_path.mkdir()
    folder = WatchedFolder.objects.create(team=team, path=str(folder_path), pattern="*.jsonl")
    return folder
