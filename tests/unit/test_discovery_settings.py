"""Discovery settings: every namespace as ["*"], and the access token for discovered Tritons."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from tritonguard.settings import DiscoverySettings


def test_star_alone_means_every_namespace_and_cannot_be_mixed() -> None:
    """["*"] watches every namespace; "*" beside a named namespace is refused."""
    assert DiscoverySettings(namespaces=["*"]).all_namespaces
    assert not DiscoverySettings(namespaces=["ml"]).all_namespaces
    with pytest.raises(ValidationError, match="list no other namespace"):
        DiscoverySettings(namespaces=["*", "ml"])


def test_the_token_comes_from_the_setting_or_a_mounted_file_never_both(tmp_path: Path) -> None:
    """A file is read (stripped); an empty or missing file names itself; both at once is refused."""
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    from_file = DiscoverySettings(namespaces=["ml"], triton_access_token_file=token)
    secret = from_file.access_token()
    assert secret is not None and secret.get_secret_value() == "s3cret"
    assert DiscoverySettings(namespaces=["ml"]).access_token() is None
    inline = DiscoverySettings(namespaces=["ml"], triton_access_token=SecretStr("t"))
    assert inline.access_token() == SecretStr("t")
    token.write_text("")
    with pytest.raises(ValueError, match="the file is empty"):
        from_file.access_token()
    with pytest.raises(ValueError, match="cannot read"):
        DiscoverySettings(triton_access_token_file=tmp_path / "missing").access_token()
    with pytest.raises(ValidationError, match="not both"):
        DiscoverySettings(triton_access_token=SecretStr("t"), triton_access_token_file=token)


def test_a_token_is_never_sent_to_every_namespace() -> None:
    """All namespaces and a Triton access token together are refused, saying what to list.

    With ``["*"]``, anyone who may create a pod with the selector's labels anywhere would be
    sent the platform's repository-API token.
    """
    with pytest.raises(ValidationError, match="list the namespaces whose Tritons share the token"):
        DiscoverySettings(namespaces=["*"], triton_access_token="s3cret")
    assert DiscoverySettings(namespaces=["ml", "search"], triton_access_token="s3cret").enabled
