"""A token's name is shown wherever the token acts (its agent id, the credential a person's
decision came through), so every way of making one (the Connect page, the admin, the command
line) refuses what would make two names look alike or a name read differently from what it
is, through the one check of names (``workflows.limits``)."""

from __future__ import annotations

import pytest

from accounts.models import ApiToken
from accounts.services import api_token_create
from tests.support.factories import make_user
from workflows.errors import InvalidInput

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("\u202eevil", "The token name contains the invisible character U+202E"),
        ("x\u200by", "The token name contains the invisible character U+200B"),
        ("\ufeffci", "The token name contains the invisible character U+FEFF"),
        ("c\u0085i", "The token name contains the control character U+0085"),
        ("a\tb", "The token name contains the control character U+0009"),
        ("<script>", "The token name contains '<' at position 0; it must be plain text"),
        ("a>b", "The token name contains '>' at position 1"),
        ("x" * 101, "The token name is 101 characters; the limit is 100"),
        ("   ", "A token name must be 1 to 100 characters"),
    ],
)
def test_a_name_that_hides_or_marks_up_is_refused(name: str, said: str):
    with pytest.raises(InvalidInput) as refused:
        api_token_create(user=make_user(username="ann"), name=name)
    assert said in refused.value.message
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize("name", ["laptop", "ci & nightly", "نوٰ\u200cشتن", "👩\u200d💻 desk"])
def test_ordinary_names_in_any_script_are_kept(name: str):
    token, _ = api_token_create(user=make_user(username="ann"), name=f" {name} ")
    assert token.name == name
