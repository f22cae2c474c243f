from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.models import User

from dashboard.teams.models import PROTOCOL_ERAS, Membership
from dashboard.teams.validators import validate_name
from mcptax import loading, tokens


class ApiTokenForm(forms.Form):
    name = forms.CharField(
        max_length=100, validators=[validate_name], help_text="e.g. the CI job that will use it"
    )


class TeamForm(forms.Form):
    name = forms.CharField(
        max_length=100, validators=[validate_name], help_text="e.g. Platform, or your company"
    )


def role_choices(*, with_owner: bool) -> list[tuple[str, str]]:
    """The roles an inviter or role-changer may hand out: the owner role only with MANAGE_OWNERS."""
    return [(v, label) for v, label in Membership.Role.choices if with_owner or v != Membership.Role.OWNER]


class InviteForm(forms.Form):
    role = forms.ChoiceField(choices=Membership.Role.choices, initial=Membership.Role.MEMBER)
    email = forms.EmailField(
        required=False, help_text="Leave empty for a link you hand on yourself (chat, a ticket)."
    )

    def __init__(self, *args: Any, with_owner: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["role"].choices = role_choices(with_owner=with_owner)  # type: ignore[attr-defined]


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=Membership.Role.choices)


class SignupForm(UserCreationForm):
    """A new account made on an invite's page: username, optional e-mail, password twice (checked by
    AUTH_PASSWORD_VALIDATORS)."""

    email = forms.EmailField(required=False, help_text="Optional; where invites and alerts can reach you.")

    class Meta(UserCreationForm.Meta):
        model = User
        fields = ("username", "email")


ENCODING_CHOICES = [(name, name) for name in tokens.OFFLINE_ENCODINGS]


class CountingForm(forms.Form):
    """What the team's figures are counted in, and the optional provider key (never shown back)."""

    main_encoding = forms.ChoiceField(
        choices=ENCODING_CHOICES, help_text="the encoding of every figure unless a page is switched"
    )
    encodings = forms.MultipleChoiceField(
        choices=ENCODING_CHOICES,
        widget=forms.CheckboxSelectMultiple,
        required=False,
        label="Also track",
        help_text="every new snapshot is counted in each; current snapshots are recounted at once",
    )
    context_window = forms.IntegerField(
        min_value=1000, max_value=10_000_000, help_text="tokens; the fixed tax is shown as a share of it"
    )
    protocol_era = forms.ChoiceField(
        choices=PROTOCOL_ERAS,
        initial="handshake",
        required=False,
        label="Figures follow the protocol revision",
        help_text="when a server lists its tools differently in the 2025 and 2026-07-28 revisions; "
        "the other revision's figure is shown beside it",
    )
    loading_client = forms.ChoiceField(
        choices=[(c, p.label) for c, p in loading.PRESETS.items()],
        required=False,
        label="Client",
        help_text="whose loading mode the pages lead with (eager or deferred behind tool search)",
    )
    tool_search = forms.CharField(
        required=False,
        max_length=20,
        label="ENABLE_TOOL_SEARCH",
        help_text="Claude Code's setting: auto, auto:N, true or false; empty: unset (recent releases "
        "defer); a stack imported with its own value keeps it",
    )
    anthropic_model = forms.CharField(
        max_length=100,
        validators=[validate_name],
        help_text="the model Anthropic's token counting counts for",
    )
    anthropic_key = forms.CharField(
        required=False,
        max_length=300,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        label="Anthropic API key",
        help_text="encrypted at rest, never shown back; leave empty to keep the stored one",
    )
    remove_key = forms.BooleanField(required=False, label="Remove the stored key")

    def clean_tool_search(self) -> str:
        value = str(self.cleaned_data.get("tool_search") or "").strip()
        try:
            loading.parse_setting("claude-code", value)
        except loading.BadSetting as exc:
            raise forms.ValidationError(str(exc)) from exc
        return value

    def tracked(self) -> list[str]:
        """The encodings to track, main one first."""
        main = self.cleaned_data["main_encoding"]
        return [main, *(e for e in self.cleaned_data["encodings"] if e != main)]
