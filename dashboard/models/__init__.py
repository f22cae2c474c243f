"""Dashboard models, one module per concept; import them here so Django finds them."""

from dashboard.models.system import WorkerHeartbeat
from dashboard.models.teams import ApiToken, Membership, Team

__all__ = ["ApiToken", "Membership", "Team", "WorkerHeartbeat"]
