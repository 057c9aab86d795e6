"""The words of the domain: work statuses, roles, single sign-on kinds, import run outcomes.

A leaf module (it imports nothing): the storage schema's CHECK constraints are built from these
tuples (db/models.py imports this module and nothing else of labeling/), so the words and what
the database accepts cannot drift apart.
"""

# Work statuses, in the order a work moves through them.
STATUS_UNVALIDATED = "machine_predicted_unvalidated"
STATUS_IN_REVIEW = "human_in_review"
STATUS_DISPUTED = "human_disputed"
STATUS_VALIDATED = "human_validated"
STATUSES = (STATUS_UNVALIDATED, STATUS_IN_REVIEW, STATUS_DISPUTED, STATUS_VALIDATED)

# Roles, from the narrowest to the widest.
ROLES = ("annotator", "lead", "exporter", "admin")

# How a single sign-on identity is mapped: by issuer and subject, by e-mail, by domain rule.
SSO_KINDS = ("subject", "email", "domain")

# How an import run ended: still running (or killed), done, or failed part-way.
RUN_RUNNING, RUN_DONE, RUN_FAILED = "running", "done", "failed"
