"""Which Slack channel an incident's thread goes to, and whom it mentions, from config."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tritonguard.core.findings import Subject
from tritonguard.core.severity import SEVERITIES, Severity


class RouteMatch(BaseModel):
    """Regular expressions (full match) on the subject, and the severities; absent = any."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    namespace: str | None = None
    model: str | None = None
    pod: str | None = None
    severity: list[Severity] = Field(default_factory=list, description="any of these")

    @field_validator("namespace", "model", "pod")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from None
        return value

    def matches(self, subject: Subject, severity: Severity) -> bool:
        """Return True when every present matcher holds for the subject and severity."""
        for pattern, value in (
            (self.namespace, subject.namespace),
            (self.model, subject.model),
            (self.pod, subject.pod),
        ):
            if pattern is not None and re.fullmatch(pattern, value) is None:
                return False
        return not self.severity or severity in self.severity


class SlackRoute(BaseModel):
    """One routing rule: incidents it matches go to ``channel`` and mention ``mention``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    match: RouteMatch = Field(default_factory=RouteMatch)
    channel: str | None = Field(None, description="channel name (#ml-oncall) or ID")
    mention: list[str] = Field(
        default_factory=list,
        description="user IDs (U…), user-group IDs (S…) or here/channel to mention in the root",
    )

    @field_validator("mention")
    @classmethod
    def _mentionable(cls, value: list[str]) -> list[str]:
        for ref in value:
            bare = ref.strip().removeprefix("@")
            if bare not in ("here", "channel", "everyone") and not re.fullmatch(
                r"[USW][A-Z0-9]{2,}", bare
            ):
                raise ValueError(
                    f"{ref!r}: mention a user ID (U…/W…), a user-group ID (S…), here or channel; "
                    "Slack cannot notify a handle by name"
                )
        return value


class Route(BaseModel):
    """Where one incident goes."""

    model_config = ConfigDict(frozen=True)

    channel: str
    mentions: tuple[str, ...] = ()


def route(
    routes: list[SlackRoute],
    subject: Subject,
    severity: Severity,
    *,
    default_channel: str,
    default_mentions: tuple[str, ...] = (),
    channel: str | None = None,
) -> Route:
    """Return the first matching route's channel and mentions, else the defaults.

    A ``channel`` given by the playbook (``slack.post`` ``channel``) wins over the routes; the
    mentions of the matching route still apply.
    """
    for r in routes:
        if r.match.matches(subject, severity):
            return Route(
                channel=channel or r.channel or default_channel,
                mentions=tuple(r.mention) or default_mentions,
            )
    return Route(channel=channel or default_channel, mentions=default_mentions)


__all__ = ["SEVERITIES", "Route", "RouteMatch", "SlackRoute", "route"]
