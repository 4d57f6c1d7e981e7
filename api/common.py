"""What every router of the REST API shares: the largest id a path takes and the error answers
each kind of operation can give."""

from __future__ import annotations

from api.schemas import ErrorOut

MAX_ID = 2**63 - 1

READ_ERRORS = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut}
# Only the actions read a body, so only they can be too large; only they write, so only they
# can find the database busy.
ACTION_ERRORS = {**READ_ERRORS, 409: ErrorOut, 413: ErrorOut, 503: ErrorOut}
