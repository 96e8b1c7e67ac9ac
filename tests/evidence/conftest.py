"""Evidence stories reuse the approval story (a run waiting before its high-risk write) and the
review-case story (a run frozen on a receipt conflict)."""

from tests.approvals.conftest import story  # noqa: F401
from tests.cases.conftest import conflict  # noqa: F401
