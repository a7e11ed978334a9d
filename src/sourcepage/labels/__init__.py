"""Labels from people, over one append-only log (:mod:`sourcepage.store.labels`):
``judgments`` (pooled relevance judging, agreement, adjudication, export; study §3.5),
``session`` (the interactive judging loop), ``reviews`` (a reviewer's decision on a
referred question) and ``referrals`` (the questions the system decided ``review`` on,
queued for the reviewer's desk, and the reviewed answers given back to askers)."""
