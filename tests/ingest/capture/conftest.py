import pytest

from ingest.capture.models import WatchedFolder


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    # Every upload of a capture test lands in its own folder. Rate-limit counters need no reset:
    # they are keyed by the token's random key id.
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def watched(team, tmp_path) -> WatchedFolder:
    """An enabled watched folder of `team` on `*.jsonl` files, empty for now."""
    folder_path = tmp_path / "logs"
    folder_path.mkdir()
    folder = WatchedFolder.objects.create(team=team, path=str(folder_path), pattern="*.jsonl")
    return folder
