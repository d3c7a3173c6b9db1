"""User templates for parts of the Slack message, in the Jinja sandbox, checked when they load."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tritonguard.core.templating import TEMPLATE_NAMES, TemplateError, check_template, render_string

# What a message template may use: a playbook template's names, and what only a message has.
MESSAGE_TEMPLATE_NAMES: frozenset[str] = TEMPLATE_NAMES | {"severity", "fix", "state", "duration"}


class SlackTemplates(BaseModel):
    """Templates that replace parts of the incident message; absent parts keep the default.

    Each is a Jinja template rendered in the sandbox with the incident's names (``model``,
    ``pod``, ``namespace``, ``cause``, ``confidence``, ``incident_id``, ``summary``,
    ``evidence.<name>``, ``held_for_s``) and ``severity``, ``fix``, ``state`` (open/resolved)
    and ``duration`` (how long it has been open, e.g. ``4 min 12 s``). A template that does not
    parse or uses another name fails when the settings load.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    header: str | None = Field(None, description="the header line (plain text, ≤150 chars)")
    summary: str | None = Field(None, description="the paragraph under the header (mrkdwn)")
    resolved: str | None = Field(None, description="the resolution posted in the thread")

    @field_validator("header", "summary", "resolved")
    @classmethod
    def _checked(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                check_template(value, MESSAGE_TEMPLATE_NAMES)
            except TemplateError as exc:
                raise ValueError(str(exc)) from None
        return value

    def render(self, part: str, context: Mapping[str, Any]) -> str | None:
        """Return the rendered template for ``part``, or None when the default applies.

        A template that fails at render time (evidence the incident lacks) raises TemplateError.
        """
        template = getattr(self, part)
        if template is None:
            return None
        return render_string(template, context).strip() or None
