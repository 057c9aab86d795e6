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

# What another campaign's verdict on an already validated work amounts to: it agrees with the
# validated answers (corroborated), or it differs on a question (disputed, open until a lead
# settles it: `settled_at`). See labeling/review/verdicts.py.
VERDICT_CORROBORATED, VERDICT_DISPUTED = "corroborated", "disputed"
VERDICT_OUTCOMES = (VERDICT_CORROBORATED, VERDICT_DISPUTED)

# The acts that may change a work's status, validated answers or gold mark, as status events
# record them (status_events.act).
ACT_RULE = "rule"  # a campaign's own rule, at a submit, an edit or an import of its labels
ACT_ADJUDICATION = "adjudication"
ACT_REOPEN = "reopen"
ACT_MODEL = "model"  # `labeling aggregate --validate`
ACT_GOLD = "gold"  # a lead marks or unmarks a validated work as gold
ACT_CORROBORATION = "corroboration"  # another campaign's verdict agrees; answers unchanged
ACT_CROSS_DISPUTE = "cross_dispute"  # another campaign's verdict differs; answers unchanged
ACTS = (
    ACT_RULE,
    ACT_ADJUDICATION,
    ACT_REOPEN,
    ACT_MODEL,
    ACT_GOLD,
    ACT_CORROBORATION,
    ACT_CROSS_DISPUTE,
)
